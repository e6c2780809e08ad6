"""The capture's own subject standing in T-pose, built from its rigid segments (ROS-free).

Without a calibration frame a capture used to be calibrated on the human model's T-pose at the map's
``human.height`` (1.75 m), whoever was in the suit: the root scale ``k_root`` (robot root height over human
root height) and the limb ratios (:mod:`dynik_ros.retarget.calibration`) then belong to another body. On the
real captures the subjects' roots sit 3-9 cm higher above their hips and their legs are shorter than the
model's (CMU 131: 0.093 m, leg 0.80 m), so the robot's pelvis target stood 5-6 cm above where its legs reach
the floor, and the soles of held feet floated 10-47 mm above the ground while counted as standing.

Here the T-pose is the capture's own. Every segment ``j`` with parent ``P`` (the 23-segment tree,
:data:`~dynik_ros.models.human.XSENS_PARENT`) has a rigid offset in its parent's segment frame,

    o_j = median_t  R_P(t)^T (p_j(t) - p_P(t)),

and in the T-pose every segment frame is the pelvis' (the segment-frame convention of Xsens and of the
readers, :mod:`.bvh`), facing world +x, so ``p_j = p_P + o_j`` from the pelvis down and out. The floor is
where the feet stand: each foot link is held at its own lowest height over the take above the capture's
floor (``p_Foot,z``'s 2nd percentile, the floor being z = 0 after :func:`.capture_checks.check_motion`), so
the ankle height is the subject's, not a proportion of a model's (the optical 'Nikki' skeleton's ankle
joint stands 16 cm above its floor, Human66's 6.7 cm). For the human model's own motion the result is the
model's T-pose (the ground-truth test).
"""

from __future__ import annotations

import numpy as np

from dynik_ros.models.human import XSENS_PARENT, XSENS_SEGMENTS

Pose = tuple[np.ndarray, np.ndarray]
FEET = ("LeftFoot", "RightFoot")
LOWEST_PERCENTILE = 2.0  # of a foot link's height over the take: where it stands (one glitch does not count)
# the fewest samples whose LOWEST_PERCENTILE lies above the single lowest one (0.02 (n - 1) >= 1)
MIN_SAMPLES = int(np.ceil(100.0 / LOWEST_PERCENTILE)) + 1


def segment_offsets(motion) -> dict[str, np.ndarray]:
    """``o_j``: each segment's median offset from its parent in the parent's segment frame (module
    docstring), for every segment whose parent the motion also has."""
    links = list(motion.links)
    index = {name: i for i, name in enumerate(links)}
    positions = np.asarray(motion.positions, dtype=float)
    rotations = np.asarray(motion.rotations, dtype=float)
    offsets = {}
    for child, parent in XSENS_PARENT.items():
        if child in index and parent in index:
            relative = positions[:, index[child]] - positions[:, index[parent]]
            local = np.einsum("nji,nj->ni", rotations[:, index[parent]], relative)
            offsets[child] = np.median(local, axis=0)
    return offsets


def skeleton_tpose(motion, min_samples: int = 1) -> dict[str, Pose]:
    """The capture's subject in T-pose on the floor z = 0, facing +x: ``{segment: (p, R)}`` for the 23
    segments (module docstring). Raises ``ValueError`` when the motion lacks a segment or its feet, or has
    fewer than ``min_samples`` samples (a live window: :data:`MIN_SAMPLES`, so that one glitch does not set
    the ankle height). The ankle heights are the lowest the feet get in ``motion``: it must include
    standing (a window of a jump alone would put the floor under the jump)."""
    links = list(motion.links)
    missing = [s for s in XSENS_SEGMENTS if s not in links]
    if missing:
        raise ValueError(f"{motion.name}: the capture's T-pose needs every segment, it lacks {missing}")
    count = len(motion.positions)
    if count < min_samples:
        raise ValueError(
            f"{motion.name} has {count} samples: the subject's T-pose needs at least {min_samples} (the "
            f"feet's lowest heights are their {LOWEST_PERCENTILE:g}th percentile; make the window longer)"
        )
    offsets = segment_offsets(motion)
    positions = {"Pelvis": np.zeros(3)}
    for segment in XSENS_SEGMENTS:  # parents come before their children in this order
        if segment != "Pelvis":
            positions[segment] = positions[XSENS_PARENT[segment]] + offsets[segment]
    heights = np.asarray(motion.positions, dtype=float)[:, [links.index(f) for f in FEET], 2]
    standing = np.percentile(heights, LOWEST_PERCENTILE, axis=0)  # each ankle's height over the floor
    # the pelvis height that puts the feet, on average, at their own standing heights
    lift = float(np.mean(standing - np.array([positions[f][2] for f in FEET])))
    return {s: (p + np.array([0.0, 0.0, lift]), np.eye(3)) for s, p in positions.items()}
