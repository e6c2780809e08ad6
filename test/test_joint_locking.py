"""Locked and mimic joints (issue 14): zero-velocity URDF joints locked with a notice, ``<mimic>`` joints
following their leader exactly, locking by name (API, robot map, ik_node), a velocity override of 0 = lock.
Checked on the output trajectory: locked joints never move, followers sit at ``m s_leader + o``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dynik_ros.bench.recovery import ROMEO_ORIENTATION_FRAMES, ROMEO_URDF, joint_sinusoid_motion
from dynik_ros.core.dynamical_ik import DynamicalIK
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import FrameTarget, TargetSet
from dynik_ros.retarget.registry import resolve_urdf

CHAIN = """<robot name="chain">
  <link name="base"/><link name="a"/><link name="b"/><link name="c"/><link name="tip"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <origin xyz="0 0 0.1"/><limit lower="-2" upper="2" velocity="3" effort="1"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 1 0"/>
    <origin xyz="0.3 0 0"/><limit lower="-1.5" upper="1.5" velocity="4" effort="1"/></joint>
  <joint name="j3" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 1 0"/>
    <origin xyz="0.3 0 0"/><limit lower="-0.5" upper="1.0" velocity="2" effort="1"/>
    <!-- <mimic joint="j1"/> : a comment, not a mimic -->
    <mimic joint="j2" multiplier="-0.5" offset="0.2"/></joint>
  <joint name="j4" type="revolute"><parent link="c"/><child link="tip"/><axis xyz="1 0 0"/>
    <origin xyz="0.2 0 0"/><limit lower="-1" upper="1" velocity="0" effort="1"/></joint>
</robot>"""


def _track(robot: RobotModel, targets: TargetSet, seconds: float = 3.0, rate: float = 100.0) -> np.ndarray:
    motion = joint_sinusoid_motion(
        robot, targets, duration=seconds, rate=rate, amplitude=0.6, speed_fraction=0.8
    )
    ik = DynamicalIK(robot, targets)
    joints = [robot.split(ik.q)[2]]
    for m in motion.measurements:
        joints.append(robot.split(ik.step(m, 1.0 / rate)[0])[2])
    return np.array(joints)


def test_mimic_and_zero_velocity_joints_of_a_urdf():
    with pytest.warns(UserWarning, match=r"zero velocity limit.*\['j4'\]"):
        robot = RobotModel.from_urdf_string(CHAIN, floating_base=False)
    assert robot.mimic == {"j3": ("j2", -0.5, 0.2)} and robot.locked.tolist() == [False, False, False, True]
    targets = TargetSet([FrameTarget("tip", position=True), FrameTarget("b")])
    joints = _track(robot, targets)
    j2, j3, j4 = joints[:, 1], joints[:, 2], joints[:, 3]
    assert np.ptp(j2) > 0.5  # the leader moves
    np.testing.assert_allclose(j3, np.clip(-0.5 * j2 + 0.2, -0.5, 1.0), atol=1e-12)
    assert np.ptp(j4) == 0.0 and j4[0] == 0.0  # locked at its neutral value
    speed = np.abs(np.diff(joints, axis=0)) * 100.0 / robot.velocity_limit
    assert speed.max() <= 1.0 + 1e-9  # the follower's own limit (2 rad/s = |m| 4) included
    assert np.all(joints >= robot.lower - 1e-12) and np.all(joints <= robot.upper + 1e-12)


def test_a_velocity_override_of_zero_locks_and_a_positive_one_unlocks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot = RobotModel.from_urdf_string(
            CHAIN, floating_base=False, velocity_limit_overrides={"j1": 0.0, "j4": 1.5}
        )
    assert robot.locked.tolist() == [True, False, False, False] and robot.velocity_limit[3] == 1.5
    with pytest.raises(ValueError, match="lock the leader"):
        robot.lock_joint("j3")
    with pytest.raises(ValueError, match=">= 0"):
        robot.set_velocity_limit("j2", -1.0)


def test_romeo_hands_are_locked_and_fingers_follow_them():
    """Romeo (example-robot-data, not in the registry): LHand/RHand have velocity 0 and 22 finger joints
    mimic them; before, each finger was a free 10 rad/s joint and an override to 0 was refused."""
    with pytest.warns(UserWarning, match=r"LHand.*RHand"):
        robot = RobotModel.from_urdf_file(resolve_urdf(ROMEO_URDF))
    assert len(robot.mimic) == 22 and {robot.joint_names[i] for i in np.flatnonzero(robot.locked)} == {
        "LHand",
        "RHand",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moving = RobotModel.from_urdf_file(resolve_urdf(ROMEO_URDF), velocity_limit_overrides={"LHand": 2.0})
    frames = [*ROMEO_ORIENTATION_FRAMES, "LFinger21Link", "LThumb1Link"]
    targets = TargetSet([FrameTarget(f, position=(f == "body")) for f in frames])
    joints = _track(moving, targets, seconds=2.0)
    hand = joints[:, moving.joint_index("LHand")]
    assert np.ptp(hand) > 0.1
    for follower, (leader, multiplier, offset) in moving.mimic.items():
        i, j = moving.joint_index(follower), moving.joint_index(leader)
        expected = np.clip(multiplier * joints[:, j] + offset, moving.lower[i], moving.upper[i])
        np.testing.assert_allclose(joints[:, i], expected, atol=1e-12, err_msg=follower)
    assert np.ptp(joints[:, moving.joint_index("RHand")]) == 0.0


def test_locked_joints_in_a_robot_map(tmp_path):
    import yaml

    from dynik_ros.models.assets import share_path
    from dynik_ros.retarget import RetargetConfigError, load_robot

    data = yaml.safe_load(share_path("config", "g1.yaml").read_text())
    data["robot"]["urdf"] = "example-robot-data:g1_description/urdf/g1_29dof_rev_1_0.urdf"
    data["locked_joints"] = ["waist_roll_joint", "waist_pitch_joint"]
    path = tmp_path / "g1_locked.yaml"
    path.write_text(yaml.safe_dump(data))
    robot = load_robot(path).robot
    assert {robot.joint_names[i] for i in np.flatnonzero(robot.locked)} == {
        "waist_roll_joint",
        "waist_pitch_joint",
    }
    data["locked_joints"] = ["waist_rol_joint"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RetargetConfigError, match="locked_joints.*waist_roll_joint"):
        load_robot(path)
