"""Kinematics, SO(3) helpers, metrics and base integration checked against pinocchio as ground truth."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.base_integration import integrate_rotation
from dynik_ros.core.frame_kinematics import FrameKinematics, to_mixed_velocity, to_pinocchio_velocity
from dynik_ros.core.metrics import angular_velocity_rmse, mnte
from dynik_ros.core.robot_model import LinearJointConstraints, RobotModel, UnknownFrameError
from dynik_ros.core.so3 import (
    exp_so3,
    normalized_trace_error,
    orientation_residual_world,
    orthonormality_error,
    project_to_so3,
    vee_of_skew_part,
)
from dynik_ros.models.assets import urdf_path


def random_q(robot: RobotModel, rng: np.random.Generator) -> np.ndarray:
    q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
    q[7:] = rng.uniform(np.maximum(robot.lower, -1.5), np.minimum(robot.upper, 1.5))
    return q


def test_stacked_jacobian_matches_pinocchio_frame_jacobians(human66):
    rng = np.random.default_rng(1)
    pos, ori = ["Pelvis", "RightHand", "LeftToe"], ["Head", "RightForeArm", "LeftFoot", "Pelvis"]
    kin = FrameKinematics(human66, pos, ori)
    data = human66.model.createData()
    for _ in range(3):
        q = random_q(human66, rng)
        positions, rotations = kin.update(q)
        p_base, r_base, _ = human66.split(q)
        jac = kin.stacked_jacobian(p_base)
        pin.computeJointJacobians(human66.model, data, q)
        pin.updateFramePlacements(human66.model, data)
        # pinocchio's Jacobian maps the base-local tangent; ours maps mixed nu: J_ours = J_pin * d(v)/d(nu).
        to_local = np.eye(human66.nv)
        to_local[:3, :3] = r_base.T
        to_local[3:6, 3:6] = r_base.T
        expected = []
        for f in pos:
            jf = pin.getFrameJacobian(human66.model, data, human66.frame_id(f), pin.LOCAL_WORLD_ALIGNED)
            expected.append(jf[:3] @ to_local)
        for f in ori:
            jf = pin.getFrameJacobian(human66.model, data, human66.frame_id(f), pin.LOCAL_WORLD_ALIGNED)
            expected.append(jf[3:] @ to_local)
        np.testing.assert_allclose(jac, np.vstack(expected), atol=1e-12)
        assert np.all(kin.pattern() | (np.abs(jac) < 1e-15)), (
            "a non-zero Jacobian entry lies outside the pattern"
        )
        np.testing.assert_allclose(
            positions[1], data.oMf[human66.frame_id("RightHand")].translation, atol=1e-12
        )
        np.testing.assert_allclose(rotations[0], data.oMf[human66.frame_id("Head")].rotation, atol=1e-12)


def test_velocity_conversion_round_trip():
    rng = np.random.default_rng(2)
    rot = exp_so3(rng.normal(size=3))
    nu = rng.normal(size=10)
    np.testing.assert_allclose(to_mixed_velocity(to_pinocchio_velocity(nu, rot, True), rot, True), nu)


def test_orientation_residual_is_world_form_of_eq5():
    rng = np.random.default_rng(3)
    r_model, r_target = exp_so3(rng.normal(size=3)), exp_so3(rng.normal(size=3))
    local = vee_of_skew_part(r_model.T @ r_target)  # eq. (5) as printed, link frame
    np.testing.assert_allclose(orientation_residual_world(r_model, r_target), r_model @ local, atol=1e-14)
    angle = 0.3
    r_small = r_model @ exp_so3(np.array([0.0, 0.0, angle]))
    assert np.linalg.norm(orientation_residual_world(r_model, r_small)) == pytest.approx(np.sin(angle))


def test_mnte_and_rmse_values():
    # tr(I - R)/2 of a rotation by theta is 1 - cos(theta): eq. (15)
    rots = exp_so3(np.array([[0.0, 0.0, 0.0], [np.pi / 2, 0.0, 0.0], [0.0, np.pi, 0.0]]))
    ident = np.broadcast_to(np.eye(3), rots.shape)
    np.testing.assert_allclose(normalized_trace_error(ident, rots), [0.0, 1.0, 2.0], atol=1e-12)
    assert mnte(ident, rots) == pytest.approx(1.0)
    # eq. (16): one target off by (1, 1, 1) rad/s, another exact -> sqrt((3/3 + 0)/2)
    assert angular_velocity_rmse(
        np.zeros((2, 3)), np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    ) == pytest.approx(np.sqrt(0.5))


def test_exp_rotation_integration_stays_orthonormal_for_1e5_steps_and_matches_pinocchio():
    """Eq. (14) with the exponential scheme: orthonormal to 1e-9 over 10^5 steps, same as pinocchio's
    exponential-map integration of a free-flyer."""
    rng = np.random.default_rng(4)
    dt = 1.0 / 240.0
    rot = np.eye(3)
    quat_model = pin.Model()
    quat_model.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "b")
    q_pin = pin.neutral(quat_model)
    worst = 0.0
    for k in range(100_000):
        omega = np.array([2.0 * np.sin(0.01 * k), 1.5 * np.cos(0.013 * k), 3.0]) + 0.1 * rng.normal(size=3)
        rot = integrate_rotation(rot, omega, dt, gain=10.0, scheme="exp")
        q_pin = pin.integrate(quat_model, q_pin, pin.Quaternion(q_pin).toRotationMatrix().T @ omega * dt)
        if k % 1000 == 0:
            worst = max(worst, float(orthonormality_error(rot)))
    worst = max(worst, float(orthonormality_error(rot)))
    assert worst < 1e-9
    np.testing.assert_allclose(rot, pin.Quaternion(q_pin).toRotationMatrix(), atol=1e-8)


def test_euler_scheme_of_eq14_is_held_near_so3_by_the_correction_and_drifts_without_it():
    dt, omega = 1.0 / 60.0, np.array([0.0, 0.0, 4.0])
    corrected = uncorrected = np.eye(3)
    for _ in range(2000):
        corrected = integrate_rotation(corrected, omega, dt, gain=30.0, scheme="euler")
        uncorrected = integrate_rotation(uncorrected, omega, dt, gain=1e-12, scheme="euler")
    bound = dt * np.dot(omega, omega) / 30.0  # steady state of the Baumgarte term
    assert orthonormality_error(corrected) < 2.0 * bound
    assert orthonormality_error(uncorrected) > 10.0 * orthonormality_error(corrected)


def test_unknown_frame_names_the_closest_valid_ones(human66):
    with pytest.raises(UnknownFrameError) as err:
        human66.frame_id("RightForearm")
    assert "RightForeArm" in str(err.value)
    with pytest.raises(UnknownFrameError, match="joint 'jRightKnee_rotq'.*jRightKnee_roty"):
        human66.joint_index("jRightKnee_rotq")


def test_limits_and_constraints_validation():
    robot = RobotModel.from_urdf_file(
        urdf_path("human48"),
        joint_limit_overrides={"jRightKnee_roty": (0.0, 1.0)},
        velocity_limit_overrides={"jRightKnee_roty": 3.0},
        constraints=LinearJointConstraints(("jRightHip_roty", "jRightKnee_roty"), [[1.0, 1.0]], [0.5]),
    )
    i = robot.joint_index("jRightKnee_roty")
    assert (robot.lower[i], robot.upper[i], robot.velocity_limit[i]) == (0.0, 1.0, 3.0)
    assert robot.constraints.A.shape == (1, robot.n_joints)
    with pytest.raises(ValueError, match="lower < upper"):
        robot.set_position_limits("jRightKnee_roty", 1.0, 0.0)
    with pytest.raises(ValueError, match="shape"):
        LinearJointConstraints(("a", "b"), [[1.0, 2.0, 3.0]], [1.0])
    with pytest.raises(UnknownFrameError):
        robot.set_constraints(LinearJointConstraints(("nope",), [[1.0]], [0.0]))


def test_project_to_so3():
    rng = np.random.default_rng(5)
    m = exp_so3(rng.normal(size=3)) + 0.01 * rng.normal(size=(3, 3))
    assert orthonormality_error(project_to_so3(m)) < 1e-12


def test_quaternion_conversion_matches_pinocchio_including_near_pi():
    from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion

    rng = np.random.default_rng(6)
    phis = rng.normal(size=(200, 3))
    phis[:50] *= (np.pi - 1e-9) / np.linalg.norm(phis[:50], axis=1, keepdims=True)  # near 180 degrees
    rots = exp_so3(phis)
    stacked = quaternion_from_rotation(rots)
    for r, q in zip(rots, stacked, strict=True):
        single = quaternion_from_rotation(r)
        np.testing.assert_allclose(single, q, atol=1e-12)
        assert q[3] >= 0.0
        np.testing.assert_allclose(pin.Quaternion(q).toRotationMatrix(), r, atol=1e-9)
    np.testing.assert_allclose(rotation_from_quaternion(stacked), rots, atol=1e-9)
    with pytest.raises(ValueError, match="non-finite"):
        quaternion_from_rotation(np.full((3, 3), np.nan))
