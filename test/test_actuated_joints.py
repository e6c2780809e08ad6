"""Actuated joints only to the robot (issue 12 item 3): a map's ``actuated_joints`` (read, checked against
the model, saved back) and bridge_node, with real rclpy and DDS, commanding those joints only while the IK
publishes every joint (the passive ones of a loop are solved, never sent)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from node_harness import ok, params

from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.registry import load_robot

# the G1's ankles as if they were driven through rods: pitch actuated, roll passive (a stand-in for a loop)
PASSIVE = ["left_ankle_roll_joint", "right_ankle_roll_joint"]


@pytest.fixture(scope="module")
def g1_map(tmp_path_factory):
    spec = load_robot("g1")
    data = spec.config.to_dict()
    data["actuated_joints"] = [j for j in spec.robot.joint_names if j not in PASSIVE]
    path = tmp_path_factory.mktemp("maps") / "g1_rods.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, data["actuated_joints"], spec.robot


def test_map_reads_checks_and_saves_the_actuated_joints(g1_map):
    from dynik_ros.retarget.retargeter import Retargeter

    path, actuated, robot = g1_map
    retargeter = Retargeter.from_config(str(path))
    assert list(retargeter.config.actuated_joints) == actuated
    assert list(config_from_dict(retargeter.config.to_dict()).actuated_joints) == actuated
    assert load_robot("g1").config.actuated_joints == ()  # the shipped maps: every joint is a motor
    data = yaml.safe_load(path.read_text())
    data["actuated_joints"] = ["left_knee_joint", "left_knee_joint"]
    with pytest.raises(RetargetConfigError, match="actuated_joints: repeated"):
        config_from_dict(data, "g1_rods.yaml")
    data["actuated_joints"] = ["left_knee_jiont"]
    bad = path.parent / "g1_typo.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(RetargetConfigError, match="g1_typo.yaml: actuated_joints"):
        Retargeter.from_config(str(bad))


def _bridge(**values):
    from dynik_ros.nodes.bridge_node import BridgeNode

    return BridgeNode(**params(**{"controller": "test_ctrl", "ramp_time": 0.0, **values}))


def test_bridge_commands_the_actuated_joints_only(h, g1_map):
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.conversions import joint_state_msg

    path, actuated, robot = g1_map
    node = h.add(_bridge(robot="g1", config_file=str(path), interface="joint_trajectory"))
    got = h.collect(JointTrajectory, "/test_ctrl/joint_trajectory")
    pub = h.probe.create_publisher(JointState, "/dynik/joint_states", RELIABLE_QOS)
    assert ok(node.trigger_configure()), node.last_error
    assert ok(node.trigger_activate())
    h.wait_matched(pub)
    names = robot.joint_names  # the IK publishes every joint, passive ones included
    values = np.clip(np.linspace(-0.3, 0.3, len(names)), robot.lower, robot.upper)
    pub.publish(joint_state_msg(7, names, values, np.zeros(len(names))))
    assert h.spin_until(lambda: len(got) >= 1)
    assert list(got[0].joint_names) == actuated and not set(PASSIVE) & set(got[0].joint_names)
    np.testing.assert_allclose(got[0].points[0].positions, [values[names.index(j)] for j in actuated])


def test_bridge_refuses_to_command_a_passive_joint(h, g1_map):
    path, _, _ = g1_map
    node = h.add(_bridge(robot="g1", config_file=str(path), joints=["left_knee_joint", PASSIVE[0]]))
    assert not ok(node.trigger_configure())
    assert "joints" in node.last_error and PASSIVE[0] in node.last_error
