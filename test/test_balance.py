"""CoM objective and support constraint (core/com_objective.py): ground truth from pinocchio's centerOfMass
at known configurations; the support constraint checked on the output q, not on solver internals."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.com_objective import (
    BalanceConfig,
    SupportFrame,
    convex_hull,
    halfplanes,
    support_distance,
)
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.targets import FrameTarget, InvalidMeasurementError, Measurements
from dynik_ros.retarget.registry import load_robot

FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
# G1 sole corners in the ankle-roll frame (heel/toe of config/g1.yaml, +-3 cm wide)
SOLE = ((-0.05, 0.03, -0.035), (0.12, 0.03, -0.035), (0.12, -0.03, -0.035), (-0.05, -0.03, -0.035))
DT = 0.01


@pytest.fixture(scope="module")
def g1():
    spec = load_robot("g1")
    return spec.robot, spec.initial_configuration()


def _feet_targets(weight: float = 10.0) -> list[FrameTarget]:
    return [
        FrameTarget(
            f,
            position=True,
            orientation=True,
            position_weight=(weight,) * 3,
            orientation_weight=(weight,) * 3,
        )
        for f in FEET
    ]


def _feet_measurement(robot, q, com=None, contacts=None) -> Measurements:
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    ids = [robot.frame_id(f) for f in FEET]
    return Measurements(
        np.array([data.oMf[i].translation for i in ids]),
        np.array([data.oMf[i].rotation for i in ids]),
        np.zeros((2, 3)),
        np.zeros((2, 3)),
        com_position=None if com is None else np.asarray(com, float),
        com_velocity=None if com is None else np.zeros(3),
        contacts=contacts,
    )


def _com(robot, q) -> np.ndarray:
    return pin.centerOfMass(robot.model, robot.model.createData(), q).copy()


def _support_hull(robot, q) -> np.ndarray:
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    corners = []
    for f in FEET:
        placement = data.oMf[robot.frame_id(f)]
        corners += [placement.act(np.array(p)) for p in SOLE]
    return convex_hull(np.array(corners)[:, :2])


def test_hull_and_halfplanes_of_a_square():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], float)
    hull = convex_hull(square)
    assert len(hull) == 4
    a, b = halfplanes(hull, 0.1)
    assert np.all(a @ np.array([0.5, 0.5]) <= b)
    assert not np.all(a @ np.array([0.05, 0.5]) <= b)
    assert support_distance(np.array([0.5, 0.2]), hull) == pytest.approx(0.2)
    assert support_distance(np.array([1.5, 0.5]), hull) == pytest.approx(-0.5)


def test_com_jacobian_in_mixed_velocity_matches_finite_differences(g1):
    robot, q0 = g1
    ik = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=BalanceConfig(enabled=True)), q0)
    rng = np.random.default_rng(3)
    q = q0.copy()
    q[7:] += rng.uniform(-0.2, 0.2, robot.n_joints)
    q = np.clip(q, robot.model.lowerPositionLimit, robot.model.upperPositionLimit)
    ik.reset(q)
    data = ik.kinematics.data
    pin.computeJointJacobians(robot.model, data, ik.q)
    ik.balance.com = _com(robot, ik.q)
    ik.balance.cost(robot.model, data, ik.base_position, np.zeros(3), None, 0.0, 1.0)
    jac = ik.balance._jacobian.copy()
    nu = rng.normal(size=robot.nv)
    eps = 1e-6
    # move along mixed nu: base position, base rotation (world omega), joints
    from dynik_ros.core.so3 import exp_so3

    q_plus = robot.join(
        ik.base_position + eps * nu[:3],
        exp_so3(eps * nu[3:6]) @ ik.base_rotation,
        ik.joint_positions + eps * nu[6:],
    )
    numeric = (_com(robot, q_plus) - _com(robot, ik.q)) / eps
    np.testing.assert_allclose(jac @ nu, numeric, atol=1e-5)


def test_com_target_from_a_known_configuration_is_reached(g1):
    """Targets: the feet and the CoM of a perturbed standing pose q*; the IK (from q0) ends with pinocchio's
    centerOfMass(q) on centerOfMass(q*), and the feet on theirs."""
    robot, q0 = g1
    q_true = q0.copy()
    names = ["left_hip_pitch_joint", "right_hip_pitch_joint", "waist_pitch_joint", "left_knee_joint"]
    for name, delta in zip(names, (-0.2, -0.15, 0.25, 0.3), strict=True):
        q_true[7 + robot.joint_index(name)] += delta
    c_true = _com(robot, q_true)
    balance = BalanceConfig(enabled=True, com_weight=(5.0, 5.0, 5.0))
    ik = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=balance), q0)
    m = _feet_measurement(robot, q_true, com=c_true)
    plain = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(), q0)
    for _ in range(300):
        q, _ = ik.step(m, DT)
        q_plain, _ = plain.step(
            Measurements(m.positions, m.rotations, m.linear_velocities, m.angular_velocities), DT
        )
    assert np.linalg.norm(_com(robot, q) - c_true) < 1e-3
    assert np.linalg.norm(_com(robot, q_plain) - c_true) > 1e-2  # the CoM row is what moved it
    fk = _feet_measurement(robot, q)
    np.testing.assert_allclose(fk.positions, m.positions, atol=1e-3)


def test_support_constraint_holds_on_every_output_sample(g1):
    """The CoM target is 25 cm in front of the feet: with the hard support rows, the CoM of every output q
    stays at least the margin inside the feet's polygon (computed here from the output q); without them it
    leaves it."""
    robot, q0 = g1
    margin = 0.01
    support = tuple(SupportFrame(f, SOLE) for f in FEET)
    hard = BalanceConfig(
        enabled=True, com_weight=(5.0, 5.0, 0.0), support=support, hard_support=True, margin=margin
    )
    soft = BalanceConfig(enabled=True, com_weight=(5.0, 5.0, 0.0), support=support, hard_support=False)
    far = _com(robot, q0) + np.array([0.25, 0.05, 0.0])
    for config, expect_inside in ((hard, True), (soft, False)):
        ik = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=config), q0)
        m = _feet_measurement(robot, q0, com=far, contacts=np.array([True, True]))
        distances = []
        for _ in range(200):
            q, _ = ik.step(m, DT)
            assert np.all(np.isfinite(q))
            distances.append(support_distance(_com(robot, q), _support_hull(robot, q)))
        if expect_inside:
            assert min(distances) >= margin - 1e-4, min(distances)
            assert min(distances) < margin + 2e-3  # pushed against the shrunk edge
            assert all(ik.info.solved for _ in [0])
        else:
            assert min(distances) < 0.0


def test_single_support_pulls_the_com_back_over_the_stance_foot(g1):
    """The right foot leaves the support: the CoM, outside the left foot's polygon at first, moves over it
    and then stays at least the margin inside."""
    robot, q0 = g1
    support = tuple(SupportFrame(f, SOLE) for f in FEET)
    config = BalanceConfig(enabled=True, com_weight=(0.0, 0.0, 0.0), support=support, hard_support=True)
    ik = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=config), q0)
    m = _feet_measurement(robot, q0, com=_com(robot, q0), contacts=np.array([True, False]))
    data = robot.model.createData()
    left = robot.frame_id(FEET[0])
    distances = []
    for _ in range(150):
        q, _ = ik.step(m, DT)
        pin.framesForwardKinematics(robot.model, data, q)
        hull = convex_hull(np.array([data.oMf[left].act(np.array(p)) for p in SOLE])[:, :2])
        distances.append(support_distance(_com(robot, q), hull))
    assert distances[0] < 0.0  # started outside (double-support stance)
    first_inside = next(i for i, d in enumerate(distances) if d >= 0.01 - 1e-4)
    assert first_inside < 80  # 10/s return rate: 10 cm out to 0.1 mm takes 0.66 s
    assert min(distances[first_inside:]) >= 0.01 - 1e-4
    assert all(np.diff(distances[:first_inside]) > 0)  # never further out on the way


def test_infeasible_support_holds_safely(g1):
    """A margin larger than the feet leaves an empty polygon: the QP is infeasible, the step holds still
    (the solver's failure path), nothing is NaN; bad CoM targets are refused with a clear error."""
    robot, q0 = g1
    support = tuple(SupportFrame(f, SOLE) for f in FEET)
    config = BalanceConfig(enabled=True, support=support, hard_support=True, margin=0.5)
    ik = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=config), q0)
    m = _feet_measurement(robot, q0, com=_com(robot, q0), contacts=np.array([True, True]))
    for _ in range(5):
        q, v = ik.step(m, DT)
        assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
        assert ik.info.held and not ik.info.solved
    np.testing.assert_allclose(q, q0, atol=1e-12)
    bad = _feet_measurement(robot, q0, com=np.array([np.nan, 0.0, 0.0]))
    with pytest.raises(InvalidMeasurementError, match="com_position"):
        ik.step(bad, DT)
    with pytest.raises(ValueError, match="contacts"):
        ik.step(_feet_measurement(robot, q0, com=_com(robot, q0), contacts=np.array([True])), DT)
    with pytest.raises(ValueError, match="span no area"):
        SupportFrame("x", ((0, 0, 0), (1, 0, 0), (2, 0, 0)))
    with pytest.raises(ValueError, match="support frames"):
        BalanceConfig(enabled=True, hard_support=True)


def test_balance_off_leaves_the_step_unchanged(g1):
    robot, q0 = g1
    m = _feet_measurement(robot, q0)
    m.positions = m.positions + 0.02
    a = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(), q0)
    b = DynamicalIK(robot, _feet_targets(), DynamicalIKConfig(balance=BalanceConfig(enabled=False)), q0)
    for _ in range(20):
        qa, _ = a.step(m, DT)
        qb, _ = b.step(m, DT)
    assert b.balance is None and b.qp.n_dynamic == 0
    np.testing.assert_array_equal(qa, qb)
