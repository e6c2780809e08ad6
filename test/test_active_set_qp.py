"""The QP of eq. (10) on DAQP (``QPSettings.solver = "daqp"``, core/active_set_qp.py): its solutions meet
the KKT conditions of the QP as posed (two-sided, banded, equality, one-sided and unbounded rows), agree
with OSQP at a tight tolerance on the IK's own problems of a real capture, and where DAQP finds no optimum
the step gets what OSQP alone gives."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import osqp
import pytest
import scipy.sparse as sp

from dynik_ros.core.velocity_qp import SOLVERS, UNBOUNDED, QPSettings, VelocityQP

ACTIVE = 1e-7  # a row within this of a bound counts as active for the KKT check


def feasible_problem(seed: int, dynamic_rows: int):
    """8 columns (2 "base" columns in no joint row), 6 joint rows, ``dynamic_rows`` dynamic rows, posed around
    a point ``x0`` that meets them all (feasible by construction) and a task far from it (many rows active):
    ``(jac, target, weights, static, (lower, upper), (a, low, high), r)``, ``r = a x0``."""
    rng = np.random.default_rng(seed)
    n = 8
    jac = rng.normal(size=(12, n))
    target = rng.normal(size=12) * 20.0
    weights = rng.uniform(0.5, 2.0, 12)
    static = np.hstack((np.zeros((6, 2)), np.eye(6)))
    x0 = rng.normal(size=n) * 0.3
    lower, upper = static @ x0 - rng.uniform(0.05, 0.5, 6), static @ x0 + rng.uniform(0.05, 0.5, 6)
    a = rng.normal(size=(dynamic_rows, n))
    r = a @ x0
    low = r - rng.uniform(0.05, 0.5, dynamic_rows)
    high = r + rng.uniform(0.05, 0.5, dynamic_rows)
    return jac, target, weights, static, (lower, upper), (a, low, high), r


def _random_problem(seed: int):
    """:func:`feasible_problem` with 8 dynamic rows of every kind."""
    jac, target, weights, static, (lower, upper), (a, low, high), r = feasible_problem(seed, 8)
    low[0], high[0] = r[0] - 1e-3, r[0] + 1e-3  # a band (the stance rows' y* +- tol)
    low[1] = high[1] = r[1]  # an equality
    low[2], high[2] = -UNBOUNDED, UNBOUNDED  # unbounded both sides (a switched-off row), OSQP's infinity
    low[3], high[3] = -np.inf, np.inf  # and numpy's
    low[4] = -UNBOUNDED  # one-sided (the floor rows: a corner's height above the ground)
    high[5] = np.inf
    return jac, target, weights, static, (lower, upper), (a, low, high)


def _kkt(p, q, c, lower, upper, x):
    """Largest stationarity residual and the multipliers of the active rows with their wrong-sign part:
    ``P x + q + C_A^T y = 0``, ``y >= 0`` on rows at their upper bound, ``y <= 0`` at their lower."""
    rows = c @ x
    at_upper = np.isfinite(upper) & (np.abs(upper) < UNBOUNDED) & (rows >= upper - ACTIVE)
    at_lower = np.isfinite(lower) & (np.abs(lower) < UNBOUNDED) & (rows <= lower + ACTIVE)
    equality = at_upper & at_lower
    active = at_upper | at_lower
    grad = p @ x + q
    y, *_ = np.linalg.lstsq(c[active].T, -grad, rcond=None)
    residual = np.abs(grad + c[active].T @ y).max() / max(1.0, np.abs(q).max())
    wrong = np.where(equality[active], 0.0, np.where(at_upper[active], np.minimum(y, 0), np.maximum(y, 0)))
    return residual, np.abs(wrong).max(initial=0.0), int(active.sum())


@pytest.mark.parametrize("seed", range(12))
def test_daqp_solutions_meet_the_kkt_conditions_of_the_qp_as_posed(seed):
    jac, target, weights, static, (lower, upper), dynamic = _random_problem(seed)
    settings = QPSettings(solver="daqp", inactive_shortcut=False)
    qp = VelocityQP(jac != 0, static, settings, dynamic_rows=len(dynamic[1]))
    solution = qp.solve(jac, target, weights, lower, upper, dynamic=dynamic)
    assert solution.status == "solved (DAQP)" and solution.solved
    x = solution.nu
    p = jac.T @ (jac * (weights**2)[:, None]) + settings.damping * np.eye(len(x))
    q = -(jac.T @ (weights**2 * target))
    c = np.vstack((static, dynamic[0]))
    low, high = np.concatenate((lower, dynamic[1])), np.concatenate((upper, dynamic[2]))
    rows = c @ x
    miss = max(0.0, (low - rows).max(), (rows - high).max())
    assert miss <= 1e-6  # primal feasibility, DAQP's primal tolerance
    assert solution.rows_met_within == pytest.approx(miss, abs=1e-15)  # what the solution says of itself
    residual, wrong_sign, active = _kkt(p, q, c, low, high, x)
    assert active >= 2  # the check has teeth: rows are active (the equality at least)
    assert residual <= 1e-8, residual  # stationarity
    assert wrong_sign <= 1e-8, wrong_sign  # dual feasibility / complementarity


def _osqp_tight(p, q, c, lower, upper):
    """The QP solved by a fresh OSQP at 1e-9 with polishing: the reference."""
    solver = osqp.OSQP()
    solver.setup(
        sp.csc_matrix(np.triu(p)), q, sp.csc_matrix(c), np.maximum(lower, -UNBOUNDED),
        np.minimum(upper, UNBOUNDED), verbose=False, eps_abs=1e-9, eps_rel=1e-9, max_iter=200000,
        polishing=True,
    )  # fmt: skip
    result = solver.solve(raise_error=False)
    assert result.info.status == "solved", result.info.status
    return result.x


def _excerpt_on_g1(solver: str):
    """The committed CMU excerpt on G1 with ``QPSettings(solver=solver)``: the retargeter, its IK and the
    take's step inputs ``(times, measurements, contacts)``."""
    from dynik_ros.core.dynamical_ik import DynamicalIKConfig
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.retargeter import ROBOT_INTEGRATION, Retargeter

    rt = Retargeter.from_config("g1")
    rt.reset()
    motion = read_motion_file(Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh")
    times, measurements, contacts, _ = rt.step_measurements(motion)
    ik = rt.make_ik(DynamicalIKConfig(integration=ROBOT_INTEGRATION, qp=QPSettings(solver=solver)))
    return rt, ik, (times, measurements, contacts)


def test_daqp_and_osqp_agree_on_the_ik_steps_of_a_real_capture(monkeypatch):
    """The main QP's and priority 1's problems (``mu`` = 1e-8: DAQP's conditioning) of the committed CMU
    excerpt on G1, each recorded as DAQP solved it: the rows met to 1e-6, the cost of a tight OSQP's
    solution (1e-9, polished) to 1e-8 relative (measured: DAQP never above it by more than 4e-10, OSQP above
    DAQP's by up to 1.3e-8); the main QP's solution (strictly convex, damping 1e-4: measured 6e-6 from
    OSQP's) to 1e-5 and its KKT conditions. Priority 1's ``nu_1`` is not unique (``mu`` = 1e-8): its cost."""

    recorded = []
    original = VelocityQP._active_set

    def record(self, hessian, gradient, c, lower, upper, *same_ldp):
        solution = original(self, hessian, gradient, c, lower, upper, *same_ldp)
        if solution is not None and len(recorded) < 400:
            problem = (hessian.copy(), gradient.copy(), c.copy(), lower.copy(), upper.copy())
            recorded.append((self.settings.damping, problem, self._last_exact.copy()))
        return solution

    monkeypatch.setattr(VelocityQP, "_active_set", record)
    rt, ik, (times, measurements, contacts) = _excerpt_on_g1("daqp")
    rt.run(times[:60], measurements[:60], ik=ik, settle=0.0, contacts=contacts[:60])
    dampings = {damping for damping, _, _ in recorded}
    assert dampings == {1e-4, 1e-8}, dampings  # the main QP and priority 1 both went through DAQP
    checked = 0
    for damping, (p, q, c, lower, upper), x in recorded[::5]:
        reference = _osqp_tight(p, q, c, lower, upper)

        def cost(z, p=p, q=q):
            return 0.5 * z @ p @ z + q @ z

        scale = max(1.0, abs(cost(reference)))
        assert cost(x) <= cost(reference) + 1e-8 * scale, (damping, cost(x), cost(reference))
        assert cost(reference) <= cost(x) + 1e-7 * scale, (damping, cost(x), cost(reference))
        rows = c @ x
        assert (rows >= lower - 1e-6).all() and (rows <= upper + 1e-6).all()
        if damping == 1e-4:
            np.testing.assert_allclose(x, reference, atol=1e-5)
            residual, wrong_sign, _ = _kkt(p, q, c, lower, upper, x)
            assert residual <= 1e-10 and wrong_sign <= 1e-8, (residual, wrong_sign)
        checked += 1
    assert checked >= 20


def test_daqp_without_an_optimum_gives_what_osqp_gives():
    """Infeasible dynamic rows (a column above 1 and below -1): DAQP reports it (exitflag -1) and the step
    gets OSQP's result, the same to the bit as with ``solver="osqp"``; after a feasible solve too (DAQP's
    model then still holds the previous problem: its answer must not be taken). Crossed bounds, which DAQP
    refuses at its update, are no solution."""
    jac, target, weights, static, (lower, upper), _ = _random_problem(0)
    a = np.zeros((2, 8))
    a[:, 2] = 1.0
    infeasible = (a, np.array([1.0, -UNBOUNDED]), np.array([UNBOUNDED, -1.0]))
    results = {}
    for solver in ("daqp", "osqp"):
        qp = VelocityQP(jac != 0, static, QPSettings(solver=solver), dynamic_rows=2)
        results[solver] = qp.solve(jac, target, weights, lower, upper, dynamic=infeasible)
        if solver == "daqp":
            assert qp._dense.exitflag == -1  # DAQP's own verdict: infeasible
    daqp_result, osqp_result = results["daqp"], results["osqp"]
    assert daqp_result.status == osqp_result.status == "primal infeasible"
    assert not daqp_result.solved and daqp_result.iterations == osqp_result.iterations
    np.testing.assert_array_equal(daqp_result.nu, osqp_result.nu)

    qp = VelocityQP(jac != 0, static, QPSettings(solver="daqp"), dynamic_rows=2)
    free = (a, np.full(2, -UNBOUNDED), np.full(2, UNBOUNDED))
    assert qp.solve(jac, target, weights, lower, upper, dynamic=free).status == "solved (DAQP)"
    after = qp.solve(jac, target, weights, lower, upper, dynamic=infeasible)
    assert not after.solved and after.status == "primal infeasible"
    assert qp.solve(jac, target, weights, lower, upper, dynamic=free).status == "solved (DAQP)"
    crossed = (a, np.array([1.0, -UNBOUNDED]), np.array([0.5, UNBOUNDED]))  # 1 <= x_2 <= 0.5
    refused = qp.solve(jac, target, weights, lower, upper, dynamic=crossed)
    assert not refused.solved and refused.status == "infeasible (a row's bounds cross)", refused
    # VelocityQP refuses crossed bounds before any solver; ActiveSetQP on its own refuses them too (DAQP
    # rejects them at its update and would answer the previous problem)
    rows = np.vstack((static, a))
    hessian = jac.T @ jac + np.eye(8)
    bounds = np.concatenate((lower, crossed[1])), np.concatenate((upper, crossed[2]))
    assert qp._dense.solve(hessian, -jac.T @ target, rows, *bounds) is None
    assert qp._dense.exitflag < 0


def test_non_finite_data_is_not_a_daqp_solution():
    """A NaN in the task: DAQP's answer is not finite and is not taken; the QP's answer is never NaN."""
    jac, target, weights, static, (lower, upper), dynamic = _random_problem(1)
    qp = VelocityQP(jac != 0, static, QPSettings(solver="daqp"), dynamic_rows=len(dynamic[1]))
    target = target.copy()
    target[0] = np.nan
    solution = qp.solve(jac, target, weights, lower, upper, dynamic=dynamic)
    assert solution.status != "solved (DAQP)"
    assert not solution.solved or np.all(np.isfinite(solution.nu))
    assert np.all(np.isfinite(solution.nu))


def test_an_unknown_solver_is_refused():
    with pytest.raises(ValueError, match="solver"):
        QPSettings(solver="qpoases")


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_whole_retarget_with_each_solver_meets_the_feet_targets_and_the_limits(solver, monkeypatch):
    """The committed CMU excerpt on G1 with the map's defaults, by each solver (``"osqp"``: the paper's one
    OSQP QP per step, one setting away): issue 9's feet targets (tilt <= 3 deg, slide <= 5 mm, sole corners
    at most 2 mm deep) and "on the ground" (a held sole's lowest corner <= 2 mm up while flat), every joint
    inside its position and velocity limits, measured by forward kinematics of the written trajectory; and
    the steps' QPs went to the solver asked for (DAQP never with ``"osqp"``; OSQP at most as DAQP's
    fallback with ``"daqp"``)."""
    from dynik_ros.retarget.foot_figures import foot_figures

    statuses = Counter()
    original = VelocityQP._solve_cost

    def count(self, *args):
        solution = original(self, *args)
        statuses[solution.status] += 1
        return solution

    monkeypatch.setattr(VelocityQP, "_solve_cost", count)
    rt, ik, (times, measurements, contacts) = _excerpt_on_g1(solver)
    result = rt.run(times, measurements, ik=ik, settle=1.0, contacts=contacts)
    exact = statuses["solved (DAQP)"] + statuses["solved (no active constraint)"]
    if solver == "daqp":
        assert statuses["solved (DAQP)"] > 300 and exact >= 0.99 * statuses.total(), statuses
    else:
        assert statuses["solved (DAQP)"] == 0 and statuses["solved"] > 300, statuses
    figures = foot_figures(
        rt.robot, result.q, result.times, result.contacts, rt.config.feet, rt.config.contact.blend_time,
        half_width=rt.config.balance.sole_half_width,
    )  # fmt: skip
    assert all(f.phases >= 1 for f in figures)  # both feet were held
    for f in figures:
        assert f.tilt_flat_max_deg <= 3.0 and f.slide_max_mm <= 5.0, f.line()
        assert f.penetration_max_mm <= 2.0 and f.above_flat_max_mm <= 2.0, f.line()
    robot = rt.robot
    joints = result.q[:, robot.nq - robot.n_joints :]
    assert np.all(np.isfinite(result.q))
    assert np.all(joints >= robot.lower - 1e-9) and np.all(joints <= robot.upper + 1e-9)
    speeds = np.abs(np.diff(joints, axis=0)) / np.diff(result.times)[:, None]
    assert np.all(speeds <= robot.velocity_limit * (1 + 1e-6) + 1e-9)


def test_the_command_line_selects_the_solver():
    from dynik_ros.cli import retarget as cli

    excerpt = str(Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh")
    assert cli.ik_config_of(cli.build_parser().parse_args([excerpt])).qp.solver == "daqp"
    chosen = cli.ik_config_of(cli.build_parser().parse_args([excerpt, "--qp-solver", "osqp"]))
    assert chosen.qp.solver == "osqp"


def test_a_problem_of_another_size_is_refused():
    """DAQP's ``update`` ignores an array of another shape and would answer the previous problem."""
    from dynik_ros.core.active_set_qp import ActiveSetQP

    qp = ActiveSetQP(3, 2)
    rows = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    x = qp.solve(np.eye(3), -np.ones(3), rows, np.full(2, -0.5), np.full(2, 0.5))
    np.testing.assert_allclose(x, [0.5, 0.5, 1.0], atol=1e-9)
    with pytest.raises(ValueError, match="2 x 3"):
        qp.solve(np.eye(3), -np.ones(3), rows[:1], np.full(1, -0.5), np.full(1, 0.5))
