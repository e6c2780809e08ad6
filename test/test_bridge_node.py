"""bridge_node's safety behaviour with real rclpy and DDS: nothing sent while inactive, the last command held
when the source stops, commands clamped to the limits and rate limited, controller joint order, the ramp
from the measured robot state."""

from __future__ import annotations

import math

import numpy as np
from node_harness import bridge, ok


# --------------------------------------------------------------------------- bridge safety
def _joint_states(names: list[str], positions: np.ndarray, stamp_ns: int):
    from dynik_ros.nodes.conversions import joint_state_msg

    return joint_state_msg(stamp_ns, names, positions, np.zeros(len(names)))


def _bridge_with_input(h, **values):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import RELIABLE_QOS

    node = h.add(bridge(**values))
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    pub = h.probe.create_publisher(JointState, "/dynik/joint_states", RELIABLE_QOS)
    assert ok(node.trigger_configure()), node.last_error
    h.wait_matched(pub)
    h.wait_matched(node._pub)
    return node, pub, commands


def test_bridge_sends_nothing_while_inactive(h, human66):
    node, pub, commands = _bridge_with_input(h, ramp_time=0.0)
    names = human66.joint_names
    for k in range(10):
        pub.publish(_joint_states(names, np.zeros(len(names)), k))
        h.spin(0.02)
    h.spin(0.2)
    assert commands == [] and node.commands_sent == 0
    assert ok(node.trigger_activate())
    pub.publish(_joint_states(names, np.zeros(len(names)), 100))
    assert h.spin_until(lambda: len(commands) >= 3)
    assert ok(node.trigger_deactivate())
    h.spin(0.1)
    n = len(commands)
    for k in range(10):
        pub.publish(_joint_states(names, np.zeros(len(names)), 200 + k))
        h.spin(0.02)
    h.spin(0.2)
    assert len(commands) == n  # nothing while inactive, not even the hold timer


def test_bridge_holds_the_last_command_when_the_source_stops(h, human66):
    node, pub, commands = _bridge_with_input(h, ramp_time=0.0, stale_timeout=0.05, command_rate=100.0)
    assert ok(node.trigger_activate())
    names = human66.joint_names
    target = np.clip(0.2 * np.ones(len(names)), human66.lower, human66.upper)
    for k in range(20):
        pub.publish(_joint_states(names, target, k * 10**7))
        h.spin(0.01)
    h.spin(0.05)
    n = len(commands)
    # the source stopped: the bridge repeats its last command at command_rate (waited on, not timed: on a
    # loaded machine a late input may also have caused an earlier, shorter hold)
    assert h.spin_until(lambda: len(commands) - n >= 20, timeout=15.0)
    held = commands[n:]
    last = np.asarray(held[-1].data)
    assert all(np.array_equal(np.asarray(c.data), last) for c in held[1:])
    assert all(np.all(np.isfinite(c.data)) for c in commands)
    assert node.hold_events >= 1 and node._holding


def test_bridge_clamps_and_rate_limits(h, human66):
    node, pub, commands = _bridge_with_input(h, ramp_time=0.0)
    assert ok(node.trigger_activate())
    names = human66.joint_names
    start = np.clip(np.zeros(len(names)), human66.lower, human66.upper)
    pub.publish(_joint_states(names, start, 1))
    assert h.spin_until(lambda: len(commands) >= 1)
    far = human66.upper + 1.0  # beyond every upper limit
    pub.publish(_joint_states(names, far, 2))
    # until the probe has the bridge's newest command made after the far input (two received commands may
    # both be the start pose's, a timer repeat before the far input is read: seen once on a loaded machine)
    assert h.spin_until(
        lambda: (
            node.fresh_commands >= 2
            and len(commands) >= 2
            and np.array_equal(commands[-1].data, node.last_command)
        )
    )
    # each command moves at most velocity_limit * dt, dt capped at two command periods (a late timer)
    wire = np.array([c.data for c in commands])
    assert np.all(wire <= human66.upper + 1e-12)
    step = np.abs(np.diff(wire, axis=0))
    assert np.all(step <= human66.velocity_limit * 2.0 / node.params["command_rate"] + 1e-9)
    assert np.any(step > 0)
    assert node.rate_limited >= 1 and node.clamped >= 1
    target = np.minimum(far, human66.upper)
    before = node.fresh_commands
    for k in range(3000):  # a fresh input stream: the commands converge to the clamped target
        pub.publish(_joint_states(names, far, 3 + k))
        h.spin(0.01)
        if np.allclose(node.last_command, target, atol=1e-9):
            break
    # seen once in a full suite on a loaded machine (not reproduced in 11 runs alone, 8 of them under two busy
    # loops): 1.6e-5 rad short after 3000 inputs; the counters say whether the bridge took them
    counters = (
        f"fresh commands {node.fresh_commands - before} of {k + 1} inputs, sent {node.commands_sent}, "
        f"hold events {node.hold_events}, holding {node._holding}, rejected {node.rejections.total}"
    )
    np.testing.assert_allclose(node.last_command, target, atol=1e-9, err_msg=counters)
    bad = _joint_states(names, start, 100)
    bad.position[0] = math.nan
    for _ in range(5):  # best effort: resent until the bridge counted it (a wait, never a race)
        pub.publish(bad)
        if h.spin_until(lambda: node.rejections.counts["nan"] >= 1, timeout=4.0):
            break
    assert node.rejections.counts["nan"] >= 1
    assert all(np.all(np.isfinite(c.data)) for c in commands)


def test_bridge_joint_trajectory_in_controller_order(h, human66):
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from dynik_ros.nodes.common import RELIABLE_QOS

    order = ["jRightKnee_rotz", "jLeftKnee_rotz", "jRightElbow_rotz"]
    assert all(j in human66.joint_names for j in order)
    node = h.add(bridge(interface="joint_trajectory", joints=order, ramp_time=0.0, time_from_start=0.1))
    got = h.collect(JointTrajectory, "/test_ctrl/joint_trajectory")
    pub = h.probe.create_publisher(JointState, "/dynik/joint_states", RELIABLE_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    h.wait_matched(pub)
    names = human66.joint_names
    values = np.clip(np.linspace(-0.5, 0.5, len(names)), human66.lower, human66.upper)
    pub.publish(_joint_states(names, values, 5))
    assert h.spin_until(lambda: len(got) >= 1)
    msg = got[0]
    assert list(msg.joint_names) == order
    assert len(msg.points) == 1 and msg.points[0].time_from_start.nanosec == 100_000_000
    np.testing.assert_allclose(msg.points[0].positions, [values[names.index(j)] for j in order])
    assert msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0  # start now


def test_bridge_ramps_from_the_measured_robot_state(h, human66):
    from sensor_msgs.msg import JointState

    from dynik_ros.nodes.common import RELIABLE_QOS

    node, pub, commands = _bridge_with_input(h, ramp_time=0.5)
    robot = h.probe.create_publisher(JointState, "/joint_states", RELIABLE_QOS)
    h.wait_matched(robot)
    names = human66.joint_names
    measured = np.clip(np.full(len(names), -0.1), human66.lower, human66.upper)
    target = np.clip(np.full(len(names), 0.1), human66.lower, human66.upper)
    robot.publish(_joint_states(names, measured, 1))
    h.spin(0.1)
    assert ok(node.trigger_activate())
    for k in range(70):
        pub.publish(_joint_states(names, target, k))
        h.spin(0.01)
    h.spin(0.1)
    first = np.asarray(commands[0].data)
    moving = np.flatnonzero(target != measured)
    assert np.all(np.abs(first - measured)[moving] < np.abs(target - measured)[moving] * 0.1)
    np.testing.assert_allclose(node.last_command, target, atol=1e-9)


def test_bridge_with_input_depth_0_commands_every_input_it_fell_behind_on(h, human66):
    """``dynik-ros run --processes`` offline: a bridge process behind the IK by more than its 10 samples of
    reader history lost the oldest (KEEP_LAST), and the run reported fewer fresh commands than IK outputs
    (22 of 60 once, under load). With ``input_depth`` 0 (keep all, what the runner sets offline) every input
    published while the bridge did not spin is taken and commanded (the default 10 kept 10 of the 50 here)."""
    from sensor_msgs.msg import JointState

    from dynik_ros.nodes.common import reliable_qos

    names = human66.joint_names
    target = np.clip(0.1 * np.ones(len(names)), human66.lower, human66.upper)
    node = h.add(bridge(ramp_time=0.0, clock="message", input_depth=0))
    pub = h.probe.create_publisher(JointState, "/dynik/joint_states", reliable_qos(0))
    assert ok(node.trigger_configure()), node.last_error
    assert ok(node.trigger_activate())
    h.wait_matched(pub)
    for k in range(50):  # the bridge's executor does not spin meanwhile: it falls 50 samples behind
        pub.publish(_joint_states(names, target, (k + 1) * 10**7))
    assert h.spin_until(lambda: node.fresh_commands >= 50, timeout=30.0)
    assert node.fresh_commands == 50 and sum(node.rejections.counts.values()) == 0


def test_bridge_on_the_message_clock_keeps_up_with_a_30_hz_stream_at_full_speed(h, human66):
    """``clock:=message`` (``dynik-ros run`` offline) at the default ``command_rate`` 100: the rate limit let
    a command move over at most two command periods (0.02 s) of an input interval of 0.033 s, so an IK output
    moving at 0.9 of the velocity limits left the commands further behind on every sample. Now the interval
    is the message clock's own (up to ``stale_timeout``): every command reaches its input, and no command on
    the wire moves faster than the limits over its stamps; a gap in the stream still moves the command by
    at most ``stale_timeout`` at full speed."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import reliable_qos
    from dynik_ros.testing.invariants import WireChecks

    names = human66.joint_names
    node = h.add(bridge(ramp_time=0.0, clock="message", input_depth=0))
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    pub = h.probe.create_publisher(JointState, "/dynik/joint_states", reliable_qos(0))
    assert ok(node.trigger_configure()), node.last_error
    assert ok(node.trigger_activate())
    h.wait_matched(pub)
    h.wait_matched(node._pub)
    period = 10**9 // 30
    start = 0.5 * (human66.lower + human66.upper)
    speed = 0.9 * human66.velocity_limit
    samples = 6  # stays inside the limits: 0.17 s at 0.9 of a speed limit from the middle of the range
    targets = [start + speed * (k * period * 1e-9) for k in range(samples)]
    assert np.all(targets[-1] <= human66.upper) and np.all(targets[-1] >= human66.lower)
    stamps = [(k + 1) * period for k in range(samples)]
    for stamp, target in zip(stamps, targets, strict=True):
        pub.publish(_joint_states(names, target, stamp))
    assert h.spin_until(lambda: len(commands) >= samples, timeout=30.0)
    wire = np.array([c.data for c in commands[:samples]])
    np.testing.assert_allclose(wire, np.array(targets), atol=1e-9)  # none behind its input
    checks = WireChecks(human66.lower, human66.upper, human66.velocity_limit)
    for stamp, command in zip(stamps, wire, strict=True):
        checks.command(command, stamp)
    assert not checks.breaches, checks.examples
    gap = stamps[-1] + 10**9  # a 1 s gap, then a target far away: one stale_timeout's motion at full speed
    far = human66.upper
    pub.publish(_joint_states(names, far, gap))
    assert h.spin_until(lambda: len(commands) >= samples + 1, timeout=30.0)
    moved = np.abs(np.asarray(commands[samples].data) - targets[-1])
    limit = human66.velocity_limit * node.params["stale_timeout"]
    assert np.all(moved <= limit + 1e-9) and np.any(moved > 0.5 * limit)
