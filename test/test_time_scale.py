"""--time-scale: the capture played slower (stamps stretched, velocities divided), checked on the output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dynik_ros.cli.retarget import main
from dynik_ros.io.human_motion import HumanMotion, at_rate, resampled, time_scaled
from dynik_ros.io.motion_files import read_motion_file

EXCERPT = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"


def test_time_scaled_stretches_stamps_and_divides_velocities():
    motion = read_motion_file(EXCERPT)
    slow = time_scaled(motion, 2.5)
    np.testing.assert_allclose(slow.times, 2.5 * motion.times)
    np.testing.assert_allclose(slow.linear_velocities, motion.linear_velocities / 2.5)
    np.testing.assert_allclose(slow.angular_velocities, motion.angular_velocities / 2.5)
    assert slow.positions is motion.positions and slow.rotations is motion.rotations
    assert slow.stamp_origin_ns == motion.stamp_origin_ns and "2.5x slower" in slow.source
    assert time_scaled(motion, 1.0) is motion
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="time scale"):
            time_scaled(motion, bad)


def test_resampled_motion_lies_on_the_uniform_motion_it_samples():
    """A link moving at constant velocity and turning at a constant rate about a fixed axis, sampled at
    uneven stamps: resampled at 50 Hz, every new sample is that motion at the new stamp (geodesic
    interpolation is exact for a constant rate), the velocities and the rest unchanged."""
    import pinocchio as pin

    times = np.array([0.0, 0.013, 0.05, 0.061, 0.1, 0.17, 0.2])
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    start = pin.exp3(np.array([0.2, 0.1, -0.4]))

    def pose(t):
        return np.array([0.1, 0.2, 0.9]) + t * np.array([0.5, -0.2, 0.1]), pin.exp3(2.0 * t * axis) @ start

    positions = np.array([[pose(t)[0]] for t in times])
    rotations = np.array([[pose(t)[1]] for t in times])
    velocity = np.tile([0.5, -0.2, 0.1], (len(times), 1, 1))
    motion = HumanMotion("line", times, ["Pelvis"], positions, rotations, velocity, 2.0 * velocity, "test")
    out = resampled(motion, 50.0)
    np.testing.assert_allclose(out.times, np.arange(11) * 0.02, atol=1e-12)
    for k, t in enumerate(out.times):
        p, r = pose(t)
        np.testing.assert_allclose(out.positions[k, 0], p, atol=1e-12)
        np.testing.assert_allclose(out.rotations[k, 0], r, atol=1e-12)
    np.testing.assert_allclose(out.linear_velocities, np.broadcast_to(velocity[0], (11, 1, 3)), atol=1e-12)
    assert out.links == motion.links and "resampled at 50 Hz" in out.source
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="rate"):
            resampled(motion, bad)


def test_time_scale_slows_the_written_trajectory(tmp_path, capsys):
    """G1 on the CMU walk: at the capture's speed its right knee nearly reaches its velocity limit (finite
    differences of the written trajectory); played twice as slow the output spans twice the time and the
    peak joint speed ratio drops."""
    peaks = {}
    for scale in (1.0, 2.0):
        out = tmp_path / f"x{scale:g}"
        code = main(
            [str(EXCERPT), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet",
             "--settle", "0.3", "--time-scale", str(scale)]
        )  # fmt: skip
        assert code == 0
        data = np.load(out / "retarget.npz")
        times, q = data["times"], data["q"][:, 7:]
        peaks[scale] = (np.abs(np.diff(q, axis=0)) / np.diff(times)[:, None] / data["velocity_limit"]).max()
        summary = (out / "summary.txt").read_text()
        assert "samples with a joint at its velocity limit" in summary
        if scale == 2.0:
            assert "played 2x slower" in summary
            motion = read_motion_file(EXCERPT)
            np.testing.assert_allclose(times, 2.0 * motion.times)
    assert peaks[1.0] > 0.95  # 0.984 with the trapezoid (the retargeter's default), 0.99+ with Adams
    assert peaks[2.0] < 0.9 * peaks[1.0]
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([str(EXCERPT), "--time-scale", "0", "--out", str(tmp_path / "bad")])


def test_at_rate_keeps_every_nth_sample_as_captured_at_a_divisor_of_the_rate():
    """The 120 Hz CMU excerpt (frame time 0.0083333 s, not an exact grid) at 60 Hz: every second sample,
    stamps, poses and twists bit for bit; at its own rate itself; at 50 Hz (no divisor) :func:`resampled`."""
    motion = read_motion_file(EXCERPT)
    half = at_rate(motion, 60.0)
    for name in ("times", "positions", "rotations", "linear_velocities", "angular_velocities"):
        np.testing.assert_array_equal(getattr(half, name), getattr(motion, name)[::2], err_msg=name)
    assert "one sample in 2" in half.source and at_rate(motion, 120.0) is motion
    fifty = at_rate(motion, 50.0)
    np.testing.assert_array_equal(fifty.times, resampled(motion, 50.0).times)
    np.testing.assert_array_equal(fifty.positions, resampled(motion, 50.0).positions)
    with pytest.raises(ValueError, match="rate"):
        at_rate(motion, 0.0)


def test_ik_rate_steps_the_ik_on_its_own_grid(tmp_path):
    """``--ik-rate 60`` on the 120 Hz excerpt: the written trajectory has every second sample's stamp, stays
    inside G1's position limits and, by finite differences of what is written, its velocity limits."""
    out = tmp_path / "ik60"
    code = main(
        [str(EXCERPT), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet",
         "--settle", "0.3", "--ik-rate", "60"]
    )  # fmt: skip
    assert code == 0
    data = np.load(out / "retarget.npz")
    motion = read_motion_file(EXCERPT)
    np.testing.assert_array_equal(data["times"], motion.times[::2] - motion.times[0])
    q, times = data["q"][:, 7:], data["times"]
    assert np.isfinite(q).all()
    assert (q >= data["lower"] - 1e-9).all() and (q <= data["upper"] + 1e-9).all()
    speed = np.abs(np.diff(q, axis=0)) / np.diff(times)[:, None]
    assert (speed <= data["velocity_limit"] * (1 + 1e-6)).all()
