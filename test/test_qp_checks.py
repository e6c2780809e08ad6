"""The QP's cheap checks (core/velocity_qp.py, core/active_set_qp.py) give what the plain numpy formulas give:
``largest`` is ``np.maximum.reduce``; a non-finite back-solve of DAQP's answer or of the unconstrained step is
refused; the Cholesky shortcut is taken only if every row is within its bounds; bounds beyond DAQP's
infinity bound nothing."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.core import active_set_qp, velocity_qp
from dynik_ros.core.active_set_qp import ActiveSetQP
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP, largest


@pytest.mark.parametrize("seed", range(20))
def test_largest_is_the_maximum_reduction(seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=rng.integers(1, 40))
    values[rng.integers(0, values.size, 3)] = values.max()  # ties
    for special in (None, np.nan, np.inf, -np.inf, 0.0, -0.0):
        v = values.copy()
        if special is not None:
            v[rng.integers(0, v.size)] = special
        plain = float(np.maximum.reduce(v))
        got = largest(v)
        assert (got == plain) or (got != got and plain != plain), (v, got, plain)


def _small_problem():
    """3 columns, 2 rows: ``x = (0.5, 0.5, 1)`` with both rows at their upper bound."""
    rows = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return np.eye(3), -np.ones(3), rows, np.full(2, -0.5), np.full(2, 0.5)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [0, 2])
def test_a_non_finite_back_solve_is_refused(monkeypatch, bad, where):
    """DAQP optimal, yet ``x = R^-1 z`` not finite in one entry: no solution (DAQP's flag kept)."""
    plain = ActiveSetQP(3, 2).solve(*_small_problem())
    np.testing.assert_allclose(plain, [0.5, 0.5, 1.0], atol=1e-9)
    real = active_set_qp.dtrtrs

    def spoilt(*args, **kwargs):
        x, info = real(*args, **kwargs)
        if kwargs.get("trans"):
            x = x.copy()
            x[where] = bad
        return x, info

    monkeypatch.setattr(active_set_qp, "dtrtrs", spoilt)
    qp = ActiveSetQP(3, 2)
    assert qp.solve(*_small_problem()) is None
    assert qp.exitflag == active_set_qp.OPTIMAL


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, None])
def test_a_non_finite_unconstrained_step_is_refused(monkeypatch, bad):
    real = velocity_qp.dposv

    def spoilt(*args, **kwargs):
        factor, x, info = real(*args, **kwargs)
        if bad is not None:
            x = x.copy()
            x[-1] = bad
        return factor, x, info

    monkeypatch.setattr(velocity_qp, "dposv", spoilt)
    x = VelocityQP._unconstrained(np.eye(3) * 4.0, -np.ones(3))
    if bad is None:
        np.testing.assert_array_equal(x, [0.25, 0.25, 0.25])
    else:
        assert x is None


@pytest.mark.parametrize("miss", [0.0, 1e-3])
@pytest.mark.parametrize("side", ["lower", "upper"])
@pytest.mark.parametrize("row", [0, 2])
def test_the_shortcut_needs_every_row_within_its_bounds(miss, side, row):
    """The unconstrained step ``x = (1, 1, 1)``; one row's bound set at its value (within the shortcut's
    tolerance: shortcut taken) or ``miss`` past it (DAQP solves)."""
    settings = QPSettings(solver="daqp", damping=0.0)
    tol = settings.shortcut_tolerance
    qp = VelocityQP(np.ones((3, 3), dtype=bool), np.eye(3), settings)
    lower, upper = np.full(3, -5.0), np.full(3, 5.0)
    if side == "lower":
        lower[row] = 1.0 + tol + miss
    else:
        upper[row] = 1.0 - tol - miss
    solution = qp.solve(np.eye(3), np.ones(3), np.ones(3), lower, upper)
    if miss == 0.0:
        assert solution.status == "solved (no active constraint)", solution.status
    else:
        assert solution.status == "solved (DAQP)", solution.status
        assert abs(solution.nu[row] - (lower[row] if side == "lower" else upper[row])) < 1e-9


def test_bounds_beyond_daqps_infinity_bound_nothing():
    """``inf``, DAQP's 1e30 and anything larger: the same floats, and DAQP is given them clipped to its
    infinity (``np.maximum(lower, -1e30)``, ``np.minimum(upper, 1e30)``; NaN kept)."""
    p, _, rows, _, _ = _small_problem()
    q = np.array([2.0, -1.0, -1.0])  # unconstrained: x = (-2, 1, 1)
    answers = []
    for big in (np.inf, active_set_qp.INFINITY, 1e40):
        lower, upper = np.array([-big, -0.5]), np.array([big, 0.25])
        qp = ActiveSetQP(3, 2)
        answers.append(qp.solve(p, q, rows, lower, upper))
        np.testing.assert_array_equal(qp._lower, np.maximum(lower, -active_set_qp.INFINITY))
        np.testing.assert_array_equal(qp._upper, np.minimum(upper, active_set_qp.INFINITY))
    np.testing.assert_allclose(answers[0], [-2.0, 0.25, 1.0], atol=1e-9)
    for other in answers[1:]:
        np.testing.assert_array_equal(other, answers[0])
    qp = ActiveSetQP(3, 2)
    lower, upper = np.array([np.nan, -1e40]), np.array([1e40, np.nan])
    qp.solve(p, q, rows, lower, upper)  # (whatever DAQP makes of NaN bounds: the arrays it was given)
    np.testing.assert_array_equal(qp._lower, [np.nan, -active_set_qp.INFINITY])
    np.testing.assert_array_equal(qp._upper, [active_set_qp.INFINITY, np.nan])
