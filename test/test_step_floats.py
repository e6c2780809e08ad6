"""The IK step's per-call shortcuts of session 34 give the answers of the plain formulas they replaced, bit for
bit: the log residual in Python floats. Each plain formula is the code as it was before the shortcut."""

from __future__ import annotations

import numpy as np

from dynik_ros.core.frame_kinematics import pose_residual
from dynik_ros.core.so3 import exp_so3, log_residual_rows, orientation_log_residual_world


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
