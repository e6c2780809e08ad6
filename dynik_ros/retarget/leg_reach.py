"""Where a level sole can stand: the leg's sideways lean that the ankle-roll joint can take up.

A leg whose foot is ``y`` beside its hip (across the level sole's heading) and ``z`` below it leans by
``phi = atan2(y, z)`` about the forward axis. Hip pitch, knee and ankle pitch turn about the lateral axis, so
they do not change the sole's roll: the sole is level only if the ankle-roll joint (axis ``u = s x_foot``,
``s = +-1``) turns by ``theta = -s phi``. With its limits ``[lo, hi]`` the lean a level sole allows is
``phi in -s [lo, hi]`` (less a margin); beyond it the sole rolls by the excess (on the real CMU 131 takes the
feet land 220-290 mm outside G1's hips, a 22-28 deg lean against its +-15 deg ankle roll: the sole rolled
6-10 deg while counted flat).

The contact rules (``contact.reach``, :mod:`dynik_ros.retarget.foot_contact`) use :func:`reach_shift` at
touch-down: the held foot is moved across the heading, towards the hip, until ``|y| <= z tan(phi_max)``
(the shift blended in over ``blend_time``, as the sole turns level, and out with the hold after lift-off);
nothing moves when the lean is within the bounds. The leg's orientation targets between hip and foot (thigh,
shank: :func:`leg_orientation_rows`) turn by the same lean change about the heading (:func:`turn_legs`), so
they do not pull the moved foot back out (without that, on the CMU 131 takes, the held feet slid more).
The bounds come from the model (:func:`ankle_roll_lean`). The pelvis lowering during a contact (a crouch)
increases the lean again; the rule acts at touch-down only, as a held foot that moves is a slide.
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

REACH_MARGIN_DEG = 1.0  # kept from the ankle-roll limits (the hip target is not the robot's hip exactly)


def ankle_roll_lean(robot, q: np.ndarray, frame: str, margin_deg: float = REACH_MARGIN_DEG):
    """Lean bounds ``(lo, hi)`` (rad, about the forward axis; + foot to the left of the hip) a level sole
    of foot ``frame`` allows, from the joint of the leg closest to the foot whose axis at ``q`` is within
    25 deg of the foot's forward axis (its ankle roll) and that joint's position limits; ``None`` when the
    leg has no such joint."""
    model = robot.model
    data = model.createData()
    pin.forwardKinematics(model, data, q)
    pin.updateFramePlacements(model, data)
    fid = robot.frame_id(frame)
    forward = data.oMf[fid].rotation[:, 0]
    joint = model.frames[fid].parentJoint
    while joint > 0:
        axis = _axis(model.joints[joint])
        if axis is not None:
            s = float(forward @ (data.oMi[joint].rotation @ axis))
            if abs(s) > math.cos(math.radians(25.0)):
                index = model.joints[joint].idx_q - 7
                lo, hi = float(robot.lower[index]), float(robot.upper[index])
                bounds = sorted((-math.copysign(1.0, s) * lo, -math.copysign(1.0, s) * hi))
                margin = math.radians(margin_deg)
                if bounds[1] - bounds[0] <= 2.0 * margin:
                    return None
                return bounds[0] + margin, bounds[1] - margin
        joint = model.parents[joint]
    return None


def _axis(joint) -> np.ndarray | None:
    """The unit axis of a revolute joint in its own frame (``None`` for any other joint)."""
    name = joint.shortname()
    for suffix, axis in (("RX", (1.0, 0.0, 0.0)), ("RY", (0.0, 1.0, 0.0)), ("RZ", (0.0, 0.0, 1.0))):
        if name.endswith(suffix):
            return np.array(axis)
    if name.startswith("JointModelRevoluteUnaligned"):
        return np.asarray(joint.extract().axis, dtype=float)
    return None


def reach_shift(
    foot: np.ndarray, hip: np.ndarray, yaw: float, bounds: tuple[float, float]
) -> tuple[np.ndarray, float]:
    """Horizontal shift (3,) that brings ``foot`` (its frame's target) within the lean ``bounds`` of ``hip``
    across heading ``yaw``, ``(clip(y, z tan lo, z tan hi) - y) y_hat`` (module docstring), and the leg's lean
    change (rad, about the heading); zero when the lean is within them or the foot is not below the hip."""
    lateral = np.array((-math.sin(yaw), math.cos(yaw), 0.0))
    d = foot - hip
    y, z = float(d @ lateral), -float(d[2])
    if z <= 0.0:
        return np.zeros(3), 0.0
    y_new = min(max(y, z * math.tan(bounds[0])), z * math.tan(bounds[1]))
    return (y_new - y) * lateral, math.atan2(y_new, z) - math.atan2(y, z)


def leg_orientation_rows(robot, config, foot_frame: str, orientation_rows: dict[str, int]) -> list[int]:
    """Rows of the orientation targets on the leg of ``foot_frame`` between its hip (the anchor of the
    foot's position target) and the foot, the foot excluded: they turn with the leg (:func:`turn_legs`)."""
    model = robot.model
    foot = next((t for t in config.targets if t.frame == foot_frame), None)
    if foot is None or foot.anchor is None:
        return []
    chain = list(model.supports[model.frames[robot.frame_id(foot_frame)].parentJoint])
    hip = model.frames[robot.frame_id(foot.anchor.frame)].parentJoint
    if hip not in chain:
        return []
    below = set(chain[chain.index(hip) + 1 :])
    return [
        row
        for frame, row in orientation_rows.items()
        if frame != foot_frame and model.frames[robot.frame_id(frame)].parentJoint in below
    ]


def turn_legs(
    rotations: np.ndarray, leg_rows: list[list[int]], turn: np.ndarray, heading: np.ndarray
) -> None:
    """Turn the orientation targets ``rotations`` ``(N, n_o, 3, 3)`` of each leg's rows by its lean change
    ``turn`` ``(N, n_feet)`` about the forward axis of ``heading`` ``(N, n_feet)`` (world), in place: the
    thigh and shank lean with the foot moved into reach instead of pulling it back out."""
    for f, rows in enumerate(leg_rows):
        for k in np.flatnonzero(turn[:, f]):
            axis = np.array((math.cos(heading[k, f]), math.sin(heading[k, f]), 0.0))
            rotations[k, rows] = pin.exp3(turn[k, f] * axis) @ rotations[k, rows]
