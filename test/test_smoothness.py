"""Smoothness of the written joint trajectory (retarget/smoothness.py) and the Adams history restarted on
a bound (core/step_integration.py): a joint held at its limit by a target beyond it must not zig-zag."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dynik_ros.bench.recovery import joint_sinusoid_motion, recovery_setup
from dynik_ros.core.branch_recovery import BranchRecoveryConfig
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.retarget.smoothness import chatter_flags, second_differences, smoothness


def test_second_differences_are_exact_on_a_parabola_with_unequal_steps():
    times = np.cumsum(np.random.default_rng(1).uniform(0.005, 0.02, 40))
    positions = np.stack((3.0 * times**2 - times, -0.5 * times**2), axis=1)
    a = second_differences(positions, times)
    assert a.shape == (38, 2)
    np.testing.assert_allclose(a, np.tile([6.0, -1.0], (38, 1)), rtol=1e-9)
    with pytest.raises(ValueError, match="increase"):
        second_differences(positions, times[::-1])


def test_chatter_is_a_sign_flip_above_the_threshold_on_both_sides():
    times = np.arange(200) / 100.0
    smooth = np.sin(2.0 * np.pi * times)  # |a| <= 39.5 rad/s^2: below the threshold, never chatter
    zigzag = np.where(np.arange(200) % 2, 0.01, -0.01)  # |a| = 400 rad/s^2, alternating every sample
    figures = smoothness(np.stack((smooth, zigzag), axis=1), times)
    np.testing.assert_allclose(figures.chatter, [0.0, 1.0])
    assert figures.chatter_share == 0.5
    np.testing.assert_allclose(figures.max[1], 400.0)
    assert figures.worst("p99") == (pytest.approx(400.0), 1)
    a = second_differences(zigzag[:, None], times)
    assert not chatter_flags(a, threshold=500.0).any()


def _held_at_limits(restart: bool, integration: str):
    """G1 tracking its own joint sinusoids with three joints' limits cutting their swing in half (a
    target beyond the limit half of the time); the written joints at 120 Hz."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, targets, home = recovery_setup("g1")
        narrow, _, _ = recovery_setup("g1")
    motion = joint_sinusoid_motion(
        robot, targets, duration=4.0, rate=120.0, amplitude=0.3, speed_fraction=0.3
    )
    held = [robot.joint_index(n) for n in ("left_ankle_roll_joint", "right_knee_joint", "left_elbow_joint")]
    swing = np.array([robot.split(q)[2] for q in motion.q])
    for j in held:
        low, high = swing[:, j].min(), swing[:, j].max()
        narrow.set_position_limits(robot.joint_names[j], low, 0.5 * (low + high))
    config = DynamicalIKConfig(
        integration=integration,
        restart_at_bounds=restart,
        branch_recovery=BranchRecoveryConfig(enabled=False),
    )
    with warnings.catch_warnings():  # the start and home postures clipped into the narrowed limits
        warnings.simplefilter("ignore")
        ik = DynamicalIK(narrow, targets, config, motion.q[0], home=home)
    joints = np.array([narrow.split(ik.step(m, 1.0 / 120.0)[0])[2] for m in motion.measurements])
    assert np.all(joints >= narrow.lower - 1e-12) and np.all(joints <= narrow.upper + 1e-12)
    return smoothness(joints, np.arange(len(joints)) / 120.0), held


def test_joints_held_at_their_limits_do_not_chatter_with_adams():
    """Old code (no restart): the held joints' accelerations flip sign with |a| > 100 rad/s^2 on 25-30 % of
    the samples and p99 |a| is 6-10x Euler's; with the history restarted on a bound 0-2.3 % and <= 1.8x."""
    adams, held = _held_at_limits(True, "adams")
    euler, _ = _held_at_limits(True, "euler")
    assert np.all(adams.chatter[held] < 0.05), adams.chatter[held]
    assert np.all(adams.p99[held] < 2.0 * np.maximum(euler.p99[held], 50.0)), (
        adams.p99[held],
        euler.p99[held],
    )


def test_without_the_restart_adams_zigzags_on_a_bound():
    """The cause, kept switchable: ``restart_at_bounds=False`` is the old behaviour."""
    old, held = _held_at_limits(False, "adams")
    assert np.all(old.chatter[held] > 0.1), old.chatter[held]


def test_dynik_retarget_writes_smoother_joints_by_default_than_with_adams(tmp_path):
    """The committed CMU excerpt on G1: the default integration (trapezoidal, the retargeter's
    ``ROBOT_INTEGRATION``) writes joints chattering on 0.10 % of the joint-samples; Adams (the solver's
    default before, with its history restarted on a bound) 0.92 %, and 1.21 % without the restart. Since the
    toe-off release is on by default (heel_off 0.005 m) the excerpt's contacts end at heel rise, and the
    release fades add chatter: 0.39 % against Adams's 2.36 % (joint acceleration p99 962 -> 576 rad/s^2), both
    without the floor rows; with them (the default since they were measured: core/floor_rows.py) 0.29 %
    against Adams's 0.84 %. Calibrated on the capture's own subject (the default since: io/skeleton_tpose.py;
    the figures above were on the 1.75 m model) 0.31 % against 2.44 % without the floor rows, 0.37 % against
    0.74 % with them. With the feet's defaults of issue 9 (hard stance rows, holds on the robot's soles, leg
    reach, swing weight 0.1) 0.19 % against 0.51 % without the floor rows, 0.18 % against 0.95 % with them."""
    from pathlib import Path

    from dynik_ros.cli.retarget import main
    from dynik_ros.retarget import Retargeter

    excerpt = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    shares = {}
    for floor in ("off", "on"):
        for name, extra in (("default", []), ("adams", ["--integration", "adams"])):
            out = tmp_path / f"{name}_{floor}"
            args = [str(excerpt), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet"]
            assert main([*args, "--floor-rows", floor, *extra]) == 0
            saved = np.load(out / "retarget.npz")
            shares[name, floor] = smoothness(saved["q"][:, 7:], saved["times"]).chatter_share
    for floor, factor in (("off", 2.0), ("on", 1.5)):
        default, adams = shares["default", floor], shares["adams", floor]
        assert default < 0.005 and default < adams / factor, shares
    assert Retargeter.from_config("g1").make_ik().config.integration == "trapezoidal"


def test_what_ik_node_and_the_bridge_put_on_the_wire_does_not_chatter(h):
    """The committed CMU excerpt replayed into ik_node (robot g1, real DDS, each sample once the IK
    answered the previous one) and bridge_node (clock message: one command per input): the joints on
    /dynik/joint_states chatter on 0.19 % of the joint-samples and the commands on 0.06 % (Adams without
    the restart, the node's integration before: 1.48 % and 0.72 %)."""
    from pathlib import Path

    from node_harness import bridge, ik, link_msg, ok
    from sensor_msgs.msg import JointState, MultiDOFJointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.wearable_sources import FileSource

    excerpt = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    samples = list(FileSource(str(excerpt), 1.0, 0.0, "apply", "").samples())
    solver = h.add(ik(model="", robot="g1", max_future_stamp=0.0))  # offline: stamps run ahead of the clock
    out = h.add(bridge(robot="g1", clock="message"))
    joints = h.collect(JointState, "/dynik/joint_states")
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    for node in (solver, out):
        assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    h.wait_matched(pub)
    for k, sample in enumerate(samples):
        msg = link_msg(sample, 10**18 + int(sample.stamp_ns))
        for _ in range(20):  # best-effort input: sent again until ik_node took it (late duplicates refused)
            pub.publish(msg)
            if h.spin_until(lambda k=k: solver.received > k, timeout=0.5):
                break
        assert solver.received > k
    assert h.spin_until(lambda: len(joints) >= len(samples) and len(commands) >= len(samples))
    stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in joints])
    assert np.all(np.diff(stamps) > 0)
    on_wire = smoothness(np.array([m.position for m in joints]), stamps)
    sent = smoothness(np.array([c.data for c in commands[: len(stamps)]]), stamps)
    shares = on_wire.chatter_share, sent.chatter_share
    assert max(shares) < 0.005, shares
