"""dynamics_node with real rclpy and DDS: torques and foot wrenches of the synthetic walk against the
inverse-dynamics ground truth, shoes optional, bad input refused and counted, parameters validated."""

from __future__ import annotations

import math

import numpy as np
import pytest
from node_harness import Harness, motion_link_msg, ok, params

FEET = ("RightFoot", "LeftFoot")
T0 = 1_700_000_000 * 10**9
RATE = 60.0


@pytest.fixture(scope="module")
def walk():
    from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
    from dynik_ros.retarget.human import synthetic_human_motion

    robot, truth = human_dynamics_truth("walking", 1.1, RATE)
    return robot, truth, synthetic_human_motion("walking", 1.1, RATE)


def dynamics(**values):
    from dynik_ros.nodes.dynamics_node import DynamicsNode

    return DynamicsNode(**params(**{"diagnostics_period": 0.1, **values}))


def _stamp(k: int) -> int:
    return T0 + round(k * 1e9 / RATE)


def _links(motion, k: int):
    return motion_link_msg(motion, k, _stamp(k))


def _shoe(wrench: np.ndarray, k: int, frame: str):
    from geometry_msgs.msg import WrenchStamped

    from dynik_ros.nodes.conversions import ns_to_stamp

    msg = WrenchStamped()
    msg.header.stamp, msg.header.frame_id = ns_to_stamp(_stamp(k)), frame
    f, m = wrench.tolist()[:3], wrench.tolist()[3:]
    msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = f
    msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = m
    return msg


class Rig:
    """A configured, active dynamics_node and the probe's publishers and collectors."""

    def __init__(self, h: Harness, **values):
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState, MultiDOFJointState
        from std_msgs.msg import String

        from dynik_ros.nodes.common import SENSOR_QOS

        self.h = h
        self.node = h.add(dynamics(**values))
        self.torques = h.collect(JointState, "/human/joint_torques")
        self.wrenches = [h.collect(WrenchStamped, f"/human/foot_wrench/{foot}") for foot in FEET]
        self.contact = h.collect(String, "/human/contact_state")
        self.links = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
        self.shoes = [
            h.probe.create_publisher(WrenchStamped, f"/human/shoes/{side}", SENSOR_QOS)
            for side in ("right", "left")
        ]
        assert ok(self.node.trigger_configure()) and ok(self.node.trigger_activate())
        h.wait_matched(self.links)
        if self.node.params["use_shoes"]:
            for pub in self.shoes:
                h.wait_matched(pub)

    def send_links(self, msg) -> None:
        before = self.node.received
        self.links.publish(msg)
        assert self.h.spin_until(lambda: self.node.received > before, timeout=20.0)

    def send_shoe(self, foot: int, msg) -> None:
        before = self.node.shoes_received[foot] + self.node.rejections.total
        self.shoes[foot].publish(msg)
        assert self.h.spin_until(
            lambda: self.node.shoes_received[foot] + self.node.rejections.total > before, timeout=20.0
        )


def _by_stamp(messages) -> dict[int, object]:
    from dynik_ros.nodes.conversions import stamp_to_ns

    return {stamp_to_ns(m.header.stamp): m for m in messages}


def test_dynamics_node_estimates_the_walk_torques_and_wrenches(h, walk):
    robot, truth, motion = walk
    rig = Rig(h)
    n = len(truth.times)
    for k in range(n):
        for f, foot in enumerate(FEET):
            rig.send_shoe(f, _shoe(truth.wrenches[k, f], k, foot))
        rig.send_links(_links(motion, k))
    assert h.spin_until(lambda: len(rig.torques) >= n - 2 and len(rig.contact) >= n - 2, timeout=30.0)
    assert rig.node.estimates == n - 2 and rig.node.rejections.total == 0
    torques = _by_stamp(rig.torques)
    right = _by_stamp(rig.wrenches[0])
    errors, wrench_errors = [], []
    for k in range(1, n - 1):  # one sample behind: the first and the last have no central difference
        msg = torques[_stamp(k)]
        assert list(msg.name) == robot.joint_names
        errors.append(np.asarray(msg.effort) - truth.tau[k])
        w = right[_stamp(k)].wrench
        estimate = [w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z]
        wrench_errors.append(np.asarray(estimate) - truth.wrenches[k, 0])
        assert right[_stamp(k)].header.frame_id == "RightFoot"
    peak = np.abs(truth.tau).max()
    assert np.sqrt(np.mean(np.square(errors))) <= 0.01 * peak  # 60 Hz central differences: ~0.003 %
    assert np.sqrt(np.mean(np.square(wrench_errors))) <= 0.01 * 75.0 * 9.81
    states = {m.data for m in rig.contact}
    assert states <= {"right", "left", "double"} and {"right", "left", "double"} <= states


def test_dynamics_node_without_shoes_uses_the_kinematic_contact(h, walk):
    _, truth, motion = walk
    rig = Rig(h, use_shoes=False, base_velocity="contacts")
    for k in range(12):
        rig.send_links(_links(motion, k))
    assert h.spin_until(lambda: len(rig.torques) >= 10, timeout=30.0)
    assert all(np.all(np.isfinite(m.effort)) for m in rig.torques)
    assert {m.data for m in rig.contact} <= {"none", "right", "left", "double"}
    assert rig.node.shoes_missing == 0  # no shoes asked for


def test_dynamics_node_refuses_bad_input_and_keeps_estimating(h, walk):
    from diagnostic_msgs.msg import DiagnosticArray

    _, truth, motion = walk
    diagnostics = h.collect(DiagnosticArray, "/diagnostics")
    rig = Rig(h, max_shoe_age=0.005)  # a reading one sample (16.7 ms) away is not used
    for k in range(5):
        for f, foot in enumerate(FEET):
            rig.send_shoe(f, _shoe(truth.wrenches[k, f], k, foot))
        rig.send_links(_links(motion, k))
    estimates = rig.node.estimates
    nan_shoe = truth.wrenches[5, 0].copy()
    nan_shoe[2] = math.nan
    rig.send_shoe(0, _shoe(nan_shoe, 5, "RightFoot"))
    rig.send_shoe(1, _shoe(truth.wrenches[5, 1], 5, "RightFoot"))  # the left shoe in the right frame
    rig.send_shoe(0, _shoe(truth.wrenches[4, 0], 4, "RightFoot"))  # older than the last right reading
    bad = _links(motion, 5)
    bad.transforms[3].translation.x = math.nan
    rig.send_links(bad)
    bad = _links(motion, 5)
    bad.twist = []
    rig.send_links(bad)
    rig.send_links(_links(motion, 3))  # out of order
    assert rig.node.estimates == estimates
    for k in range(5, 12):  # shoes missing at 5: estimated from the kinematics, then the shoes again
        if k > 5:
            for f, foot in enumerate(FEET):
                rig.send_shoe(f, _shoe(truth.wrenches[k, f], k, foot))
        rig.send_links(_links(motion, k))
    assert rig.node.estimates == estimates + 7
    expected = {"shoe_nan": 1, "shoe_frame": 1, "shoe_out_of_order": 1, "nan": 1, "no_twists": 1}
    expected["out_of_order"] = 1
    assert {k: v for k, v in rig.node.rejections.counts.items() if v} == expected
    assert rig.node.shoes_missing >= 1

    def status() -> dict[str, str]:
        for msg in reversed(diagnostics):
            for s in msg.status:
                if s.name.startswith(rig.node.get_name()):
                    return {kv.key: kv.value for kv in s.values}
        return {}

    assert h.spin_until(lambda: status().get("rejected_total") == "6", timeout=20.0)
    assert float(status()["step_time_p50_ms"]) > 0


@pytest.mark.parametrize(
    ("values", "parameter"),
    [
        ({"contact_off_fraction": 0.2, "contact_on_fraction": 0.1}, "contact_off_fraction"),
        ({"model": "g1"}, "model"),
        ({"variance_force": 0.0}, "variance_force"),
        ({"left_shoe_topic": "/human/shoes/right"}, "left_shoe_topic"),
    ],
)
def test_dynamics_node_configure_names_the_bad_parameter(h, values, parameter):
    node = h.add(dynamics(**values))
    assert not ok(node.trigger_configure())
    assert f"'{parameter}'" in node.last_error


def test_dynamics_node_on_human48(h, walk):
    _, _, motion = walk  # Human66's walk: Human48 fits it by eq. 6 within its limits
    rig = Rig(h, model="human48", use_shoes=False)
    for k in range(6):
        rig.send_links(_links(motion, k))
    assert h.spin_until(lambda: len(rig.torques) >= 4, timeout=30.0)
    assert all(len(m.effort) == 48 and np.all(np.isfinite(m.effort)) for m in rig.torques)
