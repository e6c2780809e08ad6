"""The cheaper paths of the second seed's terms give the same numbers as the plain formulas (issue 12, step
time): the regularizer cost without a body above the threshold, the activity check that replaced building
the cost in the sequential QP, and the CoM Jacobian update without a CoM target. Ground truth: the terms'
formulas written out here (dense, as before the change) and pinocchio's joint Jacobians."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.com_objective import BalanceConfig, ComObjective
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.regularizers import RegularizerConfig, Regularizers
from dynik_ros.core.targets import FrameTarget, Measurements
from dynik_ros.retarget.registry import load_robot


@pytest.fixture(scope="module")
def g1():
    spec = load_robot("g1")
    robot = spec.robot
    q = spec.initial_configuration()
    data = robot.model.createData()
    pin.computeJointJacobians(robot.model, data, q)
    pin.updateFramePlacements(robot.model, data)
    return robot, q, data


def _dense_cost(regs: Regularizers, data, w0: float, carried: np.ndarray, m0: np.ndarray):
    """The cost as first written: dense Hessian, state diagonal added to it, gradient by products."""
    config, nv, nb = regs.config, regs.robot.nv, regs.robot.base_dofs
    hessian_m, gradient_m = np.zeros((nv, nv)), np.zeros(nv)
    angular = np.zeros((3, nv))
    if nb:
        angular[:, 3:6] = np.eye(3)
    angular[:, nb:] = data.J[3:, nb:]
    if config.velocity_weight > 0:
        omegas = (regs.support * m0) @ angular.T
        speeds = np.sqrt(np.einsum("ij,ij->i", omegas, omegas))
        t, active = config.velocity_threshold, speeds > config.velocity_threshold
        if active.any():
            w, s, speed = config.velocity_weight, regs.support[active], speeds[active]
            g = ((omegas[active] / speed[:, None]) @ angular) * s
            rank_one = (t / speed)[:, None] * g
            gram = (angular.T @ angular) * (s.T @ ((1.0 - t / speed)[:, None] * s))
            hessian_m = 2 * w * (rank_one.T @ g + gram)
            gradient_m = 2 * w * (g.T @ (speed - t)) - hessian_m @ m0
    if config.state_weight > 0:
        hessian_m[np.diag_indices(nv)] += config.state_weight
    return w0 * w0 * hessian_m, w0 * (hessian_m @ carried + gradient_m)


@pytest.mark.parametrize("state_weight", [0.0, 0.01])
@pytest.mark.parametrize("velocity_scale", [0.1, 3.0])  # no body above the threshold / several
@pytest.mark.parametrize("w0", [1.0, 0.375])  # Euler / an Adams-Moulton corrector weight
def test_regularizer_cost_equals_the_dense_formula(g1, state_weight, velocity_scale, w0):
    robot, _, data = g1
    regs = Regularizers(robot, RegularizerConfig(state_weight, velocity_weight=1.0, velocity_threshold=4.0))
    rng = np.random.default_rng(3)
    m0 = rng.normal(scale=velocity_scale, size=robot.nv)
    carried = rng.normal(size=robot.nv)
    hessian, gradient = regs.cost(data, w0, carried, m0)
    expected_h, expected_g = _dense_cost(regs, data, w0, carried, m0)
    assert (regs.last_active > 0) == (velocity_scale > 1.0)
    np.testing.assert_allclose(hessian, expected_h, rtol=0, atol=1e-9)
    np.testing.assert_allclose(gradient, expected_g, rtol=0, atol=1e-9)


def test_activity_check_counts_the_bodies_above_the_threshold(g1):
    """``any_active`` / ``last_active`` against the world angular velocity of every body from pinocchio's
    joint Jacobians (the mixed base velocity turned into pinocchio's local twist)."""
    robot, q, data = g1
    threshold = 4.0
    regs = Regularizers(robot, RegularizerConfig(velocity_weight=1.0, velocity_threshold=threshold))
    rotation = pin.Quaternion(q[3:7]).matrix()
    rng = np.random.default_rng(9)
    counts = []
    for scale in (0.05, 1.0, 3.0):
        m = rng.normal(scale=scale, size=robot.nv)
        v = np.concatenate((rotation.T @ m[:3], rotation.T @ m[3:6], m[6:]))
        speeds = [
            np.linalg.norm(pin.getJointJacobian(robot.model, data, j, pin.LOCAL_WORLD_ALIGNED)[3:] @ v)
            for j in range(1, robot.model.njoints)
        ]
        expected = int(np.sum(np.array(speeds) > threshold))
        assert regs.any_active(data, m) == (expected > 0)
        assert regs.last_active == expected
        counts.append(expected)
    assert counts[0] == 0 and counts[-1] > 0
    assert not Regularizers(robot, RegularizerConfig(state_weight=1.0)).any_active(data, m)


def test_com_jacobian_without_a_target_is_the_one_the_cost_uses(g1):
    """A step without a CoM target still updates ``J_com`` (the support rows use it): equal to the one
    built with the cost, and that cost equals ``J^T W^2 J``, ``-J^T W^2 v*`` written out."""
    robot, q, data = g1
    config = BalanceConfig(enabled=True, com_weight=(1.0, 2.0, 0.0))
    a, b = ComObjective(robot, config), ComObjective(robot, config)
    base = q[:3] + np.array([0.01, -0.02, 0.0])
    a.update_jacobian(robot.model, data, base)
    target = np.array([0.1, 0.2, 0.7])
    hessian, gradient = b.cost(robot.model, data, base, target, None, 5.0, 50.0)
    np.testing.assert_array_equal(a._jacobian, b._jacobian)
    w2 = np.diag(np.array(config.com_weight) ** 2)
    jac = b._jacobian
    np.testing.assert_allclose(hessian, jac.T @ w2 @ jac, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gradient, -(jac.T @ w2 @ (5.0 * (target - b.com))), rtol=0, atol=1e-12)


def test_sequential_qp_step_equals_a_step_that_builds_every_cost(g1, monkeypatch):
    """The velocity regularizer's sequential QP decides whether to re-solve from the activity check alone;
    the same steps with the check replaced by building the full cost (the former path) are equal."""
    robot, q, _ = g1
    frames = ("left_wrist_yaw_link", "right_wrist_yaw_link", "pelvis")
    targets = [FrameTarget(f, position=True, orientation=True) for f in frames]
    regularizers = RegularizerConfig(0.01, velocity_weight=1.0, velocity_threshold=2.0)
    config = DynamicalIKConfig(regularizers=regularizers)
    data = robot.model.createData()

    def run() -> np.ndarray:
        ik = DynamicalIK(robot, targets, config, q)
        out = []
        for k in range(60):
            qk = q.copy()
            qk[7:] += 0.4 * np.sin(0.2 * k + np.arange(robot.n_joints))  # fast: bodies pass the threshold
            pin.framesForwardKinematics(robot.model, data, qk)
            ids = [robot.frame_id(f) for f in frames]
            positions = np.array([data.oMf[i].translation for i in ids])
            qs, vs = ik.step(Measurements(positions, np.array([data.oMf[i].rotation for i in ids])), 1 / 120)
            out.append(np.concatenate((qs, vs)))
            active.append(ik.regularizers.last_active)
        return np.array(out)

    active: list[int] = []
    fast = run()
    assert sum(a > 0 for a in active) >= 5  # the regularizer acted on several steps

    def build_instead(self, data, m0):
        self.cost(data, 1.0, np.zeros(self.robot.nv), m0)  # the former check: build, read last_active
        return bool(self.last_active)

    monkeypatch.setattr(Regularizers, "any_active", build_instead)
    np.testing.assert_allclose(fast, run(), rtol=0, atol=1e-9)


@pytest.mark.parametrize("state_weight", [0.0, 0.01])
@pytest.mark.parametrize("velocity_scale", [0.1, 3.0])  # no body above the threshold / several
def test_cost_added_to_another_equals_the_sum_of_both(g1, state_weight, velocity_scale):
    """``cost_plus(base, ...)`` (the CoM cost plus the regularizers in one step) is exactly ``base + cost``:
    without an active body the state diagonal goes onto a copy of ``base``'s H, which stays untouched."""
    robot, _, data = g1
    regs = Regularizers(robot, RegularizerConfig(state_weight, velocity_weight=1.0, velocity_threshold=4.0))
    rng = np.random.default_rng(5)
    m0 = rng.normal(scale=velocity_scale, size=robot.nv)
    carried = rng.normal(size=robot.nv)
    jac = rng.normal(size=(2, robot.nv))
    base = (jac.T @ jac, rng.normal(size=robot.nv))
    kept = (base[0].copy(), base[1].copy())
    hessian, gradient = regs.cost_plus(base, data, 0.375, carried, m0)
    h, g = regs.cost(data, 0.375, carried, m0)
    np.testing.assert_array_equal(hessian, base[0] + h)
    np.testing.assert_array_equal(gradient, base[1] + g)
    np.testing.assert_array_equal(base[0], kept[0])
    np.testing.assert_array_equal(base[1], kept[1])
    assert regs.cost_plus(None, data, 0.375, carried, m0)[0].shape == (robot.nv, robot.nv)


def test_cost_about_the_point_just_checked_reuses_its_speeds(g1):
    """After ``any_active(m)``, a cost about that same ``m`` uses the speeds just computed (once); the cost
    equals the dense formula either way, and a cost about another point computes its own."""
    robot, _, data = g1
    regs = Regularizers(robot, RegularizerConfig(0.01, velocity_weight=1.0, velocity_threshold=4.0))
    rng = np.random.default_rng(8)
    m, other = rng.normal(scale=3.0, size=robot.nv), rng.normal(scale=0.1, size=robot.nv)
    carried = rng.normal(size=robot.nv)
    assert regs.any_active(data, m)
    for point in (m, other, m):  # reused, then not (another point), then not (used up)
        hessian, gradient = regs.cost(data, 1.0, carried, point)
        expected_h, expected_g = _dense_cost(regs, data, 1.0, carried, point)
        np.testing.assert_allclose(hessian, expected_h, rtol=0, atol=1e-9)
        np.testing.assert_allclose(gradient, expected_g, rtol=0, atol=1e-9)
    assert regs.any_active(data, m)
    regs.cost(data, 1.0, carried, other)  # another point: the check's speeds are dropped, not reused later
    assert regs._checked is None


def test_planar_com_cost_equals_the_full_three_row_product(g1):
    """Without a vertical CoM row (weight 0, the default) the cost is built from the two horizontal rows:
    bit-identical to ``J^T W^2 J`` and ``-J^T W^2 v*`` over all three rows."""
    robot, q, data = g1
    config = BalanceConfig(enabled=True, com_weight=(1.0, 2.0, 0.0))
    objective = ComObjective(robot, config)
    base = q[:3] + np.array([0.01, -0.02, 0.0])
    target = np.array([0.1, 0.2, 0.7])
    hessian, gradient = objective.cost(robot.model, data, base, target, np.array([0.1, 0.0, 0.3]), 5.0, 50.0)
    jac = objective._jacobian
    weighted = jac * (np.array(config.com_weight) ** 2)[:, None]
    v = np.array([0.1, 0.0, 0.3]) + 5.0 * (target - objective.com)
    np.testing.assert_array_equal(hessian, jac.T @ weighted)
    np.testing.assert_array_equal(gradient, -(weighted.T @ v))


def test_activity_check_without_square_roots_agrees_at_the_threshold(g1):
    """The check compares squared speeds first and takes square roots only when a body may be above the
    threshold: with the fastest body a few ulps below, at and above ``omega_t`` (the velocity scaled onto
    it), ``any_active`` / ``last_active`` and the cost agree with the written-out ``sqrt(|omega|^2) >
    omega_t`` count and the dense formula."""
    robot, _, data = g1
    threshold = 4.0
    regs = Regularizers(robot, RegularizerConfig(0.01, velocity_weight=1.0, velocity_threshold=threshold))
    rng = np.random.default_rng(12)
    direction = rng.normal(size=robot.nv)
    _, speeds = regs.body_speeds(data, direction)
    seen = set()
    for ulps in range(-4, 5):  # the fastest body's speed a few ulps around the threshold
        m = (threshold / speeds.max() * (1.0 + ulps * 2.2e-16)) * direction
        omegas = (regs.support * m) @ regs._angular.T
        expected = int(np.count_nonzero(np.sqrt(np.einsum("ij,ij->i", omegas, omegas)) > threshold))
        assert regs.any_active(data, m) == (expected > 0)
        assert regs.last_active == expected
        hessian, gradient = regs.cost(data, 1.0, np.zeros(robot.nv), m)
        expected_h, expected_g = _dense_cost(regs, data, 1.0, np.zeros(robot.nv), m)
        np.testing.assert_allclose(hessian, expected_h, rtol=0, atol=1e-9)
        np.testing.assert_allclose(gradient, expected_g, rtol=0, atol=1e-9)
        seen.add(expected)
    assert seen == {0, 1}  # both sides of the threshold were checked


@pytest.mark.parametrize("speed", [0.5, 50.0 * (1 - 1e-12), 50.0, 50.0 * (1 + 1e-12), 1e3, 1e6])
def test_com_target_velocity_capped_as_numpy_computes_it(g1, speed):
    """``v*_com`` (built in Python floats) is numpy's ``v + K (c_ref - c)`` scaled down to ``max_speed``
    by its norm, bit for bit, below, at and above the cap (50 m/s)."""
    robot, q, data = g1
    objective = ComObjective(robot, BalanceConfig(enabled=True, com_weight=(1.0, 2.0, 3.0)))
    objective.observe(robot.model, data, None)
    gain, direction = 5.0, np.array([0.6, -0.48, 0.64])
    target = objective.com + speed / gain * direction
    hessian, gradient = objective.cost(
        robot.model, data, q[:3], target, np.array([1e-3, 0.0, -2e-3]), gain, 50.0
    )
    v = np.array([1e-3, 0.0, -2e-3]) + gain * (target - objective.com)
    norm = np.sqrt(v @ v)
    if norm > 50.0:
        v *= 50.0 / norm
    weighted = objective._jacobian * (np.array([1.0, 2.0, 3.0]) ** 2)[:, None]
    np.testing.assert_array_equal(gradient, -(weighted.T @ v))
    np.testing.assert_array_equal(hessian, objective._jacobian.T @ weighted)
