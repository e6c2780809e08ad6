"""The second seed's regularizers (core/regularizers.py): the state regularizer against its closed form,
the velocity regularizer's QP model against finite differences of eq. (4)-(5), and the Boxer-style
singularity (a shoulder passing its singular pose, motion made by forward kinematics)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.bench.singularity import ARM, hand_path, run_singularity
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.regularizers import RegularizerConfig, Regularizers
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import FrameTarget, Measurements
from dynik_ros.retarget.registry import load_robot


def test_singularity_path_is_forward_kinematics_of_its_joint_path():
    robot = RobotModel.from_urdf_string(ARM, floating_base=False)
    times = np.linspace(0.0, 4.0, 41)
    positions, velocities, joints = hand_path(times, 0.01, 0.8)
    for k in range(len(times)):
        np.testing.assert_allclose(robot.frame_pose(joints[k], "hand")[0], positions[k], atol=1e-12)
    numeric = np.gradient(positions, times, axis=0)
    np.testing.assert_allclose(velocities[1:-1], numeric[1:-1], atol=5e-3)


def test_velocity_regularizer_removes_the_singularity_spike_and_keeps_tracking_elsewhere():
    """Peak joint speed of the output drops >= 10x; away from the pole (+-0.75 s: the corner cut there heals
    at the rate K = 10/s) the hand error stays within 10 % of the unregularized run's."""
    plain = run_singularity(None)
    regularized = run_singularity(RegularizerConfig(velocity_weight=1.0, velocity_threshold=4.0))
    assert plain.peak_speed > 40.0  # the spike the path asks for: omega / eps = 80 rad/s
    assert regularized.peak_speed * 10 <= plain.peak_speed, (plain.peak_speed, regularized.peak_speed)
    far = ~plain.near
    assert regularized.error[far].mean() <= 1.1 * plain.error[far].mean() + 1e-6
    assert regularized.error.max() < 0.02  # near the pole it cuts the corner (the path passes 5 mm off it)
    assert np.all(np.isfinite(regularized.joints))


def test_state_regularizer_is_the_closed_form_damped_step():
    """Euler, first step from rest: the QP's nu is (J^T W^2 J + (lambda + w) I)^-1 J^T W^2 v*."""
    robot = RobotModel.from_urdf_string(ARM, floating_base=False)
    q0 = np.array([0.3, 0.7])
    target = robot.frame_pose(q0, "hand")[0] + np.array([0.02, -0.01, 0.01])
    weight = 0.5
    config = DynamicalIKConfig(
        integration="euler", jacobian_at="previous", regularizers=RegularizerConfig(state_weight=weight)
    )
    ik = DynamicalIK(robot, [FrameTarget("hand", position=True, orientation=False)], config, q0=q0)
    ik.step(Measurements(target[None], np.zeros((0, 3, 3))), 0.01)
    data = robot.model.createData()
    pin.computeJointJacobians(robot.model, data, q0)
    pin.updateFramePlacements(robot.model, data)
    jac = pin.getFrameJacobian(robot.model, data, robot.frame_id("hand"), pin.LOCAL_WORLD_ALIGNED)[:3]
    v_star = 10.0 * (target - data.oMf[robot.frame_id("hand")].translation)
    expected = np.linalg.solve(jac.T @ jac + (ik.config.qp.damping + weight) * np.eye(2), jac.T @ v_star)
    np.testing.assert_allclose(ik.nu, expected, rtol=1e-6, atol=1e-9)


def test_velocity_regularizer_model_matches_the_seed_term_on_g1():
    """At the expansion point the QP model's gradient is the gradient of w sum (|omega_i| - omega_t)^2 over
    the bodies above the threshold, with omega_i from pinocchio's body Jacobians (finite differences)."""
    spec = load_robot("g1")
    robot = spec.robot
    q = spec.initial_configuration()
    config = RegularizerConfig(velocity_weight=0.01, velocity_threshold=2.0)
    regs = Regularizers(robot, config)
    data = robot.model.createData()
    pin.computeJointJacobians(robot.model, data, q)
    rng = np.random.default_rng(5)
    m0 = rng.normal(scale=2.0, size=robot.nv)
    hessian, gradient = regs.cost(data, 1.0, np.zeros(robot.nv), m0)
    assert regs.last_active > 0
    rotation = pin.Quaternion(q[3:7]).matrix()
    base = np.zeros((6, 6))  # mixed (world p_dot, world omega) -> pinocchio's local base twist
    base[:3, :3] = base[3:, 3:] = rotation.T

    def seed_term(m: np.ndarray) -> float:
        v = np.concatenate((base @ m[:6], m[6:]))
        total = 0.0
        for j in range(1, robot.model.njoints):
            jac = pin.getJointJacobian(robot.model, data, j, pin.LOCAL_WORLD_ALIGNED)
            omega = jac[3:] @ v
            excess = np.linalg.norm(omega) - config.velocity_threshold
            total += config.velocity_weight * max(excess, 0.0) ** 2
        return total

    eps = 1e-6
    numeric = np.array(
        [(seed_term(m0 + eps * e) - seed_term(m0 - eps * e)) / (2 * eps) for e in np.eye(robot.nv)]
    )
    np.testing.assert_allclose(hessian @ m0 + gradient, numeric, rtol=1e-4, atol=1e-6)
    assert np.all(np.linalg.eigvalsh(hessian) > -1e-9)


def test_regularizers_off_leave_the_step_unchanged_and_config_is_validated():
    robot = RobotModel.from_urdf_string(ARM, floating_base=False)
    targets = [FrameTarget("hand", position=True, orientation=False)]
    a = DynamicalIK(robot, targets, DynamicalIKConfig(), q0=np.array([0.2, 0.5]))
    config = DynamicalIKConfig(regularizers=RegularizerConfig())
    b = DynamicalIK(robot, targets, config, q0=np.array([0.2, 0.5]))
    m = Measurements(np.array([[0.1, 0.1, 0.4]]), np.zeros((0, 3, 3)))
    for _ in range(10):
        np.testing.assert_array_equal(a.step(m, 0.01)[0], b.step(m, 0.01)[0])
    assert b.regularizers is None
    for bad in (
        {"state_weight": -1.0},
        {"velocity_weight": float("nan")},
        {"velocity_threshold": -2.0},
        {"iterations": 0},
    ):
        with pytest.raises(ValueError, match="regularizers"):
            RegularizerConfig(**bad)


def test_map_section_and_ik_node_parameters_reach_the_solver():
    from dynik_ros.nodes.ik_node import _ik_config
    from dynik_ros.nodes.ik_params import IK_PARAMS
    from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
    from dynik_ros.retarget.retargeter import Retargeter

    data = load_robot("g1").config.to_dict()
    data["regularizers"] = {"state_weight": 0.01, "velocity_weight": 2.0, "velocity_threshold": 5.0}
    config = config_from_dict(data)
    assert config.regularizers == RegularizerConfig(0.01, 2.0, 5.0)
    assert config_from_dict(config.to_dict()).regularizers == config.regularizers
    data["regularizers"] = {"velocity_weight": -1.0}
    with pytest.raises(RetargetConfigError, match="regularizers.velocity_weight"):
        config_from_dict(data)
    retargeter = Retargeter.from_config("g1")
    assert retargeter.make_ik().regularizers is None  # the shipped maps leave them off
    params = {spec.name: spec.default for spec in IK_PARAMS}
    assert _ik_config(params).regularizers == RegularizerConfig()
    params.update(velocity_regularizer_weight=1.0, velocity_regularizer_threshold=3.0)
    ik = retargeter.make_ik(_ik_config(params))
    assert ik.regularizers is not None and ik.config.regularizers.velocity_threshold == 3.0
    described = {spec.name: spec for spec in IK_PARAMS}
    for name in ("state_regularizer_weight", "velocity_regularizer_weight", "velocity_regularizer_threshold"):
        assert described[name].description and described[name].low == 0.0
