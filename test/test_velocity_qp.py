"""The QP of eq. (10): the inactive-constraint shortcut returns OSQP's optimum, and OSQP takes over as soon
as a bound is active."""

from __future__ import annotations

import numpy as np

from dynik_ros.core.velocity_qp import QPSettings, VelocityQP


def make_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(12, 8)) * (rng.random((12, 8)) < 0.6)
    jac[:, :2] += rng.normal(size=(12, 2))  # two "base" columns seen by every row
    target = rng.normal(size=12)
    constraints = np.hstack((np.zeros((6, 2)), np.eye(6)))
    return jac, target, np.ones(12), constraints


def test_shortcut_equals_osqp_when_no_bound_is_active():
    jac, target, weights, c = make_problem()
    wide = np.full(6, 1e3)
    fast = VelocityQP(jac != 0, c, QPSettings(eps_abs=1e-9, eps_rel=1e-9))
    slow = VelocityQP(jac != 0, c, QPSettings(inactive_shortcut=False, eps_abs=1e-9, eps_rel=1e-9))
    a = fast.solve(jac, target, weights, -wide, wide)
    b = slow.solve(jac, target, weights, -wide, wide)
    assert a.status == "solved (no active constraint)" and b.status == "solved"
    np.testing.assert_allclose(a.nu, b.nu, atol=1e-6)
    # and it is the damped least-squares solution of J nu = v*
    p = jac.T @ jac + 1e-4 * np.eye(8)
    np.testing.assert_allclose(a.nu, np.linalg.solve(p, jac.T @ target), atol=1e-10)


def test_active_bounds_go_to_osqp_and_are_respected():
    jac, target, weights, c = make_problem(1)
    unconstrained = VelocityQP(jac != 0, c).solve(jac, target, weights, np.full(6, -1e3), np.full(6, 1e3)).nu
    tight = 0.5 * np.abs(unconstrained[2:]).min()
    qp = VelocityQP(jac != 0, c, QPSettings(eps_abs=1e-8, eps_rel=1e-8))
    sol = qp.solve(jac, target, weights, np.full(6, -tight), np.full(6, tight))
    assert sol.status == "solved" and sol.solved
    assert np.all(np.abs(sol.nu[2:]) <= tight + 1e-6)
    assert np.isclose(np.abs(sol.nu[2:]).max(), tight, atol=1e-6), "some bound must be active"
    # the next unconstrained step takes the shortcut again
    again = qp.solve(jac, target, weights, np.full(6, -1e3), np.full(6, 1e3))
    assert again.status == "solved (no active constraint)"
