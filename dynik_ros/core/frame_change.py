"""A rigid change of the measurements' world frame, estimated across a gap and applied to stored state.

When the world frame of the incoming poses moves (a person re-registered, the origin moved, a world turned,
the retargeter re-aligned), the new samples ``x_k`` are related to the old ones by an unknown rigid transform
``C = (R_c, p_c)``: ``x_new = C x_old``. The closed-loop IK (eq. 9) keeps quantities in the old frame: the
base pose, the reference ``x_{k-1}`` its residual pairs with ``q_{k-1}``, and the world-frame velocities it
integrates (eq. 14). Re-expressing them with ``C`` makes the next step see the same residual as if nothing had
changed.

``C`` is estimated from one target attached to the floating base (the pelvis): its last old-frame pose
advanced over the gap ``dt`` with the mean of its old and (rotated-back) new twist, against its new pose;
the trapezoidal mean makes the error ``O(dt^3)`` (a 25 ms gap of a walking pelvis: ~1e-5 rad).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import Measurements, TargetSet

Transform = tuple[np.ndarray, np.ndarray]  # (R_c, p_c): x_new = R_c x_old + p_c


def first_on_base(robot: RobotModel, group: list) -> int | None:
    """Index of the first target of ``group`` whose frame is attached to the floating base (joint 1,
    e.g. the pelvis); ``None`` when there is none."""
    for i, t in enumerate(group):
        if robot.model.frames[robot.frame_id(t.frame)].parentJoint == 1:
            return i
    return None


def base_target_indices(robot: RobotModel, targets: TargetSet) -> tuple[int, int] | None:
    """``(orientation, position)`` indices of the first targets on frames attached to the floating base;
    ``None`` for a fixed base or when either is missing."""
    if not robot.floating_base:
        return None
    o = first_on_base(robot, targets.orientation_targets)
    p = first_on_base(robot, targets.position_targets)
    return None if o is None or p is None else (o, p)


def estimate_change(
    old: Measurements,
    new: Measurements,
    orientation_index: int,
    position_index: int,
    dt: float,
) -> Transform:
    """``C`` from the base-attached orientation target ``orientation_index`` and position target
    ``position_index`` of ``old`` (time ``t - dt``, old frame) and ``new`` (time ``t``, new frame)."""
    r_old, r_new = old.rotations[orientation_index], new.rotations[orientation_index]
    p_old, p_new = old.positions[position_index], new.positions[position_index]
    w_old = _row(old.angular_velocities, orientation_index)
    w_new = _row(new.angular_velocities, orientation_index)
    v_old = _row(old.linear_velocities, position_index)
    v_new = _row(new.linear_velocities, position_index)
    rotation = r_new @ (exp_so3(dt * w_old) @ r_old).T  # first guess: the old twist alone
    for _ in range(2):  # trapezoid: the mean of the old twist and the new one seen in the old frame
        mean = 0.5 * (w_old + rotation.T @ w_new)
        rotation = r_new @ (exp_so3(dt * mean) @ r_old).T
    predicted = p_old + dt * 0.5 * (v_old + rotation.T @ v_new)
    return rotation, p_new - rotation @ predicted


def transform_measurements(m: Measurements, change: Transform) -> Measurements:
    """``m`` expressed in the new frame: positions (and the CoM target) moved, rotations and world-frame
    velocities turned; every other field (contact and stance flags, weight factors, any field added
    later) kept as it is (``dataclasses.replace``: none can be dropped by omission)."""
    rotation, translation = change
    return replace(
        m,
        positions=m.positions @ rotation.T + translation,
        rotations=rotation @ m.rotations,
        linear_velocities=None if m.linear_velocities is None else m.linear_velocities @ rotation.T,
        angular_velocities=None if m.angular_velocities is None else m.angular_velocities @ rotation.T,
        com_position=None if m.com_position is None else rotation @ m.com_position + translation,
        com_velocity=None if m.com_velocity is None else rotation @ m.com_velocity,
    )


def _row(values: np.ndarray | None, index: int) -> np.ndarray:
    return np.zeros(3) if values is None else np.asarray(values[index], dtype=float)
