"""sim_node with real rclpy, real DDS and real MuJoCo: it follows commanded trajectories in sim time,
never lets bad commands reach the actuators, starts the bridge's ramp from its /joint_states, and its
mocap sees the true base through the configured camera transform. Waits are on conditions; the time
limits only bound a failure."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from node_harness import ok, params

pytest.importorskip("mujoco")


def sim_node(**values: Any):
    from dynik_ros.nodes.sim_node import SimNode

    return SimNode(**params(**{"controller": "sim_ctrl", "diagnostics_period": 0.2, **values}))


def _active(h, **values):
    node = h.add(sim_node(**values))
    assert ok(node.trigger_configure()), node.last_error
    assert ok(node.trigger_activate()), node.last_error
    return node


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def test_configure_names_the_bad_parameter(h):
    node = h.add(sim_node(robot="no_such_robot"))
    assert not ok(node.trigger_configure())
    assert "parameter 'robot'" in node.last_error and "no_such_robot" in node.last_error
    node = h.add(sim_node(real_time_factor=0.0))
    assert not ok(node.trigger_configure())
    assert "real_time_factor" in node.last_error and "publish_clock" in node.last_error
    node = h.add(sim_node(joints=["left_knee_joint", "nose_joint"]))
    assert not ok(node.trigger_configure())
    assert "parameter 'joints'" in node.last_error and "nose_joint" in node.last_error


def test_follows_a_trajectory_in_sim_time_and_publishes_the_clock(h):
    """A 50 Hz sinusoid sent as one trajectory starting 1 s ahead (sim time on /clock): the simulated
    joints follow it within 0.02 rad RMS after the best shift, the shift p50 under 60 ms; /clock and the
    /joint_states stamps are the same time base."""
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from dynik_ros.nodes.common import COMMAND_QOS
    from dynik_ros.nodes.conversions import seconds_to_stamp
    from dynik_ros.sim.tracking import estimate_delay, sinusoid_commands

    states = h.collect(JointState, "/joint_states")
    clocks = h.collect(Clock, "/clock")
    node = _active(h, publish_clock=True, real_time_factor=1.0, mocap=False)
    pub = h.probe.create_publisher(JointTrajectory, "/sim_ctrl/joint_trajectory", COMMAND_QOS)
    h.wait_matched(pub)
    assert h.spin_until(lambda: len(clocks) > 5 and len(states) > 2)
    sim = node.sim
    # hang the robot in the harness so the legs move freely (a standing robot's legs push the ground)
    position, rotation = sim.base_pose()
    sim.set_harness_target(position + np.array([0.0, 0.0, 0.3]), rotation)
    start = _seconds(clocks[-1].clock) + 1.0
    centre, lower, upper = sim.follower.position.copy(), sim.follower.lower, sim.follower.upper
    times = np.arange(1, 151) * 0.02
    commands = np.array([sinusoid_commands(centre, lower, upper, 0.2, 0.5, t) for t in times])
    msg = JointTrajectory()
    msg.header.stamp = seconds_to_stamp(start)
    msg.joint_names = node.joints
    for t, c in zip(times, commands, strict=True):
        point = JointTrajectoryPoint(positions=c.tolist())
        point.time_from_start.sec, point.time_from_start.nanosec = int(t), int(round((t % 1) * 1e9))
        msg.points.append(point)
    pub.publish(msg)
    end = start + times[-1] + 0.2
    assert h.spin_until(lambda: states and _seconds(states[-1].header.stamp) > end, timeout=120.0)
    assert node.sim.follower.counts.accepted == 1
    stamps = np.array([_seconds(m.header.stamp) for m in states])
    names = list(states[-1].name)
    assert set(node.joints) <= set(names), (names, [m.header.stamp for m in states[-3:]])
    index = [names.index(j) for j in node.joints]
    q = np.array([np.asarray(m.position)[index] for m in states])
    window = (stamps > start + 1.0) & (stamps < start + times[-1])
    delay, rms = estimate_delay(start + times, commands, stamps[window], q[window], max_delay=0.3)
    assert np.all(rms < 0.02), rms
    assert np.median(delay) < 0.06, delay
    # stamps are sim times on /clock: each state was published within the physics chunk (at most
    # max_catch_up, 50 ms) that ended at a /clock time, and on the 1 ms physics grid
    clock_times = np.array(sorted(_seconds(c.clock) for c in clocks))
    published = stamps[stamps <= clock_times[-1]]
    after = clock_times[np.searchsorted(clock_times, published - 1e-9)]
    assert published.size > 10 and np.all(after - published <= 0.05 + 1e-6), (after - published).max()
    assert np.allclose(published * 1000, np.round(published * 1000), atol=1e-6)


def test_out_of_limit_and_nan_commands_never_reach_the_actuators(h):
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import COMMAND_QOS

    node = _active(h, mocap=False)
    sim = node.sim
    pub = h.probe.create_publisher(Float64MultiArray, "/sim_ctrl/commands", COMMAND_QOS)
    h.wait_matched(pub)
    lower, upper = sim.follower.lower, sim.follower.upper
    wild = np.where(np.arange(lower.size) % 2 == 0, upper + 2.0, lower - 2.0)
    pub.publish(Float64MultiArray(data=wild.tolist()))
    assert h.spin_until(lambda: sim.follower.counts.clipped_commands == 1)
    t = sim.time
    assert h.spin_until(lambda: sim.time > t + 0.01)  # ctrl is written at the next physics step
    ctrl = sim.data.ctrl[sim.actuator_ids]
    np.testing.assert_array_equal(ctrl, np.clip(wild, lower, upper))
    for bad in ([math.nan] * lower.size, [0.0] * (lower.size - 1) + [math.inf], [0.0] * 3):
        pub.publish(Float64MultiArray(data=bad))
    assert h.spin_until(lambda: sim.follower.counts.refused_total == 3)
    t = sim.time
    assert h.spin_until(lambda: sim.time > t + 0.05)
    assert np.all(np.isfinite(sim.data.ctrl)) and np.all(np.isfinite(sim.data.qpos))
    np.testing.assert_array_equal(sim.data.ctrl[sim.actuator_ids], np.clip(wild, lower, upper))


def test_the_bridge_ramp_starts_from_the_simulated_joint_states(h):
    """The sim is first moved to a pose P away from the IK's start; the bridge, activated with an IK
    target T, ramps from P (the sim's /joint_states), and the sim ends at T."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.common import COMMAND_QOS, RELIABLE_QOS
    from dynik_ros.nodes.conversions import joint_state_msg

    node = _active(h, mocap=False)
    sim = node.sim
    names = node.joints
    start = sim.follower.position.copy()
    arms = np.array(["shoulder" in n or "elbow" in n for n in names])
    pose_p = np.clip(start + np.where(arms, 0.3, 0.0), sim.follower.lower, sim.follower.upper)
    target = np.clip(start + np.where(arms, -0.3, 0.0), sim.follower.lower, sim.follower.upper)
    direct = h.probe.create_publisher(Float64MultiArray, "/sim_ctrl/commands", COMMAND_QOS)
    h.wait_matched(direct)
    direct.publish(Float64MultiArray(data=pose_p.tolist()))
    assert h.spin_until(lambda: np.abs(sim.controlled_positions() - pose_p)[arms].max() < 0.02)
    bridge = h.add(
        BridgeNode(**params(robot="g1", controller="sim_ctrl", interface="forward_command", ramp_time=1.0))
    )
    commands = h.collect(Float64MultiArray, "/sim_ctrl/commands")
    assert ok(bridge.trigger_configure()), bridge.last_error
    h.wait_matched(bridge._pub, 2)  # the sim and the probe
    ik = h.probe.create_publisher(JointState, "/dynik/joint_states", RELIABLE_QOS)
    h.wait_matched(ik)
    assert h.spin_until(lambda: bridge._measured is not None)  # the sim's /joint_states arrived
    assert ok(bridge.trigger_activate())
    k = 0

    def feed() -> bool:
        nonlocal k
        k += 1
        ik.publish(joint_state_msg(k, names, target))
        return bool(commands) and np.abs(sim.controlled_positions() - target)[arms].max() < 0.02

    assert h.spin_until(feed, timeout=30.0)
    first = np.asarray(commands[0].data)
    moving = np.abs(target - pose_p) > 0.1
    assert np.abs(first - pose_p)[moving].max() < 0.05  # from where the sim was, not from the IK
    assert np.abs(first - target)[moving].min() > 0.5


def test_mocap_sees_the_true_base_through_the_camera_transform(h):
    """Noise-free mocap: every rigid-body pose is T_cw T_wb T_bm of the true base pose published at
    the same sim instant (mocap and /sim/base_pose_true on one 100 Hz sim-time grid, both reliable, so
    every capture has its truth); poses arrive stamped in order, in the mocap frame."""
    from geometry_msgs.msg import PoseStamped
    from scipy.spatial.transform import Rotation

    camera = [1.0, -2.0, 0.5, 5.0, -10.0, 40.0]
    marker = [0.05, 0.0, 0.12, 0.0, 20.0, 0.0]
    truth = h.collect(PoseStamped, "/sim/base_pose_true")
    seen = h.collect(PoseStamped, "/mocap/rigid_body")
    _active(
        h,
        publish_clock=True,
        publish_rate=100.0,
        mocap_rate=100.0,
        mocap_reliable=True,
        mocap_position_noise=0.0,
        mocap_rotation_noise=0.0,
        mocap_dropout_fraction=0.0,
        mocap_outlier_fraction=0.0,
        mocap_camera_from_world=camera,
        mocap_marker_offset=marker,
    )

    def matched() -> list[tuple[Any, Any]]:
        by_stamp = {round(_seconds(m.header.stamp), 6): m for m in truth}
        return [
            (by_stamp[round(_seconds(m.header.stamp), 6)], m)
            for m in seen
            if round(_seconds(m.header.stamp), 6) in by_stamp
        ]

    assert h.spin_until(lambda: len(matched()) >= 5, timeout=120.0), (len(truth), len(seen))

    def homogeneous(xyz, rotation) -> np.ndarray:
        t = np.eye(4)
        t[:3, :3], t[:3, 3] = rotation.as_matrix(), xyz
        return t

    t_cw = homogeneous(camera[:3], Rotation.from_euler("xyz", camera[3:], degrees=True))
    t_bm = homogeneous(marker[:3], Rotation.from_euler("xyz", marker[3:], degrees=True))
    for base, body in matched():
        p, o = base.pose.position, base.pose.orientation
        t_wb = homogeneous([p.x, p.y, p.z], Rotation.from_quat([o.x, o.y, o.z, o.w]))
        expected = t_cw @ t_wb @ t_bm
        p, o = body.pose.position, body.pose.orientation
        np.testing.assert_allclose([p.x, p.y, p.z], expected[:3, 3], atol=1e-9)
        q = Rotation.from_matrix(expected[:3, :3]).as_quat()
        assert abs(abs(float(np.dot(q, [o.x, o.y, o.z, o.w]))) - 1.0) < 1e-9
        assert body.header.frame_id == "mocap"
    stamps = [_seconds(m.header.stamp) for m in seen]
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))


def test_deactivating_the_bridge_stops_its_commands_and_the_sim_holds(h):
    """Bridge commanding the sim; after the bridge's deactivate no command arrives, the last trajectory
    ends and the simulated joints hold its last point (ctrl unchanged, joints within 0.02 rad of it)
    over 0.5 s of sim while the IK output goes on moving."""
    from sensor_msgs.msg import JointState

    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.conversions import joint_state_msg

    node = _active(h, mocap=False)
    sim = node.sim
    bridge = h.add(
        BridgeNode(**params(robot="g1", controller="sim_ctrl", interface="joint_trajectory", ramp_time=0.0))
    )
    assert ok(bridge.trigger_configure()), bridge.last_error
    h.wait_matched(bridge._pub)
    ik = h.probe.create_publisher(JointState, "/dynik/joint_states", RELIABLE_QOS)
    h.wait_matched(ik)
    assert ok(bridge.trigger_activate())
    names = node.joints
    arms = np.array(["elbow" in n for n in names])
    target = sim.follower.position + np.where(arms, 0.2, 0.0)
    k = 0

    def feed() -> bool:
        nonlocal k
        k += 1
        ik.publish(joint_state_msg(k, names, target))
        return np.abs(sim.controlled_positions() - target)[arms].max() < 0.02

    assert h.spin_until(feed, timeout=30.0)
    assert ok(bridge.trigger_deactivate())
    sent = bridge.commands_sent
    h.spin_until(lambda: sim.follower.counts.accepted >= sent, timeout=5.0)  # those in flight land
    accepted = sim.follower.counts.accepted
    t = sim.time
    # the last one-point trajectory ends time_from_start (0.05 s) after it arrived, then holds
    assert h.spin_until(lambda: sim.time > t + bridge.params["time_from_start"] + 0.01)
    ctrl = sim.data.ctrl.copy()
    t = sim.time

    def hold() -> bool:
        ik.publish(joint_state_msg(k + 1, names, target + 0.3))  # the IK goes on; the bridge must not
        return sim.time > t + 0.5

    assert h.spin_until(hold, timeout=60.0)
    assert sim.follower.counts.accepted == accepted
    np.testing.assert_array_equal(sim.data.ctrl, ctrl)
    assert np.abs(sim.controlled_positions() - ctrl[sim.actuator_ids])[arms].max() < 0.02


def test_lockstep_waits_for_the_consumer_then_runs_on_when_it_falls_silent(h):
    """lockstep_topic: sim time (real time on /clock) stops lockstep_lead past the consumer's
    newest stamp, moves on when a newer stamp arrives, and runs on alone once the consumer has been silent
    for lockstep_timeout."""
    from sensor_msgs.msg import JointState

    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.conversions import seconds_to_stamp

    node = _active(
        h, publish_clock=True, real_time_factor=1.0, mocap=False, lockstep_topic="/consumer",
        lockstep_lead=0.05, lockstep_timeout=3.0,
    )  # fmt: skip
    sim = node.sim
    pub = h.probe.create_publisher(JointState, "/consumer", RELIABLE_QOS)
    h.wait_matched(pub)
    dt = sim.model.opt.timestep
    for stamp in (sim.time + 2.0, sim.time + 2.5):
        msg = JointState()
        msg.header.stamp = seconds_to_stamp(stamp)
        waits = node.lockstep_waits

        def held(w=waits, m=msg) -> bool:
            pub.publish(m)  # the consumer, alive, still at this stamp
            return node.lockstep_waits > w + 20

        assert h.spin_until(held, timeout=120.0)
        assert stamp + 0.05 - dt - 1e-9 <= sim.time <= stamp + 0.05 + 1e-9, (stamp, sim.time)
    held = sim.time
    assert h.spin_until(lambda: sim.time > held + 1.0, timeout=120.0)  # silent for 3 s: on its own
