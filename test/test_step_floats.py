"""The IK step's per-call shortcuts of session 34 give the answers of the plain formulas they replaced, bit
for bit: the log residual in Python floats, the placement gathers by flat indices. Each plain formula is the
code as it was before the shortcut."""

from __future__ import annotations

import copy

import numpy as np
import pinocchio as pin

from dynik_ros.core.floor_rows import FloorConfig, FloorRows, points_of_feet
from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual
from dynik_ros.core.so3 import exp_so3, log_residual_rows, orientation_log_residual_world
from dynik_ros.retarget import Retargeter


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values (NaN where NaN) and the same signs of zero."""
    return (
        a.shape == b.shape
        and np.array_equal(a, b, equal_nan=True)
        and np.array_equal(np.signbit(a), np.signbit(b))
    )


def _plain_pose_residual(positions, rotations, target_positions, target_rotations) -> np.ndarray:
    """``pose_residual(..., rotation_log=True)`` as it was: the numpy log residual, concatenated."""
    return np.concatenate(
        (
            (target_positions - positions).reshape(-1),
            orientation_log_residual_world(rotations, target_rotations).reshape(-1),
        )
    )


def test_the_log_residual_in_floats_is_the_numpy_formula():
    """Batches of 1-16 targets with every mix of tiny (the series), small, ordinary and obtuse angles (the
    floats decline those), rotations read through a strided view as the step reads them, and a NaN: the
    numpy residual's values and signs of zero; the floats themselves decided most batches."""
    rng = np.random.default_rng(34)
    taken = series = 0
    for trial in range(600):
        n = int(rng.integers(1, 17))
        model = exp_so3(rng.normal(size=(n, 3)) * 2.0)
        table = np.zeros((n, 12))  # the placement table's layout: rotation row-major, then translation
        table[:, :9] = model.reshape(n, 9)
        strided = table[:, :9].reshape(-1, 3, 3)
        if trial % 4 == 0:
            scales = [1e-9, 1e-7, 1e-5, 1e-3, 0.3, 1.5, 2.0]
        elif trial % 4 == 1:
            scales = [1e-9, 1e-7, 1e-6, 3e-5]  # all within the series' reach
        else:
            scales = [1e-3, 0.05, 0.3, 1.0, 1.5]
        angles = rng.choice(scales, size=n) * rng.uniform(0.5, 1.0, size=n)
        axes = rng.normal(size=(n, 3))
        target = exp_so3(angles[:, None] * axes / np.linalg.norm(axes, axis=1, keepdims=True)) @ model
        positions, target_positions = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
        if trial == 7:
            target[0, 1, 2] = np.nan
        for r_model in (model, strided):
            got = pose_residual(positions, r_model, target_positions, target, rotation_log=True)
            plain = _plain_pose_residual(positions, r_model, target_positions, target)
            assert _bitwise_equal(got, plain), trial
        rows = log_residual_rows(target @ np.swapaxes(model, -1, -2))
        taken += rows is not None
        series += rows is not None and angles.max() < 1e-4
    assert taken > 300 and series > 50  # the floats' own paths were checked, not only the numpy one


def _g1_kinematics():
    """G1 (floating base) with the retargeting map's floor points and a few target frames."""
    rt = Retargeter.from_config("g1")
    robot = rt.robot
    positions = ["pelvis", "left_ankle_roll_link", "right_ankle_roll_link"]
    orientations = ["pelvis", "torso_link", "left_ankle_roll_link", "right_wrist_yaw_link"]
    floor = FloorConfig(points_of_feet(rt.config.feet, rt.config.balance.sole_half_width))
    return robot, FrameKinematics(robot, positions, orientations), FloorRows(robot, floor)


def test_placement_gathers_by_flat_indices_are_the_gathers_by_rows_and_columns():
    """The frame poses (``update``, ``poses``), the predicted positions (``update_jacobian``) and the floor
    points' origins and levers read through the placement table's flat view equal the reads by rows and
    columns, to the bit, at random configurations; a deep copy (a shadow IK's) reads its own data."""
    robot, kinematics, floor = _g1_kinematics()
    assert kinematics._table_flat is not None  # the flat view is there to be checked
    rng = np.random.default_rng(35)
    twin = copy.deepcopy(kinematics)
    for trial in range(20):
        q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
        q[q.size - robot.n_joints :] = rng.uniform(robot.lower, robot.upper)
        for k in (kinematics, twin):
            positions, rotations = k.update(q) if trial % 2 else k.poses(q)
            plain = k._table[k._pose_gather]
            assert _bitwise_equal(positions, plain[: k._n_pos, 9:])
            assert _bitwise_equal(rotations, plain[k._n_pos :, :9].reshape(-1, 3, 3))
            k.update_jacobian(q)
            assert _bitwise_equal(k._positions_all, k._table[k._position_gather])
        origins, levers = floor._levers(kinematics.data)
        assert floor._table_flat is not None
        plain = floor._table[floor._gather]
        assert _bitwise_equal(origins, plain[:, 9:])
        assert _bitwise_equal(levers, np.einsum("nij,nj->ni", plain[:, :9].reshape(-1, 3, 3), floor._offsets))
