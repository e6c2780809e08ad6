"""A re-solve of one step with the same ``P``, ``q`` and ``C`` reuses DAQP's last LDP (its Cholesky factor and
``[M | w]``, core/active_set_qp.py ``same_ldp``; detected in core/velocity_qp.py ``_solve_cost``): the same
floats as a fresh QP formed from scratch, and never the LDP of another ``P``, ``q`` or ``C`` (another task,
an extra cost, other dynamic rows, rows written by a solve that did not reach DAQP)."""

from __future__ import annotations

import numpy as np
import pytest
from test_active_set_qp import feasible_problem

from dynik_ros.core import active_set_qp
from dynik_ros.core.active_set_qp import ActiveSetQP
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP


def _problem(seed: int):
    """:func:`feasible_problem` with 6 dynamic rows, all two-sided bands (rows active: DAQP, not the Cholesky
    shortcut)."""
    return feasible_problem(seed, 6)[:-1]


def _qp(static, jac) -> VelocityQP:
    return VelocityQP(jac != 0, static, QPSettings(solver="daqp"), dynamic_rows=6)


def _wider(bounds, by):
    lower, upper = bounds
    return lower - by, upper + by


def _fresh(static, jac, target, weights, bounds, dynamic, extra=None):
    """The QP as a new VelocityQP solves it (its LDP formed from scratch)."""
    return _qp(static, jac).solve(jac, target, weights, *bounds, extra=extra, dynamic=dynamic)


def _same(a, b):
    assert a.status == b.status == "solved (DAQP)", (a.status, b.status)
    np.testing.assert_array_equal(a.nu, b.nu)
    assert (a.iterations, a.rows_met_within) == (b.iterations, b.rows_met_within)


@pytest.fixture
def factorisations(monkeypatch):
    """How many Cholesky factorisations ActiveSetQP made (each formed LDP makes one)."""
    count = [0]
    real = active_set_qp.dpotrf

    def counted(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(active_set_qp, "dpotrf", counted)
    return count


@pytest.mark.parametrize("seed", range(4))
def test_a_resolve_with_other_bounds_reuses_the_ldp_bit_for_bit(seed, factorisations):
    jac, target, weights, static, bounds, (a, low, high) = _problem(seed)
    qp = _qp(static, jac)
    first = qp.solve(jac, target, weights, *bounds, dynamic=(a, low, high))
    assert first.status == "solved (DAQP)"
    assert factorisations[0] == 1
    other = _wider(bounds, 0.01), (a.copy(), low - 0.02, high + 0.01)  # the same rows (another array)
    again = qp.resolve(*other[0], dynamic=other[1])
    assert factorisations[0] == 1  # reused
    _same(again, _fresh(static, jac, target, weights, other[0], other[1]))


@pytest.mark.parametrize("seed", range(4))
def test_two_tasks_in_one_step_never_share_an_ldp(seed, factorisations):
    jac, target, weights, static, bounds, dynamic = _problem(seed)
    jac_b = jac + 0.1 * np.random.default_rng(seed + 100).normal(size=jac.shape)
    other = _wider(bounds, 0.01)
    expected = [_fresh(static, jac_b, target, weights, b, dynamic) for b in (bounds, other)]
    factorisations[0] = 0
    qp = _qp(static, jac)
    qp.solve(jac, target, weights, *bounds, dynamic=dynamic)
    second = qp.solve(jac_b, target, weights, *bounds, dynamic=dynamic)  # another P: formed again
    assert factorisations[0] == 2
    again = qp.resolve(*other, dynamic=dynamic)  # the second task's LDP
    assert factorisations[0] == 2
    _same(second, expected[0])
    _same(again, expected[1])


@pytest.mark.parametrize("seed", range(4))
def test_other_dynamic_rows_form_a_new_ldp(seed, factorisations):
    jac, target, weights, static, bounds, (a, low, high) = _problem(seed)
    qp = _qp(static, jac)
    qp.solve(jac, target, weights, *bounds, dynamic=(a, low, high))
    moved = a.copy()
    moved[3, 2] += 1e-9
    again = qp.resolve(*bounds, dynamic=(moved, low, high))
    assert factorisations[0] == 2
    _same(again, _fresh(static, jac, target, weights, bounds, (moved, low, high)))


@pytest.mark.parametrize("seed", range(4))
def test_rows_written_by_a_solve_that_did_not_reach_daqp_are_not_taken_for_the_ldps(seed, factorisations):
    """Rows ``B`` written by a re-solve refused before DAQP (its bounds cross), then ``B`` again: the LDP of
    the first rows must not serve although the rows written last equal ``B``."""
    jac, target, weights, static, bounds, (a, low, high) = _problem(seed)
    qp = _qp(static, jac)
    qp.solve(jac, target, weights, *bounds, dynamic=(a, low, high))
    moved = a.copy()
    moved[0] *= 1.5
    refused = qp.resolve(*bounds, dynamic=(moved, high, low))
    assert refused.status == "infeasible (a row's bounds cross)"
    again = qp.resolve(*bounds, dynamic=(moved, low, high))
    assert factorisations[0] == 2
    _same(again, _fresh(static, jac, target, weights, bounds, (moved, low, high)))


@pytest.mark.parametrize("seed", range(4))
def test_an_extra_cost_forms_its_own_ldp_and_leaves_none_to_reuse(seed, factorisations):
    jac, target, weights, static, bounds, dynamic = _problem(seed)
    rng = np.random.default_rng(seed + 7)
    h = rng.normal(size=(8, 8))
    extra = h @ h.T, rng.normal(size=8)
    expected = [_fresh(static, jac, target, weights, bounds, dynamic, e) for e in (extra, None)]
    factorisations[0] = 0
    qp = _qp(static, jac)
    qp.solve(jac, target, weights, *bounds, dynamic=dynamic)
    with_extra = qp.resolve(*bounds, extra, dynamic)
    assert factorisations[0] == 2
    again = qp.resolve(*bounds, None, dynamic)  # the task's P again: not P + H's LDP
    assert factorisations[0] == 3
    _same(with_extra, expected[0])
    _same(again, expected[1])


def test_without_dynamic_rows_nothing_is_reused(factorisations):
    """``C`` is then the public ``constraint_matrix``, which may be written in place between solves."""
    jac, target, weights, static, bounds, _ = _problem(0)
    qp = VelocityQP(jac != 0, static, QPSettings(solver="daqp"))
    first = qp.solve(jac, target, weights, *bounds)
    assert first.status == "solved (DAQP)"
    qp.constraint_matrix[0, 2] = 0.5
    again = qp.resolve(*bounds)
    assert factorisations[0] == 2
    fresh = VelocityQP(jac != 0, qp.constraint_matrix.copy(), QPSettings(solver="daqp"))
    _same(again, fresh.solve(jac, target, weights, *bounds))


def test_same_ldp_after_a_p_without_a_factor_forms_one():
    """A refused ``P`` (not positive definite) leaves no LDP (not the one before it): ``same_ldp`` then forms
    one."""
    rows = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    bounds = np.full(2, -0.5), np.full(2, 0.5)
    qp = ActiveSetQP(3, 2)
    assert qp.solve(2.0 * np.eye(3), np.ones(3), rows, *bounds) is not None  # an LDP formed
    assert qp.solve(-np.eye(3), -np.ones(3), rows, *bounds) is None
    assert qp.exitflag == active_set_qp.NOT_POSITIVE_DEFINITE
    x = qp.solve(np.eye(3), -np.ones(3), rows, *bounds, same_ldp=True)
    np.testing.assert_array_equal(x, ActiveSetQP(3, 2).solve(np.eye(3), -np.ones(3), rows, *bounds))
