"""Dynamic balance plan: one sparse QP over a whole take for the horizontal CoM with its ZMP kept in the
support polygons (``balance.plan: zmp``; the quasi-static plan is :mod:`dynik_ros.retarget.balance`).

The second seed (Schumacher et al. 2021, sec. V-4) keeps the CoM over the support, which holds only for slow
walking. Kajita et al. 2003 ("Biped walking pattern generation by using preview control of zero-moment
point") model the robot as a cart on a table at height ``z_c``: the zero-moment point of the horizontal CoM
``c`` is

    p = c - z_c / g * c_ddot                                                   (cart-table, Kajita eq. 5)

and they choose the CoM jerk by preview control so that ``p`` follows a reference inside the footprints.
Offline the whole contact sequence is known, so instead of a preview horizon we solve once for every sample
of the take on a uniform grid of step ``h`` (``c_ddot`` by central second differences):

    min_c  sum_k h [ w_j |c_dddot_k|^2 + w_t |c_k - r_k|^2 + w_p |p_k - p_ref_k|^2 ]
    s.t.   a_i . p_k <= b_i - margin     for every edge i of the support polygon of sample k
           c_0 = c_1 = c_2,  c_{N-3} = c_{N-2} = c_{N-1}           (at rest at both ends)

with ``r`` a weak CoM reference (the quasi-static plan or the human's scaled CoM) and ``p_ref`` a ZMP
reference inside the polygons. The height may vary per sample: then ``z_c / g`` becomes
``z_k / (g + z_ddot_k)`` (the same cart-table balance of moments with the vertical acceleration given).
Samples without a polygon (no foot in contact) get no ZMP row but ``c_ddot_k = 0``: nothing on the ground,
no horizontal force, so the CoM coasts at the velocity it had (a flight's horizontal motion; posed by
:func:`coasting_basis`, not as rows). Without it the unstable mode of the cart-table
(``c - p ~ exp(t sqrt(g / z_c))``) was free in such a gap: a plan could let the CoM run off metres from the
soles with its ZMP on them and jump back within the few samples without contact (the CMU excerpt with
``--heel-off 0``: CoM 11 m off, 512 m/s across a 42 ms gap). Solved by OSQP (both axes in one problem: a
rotated foot couples them); infeasible problems (a polygon narrower than twice the margin, or jumps the CoM
cannot follow) raise :class:`ZmpPlanError` naming the cause. :func:`relaxed_plan` then finds the largest
margin with a plan as one LP (the margin a variable: ``max s`` s.t. ``a_i . p_k + s <= b_i``) and solves the
plan just below it by an interior-point or active-set QP (PIQP, HiGHS), where OSQP's ADMM ran out of
iterations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import osqp
import scipy.sparse as sp
from scipy.optimize import linprog

from dynik_ros.core.com_objective import halfplanes, support_distance

GRAVITY = 9.81
# The cost spans ~1e8 (jerk vs weak tracking). sigma and refinement: with OSQP's defaults the polished
# solution of a held single support was 2.5 mm off the analytic one (now 2e-6 m). eps 1e-5: at 1e-9 OSQP
# ran out of iterations on the real CMU take at x1 and x4; the polygon rows are checked after the solve.
_OSQP = {
    "eps_abs": 1e-5,
    "eps_rel": 1e-5,
    "max_iter": 100000,
    "polishing": True,
    "sigma": 1e-9,
    "polish_refine_iter": 100,
}
BACK_OFF = 5e-4  # m: the relaxed plan's margin below the largest (:func:`relaxed_plan`; was a 1 mm bisection)
# (CasADi conic plugin, its options, its status when solved) for :func:`exact_plan_at`, tried in turn
_EXACT = (
    ("piqp", {"max_iter": 500}, "solved"),
    ("highs", {"output_flag": False}, "Optimal"),
)
_POLISH_LINSYS_ERROR = -2  # OSQP's status_polish when the reduced KKT system of its polishing fails to factor


class ZmpPlanError(ValueError):
    """The ZMP plan has no solution (or the solver did not find one)."""


@dataclass(frozen=True)
class ZmpPlanSpec:
    """Weights of the plan's cost (per second of take; lengths in metres)."""

    margin: float = 0.015  # the polygons are shrunk by this
    jerk_weight: float = 1e-6  # w_j on |c_dddot|^2 [m^2/s^6]
    tracking_weight: float = 1e-2  # w_t on |c - r|^2 (weak)
    zmp_weight: float = 1.0  # w_p on |p - p_ref|^2
    tolerance: float = 1e-4  # largest accepted ZMP excursion past a shrunk edge after solving [m]


@dataclass
class ZmpPlan:
    """The solved plan on the input's sample times."""

    times: np.ndarray  # (N,)
    com: np.ndarray  # (N, 2) horizontal CoM
    velocity: np.ndarray  # (N, 2)
    acceleration: np.ndarray  # (N, 2)
    zmp: np.ndarray  # (N, 2) cart-table ZMP of ``com``
    distance: np.ndarray  # (N,) ZMP distance inside the (unshrunk) polygon [m]; NaN: no polygon
    margin: float = 0.0  # the shrink it was solved with (negative: the polygons enlarged, relaxed_plan)


def second_difference(n: int, h: float) -> sp.csr_matrix:
    """``(n, n)`` central second difference / h^2 on rows 1..n-2 (rows 0 and n-1 zero: at rest)."""
    rows = np.repeat(np.arange(1, n - 1), 3)
    cols = (np.arange(1, n - 1)[:, None] + np.array([-1, 0, 1])).ravel()
    values = np.tile([1.0, -2.0, 1.0], n - 2) / h**2
    return sp.csr_matrix((values, (rows, cols)), shape=(n, n))


def third_difference(n: int, h: float) -> sp.csr_matrix:
    """``(n - 3, n)`` forward third difference / h^3."""
    rows = np.repeat(np.arange(n - 3), 4)
    cols = (np.arange(n - 3)[:, None] + np.arange(4)).ravel()
    values = np.tile([-1.0, 3.0, -3.0, 1.0], n - 3) / h**3
    return sp.csr_matrix((values, (rows, cols)), shape=(n - 3, n))


def coasting_basis(coasts: np.ndarray) -> sp.csr_matrix:
    """``(n, m)`` basis ``T`` of one CoM coordinate, ``c = T y``, with ``c_ddot_k = 0`` wherever
    ``coasts[k]`` (``c_{k+1} = 2 c_k - c_{k-1}``: no foot down, the CoM coasts); every other sample is a free
    entry of ``y``. Integer combinations, so a coasting stretch is a straight line to round-off and the QP
    needs no equality rows for it (as rows beside the ZMP rows, OSQP misreported infeasibility and its
    polishing failed on the CMU excerpt played 2x slower)."""
    rows: list[dict[int, float]] = []
    free = 0
    for k in range(len(coasts)):
        if k >= 2 and coasts[k - 1]:
            row = {j: 2.0 * v for j, v in rows[k - 1].items()}
            for j, v in rows[k - 2].items():
                row[j] = row.get(j, 0.0) - v
        else:
            row, free = {free: 1.0}, free + 1
        rows.append(row)
    indices = [(k, j, v) for k, row in enumerate(rows) for j, v in row.items() if v != 0.0]
    k, j, v = (np.array(x) for x in zip(*indices, strict=True))
    return sp.csr_matrix((v.astype(float), (k, j)), shape=(len(coasts), free))


def zmp_operator(heights: np.ndarray, h: float, gravity: float = GRAVITY) -> sp.csr_matrix:
    """``(N, N)`` map from one CoM coordinate to its ZMP: ``I - diag(z_k / (g + z_ddot_k)) D2``."""
    n = len(heights)
    z_ddot = second_difference(n, h) @ heights
    ratio = heights / (gravity + z_ddot)
    return (sp.identity(n, format="csr") - sp.diags(ratio) @ second_difference(n, h)).tocsr()


def _grid(times: np.ndarray) -> tuple[np.ndarray, float]:
    """The uniform grid the QP is posed on: the samples themselves when they are uniform (to 1e-6 s)."""
    steps = np.diff(times)
    h = float(np.median(steps))
    if np.all(np.abs(steps - h) <= 1e-6):
        return times, h
    return times[0] + h * np.arange(int(math.floor((times[-1] - times[0]) / h + 1e-9)) + 1), h


@dataclass(frozen=True)
class ZmpProblem:
    """The plan's QP for one take, posed once at margin 0 (:func:`pose_zmp_plan`); :func:`plan_at` solves it
    at any margin: only the upper bounds of the polygon rows depend on it (``offsets - margin``)."""

    times: np.ndarray  # (N,) the input's sample times
    polygons: Sequence[np.ndarray | None]  # the input's polygons
    grid: np.ndarray  # (n,) the uniform grid the QP is posed on (:func:`_grid`)
    h: float  # its step
    grid_polygons: list  # the polygon of each grid sample (nearest input sample) or None
    basis: sp.csr_matrix  # (n, m) c = basis y per axis (:func:`coasting_basis`)
    zmp: sp.csr_matrix  # (n, n) CoM -> ZMP per axis (:func:`zmp_operator`)
    hessian: sp.csc_matrix  # (2m, 2m) upper triangle of the cost's Hessian
    gradient: np.ndarray  # (2m,)
    constraints: sp.csc_matrix  # the polygon rows (unit outward normal . p_k), then the 8 rest rows
    offsets: np.ndarray  # (rows,) the polygon rows' bounds at margin 0
    clearance: np.ndarray  # (rows,) each row's bound minus its normal . the polygon's vertex mean
    row_samples: np.ndarray  # (rows,) the grid sample of each polygon row


def pose_zmp_plan(
    times: np.ndarray,
    polygons: Sequence[np.ndarray | None],
    com_height: float | np.ndarray,
    reference: np.ndarray,
    zmp_reference: np.ndarray | None = None,
    spec: ZmpPlanSpec | None = None,
    gravity: float = GRAVITY,
) -> ZmpProblem:
    """The QP of the module docstring for ``times`` ``(N,)``, the support polygon of each sample (a
    counter-clockwise convex hull ``(m, 2)`` or ``None`` without contact), the CoM height above the ground
    (scalar or ``(N,)``), the CoM reference ``(N, 2)`` and the ZMP reference (default: each polygon's vertex
    mean, else the CoM reference); ``spec``'s weights (its margin is :func:`plan_at`'s). Non-uniform ``times``
    are posed on a uniform grid of their median step (polygon of the nearest sample, references
    interpolated)."""
    spec = spec or ZmpPlanSpec()
    times = np.asarray(times, dtype=float)
    n_in = len(times)
    reference = np.asarray(reference, dtype=float)[:, :2]
    if n_in < 7 or len(polygons) != n_in or reference.shape != (n_in, 2) or np.any(np.diff(times) <= 0):
        raise ZmpPlanError("a ZMP plan needs >= 7 increasing times, one polygon and one reference per sample")
    heights = np.broadcast_to(np.asarray(com_height, dtype=float), (n_in,)).copy()
    if not (np.all(np.isfinite(heights)) and np.all(heights > 0) and np.all(np.isfinite(reference))):
        raise ZmpPlanError("CoM heights must be positive and the references finite")
    if all(p is None for p in polygons):
        raise ZmpPlanError("no sample has a foot in contact: nothing to balance on")
    if zmp_reference is None:
        zmp_reference = np.array(
            [reference[k] if p is None else np.mean(p, axis=0) for k, p in enumerate(polygons)]
        )
    zmp_reference = np.asarray(zmp_reference, dtype=float)[:, :2]
    grid, h = _grid(times)
    n = len(grid)
    nearest = np.clip(np.searchsorted(times, grid - 0.5 * h, side="left"), 0, n_in - 1)
    grid_polygons = [polygons[i] for i in nearest]
    r = np.column_stack([np.interp(grid, times, reference[:, a]) for a in range(2)])
    p_ref = np.column_stack([np.interp(grid, times, zmp_reference[:, a]) for a in range(2)])
    z = np.interp(grid, times, heights)

    zmp = zmp_operator(z, h, gravity)
    jerk = third_difference(n, h)
    coasts = np.array([0 < k < n - 1 and p is None for k, p in enumerate(grid_polygons)])
    basis = coasting_basis(coasts)  # c = basis @ y per axis (no foot down: c_ddot = 0, module docstring)
    m = basis.shape[1]
    block = (
        spec.jerk_weight * (jerk.T @ jerk)
        + spec.tracking_weight * sp.identity(n)
        + spec.zmp_weight * (zmp.T @ zmp)
    ) * h
    block = basis.T @ block @ basis
    hessian = sp.block_diag((block, block), format="csc")
    gradient = -h * np.concatenate(
        [
            basis.T @ (spec.tracking_weight * r[:, a] + spec.zmp_weight * (zmp.T @ p_ref[:, a]))
            for a in range(2)
        ]
    )
    samples, normals, offsets, clearance = [], [], [], []
    for k, polygon in enumerate(grid_polygons):
        if polygon is not None:
            a, b = halfplanes(np.asarray(polygon, dtype=float))
            samples.append(np.full(len(b), k))
            normals.append(a)
            offsets.append(b)
            clearance.append(b - a @ np.mean(polygon, axis=0))
    normals, samples = np.concatenate(normals), np.concatenate(samples)
    of_sample = (zmp @ basis).tocsr()[samples]  # one row of p_k per polygon row
    rows = sp.hstack((sp.diags(normals[:, 0]) @ of_sample, sp.diags(normals[:, 1]) @ of_sample))
    rest = []
    for a, b in ((0, 1), (1, 2), (n - 3, n - 2), (n - 2, n - 1)):
        e = sp.csr_matrix(([1.0, -1.0], ([0, 0], [a, b])), shape=(1, n)) @ basis
        rest += [sp.hstack((e, sp.csr_matrix((1, m)))), sp.hstack((sp.csr_matrix((1, m)), e))]
    return ZmpProblem(
        times=times,
        polygons=polygons,
        grid=grid,
        h=h,
        grid_polygons=grid_polygons,
        basis=basis,
        zmp=zmp,
        hessian=sp.triu(hessian, format="csc"),
        gradient=gradient,
        constraints=sp.vstack([rows, *rest], format="csc"),
        offsets=np.concatenate(offsets),
        clearance=np.concatenate(clearance),
        row_samples=samples,
    )


def solve_zmp_plan(
    times: np.ndarray,
    polygons: Sequence[np.ndarray | None],
    com_height: float | np.ndarray,
    reference: np.ndarray,
    zmp_reference: np.ndarray | None = None,
    spec: ZmpPlanSpec | None = None,
    gravity: float = GRAVITY,
) -> ZmpPlan:
    """The plan of the module docstring (the arguments of :func:`pose_zmp_plan`) at ``spec.margin``; on the
    input's sample times (interpolated back from the grid when they are not uniform)."""
    spec = spec or ZmpPlanSpec()
    problem = pose_zmp_plan(times, polygons, com_height, reference, zmp_reference, spec, gravity)
    return plan_at(problem, spec.margin, spec.tolerance)


def plan_at(problem: ZmpProblem, margin: float, tolerance: float = 1e-4) -> ZmpPlan:
    """The plan of ``problem`` with its polygons shrunk by ``margin`` (OSQP); the ZMP of the returned CoM is
    recomputed and must be inside every shrunk polygon to ``tolerance``, else :class:`ZmpPlanError`."""
    _check_width(problem, margin)
    lower, upper = _bounds(problem, margin)
    solver = osqp.OSQP()
    solver.setup(problem.hessian, problem.gradient, problem.constraints, lower, upper, verbose=False, **_OSQP)
    result = solver.solve(raise_error=False)  # infeasibility is reported below
    if result.info.status_polish == _POLISH_LINSYS_ERROR:
        # OSQP 1.1 then returns no solution (the walking take of G1: 5.5 m off the soles, its ADMM iterate
        # inside them): the same iterate without polishing (a warm start from it, so a few iterations)
        solver.update_settings(polishing=False)
        result = solver.solve(raise_error=False)
    status = str(result.info.status)
    if result.x is None or not np.all(np.isfinite(result.x)) or status != "solved":
        raise ZmpPlanError(f"the ZMP plan is infeasible or unsolved (OSQP: {status})")
    return _plan_of(problem, result.x, margin, tolerance, f"OSQP: {status}")


def exact_plan_at(problem: ZmpProblem, margin: float, tolerance: float = 1e-4) -> ZmpPlan:
    """:func:`plan_at` where OSQP's ADMM does not converge: next to the largest margin
    (:func:`largest_margin`) the polygon rows leave a sliver of plans, and OSQP ran out of its 1e5 iterations
    within 2 mm of it on every CMU excerpt row (x1, x2, x4; G1 and TALOS). By the QP solvers of
    :data:`_EXACT` in turn (through CasADi's ``conic``), the first whose plan passes :func:`_plan_of`'s check:
    PIQP's interior point (0.03-0.4 s on those), else HiGHS' active set (PIQP stopped at its iteration limit
    on the G1 excerpt at x1; HiGHS failed on TALOS at x4 with 0.1 m left in its rows, 5e8 Hessian entries)."""
    import casadi

    def dm(matrix: sp.spmatrix) -> casadi.DM:
        m = sp.csc_matrix(matrix)
        pattern = casadi.Sparsity(*m.shape, m.indptr.tolist(), m.indices.tolist())
        return casadi.DM(pattern, m.data.tolist())

    hessian = dm(problem.hessian + sp.triu(problem.hessian, 1).T)
    constraints = dm(problem.constraints)
    lower, upper = _bounds(problem, margin)
    failures = []
    for plugin, options, solved in _EXACT:
        solver = casadi.conic(
            "zmp_plan",
            plugin,
            {"h": hessian.sparsity(), "a": constraints.sparsity()},
            {"error_on_fail": False, plugin: options},
        )
        result = solver(h=hessian, g=problem.gradient, a=constraints, lba=lower, uba=upper)
        status = f"{plugin}: {solver.stats().get('return_status')}"
        try:
            if solver.stats().get("return_status") != solved:
                raise ZmpPlanError(status)
            return _plan_of(problem, np.asarray(result["x"]).ravel(), margin, tolerance, status)
        except ZmpPlanError as exc:
            failures.append(str(exc))
    raise ZmpPlanError(f"the ZMP plan is unsolved at the {margin:g} m margin ({'; '.join(failures)})")


def _check_width(problem: ZmpProblem, margin: float) -> None:
    """Raise when a polygon is narrower than twice ``margin`` (its vertex mean outside the shrunk polygon)."""
    narrow = np.flatnonzero(problem.clearance < margin)
    if len(narrow):
        t = problem.grid[problem.row_samples[narrow[0]]]
        raise ZmpPlanError(
            f"support polygon at t = {t:.3f} s is narrower than twice the margin ({margin:g} m)"
        )


def _bounds(problem: ZmpProblem, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of the problem's rows with its polygons shrunk by ``margin``."""
    rest = problem.constraints.shape[0] - len(problem.offsets)
    upper = np.concatenate((problem.offsets - margin, np.zeros(rest)))
    lower = np.concatenate((np.full(len(problem.offsets), -np.inf), np.zeros(rest)))
    return lower, upper


def largest_margin(problem: ZmpProblem, ceiling: float) -> float:
    """The largest margin, up to ``ceiling``, at which the plan's rows have a solution: one LP in the QP's
    variables and the margin ``s`` (``max s`` s.t. ``a_i . p_k + s <= b_i`` for every polygon row, the rest
    rows, ``s <= ceiling``), by HiGHS' dual simplex: its optimum is exact to its 1e-7 feasibility tolerance,
    where OSQP's verdict on one margin is a certificate or just its iteration limit (``relaxed_plan``)."""
    rows = problem.constraints.shape[0]
    polygon_rows = len(problem.offsets)
    slack = sp.csc_matrix(np.concatenate((np.ones(polygon_rows), np.zeros(rows - polygon_rows)))[:, None])
    matrix = sp.hstack((problem.constraints, slack), format="csr")
    cost = np.zeros(matrix.shape[1])
    cost[-1] = -1.0
    result = linprog(
        cost,
        A_ub=matrix[:polygon_rows],
        b_ub=problem.offsets,
        A_eq=matrix[polygon_rows:],
        b_eq=np.zeros(rows - polygon_rows),
        bounds=[(None, None)] * (matrix.shape[1] - 1) + [(None, ceiling)],
        method="highs-ds",
    )
    if result.status != 0:  # the margin is free below: only a numerical failure gets here
        raise ZmpPlanError(f"the largest margin of the ZMP plan was not found (HiGHS: {result.message})")
    return float(result.x[-1])


def _plan_of(problem: ZmpProblem, x: np.ndarray, margin: float, tolerance: float, solver: str) -> ZmpPlan:
    """The plan of the QP's solution ``x``: its ZMP recomputed from the CoM (cart-table) and checked against
    every polygon shrunk by ``margin`` (to ``tolerance``), on the input's samples."""
    times, polygons, grid = problem.times, problem.polygons, problem.grid
    basis, zmp, h, n, m = problem.basis, problem.zmp, problem.h, len(grid), problem.basis.shape[1]
    c = np.column_stack((basis @ x[:m], basis @ x[m:]))
    p = np.column_stack([zmp @ c[:, a] for a in range(2)])
    distance = np.full(n, np.nan)
    for k, polygon in enumerate(problem.grid_polygons):
        if polygon is not None:
            distance[k] = support_distance(p[k], np.asarray(polygon, dtype=float))
    worst = np.nanmin(distance - margin)
    if worst < -tolerance:
        k = int(np.nanargmin(distance))
        raise ZmpPlanError(
            f"the ZMP plan leaves the shrunk support by {1e3 * -worst:.2f} mm at t = {grid[k]:.3f} s "
            f"({solver})"
        )
    velocity = np.gradient(c, h, axis=0)
    acceleration = np.vstack((np.zeros(2), np.diff(c, 2, axis=0) / h**2, np.zeros(2)))
    if n != len(times) or not np.array_equal(grid, times):  # back onto the input's samples
        c, velocity, acceleration, p = (
            np.column_stack([np.interp(times, grid, v[:, a]) for a in range(2)])
            for v in (c, velocity, acceleration, p)
        )
        distance = np.array(
            [np.nan if q is None else support_distance(p[k], q) for k, q in enumerate(polygons)]
        )
    return ZmpPlan(times, c, velocity, acceleration, p, distance, margin)


def relaxed_plan(
    times, polygons, com_height, reference, zmp_reference=None, spec: ZmpPlanSpec | None = None, widest=0.3
) -> ZmpPlan:
    """:func:`solve_zmp_plan`, or when it has no solution the plan with the largest margin that has one,
    down to ``spec.margin - widest`` (a negative margin enlarges the polygons): the answer to "how far past
    the soles would the ZMP have to go". That margin is one LP (:func:`largest_margin`), the plan the QP at
    ``BACK_OFF`` below it (:func:`exact_plan_at`). It was a bisection to 1 mm over OSQP solves whose
    verdicts were no proof either way: infeasible and near-boundary tries ran to OSQP's 1e5 iterations (18 s
    on the CMU excerpt) and feasible ones near the boundary failed, landing it 6-13 mm low. Raises when even
    ``widest`` has none, or a polygon is narrower than twice ``spec.margin`` (not relaxed). OSQP's try at
    ``spec.margin`` comes first: a take with a plan gets the same plan, at the same cost (the LP first cost
    as much again as OSQP on the 1247-sample CMU 131_02, 1.8 s); an infeasible one pays that try (up to its
    1e5 iterations: 6.5 s on the CMU excerpt played 4x slower)."""
    spec = spec or ZmpPlanSpec()
    problem = pose_zmp_plan(times, polygons, com_height, reference, zmp_reference, spec)
    try:
        return plan_at(problem, spec.margin, spec.tolerance)
    except ZmpPlanError as exc:
        if "narrower" in str(exc):
            raise
    largest = largest_margin(problem, spec.margin + BACK_OFF)  # >= spec.margin: OSQP did not find the plan
    margin = min(largest - BACK_OFF, spec.margin)
    if margin < spec.margin - widest:
        raise ZmpPlanError(
            f"the ZMP plan is infeasible with the {spec.margin:g} m margin, and still with the polygons "
            f"enlarged by {widest - spec.margin:g} m (it needs {-largest:.3f} m)"
        )
    return exact_plan_at(problem, margin, spec.tolerance)
