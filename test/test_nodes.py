"""The four lifecycle nodes with real rclpy and DDS (no mocks): message conversions, transitions, parameter
validation, data flowing end to end, refused inputs counted in diagnostics, a robot model in ik_node.

Every test gets fresh nodes on one SingleThreadedExecutor (the ``h`` fixture, conftest.py) and destroys them
afterwards. The session uses its own ROS_DOMAIN_ID (claimed with a lock file, see conftest) and
localhost-only discovery, so parallel sessions do not meet. The bridge's safety behaviour is in
test_bridge_node.py, hostile input to ik_node in test_hostile_input.py, mocap_node in test_mocap_node.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from node_harness import bridge, ik, link_msg, mocap, ok, wearable


# --------------------------------------------------------------------------- conversions (no DDS)
def test_cdr_parser_matches_rclpy_deserialization(samples):
    from rclpy.serialization import serialize_message

    from dynik_ros.nodes.conversions import MessageRejected, link_states_from_cdr, link_states_from_msg

    s = samples[7]
    for frame, twist in (("world", True), ("", False), ("abc", True)):
        msg = link_msg(s, 1_700_000_000_123_456_789)
        msg.header.frame_id = frame
        if not twist:
            msg.twist = []
        a, b = link_states_from_cdr(serialize_message(msg)), link_states_from_msg(msg)
        assert a.stamp_ns == b.stamp_ns == 1_700_000_000_123_456_789
        assert a.names == b.names == list(s.names)
        np.testing.assert_array_equal(a.positions, b.positions)
        np.testing.assert_allclose(a.rotations, b.rotations, atol=1e-15)
        assert (a.angular_velocities is None) == (not twist)
        if twist:
            np.testing.assert_array_equal(a.angular_velocities, s.angular_velocities)
    with pytest.raises(MessageRejected) as err:
        link_states_from_cdr(serialize_message(link_msg(s, 1))[:300])
    assert err.value.reason == "wrong_lengths"


def test_decode_link_states_turns_foreign_bytes_into_one_refusal(samples):
    """ik_node and dynamics_node share this decode-or-reject: a 1-byte message or big-endian CDR (which
    rclpy's deserializer refuses with an RMWError) is a MessageRejected "undecodable", not an escape."""
    from rclpy.serialization import serialize_message

    from dynik_ros.nodes.conversions import UNDECODABLE, MessageRejected, decode_link_states

    good = serialize_message(link_msg(samples[3], 5))
    assert decode_link_states(good).names == list(samples[3].names)
    for data in (b"\x00", b"\x00\x00\x00\x00" + good[4:40], b""):
        with pytest.raises(MessageRejected) as err:
            decode_link_states(data)
        assert err.value.reason == UNDECODABLE, (data, err.value)


def test_stamp_and_quaternion_helpers():
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.core.so3 import exp_so3
    from dynik_ros.nodes.conversions import ns_to_stamp, pose_msg, stamp_to_ns

    for ns in (0, 1, 999_999_999, 1_700_000_000_123_456_789):
        assert stamp_to_ns(ns_to_stamp(ns)) == ns
    r = exp_so3(np.array([0.3, -2.0, 1.0]))
    q = pose_msg(np.zeros(3), quaternion_from_rotation(r)).orientation  # the Odometry / TF path
    w, x, y, z = q.w, q.x, q.y, q.z
    np.testing.assert_allclose(
        [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]],
        r,
        atol=1e-12,
    )  # fmt: skip


# --------------------------------------------------------------------------- lifecycle
NODE_FACTORIES = {
    "wearable_node": lambda: wearable(),
    "ik_node": lambda: ik(),
    "mocap_node": lambda: mocap(),
    "bridge_node": lambda: bridge(),
}


@pytest.mark.parametrize("name", list(NODE_FACTORIES))
def test_every_lifecycle_transition(h, name):
    node = h.add(NODE_FACTORIES[name]())
    assert node.lifecycle_state == "unconfigured"
    assert ok(node.trigger_configure()) and node.lifecycle_state == "inactive", node.last_error
    n_publishers = len(list(node.publishers))
    assert ok(node.trigger_activate()) and node.lifecycle_state == "active"
    h.spin(0.05)
    assert ok(node.trigger_deactivate()) and node.lifecycle_state == "inactive"
    assert ok(node.trigger_cleanup()) and node.lifecycle_state == "unconfigured"
    assert len(list(node.publishers)) < n_publishers  # cleanup destroyed what configure made
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    assert ok(node.trigger_shutdown()) and node.lifecycle_state == "finalized"


def test_cleanup_frees_the_model(h):
    node = h.add(ik())
    assert ok(node.trigger_configure())
    assert node.ik is not None and node.robot is not None
    assert ok(node.trigger_cleanup())
    assert node.ik is None and node.robot is None and node._evaluator is None


BAD_PARAMETERS = [
    ("wearable_node", {"rate": -5.0}, "rate"),
    ("wearable_node", {"scenario": "dancing"}, "scenario"),
    ("wearable_node", {"source": "bag"}, "bag_path"),
    ("wearable_node", {"source": "bag", "bag_path": "/nonexistent/bag"}, "bag_path"),
    ("wearable_node", {"rate": "fast"}, "rate"),
    ("ik_node", {"position_gain": -1.0}, "position_gain"),
    ("ik_node", {"model": "human99"}, "model"),
    ("ik_node", {"base_frame": "Pelvic"}, "base_frame"),
    ("ik_node", {"robot": "no_such_robot"}, "robot"),
    ("ik_node", {"config_file": "config/g1.yaml"}, "config_file"),
    ("mocap_node", {"rigid_body_in_base": [0.0, 0.0, 0.1]}, "rigid_body_in_base"),
    ("mocap_node", {"calibration_samples": 0}, "calibration_samples"),
    ("bridge_node", {"joints": ["jRightKnee_rotz", "no_such_joint"]}, "joints"),
    ("bridge_node", {"command_rate": 0.0}, "command_rate"),
    ("bridge_node", {"urdf": "/nonexistent.urdf"}, "urdf"),
]


@pytest.mark.parametrize("name, values, parameter", BAD_PARAMETERS)
def test_configure_fails_naming_the_bad_parameter(h, capfd, name, values, parameter):
    factories = {"wearable_node": wearable, "ik_node": ik, "mocap_node": mocap, "bridge_node": bridge}
    node = h.add(factories[name](**values))  # never raises: bad overrides surface at configure
    assert not ok(node.trigger_configure())
    assert node.lifecycle_state == "unconfigured"
    assert f"parameter '{parameter}'" in node.last_error, node.last_error
    if parameter == "joints":
        assert "no_such_joint" in node.last_error
    assert f"parameter '{parameter}'" in capfd.readouterr().err  # the error log names it too


def test_configure_succeeds_once_the_parameter_is_fixed(h):
    from rclpy.parameter import Parameter

    node = h.add(wearable(rate=-5.0))
    assert not ok(node.trigger_configure())
    assert node.set_parameters([Parameter("rate", value=30.0)])[0].successful
    assert ok(node.trigger_configure()), node.last_error


def test_runtime_gain_changes_are_validated(h):
    from rclpy.parameter import Parameter

    node = h.add(ik())
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    n_pos = 3 * node.targets.n_position
    assert node.set_parameters([Parameter("position_gain", value=20.0)])[0].successful
    assert node.set_parameters([Parameter("orientation_gain", value=5.0)])[0].successful
    assert not node.set_parameters([Parameter("orientation_gain", value=5)])[0].successful  # typed double
    np.testing.assert_array_equal(node.ik.gains[:n_pos], 20.0)
    np.testing.assert_array_equal(node.ik.gains[n_pos:], 5.0)
    for bad in (-1.0, math.nan, math.inf, "high"):
        result = node.set_parameters([Parameter("position_gain", value=bad)])[0]
        assert not result.successful, bad
    assert "position_gain" in node.set_parameters([Parameter("position_gain", value=-1.0)])[0].reason
    np.testing.assert_array_equal(node.ik.gains[:n_pos], 20.0)  # unchanged by the refused values
    assert node.set_parameters([Parameter("limit_gain", value=3.0)])[0].successful
    assert node.ik.config.limit_gain == 3.0
    assert not node.set_parameters([Parameter("limit_gain", value=0.0)])[0].successful
    assert not node.set_parameters([Parameter("model", value="human99")])[0].successful


def test_tf_is_reported_when_tf2_msgs_is_missing(h):
    node = h.add(ik(publish_tf=True))
    assert ok(node.trigger_configure())
    try:
        import tf2_msgs  # noqa: F401

        assert node.tf_available
    except ImportError:
        assert not node.tf_available


# --------------------------------------------------------------------------- data flow
def test_data_flows_through_all_four_nodes(h):
    """wearable -> ik (base from mocap) -> bridge, with a mocap rigid body on the measured pelvis.

    Offline pacing (each sample once the IK answered the previous one): nothing may be lost, however
    loaded the machine is. Real-time pacing is covered by test_runner.py."""
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState, MultiDOFJointState
    from std_msgs.msg import Float64MultiArray
    from visualization_msgs.msg import MarkerArray

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.conversions import pose_msg

    # ack_timeout only bounds a failure: with every reader matched first, each ack arrives (reliable)
    src = h.add(wearable(rate=60.0, duration=1.5, realtime=False, ack_timeout=20.0))
    solver = h.add(ik(use_base_odom=True, max_future_stamp=0.0))  # offline: stamps run ahead of the clock
    base = h.add(mocap(calibration_samples=5, robot_world="camera", base_frame="Pelvis"))
    out = h.add(bridge())
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    joints = h.collect(JointState, "/dynik/joint_states")
    odom = h.collect(Odometry, "/robot/base_odom")
    markers = h.collect(MarkerArray, "/dynik/markers")
    rigid = h.probe.create_publisher(PoseStamped, "/mocap/rigid_body", SENSOR_QOS)

    def to_mocap(msg: MultiDOFJointState) -> None:  # a marker cluster on the pelvis
        i = list(msg.joint_names).index("Pelvis")
        t = msg.transforms[i]
        pose = PoseStamped()
        pose.header = msg.header
        pose.pose = pose_msg(
            (t.translation.x, t.translation.y, t.translation.z),
            (t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w),
        )
        rigid.publish(pose)

    h.probe.create_subscription(MultiDOFJointState, "/human/link_states", to_mocap, SENSOR_QOS)
    for node in (out, base, solver, src):
        assert ok(node.trigger_configure()), node.last_error
    h.wait_matched(src._pub, 2)
    h.wait_matched(rigid)
    # the wearable's ack reader, the collector and the bridge: an IK answer sent before discovery matched
    # the ack reader was lost, and the replay waited ack_timeout (flaky under load)
    h.wait_matched(solver._pub_js, 3)
    for node in (out, base, solver, src):
        assert ok(node.trigger_activate())
    assert h.spin_until(lambda: src.finished, timeout=120.0)
    h.spin(0.3)
    assert src.published == 90 and src.ack_timeouts == 0
    assert solver.received == 90 and solver.rejections.total == 0
    assert solver.steps == 89 and solver.qp_failures == 0
    assert base.published == 90 - 4 and len(odom) == base.published  # 5 poses calibrate
    assert solver.base_odom_missing <= 6  # while the mocap calibrates
    assert len(joints) == 90 and len(commands) >= 90
    assert all(len(c.data) == len(solver.robot.joint_names) and np.all(np.isfinite(c.data)) for c in commands)
    # with the base pose measured, the IK's base is the measured pelvis
    last = src._template  # the serialized layout of the last sample published (cdr_writer)
    t = last.transforms[last.names.index("Pelvis"), :3]
    np.testing.assert_allclose(solver.ik.base_position, t, atol=0.02)
    # stamps travel through: the last joint state has the last link-state stamp
    from dynik_ros.nodes.conversions import stamp_to_ns

    assert stamp_to_ns(joints[-1].header.stamp) == last.stamp_ns
    assert np.mean([e[1] for e in solver.errors[20:]]) < 1e-2  # MNTE
    # targets vs achieved axes (x, y, z) and both skeletons (22 bones of the 23 Xsens links)
    assert markers, "no /dynik/markers"
    spaces = [(m.ns, m.id, len(m.points)) for m in markers[-1].markers]
    assert spaces[:6] == [("targets", k, 46) for k in range(3)] + [("achieved", k, 46) for k in range(3)]
    assert spaces[6:] == [("skeleton", 0, 44), ("measured_skeleton", 0, 44)]
    assert all(m.header.frame_id == "world" for m in markers[-1].markers)


def test_bad_messages_are_refused_counted_and_the_pipeline_keeps_running(h, samples):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import MultiDOFJointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import SENSOR_QOS

    solver = h.add(ik(max_input_age=0.5))
    out = h.add(bridge())
    diagnostics = h.collect(DiagnosticArray, "/diagnostics")
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    for node in (out, solver):
        assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    h.wait_matched(pub)
    t0 = 1_700_000_000 * 10**9
    period = 10**9 // 120

    def send(msg: MultiDOFJointState) -> None:
        before = solver.received
        pub.publish(msg)
        assert h.spin_until(lambda: solver.received > before, timeout=10.0)

    def good(k: int) -> MultiDOFJointState:
        return link_msg(samples[k], t0 + k * period)

    for k in range(10):
        send(good(k))
    bad = []
    m = good(10)
    m.transforms[3].translation.x = math.nan
    bad.append(("nan", m))
    m = good(10)
    m.twist[5].angular.z = math.inf
    bad.append(("nan", m))
    m = good(10)
    m.transforms[4].rotation.w *= 1.5
    bad.append(("non_rotation", m))
    m = good(10)
    m.joint_names = ["Pelvis", "Tail"] + list(m.joint_names[2:])
    bad.append(("unknown_links", m))
    m = good(10)
    m.transforms = m.transforms[:-1]
    bad.append(("wrong_lengths", m))
    m = good(10)
    m.twist = m.twist[:5]
    bad.append(("wrong_lengths", m))
    m = good(10)
    m.joint_names = list(m.joint_names[:-1]) + ["Pelvis"]
    bad.append(("duplicate_names", m))
    m = good(10)
    m.joint_names, m.transforms, m.twist = m.joint_names[:-1], m.transforms[:-1], m.twist[:-1]
    bad.append(("missing_links", m))
    bad.append(("out_of_order", good(5)))  # 42 ms older than the newest: out of order
    bad.append(("out_of_order", good(9)))  # same stamp again
    m = good(10)
    m.header.stamp.sec -= 2  # 2 s older than the newest: stale
    bad.append(("stale", m))
    steps = solver.steps
    for _, msg in bad:
        send(msg)
    assert solver.steps == steps
    for k in range(10, 40):
        send(good(k))
    assert solver.steps == steps + 30  # kept tracking
    expected: dict[str, int] = {}
    for reason, _ in bad:
        expected[reason] = expected.get(reason, 0) + 1
    assert {k: v for k, v in solver.rejections.counts.items() if v} == expected
    h.spin(0.15)

    def ik_status() -> dict[str, str] | None:
        for msg in reversed(diagnostics):
            for status in msg.status:
                if status.name.startswith(solver.get_name()):
                    return {kv.key: kv.value for kv in status.values}
        return None

    assert h.spin_until(lambda: (ik_status() or {}).get("rejected_total") == str(len(bad)), timeout=10.0)
    status = ik_status()
    for reason, count in expected.items():
        assert status[f"rejected_{reason}"] == str(count)
    assert float(status["solve_time_p50_ms"]) > 0 and status["qp_status"] != "none"
    assert len(commands) >= 40 and all(np.all(np.isfinite(c.data)) for c in commands)


def test_wearable_offline_mode_publishes_one_sample_per_ack_timeout_without_an_ik(h):
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    src = h.add(wearable(rate=60.0, duration=0.5, realtime=False, ack_timeout=0.4))
    got = h.collect(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(src.trigger_configure()) and ok(src.trigger_activate())
    # nobody answers the first sample: the next one goes out only when ack_timeout expires (on a loaded
    # machine more than one may have expired by the time we look: each one published one sample)
    assert h.spin_until(lambda: src.published >= 2, timeout=10.0)
    assert src.ack_timeouts >= 1 and src.published == src.ack_timeouts + 1
    assert h.spin_until(lambda: len(got) >= 1)


def test_wearable_offline_mode_waits_for_the_ik(h):
    """With the IK up before the first sample, every sample is answered: no ack_timeout (20 s, it only
    bounds a failure) ever expires, whatever the machine's load."""
    src = h.add(wearable(rate=60.0, duration=0.5, realtime=False, ack_timeout=20.0))
    solver = h.add(ik())
    assert ok(solver.trigger_configure()) and ok(solver.trigger_activate())
    assert ok(src.trigger_configure())
    h.wait_matched(src._pub)  # ik_node's link-state reader
    h.wait_matched(solver._pub_js)  # the wearable's ack reader: answers before it matched were lost
    assert ok(src.trigger_activate())
    assert h.spin_until(lambda: src.finished, timeout=120.0)
    assert src.published == 30 and src.ack_timeouts == 0
    assert solver.received == 30


def test_wearable_loops_with_increasing_stamps(h):
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.conversions import stamp_to_ns

    src = h.add(wearable(rate=100.0, duration=0.1, loop=True, scenario="running"))
    got = h.collect(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(src.trigger_configure())
    h.wait_matched(src._pub)
    assert ok(src.trigger_activate())
    assert h.spin_until(lambda: len(got) >= 25, timeout=5.0)
    assert src.loops >= 2 and not src.finished
    stamps = np.array([stamp_to_ns(m.header.stamp) for m in got])
    steps = np.diff(stamps)  # one period, across the loop boundaries too (a lost sample: two)
    assert np.all(steps > 0) and np.all(steps % 10_000_000 == 0)
    assert len(got[0].joint_names) == 23 and len(got[0].twist) == 23


# --------------------------------------------------------------------------- robot model
def test_ik_diagnostics_count_the_matched_readers_of_its_output(h):
    """``output_subscribers``: the readers ik_node's joint-state writer matched (what a runner waits for
    before it starts a source, so that no output goes out before its consumers can receive it)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState

    solver = h.add(ik())
    diagnostics = h.collect(DiagnosticArray, "/diagnostics")
    assert ok(solver.trigger_configure()) and ok(solver.trigger_activate())

    def readers() -> int | None:
        for msg in reversed(diagnostics):
            for status in msg.status:
                if status.name.endswith(": dynamical IK"):
                    values = {kv.key: kv.value for kv in status.values}
                    return int(values["output_subscribers"])
        return None

    assert h.spin_until(lambda: readers() is not None)
    before = readers()
    h.collect(JointState, "/dynik/joint_states")
    h.collect(JointState, "/dynik/joint_states")
    assert h.spin_until(lambda: readers() == before + 2), (before, readers())


def test_ik_node_retargets_to_the_g1(h, samples):
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    solver = h.add(ik(model="", robot="g1"))
    joints = h.collect(JointState, "/dynik/joint_states")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(solver.trigger_configure()), solver.last_error
    assert ok(solver.trigger_activate())
    h.wait_matched(pub)
    for k in range(30):
        pub.publish(link_msg(samples[k], 10**18 + k * 10**9 // 120))
        h.spin_until(lambda k=k: solver.received > k, timeout=10.0)
    assert h.spin_until(lambda: len(joints) >= 30)
    assert solver.rejections.total == 0 and solver.steps == 29
    assert list(joints[-1].name) == solver.robot.joint_names and len(joints[-1].name) == 29
    assert np.all(np.isfinite(joints[-1].position))
    assert len(solver._skeleton_links) >= 10  # robot skeleton: nearest tracked ancestors
    marker_array = solver._markers(*solver._latest)
    from rclpy.serialization import deserialize_message, serialize_message
    from visualization_msgs.msg import MarkerArray

    # the serialized template carries what the message carries (both through the wire's float32 colours)
    decoded = deserialize_message(solver._marker_bytes(*solver._latest), MarkerArray)
    assert decoded == deserialize_message(serialize_message(marker_array), MarkerArray)
    points = np.array([(p.x, p.y, p.z) for m in marker_array.markers for p in m.points])
    assert np.all(np.isfinite(points)) and len(points) == 2 * (6 * 14 + len(solver._skeleton_links))
