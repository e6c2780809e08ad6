"""The inverse differential kinematics QP of eq. (10), on DAQP (dense, dual active set) or OSQP (sparse
ADMM, with a sparsity pattern fixed at set-up).

    minimize_nu  1/2 || W (J nu - v*) ||^2 + 1/2 lambda ||nu||^2      (eq. 10a, damped)
    subject to   l <= C nu <= u                                        (eq. 10b, from eq. 12-13)

``C`` is constant (rows selecting joint velocities plus the coupled-joint rows ``A``), so only the values
of ``P = J^T W^2 J + lambda I``, of ``q = -J^T W^2 v*`` and of the bounds change from step to step. They are
written into OSQP in place and the previous solution warm-starts the next solve.

Shortcut (``QPSettings.inactive_shortcut``): the unconstrained minimiser of eq. (10a) comes from one
Cholesky solve of ``P``. When it satisfies every row of eq. (10b) it *is* the QP's solution (no constraint
active), and no solver is called. With DAQP it is tried only while the last solve had no row on a bound
(an active bound mostly stays active from one step to the next). Otherwise ``QPSettings.solver`` solves
the QP: ``"daqp"`` (:mod:`.active_set_qp`: dense, exact on its rows) and, where DAQP reports no optimum
(infeasible rows, its iteration limit), OSQP on the same QP; or ``"osqp"`` alone (the paper's "one OSQP
QP per step"). OSQP
is warm-started from the last solution (its own, the shortcut's or DAQP's). The status says which path was
taken: ``"solved (no active constraint)"``, ``"solved (DAQP)"`` or OSQP's own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynik_ros.core.active_set_qp import ActiveSetQP
from dynik_ros.core.lapack import dposv
from dynik_ros.core.small_arrays import dot as _dot

# OSQP's infinity (``osqp.constant("OSQP_INFTY")``, checked by the tests): a row bound this large bounds
# nothing. OSQP itself (and scipy.sparse, its matrices) is imported when a QP first needs it: with DAQP most
# runs never do, and the imports cost ~0.3 s of a process's start.
UNBOUNDED = 1e30
SOLVERS = ("daqp", "osqp")  # QPSettings.solver


def largest(values: np.ndarray) -> float:
    """``float(np.maximum.reduce(values))`` by ``argmax``, one C method: the ufunc reduction's machinery cost
    ~4 us a call in the IK loop (cold caches). The same value: max is exact, and ``argmax`` stops at the first
    NaN, which ``maximum`` propagates (signed zeros aside: ``-0.0`` and ``0.0`` compare equal)."""
    return float(values[values.argmax()])


# OSQP statuses whose iterate is usable: solved, solved inaccurate, iteration or time limit reached.
_USABLE_NAMES = ("OSQP_SOLVED", "OSQP_SOLVED_INACCURATE", "OSQP_MAX_ITER_REACHED", "OSQP_TIME_LIMIT_REACHED")


@dataclass(frozen=True)
class QPSettings:
    """The solver, OSQP's tolerances and the damping ``lambda``; defaults suit real-time tracking at 60-1000
    Hz. ``solver``: ``"daqp"`` (OSQP where DAQP finds no optimum) or ``"osqp"`` (see the module docstring)."""

    solver: str = "daqp"
    damping: float = 1e-4
    eps_abs: float = 1e-5
    eps_rel: float = 1e-5
    max_iter: int = 400
    adaptive_rho: bool = True
    polishing: bool = False
    inactive_shortcut: bool = True
    shortcut_tolerance: float = 1e-9

    def __post_init__(self):
        if self.solver not in SOLVERS:
            raise ValueError(f"QPSettings.solver: {self.solver!r} is not one of {', '.join(SOLVERS)}")


@dataclass
class QPSolution:
    nu: np.ndarray
    status: str
    iterations: int
    solved: bool
    # every row of the QP as posed is met within this (the Cholesky shortcut's tolerance; inf: not checked)
    rows_met_within: float = float("inf")


class VelocityQP:
    """Eq. (10) on DAQP and/or OSQP (``QPSettings.solver``); OSQP with a fixed pattern for ``P`` (from the
    Jacobian's structural non-zeros)."""

    def __init__(
        self,
        jacobian_pattern: np.ndarray,
        constraint_matrix: np.ndarray,
        settings: QPSettings | None = None,
        expansion: np.ndarray | None = None,
        dense_cost: bool = False,
        dynamic_rows: int = 0,
    ):
        """``expansion`` ``E`` (nv x nr): solve for ``x`` with ``nu = E x`` (locked and mimic joints, see
        :meth:`RobotModel.joint_expansion`); constraint rows that ``E`` empties are dropped.
        ``dense_cost``: every entry of ``P`` may be non-zero (extra cost terms); ``dynamic_rows``: number
        of inequality rows with per-step coefficients appended below the constant ones."""
        self.settings = settings or QPSettings()
        self.n_full = jacobian_pattern.shape[1]
        self.expansion = None if expansion is None else np.asarray(expansion, dtype=float)
        if self.expansion is not None:
            e = self.expansion
            jacobian_pattern = (jacobian_pattern.astype(float) @ np.abs(e)) > 0
            reduced = np.asarray(constraint_matrix, dtype=float) @ e
            self._rows = np.flatnonzero(np.any(reduced != 0, axis=1))
            constraint_matrix = reduced[self._rows]
            self._hessian_weights = e * e  # diag(E^T D E) = (E*E)^T d: columns of E touch disjoint rows
        m, n = jacobian_pattern.shape
        self.n = n
        pattern = (jacobian_pattern.T.astype(float) @ jacobian_pattern.astype(float)) > 0
        pattern |= np.eye(n, dtype=bool)
        if dense_cost:
            pattern[:] = True
        # (row, col) of every stored entry of P's upper triangle, in OSQP's CSC order (column by column,
        # rows ascending)
        self._p_cols, self._p_rows = np.nonzero(np.triu(pattern).T)
        self._diag = np.zeros(n)
        self.constraint_matrix = np.asarray(constraint_matrix, dtype=float)
        self.n_dynamic = int(dynamic_rows)
        n_static = self.constraint_matrix.shape[0]
        # every stored entry of the constraint matrix: the constant rows' non-zeros, then the dynamic rows
        # dense (explicit zeros stay in the pattern so that their values can be written in place)
        a_pattern = np.vstack((self.constraint_matrix != 0, np.ones((self.n_dynamic, n), dtype=bool)))
        a_cols, a_rows = np.nonzero(a_pattern.T)  # column-major: OSQP's CSC order
        self._a_rows, self._a_cols = a_rows, a_cols
        self._a_values = np.vstack((self.constraint_matrix, np.zeros((self.n_dynamic, n))))
        self._n_static = n_static
        rows = n_static + self.n_dynamic
        self._dense = ActiveSetQP(n, rows) if self.settings.solver == "daqp" and rows else None
        self._gaps = np.empty(2 * rows)  # _active_set's scratch: the rows' distances to their bounds
        # set by a caller around a trial solve (the plain stance rows, core/extra_terms.py): where DAQP finds
        # no optimum the solve ends unsolved instead of going on to OSQP
        self.daqp_only = False
        self._new_solver()

    def _osqp_problem(self):
        """``(P, C)`` as OSQP is set up with them: CSC matrices on the fixed patterns (``P``: identity values,
        ``C``: the constant rows' values, ones on the dynamic rows' pattern)."""
        import scipy.sparse as sp

        n, n_static = self.n, self._n_static
        a_rows, a_cols = self._a_rows, self._a_cols
        c = sp.csc_matrix(
            (
                np.where(a_rows < n_static, self._a_values[a_rows, a_cols], 1.0),
                a_rows,
                np.searchsorted(a_cols, np.arange(n + 1)),
            ),
            shape=(n_static + self.n_dynamic, n),
        )
        p_matrix = sp.csc_matrix(
            (
                (self._p_rows == self._p_cols).astype(float),
                self._p_rows,
                np.searchsorted(self._p_cols, np.arange(n + 1)),
            ),
            shape=(n, n),
        )
        return p_matrix, c

    def _new_solver(self) -> None:
        """As set up: nothing carried from any solve; OSQP (made by :meth:`_osqp_solver` when first needed)
        fresh, without its adaptive ``rho``, its factorization or a warm start."""
        self._solver = None
        self._native = None
        self._last_exact: np.ndarray | None = None  # the last solve's x from the shortcut or DAQP
        self._task: tuple[np.ndarray, np.ndarray] | None = None  # the last solve's task (P, q), for resolve
        # the (P, q) objects DAQP's last LDP was formed from, with no extra cost (see _solve_cost); or None
        self._ldp_source: tuple[np.ndarray, np.ndarray] | None = None
        self._a_values[self._n_static :] = 0.0  # the dynamic rows as set up
        self._used = False
        # the Cholesky shortcut is tried while the last solve had no row on a bound: on real captures a
        # bound that is active stays so (the main QP of CMU 131_02 on G1: 26 of 1365 solves had none
        # active), and a failed try cost a factorisation and a check of every row for nothing
        self._free_last = True

    def _osqp_solver(self):
        """OSQP set up on the problem's pattern (made once after each :meth:`_new_solver`)."""
        if self._solver is not None:
            return self._solver
        import osqp

        p_matrix, c = self._osqp_problem()
        self._solver = osqp.OSQP()
        self._solver.setup(
            p_matrix,
            np.zeros(self.n),
            c,
            -np.ones(c.shape[0]),
            np.ones(c.shape[0]),
            verbose=False,
            warm_starting=True,
            polishing=self.settings.polishing,
            eps_abs=self.settings.eps_abs,
            eps_rel=self.settings.eps_rel,
            max_iter=self.settings.max_iter,
            adaptive_rho=self.settings.adaptive_rho,
        )
        # osqp's Python wrapper rebuilds a namespace of every info field on each solve (tens of
        # microseconds at our sizes); call the extension solver it wraps when this osqp version exposes it.
        native = getattr(self._solver, "_solver", None)
        self._native = (
            native if all(hasattr(native, a) for a in ("update_data_vec", "update_data_mat")) else None
        )
        self._usable = tuple(int(getattr(osqp.SolverStatus, name)) for name in _USABLE_NAMES)
        return self._solver

    def restart(self) -> None:
        """As just constructed (after a restart of the problem, e.g. ``DynamicalIK.reset``): a new OSQP,
        so that the solves that follow are those of a fresh solver, bit for bit (a warm-start reset alone
        keeps OSQP's adapted ``rho``: an IK reset after a 1.5 s take then drifted 3e-4 rad from a new
        one's path); DAQP starts every solve cold. Nothing to do before the first solve."""
        if self._used:
            self._new_solver()

    def solve(
        self,
        jacobian: np.ndarray,
        target_velocity: np.ndarray,
        weights: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        regularization: tuple[np.ndarray, np.ndarray] | None = None,
        extra: tuple[np.ndarray, np.ndarray] | None = None,
        dynamic: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> QPSolution:
        """Solve eq. (10) for the current ``J``, ``v*`` (eq. 9) and bounds; ``nu`` and OSQP's status.

        ``regularization = (d, t)`` adds ``1/2 sum_c d_c (nu_c - t_c)^2`` to the cost (diagonal: the
        pattern of ``P`` is unchanged), e.g. a joint-space task. ``extra = (H, g)`` (full ``nv`` columns)
        adds ``1/2 nu^T H nu + g^T nu`` (set up with ``dense_cost`` unless ``H`` fits ``P``'s pattern);
        ``dynamic = (A_d, l_d, u_d)`` gives the ``dynamic_rows`` rows ``l_d <= A_d nu <= u_d`` of this step.
        """
        e = self.expansion
        if e is not None:
            jacobian = jacobian @ e
        weighted = jacobian * (weights**2)[:, None]
        hessian = _dot(jacobian.T, weighted)  # (np.dot's C function: @'s BLAS call, small_arrays.dot)
        # P's diagonal as a strided view (the product is C-contiguous): added to in place, one call where the
        # gather and scatter of its indices took three
        diagonal_view = hessian.reshape(-1)[:: self.n + 1]
        diagonal_view += self.settings.damping
        gradient = -_dot(weighted.T, target_velocity)
        if regularization is not None:
            diagonal, target = regularization
            if e is None:
                diagonal_view += diagonal
                gradient -= diagonal * target
            else:
                diagonal_view += self._hessian_weights.T @ diagonal
                gradient -= e.T @ (diagonal * target)
        self._task = (hessian, gradient)
        return self._solve_cost(hessian, gradient, lower, upper, extra, dynamic)

    def resolve(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        extra: tuple[np.ndarray, np.ndarray] | None = None,
        dynamic: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> QPSolution:
        """:meth:`solve` again with the last call's ``J``, ``v*``, weights and regularization (their part of
        ``P`` and ``q`` is kept, not rebuilt) and another ``extra`` cost, bounds and dynamic rows: a re-solve
        of the same step (the velocity regularizer's sequential QP, ``core/regularizers.py``)."""
        if self._task is None:
            raise RuntimeError("VelocityQP.resolve before any solve")
        hessian, gradient = self._task
        return self._solve_cost(hessian, gradient, lower, upper, extra, dynamic)

    def _solve_cost(self, hessian, gradient, lower, upper, extra, dynamic) -> QPSolution:
        """The QP with the task's ``(P, q)`` (left untouched) plus ``extra``, bounds and dynamic rows."""
        self._used = True
        e = self.expansion
        if e is not None:
            lower, upper = lower[self._rows], upper[self._rows]
        if extra is not None:  # new arrays (the task's are kept for resolve): the same sums as in place
            h_extra, g_extra = extra
            if e is None:
                hessian = hessian + h_extra
                gradient = gradient + g_extra
            else:
                hessian = hessian + e.T @ h_extra @ e
                gradient = gradient + e.T @ g_extra
        # DAQP's last LDP serves again (core/active_set_qp.py, same_ldp) if P, q and C are the same floats:
        # the task's own (P, q) objects (made by solve(), never written after; kept referenced in
        # _ldp_source, so no other array has their identity), no extra cost, and the same dynamic rows (C's
        # constant rows are _a_values' own copy, set up once). Without dynamic rows C is the public
        # constraint_matrix, which could be written in place: no reuse then.
        source = self._ldp_source
        same_ldp = extra is None and source is not None and source[0] is hessian and source[1] is gradient
        constraint_matrix = self.constraint_matrix
        if self.n_dynamic:
            a_dynamic, l_dynamic, u_dynamic = dynamic if dynamic is not None else self._no_dynamic()
            if e is not None:
                a_dynamic = a_dynamic @ e
            written = self._a_values[self._n_static :]
            if same_ldp:  # (NaN rows compare unequal: not reused)
                same_ldp = np.count_nonzero(written == a_dynamic) == written.size
            if not same_ldp:  # rows other than the LDP's (maybe): it is not reused until DAQP forms another
                self._ldp_source = None
                written[...] = a_dynamic
            constraint_matrix = self._a_values
            lower = np.concatenate((lower, l_dynamic))
            upper = np.concatenate((upper, u_dynamic))
        if self.settings.inactive_shortcut and self._free_last:
            x = self._unconstrained(hessian, gradient)
            if x is not None:
                rows = constraint_matrix @ x
                tol = self.settings.shortcut_tolerance
                # (count_nonzero, not .all(): its wrappers and the reduction cost ~4 us a call in the IK loop)
                m = rows.size
                if np.count_nonzero(rows >= lower - tol) == m and np.count_nonzero(rows <= upper + tol) == m:
                    self._last_exact = x
                    return QPSolution(self._full(x), "solved (no active constraint)", 0, True, tol)
        self._free_last = True  # unless DAQP finds a row active below
        if np.count_nonzero(lower <= upper) != lower.size:  # not all (without .all()'s wrappers)
            # no nu meets a row whose bounds cross (or are NaN); both solvers reject such data and would
            # answer the previous problem instead (OSQP says "solved" with the last step's nu)
            return QPSolution(np.zeros(self.n_full), "infeasible (a row's bounds cross)", 0, False)
        if self._dense is not None:
            solution = self._active_set(hessian, gradient, constraint_matrix, lower, upper, same_ldp)
            self._ldp_source = (hessian, gradient) if extra is None and self.n_dynamic else None
            if solution is not None:
                return solution
            if self.daqp_only:  # a trial of rows that may not be feasible: OSQP would spend max_iter on them
                return QPSolution(
                    np.zeros(self.n_full), "no optimum (DAQP only)", self._dense.iterations, False
                )
        return self._osqp(hessian, gradient, lower, upper)

    def _active_set(
        self, hessian, gradient, constraint_matrix, lower, upper, same_ldp=False
    ) -> QPSolution | None:
        """DAQP's solution (:mod:`.active_set_qp`) with the largest miss of a row by it; ``None`` without."""
        dense = self._dense
        x = dense.solve(hessian, gradient, constraint_matrix, lower, upper, same_ldp)
        if x is None:
            return None
        self._last_exact = x
        rows = _dot(constraint_matrix, x)
        # how far the rows are inside their bounds, below and above, in one array: one reduction where two
        # made the same largest value (max is exact); a NaN (from an infinite x) is left to the two
        m = rows.size
        gaps = self._gaps if self._gaps.size == 2 * m else np.empty(2 * m)
        self._gaps = gaps
        np.subtract(lower, rows, gaps[:m])
        np.subtract(rows, upper, gaps[m:])
        worst = largest(gaps)
        if worst != worst:
            below, above = float((lower - rows).max()), float((rows - upper).max())
            worst = max(below, above)
            miss = max(0.0, below, above)
        else:
            miss = max(0.0, worst)
        # the shortcut is tried next only if no row is on its bound here (:attr:`_free_last`)
        self._free_last = worst < -self.settings.shortcut_tolerance
        return QPSolution(self._full(x), "solved (DAQP)", dense.iterations, True, miss)

    def _osqp(self, hessian, gradient, lower, upper) -> QPSolution:
        """OSQP on the QP (its dynamic rows written into ``_a_values``), warm-started from the last solution
        (OSQP's own, or the shortcut's or DAQP's when a later solve took one of those)."""
        solver = self._osqp_solver()
        native = self._native
        if self._last_exact is not None:
            solver.warm_start(x=self._last_exact)
            self._last_exact = None
        if native is not None:
            native.update_data_vec(
                q=gradient, l=np.maximum(lower, -UNBOUNDED), u=np.minimum(upper, UNBOUNDED)
            )
            a_x = self._a_values[self._a_rows, self._a_cols] if self.n_dynamic else None
            native.update_data_mat(P_x=hessian[self._p_rows, self._p_cols], P_i=None, A_x=a_x, A_i=None)
            native.solve()
            info, x = native.info, native.solution.x
        else:
            solver.update(
                Px=hessian[self._p_rows, self._p_cols],
                q=gradient,
                l=np.maximum(lower, -UNBOUNDED),
                u=np.minimum(upper, UNBOUNDED),
                **({"Ax": self._a_values[self._a_rows, self._a_cols]} if self.n_dynamic else {}),
            )
            result = solver.solve(raise_error=False)
            info, x = result.info, result.x
        solved = info.status_val in self._usable and bool(np.all(np.isfinite(x)))
        return QPSolution(
            self._full(np.array(x)) if solved else np.zeros(self.n_full),
            str(info.status),
            int(info.iter),
            solved,
        )

    def _no_dynamic(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dynamic rows switched off for this step: zero coefficients, unbounded."""
        return self._no_dynamic_rows(self.n_dynamic)

    def _no_dynamic_rows(self, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``rows`` dynamic rows switched off: zero coefficients, unbounded."""
        return np.zeros((rows, self.n_full)), np.full(rows, -UNBOUNDED), np.full(rows, UNBOUNDED)

    def _full(self, x: np.ndarray) -> np.ndarray:
        """``nu = E x`` (or ``x`` itself without an expansion)."""
        return x if self.expansion is None else self.expansion @ x

    @staticmethod
    def _unconstrained(hessian: np.ndarray, gradient: np.ndarray) -> np.ndarray | None:
        """Minimiser of ``1/2 x^T P x + g^T x`` by Cholesky; ``None`` if ``P`` is not positive definite.
        LAPACK's ``posv`` directly: ``potrf`` then ``potrs`` (scipy's ``cho_factor`` / ``cho_solve``) in one
        call, without their argument checks (tens of microseconds a step)."""
        _, x, info = dposv(hessian, -gradient, lower=0)
        return x if info == 0 and np.count_nonzero(np.isfinite(x)) == x.size else None

    def reset_warm_start(self) -> None:
        """Forget the previous solution (after a jump in the state; DAQP starts every solve cold)."""
        rows = self.constraint_matrix.shape[0] + self.n_dynamic
        if self._solver is not None:  # (a fresh OSQP starts from zeros)
            self._solver.warm_start(x=np.zeros(self.n), y=np.zeros(rows))
