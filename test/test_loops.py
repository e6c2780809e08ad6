"""Kinematic loops (core/loop_closure.py): a four-bar linkage built here as a URDF tree cut at one joint,
its coupler closed by loop rows; ground truth from the analytic circle-intersection solution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.loop_closure import LoopClosure
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import FrameTarget, Measurements

GROUND, CRANK, COUPLER, ROCKER = 0.3, 0.1, 0.3, 0.25  # Grashof crank-rocker: the crank turns fully


def _link(name: str) -> str:
    return f'<link name="{name}"/>'


FOUR_BAR = f"""<robot name="four_bar">
  {_link("ground")}{_link("crank")}{_link("coupler")}{_link("rocker")}{_link("coupler_tip")}{_link("rocker_tip")}
  <joint name="crank_joint" type="revolute"><parent link="ground"/><child link="crank"/><axis xyz="0 0 1"/>
    <limit lower="-100" upper="100" velocity="20" effort="1"/></joint>
  <joint name="coupler_joint" type="revolute"><parent link="crank"/><child link="coupler"/><axis xyz="0 0 1"/>
    <origin xyz="{CRANK} 0 0"/><limit lower="-100" upper="100" velocity="20" effort="1"/></joint>
  <joint name="coupler_fixed" type="fixed"><parent link="coupler"/><child link="coupler_tip"/>
    <origin xyz="{COUPLER} 0 0"/></joint>
  <joint name="rocker_joint" type="revolute"><parent link="ground"/><child link="rocker"/><axis xyz="0 0 1"/>
    <origin xyz="{GROUND} 0 0"/><limit lower="-100" upper="100" velocity="20" effort="1"/></joint>
  <joint name="rocker_fixed" type="fixed"><parent link="rocker"/><child link="rocker_tip"/>
    <origin xyz="{ROCKER} 0 0"/></joint>
</robot>"""
LOOP = LoopClosure("coupler_tip", "rocker_tip", axes=(0, 1))


def closed(theta: float) -> np.ndarray:
    """Joint angles (crank, coupler relative to crank, rocker) of the assembled linkage, upper branch."""
    p = np.array([CRANK * math.cos(theta), CRANK * math.sin(theta)])
    o = np.array([GROUND, 0.0])
    d = np.linalg.norm(o - p)
    along = (COUPLER**2 - ROCKER**2 + d**2) / (2 * d)
    height = math.sqrt(COUPLER**2 - along**2)
    u = (o - p) / d
    q = p + along * u + height * np.array([-u[1], u[0]])
    coupler = math.atan2(q[1] - p[1], q[0] - p[0])
    rocker = math.atan2(q[1] - o[1], q[0] - o[0])
    return np.array([theta, coupler - theta, rocker])


def _rotation_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array(((c, -s, 0.0), (s, c, 0.0), (0.0, 0.0, 1.0)))


def _loop_error(robot: RobotModel, q: np.ndarray) -> float:
    return float(np.linalg.norm(robot.frame_pose(q, "coupler_tip")[0] - robot.frame_pose(q, "rocker_tip")[0]))


def test_closed_form_is_assembled():
    robot = RobotModel.from_urdf_string(FOUR_BAR, floating_base=False)
    for theta in np.linspace(0, 2 * math.pi, 13):
        assert _loop_error(robot, closed(theta)) < 1e-12


def test_crank_driven_through_a_full_turn_follows_the_analytic_solution():
    """Target: the crank's orientation turning once in 4 s. The coupler and rocker (not targeted) follow the
    analytic solution through the loop rows; the loop stays closed on every output sample."""
    robot = RobotModel.from_urdf_string(FOUR_BAR, floating_base=False)
    config = DynamicalIKConfig(loops=(LOOP,))
    ik = DynamicalIK(robot, [FrameTarget("crank", orientation_gain=20.0)], config, q0=closed(0.0))
    rate, omega = 200.0, 2 * math.pi / 4.0
    worst_joint = worst_loop = 0.0
    for k in range(1, 801):
        theta = omega * k / rate
        m = Measurements(
            np.zeros((0, 3)), _rotation_z(theta)[None], np.zeros((0, 3)), np.array([[0, 0, omega]])
        )
        q, _ = ik.step(m, 1.0 / rate)
        assert ik.info.solved
        worst_loop = max(worst_loop, _loop_error(robot, q))
        truth = closed(q[0])  # the analytic linkage at the crank angle reached
        diff = np.angle(np.exp(1j * (q - truth)))
        worst_joint = max(worst_joint, float(np.abs(diff).max()))
    assert worst_loop < 1e-5, worst_loop
    assert worst_joint < 1e-4, worst_joint
    assert abs(np.angle(np.exp(1j * (q[0] - omega * 4.0)))) < 1e-3  # the crank went all the way round


def test_unreachable_target_does_not_disassemble_the_mechanism():
    """The coupler tip pulled 1 m away: without the loop rows the tree reaches towards it and the loop opens;
    with them (and the projection after each step) the loop stays closed to 1e-5 m, every sample finite."""
    robot = RobotModel.from_urdf_string(FOUR_BAR, floating_base=False)
    far = Measurements(np.array([[1.0, 1.0, 0.0]]), np.zeros((0, 3, 3)))
    targets = [FrameTarget("coupler_tip", position=True, orientation=False)]
    free = DynamicalIK(robot, targets, DynamicalIKConfig(), q0=closed(0.5))
    held = DynamicalIK(robot, targets, DynamicalIKConfig(loops=(LOOP,)), q0=closed(0.5))
    opened = []
    for _ in range(300):
        q_free, _ = free.step(far, 0.01)
        opened.append(_loop_error(robot, q_free))
        q, _ = held.step(far, 0.01)
        assert np.all(np.isfinite(q))
        assert _loop_error(robot, q) < 1e-5
    # the free tree, stretched at a singularity, keeps moving: its loop error over the last 2 s
    assert np.median(opened[100:]) > 0.02
    # and it ends near the closest point of the coupler curve (analytic linkage swept over the crank angle)
    reached = np.linalg.norm(robot.frame_pose(q, "coupler_tip")[0] - far.positions[0])
    best = min(
        np.linalg.norm(robot.frame_pose(closed(t), "coupler_tip")[0] - far.positions[0])
        for t in np.linspace(0.0, 2 * math.pi, 3601)
    )
    assert best <= reached < best + 5e-3


def test_loop_configuration_is_validated():
    with pytest.raises(ValueError, match="axes"):
        LoopClosure("a", "b", axes=(0, 3))
    with pytest.raises(ValueError, match="gain"):
        LoopClosure("a", "b", gain=0.0)
