"""Suit calibration (dynik_ros.io.suit_calibration) against known transforms of the model's T-pose."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.io.suit_calibration import (
    CalibrationError,
    PoseWindow,
    SuitCalibration,
    expected_orientations,
    rotation_angle,
    rotation_z,
)
from dynik_ros.retarget.human import human_tpose

YAW = np.radians(40.0)
SHIFT = np.array([2.0, -1.0, 0.0])


def _tpose():
    poses = human_tpose()
    names = list(poses)
    return names, np.array([poses[n][0] for n in names]), np.array([poses[n][1] for n in names])


def _mounting_errors(n: int, seed: int = 3) -> np.ndarray:
    """Known per-segment mis-alignments up to ~10 deg (what the calibration must find and undo)."""
    rng = np.random.default_rng(seed)
    return np.array([pin.exp3(rng.uniform(-0.1, 0.1, 3)) for _ in range(n)])


def _window(names, positions, rotations, samples=60, jitter=0.002, angle_jitter=0.01, seed=5):
    """The T-pose as a suit in another world reports it: turned by YAW, shifted, segments mis-aligned,
    with small sway; 120 Hz."""
    rng = np.random.default_rng(seed)
    turn = rotation_z(YAW)
    window = PoseWindow(seconds=0.5)
    for k in range(samples):
        p = positions @ turn.T + SHIFT + rng.normal(0, jitter, positions.shape)
        r = turn[None] @ rotations @ np.array([pin.exp3(rng.normal(0, angle_jitter, 3)) for _ in names])
        window.append(k * 8_333_333, names, p, r)
    return window


def test_world_alignment_and_offsets_recover_known_transforms():
    names, positions, rotations = _tpose()
    errors = _mounting_errors(len(names))
    window = _window(names, positions, rotations @ errors)
    average = window.average()
    assert average.samples == 60  # 0.49 s at 120 Hz: all inside the 0.5 s window
    calibration = SuitCalibration.from_window(average)
    assert calibration.yaw == pytest.approx(YAW + _pelvis_error_yaw(errors, names), abs=0.02)
    # Calibrated T-pose: every segment world-aligned, the pelvis over the origin, heights kept.
    p, r, _, _ = calibration.apply(
        names, positions @ rotation_z(YAW).T + SHIFT, rotation_z(YAW)[None] @ rotations @ errors
    )
    assert np.degrees(rotation_angle(r).max()) < 1.0
    pelvis = names.index("Pelvis")
    assert np.linalg.norm(p[pelvis, :2]) < 0.01 and p[pelvis, 2] == pytest.approx(
        positions[pelvis, 2], abs=0.01
    )
    # The heading is the pelvis segment's: its own mounting error turns the whole body by that yaw.
    expected = (positions - positions[pelvis]) @ rotation_z(-_pelvis_error_yaw(errors, names)).T
    assert np.abs((p - p[pelvis]) - expected).max() < 0.01


def _pelvis_error_yaw(errors, names) -> float:
    x = errors[names.index("Pelvis")][:, 0]
    return float(np.arctan2(x[1], x[0]))


def test_velocities_are_turned_into_the_calibrated_world():
    names, positions, rotations = _tpose()
    calibration = SuitCalibration.from_window(_window(names, positions, rotations).average())
    turn = rotation_z(YAW)
    v = np.tile([1.0, 0.0, 0.0], (len(names), 1))  # walking along the body's forward axis
    w = np.tile([0.0, 0.0, 0.5], (len(names), 1))
    _, _, lin, ang = calibration.apply(names, positions, rotations, v @ turn.T, w @ turn.T)
    assert np.abs(lin - v).max() < 0.02 and np.abs(ang - w).max() < 0.02


def test_npose_is_recognised_and_a_wrong_pose_is_refused_with_the_angle():
    names, positions, rotations = _tpose()
    npose = expected_orientations(names, "npose")
    window = _window(names, positions, npose)
    calibration = SuitCalibration.from_window(window.average(), pose="npose")
    assert np.degrees(calibration.largest_offset()[1]) < 3.0
    with pytest.raises(
        CalibrationError, match=r"not a tpose: segment '(Left|Right)(UpperArm|ForeArm|Hand)' is 9\d deg"
    ):
        SuitCalibration.from_window(window.average(), pose="tpose")


def test_a_moving_window_is_refused():
    names, positions, rotations = _tpose()
    window = PoseWindow(seconds=1.0)
    for k in range(100):
        window.append(k * 10_000_000, names, positions + [0.01 * k, 0, 0], rotations)  # 1 m/s walk
    with pytest.raises(CalibrationError, match="moved"):
        SuitCalibration.from_window(window.average())
    with pytest.raises(CalibrationError, match="no samples"):
        PoseWindow().average()


def test_save_and_load_round_trip_and_bad_files(tmp_path):
    names, positions, rotations = _tpose()
    calibration = SuitCalibration.from_window(
        _window(names, positions, rotations @ _mounting_errors(len(names))).average()
    )
    path = calibration.save(tmp_path / "suit.yaml")
    loaded = SuitCalibration.load(path)
    assert loaded.yaw == pytest.approx(calibration.yaw) and np.allclose(loaded.origin, calibration.origin)
    for name in names:
        assert np.allclose(loaded.offsets[name], calibration.offsets[name], atol=1e-9)
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: dynik_ros/suit_calibration/1\noffsets: {Pelvis: [[2,0,0],[0,1,0],[0,0,1]]}\n")
    with pytest.raises(CalibrationError, match="not a rotation"):
        SuitCalibration.load(bad)
    bad.write_text("just: text\n")
    with pytest.raises(CalibrationError, match="not a suit calibration"):
        SuitCalibration.load(bad)
    with pytest.raises(CalibrationError, match="cannot read"):
        SuitCalibration.load(tmp_path / "missing.yaml")


def test_quaternion_path_matches_the_matrix_path():
    from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion

    names, positions, rotations = _tpose()
    calibration = SuitCalibration.from_window(
        _window(names, positions, rotations @ _mounting_errors(len(names))).average()
    )
    rng = np.random.default_rng(2)
    r = np.array([pin.exp3(rng.normal(0, 1, 3)) for _ in names])
    v, w = rng.normal(0, 1, (2, len(names), 3))
    p1, r1, v1, w1 = calibration.apply(names, positions, r, v, w)
    p2, q2, v2, w2 = calibration.apply_quaternions(names, positions, quaternion_from_rotation(r), v, w)
    assert np.allclose(p1, p2) and np.allclose(v1, v2) and np.allclose(w1, w2)
    assert np.allclose(r1, rotation_from_quaternion(q2), atol=1e-12)
