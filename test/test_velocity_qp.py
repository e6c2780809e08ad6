"""The QP of eq. (10): the inactive-constraint shortcut returns the solvers' optimum, and the solver (DAQP
or OSQP, ``QPSettings.solver``) takes over as soon as a bound is active."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.core.velocity_qp import SOLVERS, QPSettings, VelocityQP

STATUS = {"daqp": "solved (DAQP)", "osqp": "solved"}  # a solve with an active row, by each solver


def make_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(12, 8)) * (rng.random((12, 8)) < 0.6)
    jac[:, :2] += rng.normal(size=(12, 2))  # two "base" columns seen by every row
    target = rng.normal(size=12)
    constraints = np.hstack((np.zeros((6, 2)), np.eye(6)))
    return jac, target, np.ones(12), constraints


@pytest.mark.parametrize("solver", SOLVERS)
def test_shortcut_equals_the_solver_when_no_bound_is_active(solver):
    jac, target, weights, c = make_problem()
    wide = np.full(6, 1e3)
    fast = VelocityQP(jac != 0, c, QPSettings(solver=solver, eps_abs=1e-9, eps_rel=1e-9))
    slow = VelocityQP(
        jac != 0, c, QPSettings(solver=solver, inactive_shortcut=False, eps_abs=1e-9, eps_rel=1e-9)
    )
    a = fast.solve(jac, target, weights, -wide, wide)
    b = slow.solve(jac, target, weights, -wide, wide)
    assert a.status == "solved (no active constraint)" and b.status == STATUS[solver]
    np.testing.assert_allclose(a.nu, b.nu, atol=1e-6)
    # and it is the damped least-squares solution of J nu = v*
    p = jac.T @ jac + 1e-4 * np.eye(8)
    np.testing.assert_allclose(a.nu, np.linalg.solve(p, jac.T @ target), atol=1e-10)


@pytest.mark.parametrize("solver", SOLVERS)
def test_active_bounds_go_to_the_solver_and_are_respected(solver):
    jac, target, weights, c = make_problem(1)
    unconstrained = VelocityQP(jac != 0, c).solve(jac, target, weights, np.full(6, -1e3), np.full(6, 1e3)).nu
    tight = 0.5 * np.abs(unconstrained[2:]).min()
    qp = VelocityQP(jac != 0, c, QPSettings(solver=solver, eps_abs=1e-8, eps_rel=1e-8))
    sol = qp.solve(jac, target, weights, np.full(6, -tight), np.full(6, tight))
    assert sol.status == STATUS[solver] and sol.solved
    assert np.all(np.abs(sol.nu[2:]) <= tight + 1e-6)
    assert np.isclose(np.abs(sol.nu[2:]).max(), tight, atol=1e-6), "some bound must be active"
    # the next unconstrained step: with DAQP the solve right after an active bound goes to DAQP (the
    # shortcut is tried while the last solve had no row on a bound), which finds none active and hands
    # back to the shortcut; OSQP tries the shortcut every time
    wide = np.full(6, 1e3)
    after = qp.solve(jac, target, weights, -wide, wide)
    again = qp.solve(jac, target, weights, -wide, wide)
    assert after.status == (STATUS[solver] if solver == "daqp" else "solved (no active constraint)")
    assert again.status == "solved (no active constraint)"
    np.testing.assert_allclose(after.nu, again.nu, rtol=0, atol=1e-10)


@pytest.mark.parametrize("solver", SOLVERS)
def test_resolve_equals_a_full_solve_with_the_same_task(solver):
    """``resolve`` (the sequential QP's re-solve: the task's ``P`` and ``q`` kept from the last ``solve``)
    gives what a full ``solve`` with the same ``J``, ``v*``, weights and regularization gives, bit for bit,
    with another extra cost, other bounds and dynamic rows, with and without an expansion, on the shortcut
    and on each solver; it leaves the kept task cost untouched for a further re-solve."""
    jac, target, weights, c = make_problem(2)
    rng = np.random.default_rng(4)
    expansion = np.zeros((8, 7))
    expansion[:7, :7] = np.eye(7)
    expansion[7, 6] = -1.0  # the last joint mimics the one before
    regularization = (rng.random(8), rng.normal(size=8))
    wide, tight = np.full(6, 1e3), np.full(6, 0.05)
    statuses = set()
    for e in (None, expansion):
        settings = QPSettings(solver=solver, eps_abs=1e-9, eps_rel=1e-9)
        kwargs = {"settings": settings, "dense_cost": True, "dynamic_rows": 2}
        full, kept = (
            VelocityQP(jac != 0, c, expansion=e, **kwargs),
            VelocityQP(jac != 0, c, expansion=e, **kwargs),
        )
        first = rng.normal(size=(8, 8))
        first = (first @ first.T, rng.normal(size=8))
        for qp in (full, kept):  # the same history: a warm start is part of the state
            qp.solve(jac, target, weights, -wide, wide, regularization, first)
        for bound in (wide, tight, wide):
            root = rng.normal(size=(8, 8))
            extra = (root @ root.T, rng.normal(size=8))
            dynamic = (rng.normal(size=(2, 8)), np.full(2, -1e30), rng.random(2))
            a = full.solve(jac, target, weights, -bound, bound, regularization, extra, dynamic)
            b = kept.resolve(-bound, bound, extra, dynamic)
            assert a.status == b.status and a.iterations == b.iterations
            np.testing.assert_array_equal(a.nu, b.nu)
            statuses.add(a.status)
    assert statuses == {STATUS[solver], "solved (no active constraint)"}  # both paths were compared


def test_resolve_before_any_solve_is_refused():
    jac, _, _, c = make_problem()
    qp = VelocityQP(jac != 0, c)
    try:
        qp.resolve(np.full(6, -1.0), np.full(6, 1.0))
    except RuntimeError as error:
        assert "before any solve" in str(error)
    else:
        raise AssertionError("resolve without a solve must raise")


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_row_whose_bounds_cross_is_not_solved(solver):
    """No ``nu`` meets a row with its lower bound above its upper one (or a NaN bound): the QP says so (the
    step then holds) and the next solve with sound bounds is the plain one. Both solvers reject such data
    and, before, answered the previous problem: OSQP reported "solved" with the last step's ``nu`` (the
    velocity bounds of a joint at its limit), DAQP's fallback a zero ``nu``."""
    qp = VelocityQP(np.ones((3, 3), dtype=bool), np.eye(3), QPSettings(solver=solver))
    jacobian, target, weights = np.eye(3), np.array([5.0, -5.0, 0.3]), np.ones(3)
    lower, upper = -np.ones(3), np.ones(3)
    first = qp.solve(jacobian, target, weights, lower, upper)
    assert first.solved
    for bad in (np.array([2.0, -1.0, -1.0]), np.array([np.nan, -1.0, -1.0])):
        crossed = qp.solve(jacobian, target, weights, bad, upper)
        assert not crossed.solved, crossed
        assert np.all(np.isfinite(crossed.nu))
    again = qp.solve(jacobian, target, weights, lower, upper)
    assert again.solved and np.allclose(again.nu, first.nu, atol=1e-4), (again.nu, first.nu)


def test_unbounded_is_osqps_infinity():
    """``UNBOUNDED`` is written as a number (OSQP is imported only when a QP needs it): OSQP's own."""
    import osqp

    from dynik_ros.core.velocity_qp import UNBOUNDED

    assert UNBOUNDED == float(osqp.constant("OSQP_INFTY"))


def test_osqp_is_imported_only_when_a_qp_needs_it():
    """``dynik-retarget``'s imports and DAQP's solves leave OSQP and scipy.sparse unimported (~0.3 s of a
    process's start); an OSQP solve imports them."""
    import subprocess
    import sys

    script = """
import sys
import numpy as np
import dynik_ros.cli.retarget
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP
def loaded():
    return sorted(m for m in ("osqp", "scipy.sparse") if m in sys.modules)
print(loaded())
jac = np.vstack((np.eye(3), np.ones((1, 3))))
c = np.eye(3)
for solver in ("daqp", "osqp"):
    qp = VelocityQP(jac != 0, c, QPSettings(solver=solver))
    solution = qp.solve(jac, np.ones(4), np.ones(4), -np.full(3, 0.1), np.full(3, 0.1))
    print(solver, solution.status, loaded())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [
        "[]",
        "daqp solved (DAQP) []",
        "osqp solved ['osqp', 'scipy.sparse']",
    ], out


def test_a_restarted_osqp_solves_as_a_new_one_bit_for_bit():
    """After ``restart`` (``DynamicalIK.reset``) the OSQP of a QP (made again when next needed) answers the
    same sequence of QPs as a new ``VelocityQP``, bit for bit; ``reset_warm_start`` before any OSQP solve
    changes nothing."""
    jac, target, weights, c = make_problem(5)
    rng = np.random.default_rng(6)
    bounds = [0.05 + 0.1 * rng.random(6) for _ in range(6)]

    def run(qp):
        return [qp.solve(jac, target + 0.1 * k, weights, -b, b).nu for k, b in enumerate(bounds)]

    used = VelocityQP(jac != 0, c, QPSettings(solver="osqp"))
    run(used)
    used.restart()
    fresh = VelocityQP(jac != 0, c, QPSettings(solver="osqp"))
    fresh.reset_warm_start()
    for a, b in zip(run(used), run(fresh), strict=True):
        np.testing.assert_array_equal(a, b)
