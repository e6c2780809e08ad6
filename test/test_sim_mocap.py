"""The simulated mocap system (dynik_ros.sim.mocap): frames against independent homogeneous transforms,
rate and latency in sim time, and the error statistics it was configured with."""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial.transform import Rotation

from dynik_ros.sim.mocap import OUTLIER, MocapConfig, MocapSimulator


def _homogeneous(xyz_rpy) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = Rotation.from_euler("xyz", xyz_rpy[3:]).as_matrix()  # extrinsic x, y, z = Rz Ry Rx
    t[:3, 3] = xyz_rpy[:3]
    return t


def _run(config: MocapConfig, duration: float, dt: float = 1e-3):
    mocap = MocapSimulator(config)
    samples = []
    rotation = Rotation.from_euler("z", 0.4).as_matrix()
    for k in range(int(round(duration / dt)) + 1):
        t = k * dt
        position = np.array([0.1 * t, 0.0, 0.8])
        mocap.capture(t, position, rotation)
        samples += [(t, s) for s in mocap.deliver(t)]
    return mocap, samples


def test_noise_free_pose_is_the_link_pose_seen_from_the_offset_camera():
    config = MocapConfig(
        position_noise=0.0, rotation_noise=0.0, dropout_fraction=0.0, outlier_fraction=0.0,
        camera_from_world=(1.0, -2.0, 0.5, 0.1, -0.2, 0.7), marker_offset=(0.02, 0.0, 0.15, 0.0, 0.3, 0.0),
    )  # fmt: skip
    mocap = MocapSimulator(config)
    link = _homogeneous([0.3, 0.2, 0.9, 0.05, 0.1, -1.2])
    expected = _homogeneous(config.camera_from_world) @ link @ _homogeneous(config.marker_offset)
    mocap.capture(0.0, link[:3, 3], link[:3, :3])
    (sample,) = mocap.deliver(1.0)
    np.testing.assert_allclose(sample.position, expected[:3, 3], atol=1e-12)
    q = Rotation.from_matrix(expected[:3, :3]).as_quat()  # x y z w
    assert abs(abs(float(np.dot(q, sample.quaternion))) - 1.0) < 1e-12


def test_rate_and_latency_in_sim_time():
    config = MocapConfig(dropout_fraction=0.0, outlier_fraction=0.0)
    mocap, samples = _run(config, 10.0)
    assert abs(mocap.captures - 7501) <= 1  # 750 Hz over 10 s (both ends)
    stamps = np.array([s.stamp for _, s in samples])
    received = np.array([t for t, _ in samples])
    latency = np.array([s.delivery - s.stamp for _, s in samples])
    assert np.all(np.diff(stamps) > 0) and np.all(np.diff(received) >= 0)
    assert latency.min() >= 0.002 - 1e-12 and latency.max() <= 0.004 + 1e-12
    assert np.all(received - stamps <= 0.004 + 1e-3)  # delivered at the first step after the latency
    intervals = np.diff(stamps)  # captures at the physics steps at or after k / 750 s
    assert intervals.min() >= 1e-3 - 1e-9 and intervals.max() <= 2e-3 + 1e-9
    assert abs(intervals.mean() - 1 / 750) < 1e-5


def test_noise_dropouts_and_outliers_match_their_configuration():
    config = MocapConfig(
        position_noise=0.0005, rotation_noise=math.radians(0.1), dropout_fraction=0.05,
        dropout_mean_length=10.0, outlier_fraction=0.01, seed=3,
    )  # fmt: skip
    mocap, samples = _run(config, 40.0)
    assert mocap.captures == mocap.delivered + mocap.dropped + mocap.pending
    assert 0.035 < mocap.dropped / mocap.captures < 0.065
    outliers = [s for _, s in samples if s.kind == OUTLIER]
    assert 0.007 < len(outliers) / len(samples) < 0.013
    for s in outliers:
        assert 0.05 - 2e-3 < np.linalg.norm(s.position - s.true_position) < 0.3 + 2e-3
    good = [s for _, s in samples if s.kind != OUTLIER]
    err = np.array([s.position - s.true_position for s in good])
    assert np.all(np.abs(err.std(axis=0) / 0.0005 - 1.0) < 0.05)
    angles = np.array(
        [
            (Rotation.from_matrix(s.true_rotation).inv() * Rotation.from_quat(s.quaternion)).as_rotvec()
            for s in good
        ]
    )
    assert np.all(np.abs(angles.std(axis=0) / math.radians(0.1) - 1.0) < 0.05)
    # occlusions come in runs: mean run length near the configured 10 captures
    gaps = np.diff([s.frame for _, s in samples]) - 1
    runs = gaps[gaps > 0]
    assert 7.0 < runs.mean() < 13.0
