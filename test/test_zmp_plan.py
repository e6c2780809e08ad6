"""The dynamic balance plan (``retarget/zmp_plan.py``, Kajita et al. 2003 cart-table) and the whole-body
ZMP of a written trajectory (``retarget/zmp_figures.py``), against analytic and inverse-dynamics ground
truth."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.com_objective import convex_hull, halfplanes
from dynik_ros.retarget.zmp_plan import (
    GRAVITY,
    ZmpPlanError,
    ZmpPlanSpec,
    relaxed_plan,
    solve_zmp_plan,
)

Z = 0.6


def sole(cx: float, cy: float, hx: float = 0.1, hy: float = 0.025) -> np.ndarray:
    return np.array([[cx - hx, cy - hy], [cx + hx, cy - hy], [cx + hx, cy + hy], [cx - hx, cy + hy]])


def min_jerk_com(times: np.ndarray, duration: float, amplitude: np.ndarray):
    """``(c, c_ddot)`` of a minimum-jerk transfer (at rest at both ends), analytic."""
    s = times / duration
    c = amplitude * (10 * s**3 - 15 * s**4 + 6 * s**5)[:, None]
    c_ddot = amplitude * ((60 * s - 180 * s**2 + 120 * s**3) / duration**2)[:, None]
    return c, c_ddot


def alternating_walk(times: np.ndarray, steps: int = 4, period: float = 0.6, double: float = 0.12) -> list:
    """Support polygons of a walk: 0.5 s on both feet, ``steps`` steps of 0.15 m (a double support of
    ``double`` seconds: the hull of both soles, then a single support), both feet side by side after."""
    polygons = []
    for t in times:
        step = int((t - 0.5) // period) if t >= 0.5 else -1
        phase = t - 0.5 - step * period
        stance = [sole(0.15 * max(step, 0), 0.1 * (-1) ** max(step, 0))]
        if step < 0 or step >= steps or phase < double:  # both feet: the last stance foot and this one
            stance.append(sole(0.15 * max(step - 1, 0), -0.1 * (-1) ** max(step, 0)))
        polygons.append(convex_hull(np.vstack(stance)))
    return polygons


def test_cart_table_zmp_of_an_analytic_transfer_is_reproduced():
    """With the polygons inactive and the references the analytic CoM and its ZMP ``c - z/g c_ddot``, the
    plan returns that CoM (to the finite differences' O(h^2)) and its ZMP."""
    times = np.arange(0.0, 1.0 + 1e-9, 0.01)
    c, c_ddot = min_jerk_com(times, 1.0, np.array([0.1, 0.05]))
    zmp = c - Z / GRAVITY * c_ddot
    spec = ZmpPlanSpec(jerk_weight=1e-12, tracking_weight=1e-6)
    plan = solve_zmp_plan(times, [sole(0, 0, 1, 1)] * len(times), Z, c, zmp, spec)
    assert np.abs(plan.com - c).max() < 2e-4
    assert np.abs(plan.zmp - zmp)[3:-3].max() < 1e-3  # the first and last 3 samples are held at rest
    assert np.abs(plan.zmp - zmp).max() < 5e-3
    assert np.abs(zmp - c).max() > 0.03  # the analytic ZMP runs 3.5 cm ahead of the CoM, then behind


def test_varying_height_uses_z_over_g_plus_z_ddot():
    times = np.arange(0.0, 2.0 + 1e-9, 0.01)
    c, c_ddot = min_jerk_com(times, 2.0, np.array([0.1, 0.0]))
    z = Z + 0.08 * np.sin(2 * np.pi * times)  # height of the cart, with its analytic z_ddot
    z_ddot = -0.08 * (2 * np.pi) ** 2 * np.sin(2 * np.pi * times)
    zmp = c - (z / (GRAVITY + z_ddot))[:, None] * c_ddot
    spec = ZmpPlanSpec(jerk_weight=1e-12, tracking_weight=1e-6)
    plan = solve_zmp_plan(times, [sole(0, 0, 1, 1)] * len(times), z, c, zmp, spec)
    assert np.abs(plan.zmp - zmp)[3:-3].max() < 1e-3
    constant = c - Z / GRAVITY * c_ddot  # the constant-height formula would be this far off
    assert np.abs(constant - zmp).max() > 3e-3


def test_single_support_held_comes_to_rest_at_the_known_point():
    """One sole for the whole take, the ZMP reference its centre, the CoM reference ``r`` off it: the CoM at
    rest, ``c = p = (w_t r + w_p centre) / (w_t + w_p)``; a reference far out: ``c`` on the shrunk edge."""
    times = np.arange(0.0, 2.0 + 1e-9, 0.01)
    spec = ZmpPlanSpec()
    centre = np.array([0.2, -0.1])
    polygons = [sole(*centre)] * len(times)
    for offset, expected in ((0.3, 0.3 * spec.tracking_weight / (spec.tracking_weight + spec.zmp_weight)),
                             (20.0, 0.1 - spec.margin)):  # fmt: skip
        reference = np.tile(centre + [offset, 0.0], (len(times), 1))
        plan = solve_zmp_plan(times, polygons, Z, reference, np.tile(centre, (len(times), 1)), spec)
        np.testing.assert_allclose(plan.com, np.tile(centre + [expected, 0.0], (len(times), 1)), atol=1e-5)
        np.testing.assert_allclose(plan.zmp, plan.com, atol=2e-4)  # at rest: p = c (OSQP eps 1e-5)


def test_walk_zmp_inside_every_shrunk_polygon_while_the_com_leaves_them():
    times = np.arange(0.0, 4.0 + 1e-9, 0.01)
    polygons = alternating_walk(times)
    spec = ZmpPlanSpec(margin=0.015)
    plan = solve_zmp_plan(times, polygons, Z, np.zeros((len(times), 2)), None, spec)
    h = 0.01  # the ZMP of the returned CoM, recomputed here
    c = plan.com
    p = c.copy()
    p[1:-1] = c[1:-1] - Z / GRAVITY * (c[2:] - 2 * c[1:-1] + c[:-2]) / h**2
    com_inside = []
    for k, polygon in enumerate(polygons):
        a, b = halfplanes(polygon, spec.margin)
        assert np.all(a @ p[k] <= b + 1e-6), k
        com_inside.append(np.all(a @ c[k] <= b))
    assert not all(com_inside)  # dynamic: the CoM is not kept over the stance sole
    assert np.nanmin(plan.distance) >= spec.margin - 1e-6
    relaxed = relaxed_plan(times, polygons, Z, np.zeros((len(times), 2)), None, spec)
    assert relaxed.margin == spec.margin and np.array_equal(relaxed.com, plan.com)  # feasible: the same plan
    # the same on jittered (non-uniform) sample times: posed on a uniform grid, returned on the samples
    jittered = times + np.where(np.arange(len(times)) % 2, 0.002, 0.0)
    again = solve_zmp_plan(jittered, polygons, Z, np.zeros((len(times), 2)), None, spec)
    assert np.abs(again.com - plan.com).max() < 5e-3 and np.nanmin(again.distance) > 0.0


def test_infeasible_plans_are_reported():
    times = np.arange(0.0, 2.0 + 1e-9, 0.01)
    with pytest.raises(ZmpPlanError, match="narrower than twice the margin"):
        solve_zmp_plan(times, [sole(0, 0, 0.1, 0.01)] * len(times), Z, np.zeros((len(times), 2)))
    # from a sole to one 1 m ahead at 0.3 s, no double support: from rest with the ZMP on the first sole, the
    # cart-table CoM covers at most 0.17 m cosh(0.3 sqrt(g / z)) = 0.31 m by then, not the 0.5 m it needs
    short = times[:61]
    polygons = [sole(0, 0) if t < 0.3 else sole(1.0, 0) for t in short]
    with pytest.raises(ZmpPlanError, match="infeasible"):
        solve_zmp_plan(short, polygons, Z, np.zeros((len(short), 2)))
    # relaxed: the largest margin (here negative: the soles enlarged) with a solution, to 1 mm
    relaxed = relaxed_plan(short, polygons, Z, np.zeros((len(short), 2)))
    assert -0.2 < relaxed.margin < -0.05 and np.nanmin(relaxed.distance) >= relaxed.margin - 1e-4
    tighter = ZmpPlanSpec(margin=relaxed.margin + 2e-3)
    with pytest.raises(ZmpPlanError, match="infeasible"):
        solve_zmp_plan(short, polygons, Z, np.zeros((len(short), 2)), None, tighter)
    with pytest.raises(ZmpPlanError, match="no sample has a foot"):
        solve_zmp_plan(times, [None] * len(times), Z, np.zeros((len(times), 2)))
    with pytest.raises(ZmpPlanError, match="positive"):
        solve_zmp_plan(times, [sole(0, 0)] * len(times), -1.0, np.zeros((len(times), 2)))


def test_relaxed_margin_is_the_bisections_from_one_lp_and_the_plan_osqps(monkeypatch):
    """The relaxed search against a brute-force bisection (to 1 mm) over :func:`solve_zmp_plan` on a small
    take (the step of the test above, 0.3 m sideways as well: a rotated edge couples the axes): the same
    margin within the bisection's 1 mm, the plan's cart-table ZMP (recomputed here from its CoM) inside every
    polygon shrunk by that margin, and OSQP's plan at that margin the same CoM. It takes one OSQP solve (the
    try at the map's margin), one LP and one QP (PIQP): the bisection made 11 OSQP solves, each infeasible
    or near-boundary try running to OSQP's 1e5 iterations on real takes (18 s on the CMU excerpt)."""
    import osqp

    times = np.arange(0.0, 0.6 + 1e-9, 0.01)
    polygons = [sole(0, 0) if t < 0.3 else sole(0.3, 0.35) for t in times]
    reference = np.zeros((len(times), 2))

    def solves(margin: float) -> bool:
        try:
            solve_zmp_plan(times, polygons, Z, reference, None, ZmpPlanSpec(margin=margin))
        except ZmpPlanError:
            return False
        return True

    low, high = -0.285, 0.015
    assert solves(low) and not solves(high)
    while high - low > 1e-3:
        middle = 0.5 * (low + high)
        low, high = (middle, high) if solves(middle) else (low, middle)
    calls = []
    solve = osqp.OSQP.solve
    monkeypatch.setattr(osqp.OSQP, "solve", lambda self, *a, **k: calls.append(1) or solve(self, *a, **k))
    relaxed = relaxed_plan(times, polygons, Z, reference)
    monkeypatch.undo()
    assert len(calls) == 1  # the try at the map's margin (the bisection: 11)
    assert abs(relaxed.margin - low) <= 1e-3 and -0.06 < relaxed.margin < -0.03  # -46.1 mm (bisection -45.6)
    c = relaxed.com
    p = c - Z / GRAVITY * second_differences(c, 0.01)
    for k, polygon in enumerate(polygons):
        a, b = halfplanes(polygon, relaxed.margin)
        assert np.all(a @ p[k] <= b + 1e-6), k
    same = solve_zmp_plan(times, polygons, Z, reference, None, ZmpPlanSpec(margin=relaxed.margin))
    assert np.abs(same.com - relaxed.com).max() < 1e-4  # 4e-6 m


def test_the_relaxed_plan_falls_back_from_piqp_to_highs_and_names_every_failure(monkeypatch):
    """:func:`exact_plan_at` tries its QP solvers in turn: PIQP stopped at its iteration limit (as it did on
    the G1 excerpt at x1) leaves the plan to HiGHS, which gives the same plan, its cart-table ZMP (recomputed
    here) inside every shrunk polygon; with every solver failing, the error names each one's status."""
    import casadi

    from dynik_ros.retarget import zmp_plan

    times = np.arange(0.0, 0.6 + 1e-9, 0.01)
    polygons = [sole(0, 0) if t < 0.3 else sole(0.3, 0.35) for t in times]
    reference = np.zeros((len(times), 2))
    plugins = []
    conic = casadi.conic
    monkeypatch.setattr(
        casadi, "conic", lambda name, plugin, *a: plugins.append(plugin) or conic(name, plugin, *a)
    )
    first = relaxed_plan(times, polygons, Z, reference)
    assert plugins == ["piqp"]
    plugins.clear()
    stopped = ("piqp", {"max_iter": 1}, "solved")
    monkeypatch.setattr(zmp_plan, "_EXACT", (stopped, zmp_plan._EXACT[1]))
    second = relaxed_plan(times, polygons, Z, reference)
    assert plugins == ["piqp", "highs"]
    assert second.margin == first.margin and np.abs(second.com - first.com).max() < 1e-4
    p = second.com - Z / GRAVITY * second_differences(second.com, 0.01)
    for k, polygon in enumerate(polygons):
        a, b = halfplanes(polygon, second.margin)
        assert np.all(a @ p[k] <= b + 1e-6), k
    monkeypatch.setattr(zmp_plan, "_EXACT", (stopped, stopped))
    with pytest.raises(ZmpPlanError, match=r"unsolved at the .* margin \(piqp: .*; piqp: .*\)"):
        relaxed_plan(times, polygons, Z, reference)


def second_differences(c: np.ndarray, h: float) -> np.ndarray:
    """``c_ddot`` of a plan's CoM by central differences (zero on the first and last sample)."""
    out = np.zeros_like(c)
    out[1:-1] = (c[2:] - 2 * c[1:-1] + c[:-2]) / h**2
    return out


def test_without_a_foot_down_the_com_coasts():
    """No foot in contact, no ground force: the plan's horizontal CoM acceleration is zero there (recomputed
    from the returned CoM). Such samples had no row at all before, and the cart-table's unstable mode crossed
    the gap: the infeasible step of the test above with 30 ms without a foot down between the soles was
    'solved' with the CoM carried 0.8 m in those 30 ms (2900 m/s^2); on the CMU excerpt with --heel-off 0
    the plan ran 11 m off the soles and back across a 42 ms gap."""
    times = np.arange(0.0, 0.6 + 1e-9, 0.01)
    gap = (times > 0.3 - 1e-9) & (times < 0.33 - 1e-9)
    steps = [sole(0, 0) if t < 0.3 else sole(1.0, 0) for t in times]
    polygons = [None if g else p for p, g in zip(steps, gap, strict=True)]
    reference = np.zeros((len(times), 2))
    with pytest.raises(ZmpPlanError, match="infeasible"):
        solve_zmp_plan(times, polygons, Z, reference)
    relaxed = relaxed_plan(times, polygons, Z, reference)
    assert np.abs(second_differences(relaxed.com, 0.01)[gap]).max() < 1e-6
    without_gap = relaxed_plan(times, steps, Z, reference)  # the gap is no short cut: the same relaxation
    assert relaxed.margin < -0.05 and abs(relaxed.margin - without_gap.margin) < 0.01
    # a walk whose double supports begin with 60 ms without a foot down: a plan at the margin, its cart-table
    # ZMP inside every shrunk polygon, the CoM on a straight line through each gap and within the footsteps
    times = np.arange(0.0, 4.0 + 1e-9, 0.01)
    step = np.floor((times - 0.5) / 0.6)
    flight = (times >= 0.5) & (step < 4) & (times - 0.5 - step * 0.6 < 0.06 - 1e-9)
    polygons = [None if f else p for p, f in zip(alternating_walk(times), flight, strict=True)]
    spec = ZmpPlanSpec(margin=0.015)
    plan = solve_zmp_plan(times, polygons, Z, np.zeros((len(times), 2)), None, spec)
    c_ddot = second_differences(plan.com, 0.01)
    assert flight.sum() == 24 and np.abs(c_ddot[flight]).max() < 1e-6
    p = plan.com - Z / GRAVITY * c_ddot
    for k, polygon in enumerate(polygons):
        if polygon is not None:
            a, b = halfplanes(polygon, spec.margin)
            assert np.all(a @ p[k] <= b + 1e-6), k
    assert plan.com[:, 0].min() > -0.1 and plan.com[:, 0].max() < 0.7 and np.abs(plan.com[:, 1]).max() < 0.2


# ------------------------------------------------------------------ whole-body ZMP of a trajectory
@pytest.fixture(scope="module")
def g1():
    from dynik_ros.retarget.retargeter import Retargeter

    retargeter = Retargeter.from_config("g1")
    return retargeter.robot.model, retargeter.initial_configuration()


def test_whole_body_zmp_of_a_translated_rigid_robot_is_the_cart_table_zmp(g1):
    """Joints fixed, the base translated on a sine: no angular momentum, so the ZMP is exactly
    ``c - c_z / g c_ddot`` with the analytic acceleration (finite differences O(h^2))."""
    from dynik_ros.retarget.zmp_figures import whole_body_zmp

    model, q0 = g1
    times = np.arange(0.0, 1.0 + 1e-9, 0.01)
    w, amplitude = 2 * np.pi, np.array([0.05, 0.03])
    q = np.tile(q0, (len(times), 1))
    q[:, :2] += amplitude * np.sin(w * times)[:, None]
    zmp, com = whole_body_zmp(model, times, q, ground=0.0)
    c_ddot = -amplitude * w**2 * np.sin(w * times)[:, None]
    expected = com[:, :2] - com[:, 2:3] / GRAVITY * c_ddot
    assert np.isnan(zmp[0]).all() and np.isnan(zmp[-1]).all()
    np.testing.assert_allclose(zmp[1:-1], expected[1:-1], atol=2e-4)
    assert np.abs(expected - com[:, :2]).max() > 0.05


def test_whole_body_zmp_matches_inverse_dynamics(g1):
    """A general motion (base rotating and translating, every joint moving): the ZMP from the centroidal
    momentum rate equals the one from the base wrench of pinocchio's RNEA at the same ``(q, v, a)``."""
    from dynik_ros.retarget.zmp_figures import finite_differences, whole_body_zmp

    model, q0 = g1
    times = np.arange(0.0, 0.5 + 1e-9, 0.01)
    rng = np.random.default_rng(3)
    phase, amp = rng.uniform(0, 2 * np.pi, model.nv), rng.uniform(0.05, 0.3, model.nv)
    q = np.array([pin.integrate(model, q0, amp * np.sin(3 * t + phase)) for t in times])
    zmp, _ = whole_body_zmp(model, times, q, ground=0.02)
    v, a = finite_differences(model, times, q)
    data = model.createData()
    for k in range(1, len(times) - 1):
        tau = pin.rnea(model, data, q[k], v[k], a[k])
        base = pin.XYZQUATToSE3(q[k, :7])  # tau[:6]: the wrench on the base in its frame
        wrench = base.act(pin.Force(tau[:6]))  # the ground wrench, world frame, about the origin
        f, n = wrench.linear, wrench.angular
        expected = ((0.02 * f[0] - n[1]) / f[2], (n[0] + 0.02 * f[1]) / f[2])
        np.testing.assert_allclose(zmp[k], expected, atol=1e-9)
