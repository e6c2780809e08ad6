"""A real robot with kinematic loops: Cassie from example-robot-data's SDF (models/sdf_loops.py), its
achilles and plantar rods closed by the loop rows while the pelvis and feet follow targets, reachable and
not. Ground truth: the SDF text itself (link poses, masses, joint axes), the SRDF's standing pose (written
by another tool) and pinocchio's forward kinematics of every output q."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.targets import FrameTarget, Measurements
from dynik_ros.models.sdf_loops import SdfError, load_sdf_with_loops, sdf_configuration
from dynik_ros.retarget.registry import example_robot_data_dir

SPRINGS = (
    "left-knee-shin-joint",
    "left-tarsus-spring-joint",
    "right-knee-shin-joint",
    "right-tarsus-spring-joint",
)
FEET = ("left-foot", "right-foot")


@pytest.fixture(scope="module")
def cassie():
    directory = example_robot_data_dir() / "cassie_description"
    sdf = directory / "robots" / "cassie_v2.sdf"
    if not sdf.is_file():
        pytest.skip(f"example-robot-data has no {sdf}")
    return load_sdf_with_loops(sdf), sdf, directory / "srdf" / "cassie_v2.srdf"


def _standing(loop_robot, srdf) -> np.ndarray:
    """The SRDF's 'standing' state on this tree's joints (pinocchio's own SDF parser wrote it)."""
    state = {
        j.get("name"): [float(x) for x in j.get("value").split()]
        for j in ET.parse(srdf).getroot().find("group_state").findall("joint")
    }
    robot = loop_robot.robot
    root = np.array(state["root_joint"])
    joints = np.array([state[name][0] for name in robot.joint_names])
    return robot.join(root[:3], pin.Quaternion(root[3:]).matrix(), joints)


def _loop_errors(loop_robot, q: np.ndarray) -> np.ndarray:
    robot = loop_robot.robot
    return np.array(
        [
            np.linalg.norm(robot.frame_pose(q, c.frame_a)[0] - robot.frame_pose(q, c.frame_b)[0])
            for c in loop_robot.loops
        ]
    )


def test_tree_and_loops_read_from_the_sdf(cassie):
    loop_robot, sdf, srdf = cassie
    robot = loop_robot.robot
    model = ET.parse(sdf).getroot().find("model")
    # the four rod ends that are not in the tree close the loops (ball joints)
    assert sorted(loop_robot.loop_joints) == sorted(
        j.get("name") for j in model.findall("joint") if j.get("type") == "ball"
    )
    assert len(loop_robot.loops) == 4 and robot.n_joints == 22
    # total mass and every link's centre of mass at the SDF's configuration, from the XML text
    q = sdf_configuration(loop_robot)
    data = robot.model.createData()
    pin.forwardKinematics(robot.model, data, q)
    masses = [float(link.findtext("inertial/mass")) for link in model.findall("link")]
    assert pin.computeTotalMass(robot.model) == pytest.approx(sum(masses), abs=1e-9)
    com = sum(
        m * _sdf_pose(link.find("pose")).act(_sdf_pose(link.find("inertial/pose")).translation)
        for m, link in zip(masses, model.findall("link"), strict=True)
    ) / sum(masses)
    np.testing.assert_allclose(pin.centerOfMass(robot.model, data, q), com, atol=1e-9)
    # a tree joint turns its child about the SDF axis (joint frame = child pose * joint pose), through it
    joint = next(j for j in model.findall("joint") if j.get("name") == "left-knee-op")
    child = _sdf_pose(model.find(f"link[@name='{joint.findtext('child')}']/pose"))
    axis = child.rotation @ np.array([float(v) for v in joint.findtext("axis/xyz").split()])
    turned = q.copy()
    turned[7 + robot.joint_index("left-knee-op")] = 0.3
    before, after = robot.frame_pose(q, "left-shin"), robot.frame_pose(turned, "left-shin")
    expected = pin.AngleAxis(0.3, axis).matrix()
    np.testing.assert_allclose(after[1], expected @ before[1], atol=1e-9)
    np.testing.assert_allclose(
        after[0] - child.translation, expected @ (before[0] - child.translation), atol=1e-9
    )
    # assembled in the file's configuration; in the SRDF's standing pose the plantar rods close too
    assert _loop_errors(loop_robot, q).max() < 1e-9
    standing = _loop_errors(loop_robot, _standing(loop_robot, srdf))
    plantar = [i for i, c in enumerate(loop_robot.loops) if "plantar" in c.frame_a]
    assert len(plantar) == 2 and standing[plantar].max() < 1e-6


def _sdf_pose(element) -> pin.SE3:
    x = [float(v) for v in (element.text or "0 0 0 0 0 0").split()] if element is not None else [0.0] * 6
    return pin.SE3(pin.rpy.rpyToMatrix(*x[3:]), np.array(x[:3]))


def test_unsupported_sdf_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "slider.sdf"
    path.write_text(
        "<sdf version='1.6'><model name='m'><link name='a'/><link name='b'/>"
        "<joint name='s' type='prismatic'><parent>a</parent><child>b</child></joint></model></sdf>"
    )
    with pytest.raises(SdfError, match="slider.sdf: joint 's': type 'prismatic'"):
        load_sdf_with_loops(path)


def test_pelvis_and_feet_follow_targets_with_the_rods_closed(cassie):
    """The pelvis squats and sways over still feet, then the left foot is pulled 1 m away (unreachable):
    every output keeps all four loops closed within 1e-5 m."""
    _, sdf, srdf = cassie
    loop_robot = cassie[0]
    robot = loop_robot.robot
    # the SRDF's standing pose is of the model variant with gearboxes: its achilles loops are 11 mm open
    # along the knee axis here (no in-plane joint can close that), its plantar loops closed; so the legs'
    # achilles chain starts at the file's configuration (closed by construction), the rest standing. The
    # springs stay free: with them locked the achilles loop (a ball and a revolute rod end) is rigid.
    q0 = _standing(loop_robot, srdf)
    for name in robot.joint_names:
        if any(part in name for part in ("knee", "shin", "tarsus-spring", "achilles")):
            q0[7 + robot.joint_index(name)] = 0.0
    assert _loop_errors(loop_robot, q0).max() < 1e-6
    # a Cassie leg has 5 motors: pelvis pose and feet positions (6 + 6 of 16 DoF) can all be met
    targets = [FrameTarget("pelvis", position=True, orientation=True)]
    targets += [FrameTarget(f, position=True, orientation=False) for f in FEET]
    ik = DynamicalIK(robot, targets, DynamicalIKConfig(loops=loop_robot.loops), q0)
    start = [robot.frame_pose(q0, f)[0] for f in ("pelvis", *FEET)]
    pelvis_rotation = robot.frame_pose(q0, "pelvis")[1]
    rate, errors, tracking, joints = 200.0, [], [], []
    for k in range(int(4 * rate)):
        t = k / rate
        positions, velocities = np.array(start), np.zeros((3, 3))
        positions[0] += [0.03 * math.sin(2 * t), 0.04 * math.sin(3 * t), -0.04 * (1 - math.cos(2 * t))]
        velocities[0] = [0.06 * math.cos(2 * t), 0.12 * math.cos(3 * t), -0.08 * math.sin(2 * t)]
        if t >= 3.0:
            positions[1] += [1.0, 0.5, 0.3]  # unreachable
        m = Measurements(positions, np.array([pelvis_rotation]), velocities, np.zeros((1, 3)))
        q, _ = ik.step(m, 1.0 / rate)
        assert ik.info.solved, (k, ik.info.status)
        errors.append(_loop_errors(loop_robot, q).max())
        if t < 3.0:
            tracking.append(np.linalg.norm(robot.frame_pose(q, "pelvis")[0] - positions[0]))
        joints.append(q[7:].copy())
    assert max(errors) < 1e-5, max(errors)
    assert np.median(tracking) < 2e-3, np.median(tracking)
    joints = np.array(joints)
    # the achilles rod makes the tarsus follow the knee: both move over the squat
    knee, tarsus = robot.joint_index("left-knee-op"), robot.joint_index("left-shin-tarsus-joint")
    assert np.ptp(joints[:, knee]) > 0.1 and np.ptp(joints[:, tarsus]) > 0.05
