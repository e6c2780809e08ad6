"""The dynamical IK's pelvis feed-forward from the feet in contact (issue 13 item 1, Latella et al. 2019
eq. 8-10): ROS-free against forward-kinematics truth of a motion whose right foot is truly still, the IK
tracking it with each source, and ik_node's base_velocity_source parameter on real rclpy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from node_harness import Harness, ik, link_msg, ok

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from dynamics_bench import planted_link_motion, track_with_feed_forward  # noqa: E402

from dynik_ros.core.targets import Measurements  # noqa: E402
from dynik_ros.estimation.base_feedforward import BaseFeedForward  # noqa: E402
from dynik_ros.models.assets import human_tracking_targets  # noqa: E402
from dynik_ros.retarget.human import human_model  # noqa: E402

RATE = 60.0


@pytest.fixture(scope="module")
def planted():
    return planted_link_motion("right", 1.2, RATE)


def test_contacts_give_the_true_pelvis_velocity(planted):
    robot, targets = human_model("human66"), human_tracking_targets()
    measured = planted.measurements(targets)
    pelvis = targets.position_links.index("Pelvis")
    pelvis_o = targets.orientation_links.index("Pelvis")
    contacts = BaseFeedForward(robot, targets, "contacts")
    none = BaseFeedForward(robot, targets, "none")
    suit = BaseFeedForward(robot, targets, "suit")
    for k in range(0, len(planted.times), 7):
        m = measured[k]
        q, s_dot = planted.q[k], planted.v[k, 6:]
        assert np.linalg.norm(m.linear_velocities[pelvis]) > 0.1  # the pelvis really moves
        # s_dot from the suit's angular velocities (least squares over the 23 links) and the IK's given
        out = contacts.apply(m, q, (True, False))
        np.testing.assert_allclose(contacts.joint_velocities(q, m.angular_velocities), s_dot, atol=1e-6)
        np.testing.assert_allclose(out.linear_velocities[pelvis], m.linear_velocities[pelvis], atol=1e-5)
        np.testing.assert_allclose(
            out.angular_velocities[pelvis_o], m.angular_velocities[pelvis_o], atol=1e-5
        )
        others = np.arange(targets.n_orientation) != pelvis_o
        np.testing.assert_array_equal(out.angular_velocities[others], m.angular_velocities[others])
        # without the suit's angular velocities: the joint velocities given (the IK's) are used
        bare = Measurements(m.positions, m.rotations)
        out = contacts.apply(bare, q, (True, False), s_dot)
        np.testing.assert_allclose(out.linear_velocities[pelvis], m.linear_velocities[pelvis], atol=1e-5)
        # the wrong foot is not still: the twist is wrong
        wrong = contacts.apply(m, q, (False, True))
        assert np.linalg.norm(wrong.linear_velocities[pelvis] - m.linear_velocities[pelvis]) > 0.05
        # no contact, or "none": no feed-forward on the pelvis; "suit": untouched
        for out in (contacts.apply(m, q, (False, False)), none.apply(m, q, (True, False))):
            assert not out.linear_velocities[pelvis].any() and not out.angular_velocities[pelvis_o].any()
            np.testing.assert_array_equal(out.angular_velocities[others], m.angular_velocities[others])
        assert suit.apply(m, q, (True, False)) is m


def test_bad_sources_are_refused():
    robot, targets = human_model("human66"), human_tracking_targets()
    with pytest.raises(ValueError, match="gps"):
        BaseFeedForward(robot, targets, "gps")
    with pytest.raises(ValueError, match="for_human"):
        BaseFeedForward(robot, targets, "contacts").contacts_from_links({})


def test_ik_tracks_the_pelvis_with_the_contact_twist(planted):
    """Without the suit's pelvis velocity the pelvis lags by about v / K; the contact twist removes most
    of it (the truth: the suit's own velocities, zero lag)."""
    contacts = np.tile([True, False], (len(planted.times), 1))
    settle = int(0.5 * RATE)
    error = {
        source: track_with_feed_forward(planted, source, RATE, contacts)["base"][settle:].mean()
        for source in ("suit", "contacts", "none")
    }
    assert error["suit"] < 1e-3
    assert error["none"] > 0.03
    assert error["contacts"] < 0.2 * error["none"]


def test_ik_node_base_velocity_source(ros, planted):
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.wearable_node import SyntheticSource

    h = Harness(ros)
    try:
        bad = h.add(ik(base_velocity_source="gps"))
        assert not ok(bad.trigger_configure())
        assert "parameter 'base_velocity_source'" in bad.last_error
        solver = h.add(ik(base_velocity_source="contacts"))
        joints = h.collect(JointState, "/dynik/joint_states")
        pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
        assert ok(solver.trigger_configure()), solver.last_error
        assert ok(solver.trigger_activate())
        h.wait_matched(pub)
        samples = list(SyntheticSource("human66", "walking", 0.5, RATE, 0.0, 1).samples())
        for k, sample in enumerate(samples):
            for _ in range(5):  # best effort: resent if lost on the way
                pub.publish(link_msg(sample, 10**18 + k * 10**9 // int(RATE)))
                if h.spin_until(lambda k=k: solver.received > k, timeout=4.0):
                    break
        assert h.spin_until(lambda: len(joints) >= len(samples))
        assert solver.rejections.total == 0 and solver.steps == len(samples) - 1
        assert solver._base_feed_forward.source == "contacts"
        assert solver._base_feed_forward.uses > 0  # a foot was in contact: the contact twist was used
        assert np.all(np.isfinite(joints[-1].position))
    finally:
        h.close()
