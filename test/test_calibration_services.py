"""``~/calibrate`` and ``~/reset`` (std_srvs/Trigger) with real nodes, services and DDS (issue 10).

The suit's T-pose is replayed from a bag in a world turned by 40 deg and shifted, with every segment
mis-aligned by a known rotation: after ``~/calibrate`` wearable_node publishes the person at the origin,
facing +x, every segment world-aligned; ``~/reset`` gives the raw stream back; the calibration file is
loaded again at the next configure. ik_node's retargeting calibration is checked the same way.
"""

from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest
from node_harness import ik, ok, wearable

from dynik_ros.core.quaternion import rotation_from_quaternion
from dynik_ros.io.suit_calibration import rotation_angle, rotation_z

YAW = np.radians(40.0)
SHIFT = np.array([2.0, -1.0, 0.0])


@pytest.fixture(scope="module")
def tpose_bag(tmp_path_factory):
    """1 s of a still T-pose at 60 Hz, turned, shifted, segments mis-aligned (known), in a bag."""
    from dynik_ros.io.bags import write_link_states
    from dynik_ros.retarget.human import human_tpose

    rng = np.random.default_rng(11)
    turn = rotation_z(YAW)
    poses = human_tpose()
    errors = {name: pin.exp3(rng.uniform(-0.1, 0.1, 3)) for name in poses}
    errors["Pelvis"] = np.eye(3)  # the heading comes from the pelvis: keep it exact for the check
    still = {name: (turn @ p + SHIFT, turn @ r @ errors[name]) for name, (p, r) in poses.items()}
    zero = {name: (np.zeros(3), np.zeros(3)) for name in poses}
    path = tmp_path_factory.mktemp("calib") / "tpose_bag"
    return write_link_states(path, [(k / 60.0, still, zero) for k in range(60)])


def _client(h, service: str):
    from std_srvs.srv import Trigger

    client = h.probe.create_client(Trigger, service)
    assert h.spin_until(client.service_is_ready), f"{service} never came up"
    return client


def _call(h, client):
    from std_srvs.srv import Trigger

    future = client.call_async(Trigger.Request())
    assert h.spin_until(future.done, timeout=30.0), "no answer"
    return future.result()


def _arrays(msg):
    names = list(msg.joint_names)
    p = np.array([[t.translation.x, t.translation.y, t.translation.z] for t in msg.transforms])
    q = np.array([[t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w] for t in msg.transforms])
    return names, p, rotation_from_quaternion(q)


def _latest_after(h, got: list, count: int):
    start = len(got)
    assert h.spin_until(lambda: len(got) >= start + count, timeout=30.0)
    return _arrays(got[-1])


def calibrated(names, p, r) -> bool:
    pelvis = names.index("Pelvis")
    return np.linalg.norm(p[pelvis, :2]) < 1e-6 and np.degrees(rotation_angle(r).max()) < 0.01


def raw(names, p, r) -> bool:
    pelvis = names.index("Pelvis")
    return np.linalg.norm(p[pelvis, :2] - SHIFT[:2]) < 1e-6 and np.degrees(rotation_angle(r).max()) > 30.0


def _switches_to(h, got: list, state) -> bool:
    """Messages already in flight may still show the old state: wait for the first in the new one, then
    every one of the next five must be in it too."""
    start = len(got)
    if not h.spin_until(lambda: any(state(*_arrays(m)) for m in got[start:]), timeout=30.0):
        return False
    first = next(i for i in range(start, len(got)) if state(*_arrays(got[i])))
    assert h.spin_until(lambda: len(got) >= first + 6, timeout=30.0)
    return all(state(*_arrays(m)) for m in got[first : first + 6])


def test_wearable_calibrate_reset_and_reload(h, tpose_bag, tmp_path):
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    saved = tmp_path / "suit.yaml"
    node = h.add(
        wearable(
            source="bag", bag_path=str(tpose_bag), loop=True, duration=0.0, calibration_file=str(saved),
            calibration_window=0.5,
        )
    )  # fmt: skip
    got = h.collect(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    calibrate, reset = _client(h, "/wearable_node/calibrate"), _client(h, "/wearable_node/reset")

    assert raw(*_latest_after(h, got, 40))  # turned and shifted, segments mis-aligned

    answer = _call(h, calibrate)
    assert answer.success, answer.message
    assert "tpose calibration" in answer.message and "heading 40.0 deg" in answer.message
    assert saved.is_file()
    assert _switches_to(h, got, calibrated)  # at the origin, facing +x, segments world-aligned

    answer = _call(h, reset)
    assert answer.success and "dropped" in answer.message
    assert _switches_to(h, got, raw)

    # configure loads the saved file: calibrated from the first sample on
    assert ok(node.trigger_deactivate()) and ok(node.trigger_cleanup())
    # a new subscription: samples of the raw stream still in flight to the old one cannot reach it (the
    # publisher it matches is created by the next configure; volatile QoS keeps no history)
    fresh = h.collect(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    assert h.spin_until(lambda: len(fresh) >= 5, timeout=30.0)
    assert all(calibrated(*_arrays(m)) for m in fresh)


def test_wearable_refuses_a_calibration_in_the_wrong_pose(h, tpose_bag):
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    node = h.add(
        wearable(source="bag", bag_path=str(tpose_bag), loop=True, duration=0.0, calibration_pose="npose")
    )
    got = h.collect(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    calibrate = _client(h, "/wearable_node/calibrate")
    _latest_after(h, got, 30)
    answer = _call(h, calibrate)
    assert not answer.success
    assert re.search(r"not a npose: segment '(Left|Right)(UpperArm|ForeArm|Hand)' is 9\d deg", answer.message)
    assert raw(*_latest_after(h, got, 3))  # nothing changed


def test_services_exist_only_while_configured(h):
    node = h.add(wearable())

    def listed() -> bool:
        return any(name == "/wearable_node/calibrate" for name, _ in h.probe.get_service_names_and_types())

    assert ok(node.trigger_configure())
    assert h.spin_until(listed)
    assert ok(node.trigger_cleanup())
    assert h.spin_until(lambda: not listed())


def _tpose_msg(poses: dict, stamp_ns: int):
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.nodes.conversions import link_states_to_msg

    names = list(poses)
    p = np.array([poses[n][0] for n in names])
    q = quaternion_from_rotation(np.array([poses[n][1] for n in names]))
    zero = np.zeros((len(names), 3))
    return link_states_to_msg(stamp_ns, names, p, q, zero, zero)


def test_ik_node_calibrates_the_retargeting_on_a_taller_person_without_a_jump(h, tmp_path):
    """A 1.95 m person in T-pose (the map's default subject is smaller): the new calibration equals the
    ROS-free one on the same poses, the robot does not jump, and configure loads the saved file."""
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.retarget.calibration import calibrate
    from dynik_ros.retarget.human import human_tpose
    from dynik_ros.retarget.registry import load_robot

    saved = tmp_path / "g1_calibration.yaml"
    solver = h.add(ik(model="", robot="g1", calibration_file=str(saved), calibration_window=0.2))
    joints = h.collect(JointState, "/dynik/joint_states")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(solver.trigger_configure()) and ok(solver.trigger_activate())
    h.wait_matched(pub)
    calibrate_client, reset_client = _client(h, "/ik_node/calibrate"), _client(h, "/ik_node/reset")
    tall = human_tpose(height=1.95, mass=80.0)
    before = solver.retargeter.calibration.root_scale
    stamp = [10**18]

    def feed(count: int) -> None:
        for _ in range(count):
            stamp[0] += 10**9 // 60
            received = solver.received
            pub.publish(_tpose_msg(tall, stamp[0]))
            assert h.spin_until(lambda received=received: solver.received > received, timeout=10.0)

    feed(30)
    answer = _call(h, calibrate_client)
    assert answer.success, answer.message
    expected = calibrate(load_robot("g1"), tall)
    assert solver.retargeter.calibration.root_scale == pytest.approx(expected.root_scale, rel=1e-9)
    assert expected.root_scale < before  # a taller person: smaller scale
    for frame, offset in expected.offsets.items():
        assert np.allclose(solver.retargeter.calibration.offsets[frame], offset, atol=1e-9)
    q_before = solver.ik.q.copy()
    count = len(joints)
    feed(10)
    assert h.spin_until(lambda: len(joints) >= count + 10)
    steps = np.array([j.position for j in joints[count - 1 :]])
    assert np.abs(np.diff(steps, axis=0)).max() < 0.05  # no jump: the robot stays where it stands
    assert np.abs(solver.ik.q[7:] - q_before[7:]).max() < 0.2

    answer = _call(h, reset_client)
    assert answer.success and "starts it over" in answer.message
    feed(1)  # the first sample after a reset initializes the IK at the map's initial configuration
    assert np.allclose(solver.ik.q, solver.retargeter.initial_configuration())

    assert ok(solver.trigger_deactivate()) and ok(solver.trigger_cleanup()) and ok(solver.trigger_configure())
    assert solver.retargeter.calibration.source == str(saved)
    assert solver.retargeter.calibration.root_scale == pytest.approx(expected.root_scale, rel=1e-9)


def test_ik_node_with_a_human_model_says_where_to_calibrate(h):
    solver = h.add(ik(model="human66"))
    assert ok(solver.trigger_configure())
    answer = _call(h, _client(h, "/ik_node/calibrate"))
    assert not answer.success and "wearable_node's ~/calibrate" in answer.message
