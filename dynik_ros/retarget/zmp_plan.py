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
cannot follow) raise :class:`ZmpPlanError` naming the cause.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import osqp
import scipy.sparse as sp

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


def solve_zmp_plan(
    times: np.ndarray,
    polygons: Sequence[np.ndarray | None],
    com_height: float | np.ndarray,
    reference: np.ndarray,
    zmp_reference: np.ndarray | None = None,
    spec: ZmpPlanSpec | None = None,
    gravity: float = GRAVITY,
) -> ZmpPlan:
    """The plan of the module docstring for ``times`` ``(N,)``, the support polygon of each sample (a
    counter-clockwise convex hull ``(m, 2)`` or ``None`` without contact), the CoM height above the ground
    (scalar or ``(N,)``), the CoM reference ``(N, 2)`` and the ZMP reference (default: each polygon's vertex
    mean, else the CoM reference). Non-uniform ``times`` are posed on a uniform grid of their median step
    (polygon of the nearest sample, references interpolated) and the result interpolated back."""
    spec = spec or ZmpPlanSpec()
    times = np.asarray(times, dtype=float)
    n_in = len(times)
    reference = np.asarray(reference, dtype=float)[:, :2]
    if n_in < 7 or len(polygons) != n_in or reference.shape != (n_in, 2) or np.any(np.diff(times) <= 0):
        raise ZmpPlanError("a ZMP plan needs >= 7 increasing times, one polygon and one reference per sample")
    heights = np.broadcast_to(np.asarray(com_height, dtype=float), (n_in,)).copy()
    if not (np.all(np.isfinite(heights)) and np.all(heights > 0) and np.all(np.isfinite(reference))):
        raise ZmpPlanError("CoM heights must be positive and the references finite")
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
    zmp_of_free = (zmp @ basis).tocsr()
    rows, lower, upper = [], [], []
    for k, polygon in enumerate(grid_polygons):
        if polygon is None:
            continue
        normals, offsets = halfplanes(np.asarray(polygon, dtype=float), spec.margin)
        centre = np.mean(polygon, axis=0)
        if np.min(offsets - normals @ centre) < 0:
            raise ZmpPlanError(
                f"support polygon at t = {grid[k]:.3f} s is narrower than twice the margin "
                f"({spec.margin:g} m)"
            )
        row = zmp_of_free.getrow(k)
        for (ax, ay), b in zip(normals, offsets, strict=True):
            rows.append(sp.hstack((ax * row, ay * row)))
            upper.append(b)
            lower.append(-np.inf)
    if not rows:
        raise ZmpPlanError("no sample has a foot in contact: nothing to balance on")
    rest = []
    for a, b in ((0, 1), (1, 2), (n - 3, n - 2), (n - 2, n - 1)):
        e = sp.csr_matrix(([1.0, -1.0], ([0, 0], [a, b])), shape=(1, n)) @ basis
        rest += [sp.hstack((e, sp.csr_matrix((1, m)))), sp.hstack((sp.csr_matrix((1, m)), e))]
    constraints = sp.vstack(rows + rest, format="csc")
    lower = np.concatenate((lower, np.zeros(len(rest))))
    upper = np.concatenate((upper, np.zeros(len(rest))))
    solver = osqp.OSQP()
    solver.setup(
        sp.triu(hessian, format="csc"), gradient, constraints, lower, upper,
        verbose=False, **_OSQP
    )  # fmt: skip
    result = solver.solve(raise_error=False)  # infeasibility is reported below
    status = str(result.info.status)
    if result.x is None or not np.all(np.isfinite(result.x)) or status != "solved":
        raise ZmpPlanError(f"the ZMP plan is infeasible or unsolved (OSQP: {status})")
    c = np.column_stack((basis @ result.x[:m], basis @ result.x[m:]))
    p = np.column_stack([zmp @ c[:, a] for a in range(2)])
    distance = np.full(n, np.nan)
    for k, polygon in enumerate(grid_polygons):
        if polygon is not None:
            distance[k] = support_distance(p[k], np.asarray(polygon, dtype=float))
    worst = np.nanmin(distance - spec.margin)
    if worst < -spec.tolerance:
        k = int(np.nanargmin(distance))
        raise ZmpPlanError(
            f"the ZMP plan leaves the shrunk support by {1e3 * -worst:.2f} mm at t = {grid[k]:.3f} s "
            f"(OSQP: {status})"
        )
    velocity = np.gradient(c, h, axis=0)
    acceleration = np.vstack((np.zeros(2), np.diff(c, 2, axis=0) / h**2, np.zeros(2)))
    if n != n_in or not np.array_equal(grid, times):  # back onto the input's samples
        c, velocity, acceleration, p = (
            np.column_stack([np.interp(times, grid, x[:, a]) for a in range(2)])
            for x in (c, velocity, acceleration, p)
        )
        distance = np.array(
            [np.nan if q is None else support_distance(p[k], q) for k, q in enumerate(polygons)]
        )
    return ZmpPlan(times, c, velocity, acceleration, p, distance, spec.margin)


def relaxed_plan(
    times, polygons, com_height, reference, zmp_reference=None, spec: ZmpPlanSpec | None = None, widest=0.3
) -> ZmpPlan:
    """:func:`solve_zmp_plan`, or when it has no solution the plan with the largest margin that has one,
    found by bisection down to ``spec.margin - widest`` (a negative margin enlarges the polygons; to 1 mm):
    the answer to "how far past the soles would the ZMP have to go". Raises when even that has none."""
    spec = spec or ZmpPlanSpec()
    args = (times, polygons, com_height, reference, zmp_reference)
    try:
        return solve_zmp_plan(*args, spec)
    except ZmpPlanError as exc:
        if "narrower" in str(exc) or "no sample" in str(exc):
            raise
        first = exc
    low, high = spec.margin - widest, spec.margin  # feasible at low (checked), not at high
    try:
        best = solve_zmp_plan(*args, replace(spec, margin=low))
    except ZmpPlanError:
        raise ZmpPlanError(
            f"{first}; still none with the polygons enlarged by {widest - spec.margin:g} m"
        ) from None
    while high - low > 1e-3:
        middle = 0.5 * (low + high)
        try:
            best, low = solve_zmp_plan(*args, replace(spec, margin=middle)), middle
        except ZmpPlanError:
            high = middle
    return best
