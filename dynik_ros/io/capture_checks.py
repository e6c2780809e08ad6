"""Input checks on motion captures (ROS-free): clear errors or warnings naming the file and the frame.

Called by the file readers (:mod:`dynik_ros.io.mvnx`, :mod:`dynik_ros.io.bvh`) and ``dynik-retarget``.
Errors raise :class:`CaptureError` (one line); warnings and applied corrections are appended to
``motion.notices`` (one line each) and printed by the caller.

* non-finite values and quaternions that are not rotations (norm outside ``1 +- 0.1``): error naming the
  frame and segment;
* timestamps not strictly increasing: error naming the frame;
* units: the stature estimated from the legs (hip -> knee -> ankle, rigid lengths, any pose) divided by
  the expected ratio (0.484 of the stature for Human66) must be a human's 1.4-2.1 m; about 100x or 39x
  that says cm or inches: error (the BVH reader converts before, MVNX is always metres);
* floor: the lowest sole over the take (per frame the lower of the ankle minus its height, 0.038 stature,
  and the ball of the foot minus its, 0.013 stature; the 2nd percentile over the frames, so one glitch
  does not set the floor) should be z = 0; an offset beyond 1 cm is applied with a notice
  (``floor="apply"``) or only reported (``floor="report"``). Calibration frames get their own floor;
* teleports: a segment moving faster than 25 m/s (pelvis 12 m/s) between two frames: warning with the
  count and the first frames;
* calibration pose (:func:`check_calibration_pose`): the angle of each upper arm, forearm, thigh and shank
  against its T-pose direction (arms straight out sideways, legs straight down, in the pelvis' heading
  frame); above 15 deg a warning with the worst angle, above 35 deg an error unless forced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dynik_ros.core.quaternion import rotation_from_quaternion
from dynik_ros.core.so3 import determinant

LEG_OVER_STATURE = 0.4836  # hip -> knee -> ankle of Human66 (models.anthropometry), per stature
ANKLE_OVER_STATURE = 0.0384  # ankle (Foot origin) above the sole
BALL_OVER_STATURE = 0.0134  # ball of the foot (Toe origin) above the sole
STATURE_RANGE = (1.4, 2.1)  # m, a human
FLOOR_TOLERANCE = 0.01  # m
PELVIS_SPEED = 12.0  # m/s between two frames: faster is a teleport
SEGMENT_SPEED = 25.0  # m/s
POSE_WARN_DEG = 15.0
POSE_REFUSE_DEG = 35.0
QUATERNION_NORM_TOLERANCE = 0.1


class CaptureError(ValueError):
    """A capture that cannot be used as it is (one line naming the file and the frame)."""


def require_finite(name: str | Any, what: str, values: np.ndarray, links: list[str] | None = None) -> None:
    """Raise :class:`CaptureError` naming the first frame (and segment) with a NaN or infinite value."""
    arr = np.asarray(values, dtype=float)
    bad = ~np.isfinite(arr)
    if not bad.any():
        return
    where = np.argwhere(bad)[0]
    segment = ""
    if arr.ndim >= 3:
        from dynik_ros.models.segments import XSENS_SEGMENTS

        names = links or list(XSENS_SEGMENTS)
        segment = f" of {names[where[1]]}" if where[1] < len(names) else f" of segment {where[1]}"
    count = int(bad.reshape(arr.shape[0], -1).any(axis=1).sum())
    raise CaptureError(f"{name}: frame {where[0]}: {what}{segment} is not finite ({count} frames affected)")


def rotations_from_wxyz(name: str | Any, q: np.ndarray, what: str = "frame") -> np.ndarray:
    """Rotation matrices of ``(N, L, 4)`` quaternions in ``w x y z`` order, after checking each is finite
    and of norm ``1 +- 0.1`` (a zero or scaled quaternion is no rotation: :class:`CaptureError`)."""
    q = np.asarray(q, dtype=float)
    require_finite(name, "orientation", q)
    norm = np.linalg.norm(q, axis=-1)
    bad = np.abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE
    if bad.any():
        k, i = (int(x) for x in np.argwhere(bad)[0][:2])
        from dynik_ros.models.segments import XSENS_SEGMENTS

        segment = XSENS_SEGMENTS[i] if i < len(XSENS_SEGMENTS) else f"segment {i}"
        label = f"{what} {k}" if what == "frame" else what
        raise CaptureError(
            f"{name}: {label}: orientation of {segment} is not a rotation (quaternion norm {norm[k, i]:.3g})"
        )
    return rotation_from_quaternion(np.roll(q, -1, axis=-1))


def require_rotations(name: str, rotations: np.ndarray, links: list[str], tolerance: float = 1e-3) -> None:
    """Raise :class:`CaptureError` for the first matrix with ``|R^T R - I| > tolerance`` or ``det <= 0``.

    ``det`` by the columns' triple product (``core.so3.determinant``; LAPACK's batched ``det`` cost 0.14 s on
    a 60 s take) for a tolerance under 0.1: where ``|R^T R - I| <= tolerance`` the eigenvalues of ``R^T R``
    are within ``3 tolerance`` of 1, so ``det^2 >= (1 - 3 tolerance)^3 > 0.3`` and both give the same sign
    (rounding moves them by ~1e-15); elsewhere the matrix is refused whatever its det. ``R^T R`` by ``@`` (a
    BLAS call per matrix) only for the matrices :func:`_gram_error_screen` does not clear."""
    r = np.asarray(rotations, dtype=float)
    require_finite(name, "orientation", r, links)
    negative = (determinant(r) if tolerance < 0.1 else np.linalg.det(r)) <= 0
    if tolerance >= SCREEN_TOLERANCE:
        # only the matrices the screen puts past half the tolerance (or with det <= 0) get the exact product
        near = (_gram_error_screen(r) > tolerance / 2) | negative
        err = np.zeros(r.shape[:-2])
        if near.any():
            err[near] = _gram_error(r[near])
        bad = near & ((err > tolerance) | negative)
    else:
        err = _gram_error(r)
        bad = (err > tolerance) | negative
    if bad.any():
        k, i = (int(x) for x in np.argwhere(bad)[0][:2])
        raise CaptureError(
            f"{name}: frame {k}: orientation of {links[i]} is not a rotation "
            f"(|R^T R - I| = {err[k, i]:.2g}, det {np.linalg.det(r[k, i]):.3g})"
        )


SCREEN_TOLERANCE = 1e-9  # require_rotations screens by whole-array sums at this tolerance or above


def _gram_error(r: np.ndarray) -> np.ndarray:
    """``max |R^T R - I|`` of each matrix by ``@`` (the figure :func:`require_rotations` reports)."""
    return np.abs(np.swapaxes(r, -1, -2) @ r - np.eye(3)).max(axis=(-1, -2))


def _gram_error_screen(r: np.ndarray) -> np.ndarray:
    """:func:`_gram_error` of finite matrices by whole-array sums of products, a few rounding errors from
    ``@``'s (which calls BLAS per matrix: 0.04 s on a 60 s, 120 Hz take). Where this is at most half the
    tolerance the columns' norms are within it of 1, so ``@``'s figure differs by ~1e-15 and is at most the
    tolerance too (for a tolerance of at least :data:`SCREEN_TOLERANCE`)."""
    flat = r.reshape(-1, 9).T.copy()  # flat[3 k + j] = R_kj
    worst = np.zeros(flat.shape[1])
    for i in range(3):
        for j in range(i, 3):
            dot = flat[i] * flat[j] + flat[3 + i] * flat[3 + j] + flat[6 + i] * flat[6 + j]
            worst = np.maximum(worst, np.abs(dot - 1.0) if i == j else np.abs(dot))
    return worst.reshape(r.shape[:-2])


def _index(links: list[str], name: str) -> int | None:
    return links.index(name) if name in links else None


def leg_stature(positions: np.ndarray, links: list[str]) -> float | None:
    """Stature (in the file's units) from the median leg length, hip -> knee -> ankle, both sides."""
    lengths = []
    for side in ("Right", "Left"):
        i, j, k = (_index(links, side + s) for s in ("UpperLeg", "LowerLeg", "Foot"))
        if i is None or j is None or k is None:
            continue
        p = np.asarray(positions)
        lengths.append(
            np.linalg.norm(p[:, j] - p[:, i], axis=-1) + np.linalg.norm(p[:, k] - p[:, j], axis=-1)
        )
    if not lengths:
        return None
    return float(np.median(np.concatenate(lengths))) / LEG_OVER_STATURE


def floor_height(positions: np.ndarray, links: list[str], stature: float) -> float | None:
    """Floor height from the feet: per frame the lowest sole estimate, its 2nd percentile over frames."""
    p = np.asarray(positions)
    soles = []
    for side in ("Right", "Left"):
        for seg, clearance in (("Foot", ANKLE_OVER_STATURE), ("Toe", BALL_OVER_STATURE)):
            i = _index(links, side + seg)
            if i is not None:
                soles.append(p[:, i, 2] - clearance * stature)
    if not soles:
        return None
    lowest = np.min(np.stack(soles), axis=0)
    return float(np.percentile(lowest, 2.0))


def check_motion(motion: Any, name: str, floor: str = "apply") -> Any:
    """Run the checks of the module docstring on ``motion`` (a :class:`HumanMotion`), in place.

    ``floor``: ``"apply"`` shifts positions (and calibration frames) so the floor is z = 0, ``"report"``
    only says it, ``"off"`` skips the floor. Returns ``motion``.
    """
    if floor not in ("apply", "report", "off"):
        raise ValueError(f"floor must be 'apply', 'report' or 'off', got {floor!r}")
    links = list(motion.links)
    times = np.asarray(motion.times, dtype=float)
    require_finite(name, "time", times)
    steps = np.diff(times)
    if np.any(steps <= 0):
        k = int(np.argmax(steps <= 0)) + 1
        raise CaptureError(
            f"{name}: frame {k}: timestamp {times[k]:.6f} s does not increase (previous {times[k - 1]:.6f} s)"
        )
    require_finite(name, "position", motion.positions, links)
    require_rotations(name, motion.rotations, links)
    require_finite(name, "linear velocity", motion.linear_velocities, links)
    require_finite(name, "angular velocity", motion.angular_velocities, links)

    stature = leg_stature(motion.positions, links)
    if stature is not None:
        lo, hi = STATURE_RANGE
        if not lo <= stature <= hi:
            unit = _unit_guess(stature)
            raise CaptureError(
                f"{name}: the legs give a stature of {stature:.3g} (expected {lo}-{hi} m for a human)"
                + (f": the units look like {unit}" if unit else ": wrong units or a broken skeleton")
            )

    if len(times) > 1:
        _teleports(motion, name, links, steps)

    if floor != "off" and stature is not None:
        level = floor_height(motion.positions, links, stature)
        if level is not None and abs(level) > FLOOR_TOLERANCE:
            pelvis = _index(links, "Pelvis")
            pz = float(np.median(motion.positions[:, pelvis, 2])) if pelvis is not None else float("nan")
            text = (
                f"{name}: the feet put the floor at z = {level:+.3f} m (pelvis median z {pz:.3f} m, stature "
                f"{stature:.2f} m from the legs)"
            )
            if floor == "apply":
                motion.positions = motion.positions.copy()
                motion.positions[..., 2] -= level
                motion.notices.append(text + f": shifted by {-level:+.3f} m so the floor is z = 0")
            else:
                motion.notices.append(text + ": not shifted (floor check set to report only)")
        if floor == "apply":
            for kind, poses in list(motion.calibration.items()):
                names = list(poses)
                p = np.array([poses[s][0] for s in names])[None]
                level = floor_height(p, names, stature)
                if level is not None and abs(level) > FLOOR_TOLERANCE:
                    shift = np.array([0.0, 0.0, level])
                    motion.calibration[kind] = {s: (pr[0] - shift, pr[1]) for s, pr in poses.items()}
    return motion


def _unit_guess(stature_m: float) -> str:
    for unit, factor in (("centimetres", 100.0), ("inches", 39.37), ("millimetres", 1000.0)):
        if STATURE_RANGE[0] * factor * 0.8 <= stature_m <= STATURE_RANGE[1] * factor * 1.2:
            return unit
    return ""


def _teleports(motion: Any, name: str, links: list[str], steps: np.ndarray) -> None:
    speed = np.linalg.norm(np.diff(motion.positions, axis=0), axis=-1) / steps[:, None]  # (N-1, L)
    limit = np.full(len(links), SEGMENT_SPEED)
    pelvis = _index(links, "Pelvis")
    if pelvis is not None:
        limit[pelvis] = PELVIS_SPEED
    jumps = speed > limit
    if jumps.any():
        frames = np.flatnonzero(jumps.any(axis=1)) + 1
        k = int(frames[0])
        i = int(np.argmax(speed[k - 1] / limit))
        motion.notices.append(
            f"{name}: frame {k}: {links[i]} jumps {speed[k - 1, i] * steps[k - 1]:.3f} m in one frame "
            f"({speed[k - 1, i]:.1f} m/s, limit {limit[i]:g}); {len(frames)} such frames"
            + (f", first ones {frames[:5].tolist()}" if len(frames) > 1 else "")
        )


# ---------------------------------------------------------------------------- calibration pose
_LIMBS = (
    ("RightUpperArm", "RightForeArm", (0.0, -1.0, 0.0)),
    ("RightForeArm", "RightHand", (0.0, -1.0, 0.0)),
    ("LeftUpperArm", "LeftForeArm", (0.0, 1.0, 0.0)),
    ("LeftForeArm", "LeftHand", (0.0, 1.0, 0.0)),
    ("RightUpperLeg", "RightLowerLeg", (0.0, 0.0, -1.0)),
    ("RightLowerLeg", "RightFoot", (0.0, 0.0, -1.0)),
    ("LeftUpperLeg", "LeftLowerLeg", (0.0, 0.0, -1.0)),
    ("LeftLowerLeg", "LeftFoot", (0.0, 0.0, -1.0)),
)


def pose_angles(poses: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Angle (deg) of each limb segment (upper arm, forearm, thigh, shank) against its T-pose direction,
    in the pelvis' heading frame (yaw removed)."""
    r_pelvis = np.asarray(poses["Pelvis"][1], dtype=float)
    yaw = math.atan2(r_pelvis[1, 0], r_pelvis[0, 0])
    c, s = math.cos(-yaw), math.sin(-yaw)
    unturn = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    out = {}
    for start, end, expected in _LIMBS:
        if start not in poses or end not in poses:
            continue
        d = unturn @ (np.asarray(poses[end][0], dtype=float) - np.asarray(poses[start][0], dtype=float))
        norm = float(np.linalg.norm(d))
        if norm < 1e-9:
            continue
        cosine = float(np.clip(d @ np.asarray(expected) / norm, -1.0, 1.0))
        out[start] = math.degrees(math.acos(cosine))
    return out


def check_calibration_pose(
    poses: Mapping[str, tuple[np.ndarray, np.ndarray]],
    where: str,
    force: bool = False,
    warn_deg: float = POSE_WARN_DEG,
    refuse_deg: float = POSE_REFUSE_DEG,
) -> str | None:
    """Check that a calibration frame is a T-pose; returns a warning line or None.

    Raises:
        CaptureError: a limb is more than ``refuse_deg`` off its T-pose direction and ``force`` is false.
    """
    angles = pose_angles(poses)
    if not angles:
        return None
    worst = max(angles, key=angles.get)
    angle = angles[worst]
    if angle <= warn_deg:
        return None
    arms_down = [k for k in angles if "Arm" in k and angles[k] > 60.0]
    hint = " (arms down: an N-pose? the retargeter calibrates on a T-pose)" if len(arms_down) >= 2 else ""
    over = ", ".join(f"{k} {v:.0f}" for k, v in angles.items() if v > warn_deg)
    text = (
        f"{where}: not a T-pose: {worst} is {angle:.0f} deg off its T-pose direction"
        f" (limbs over {warn_deg:g} deg: {over})" + hint
    )
    if angle > refuse_deg and not force:
        raise CaptureError(text + f"; refused above {refuse_deg:g} deg (--force-calibration to use it)")
    return text
