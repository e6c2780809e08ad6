"""Dense dual active-set solves of the IK step's QP with DAQP (Arnstrom, Bemporad, Axehill 2022, "A dual
active-set solver for embedded quadratic programming using recursive LDL^T updates", IEEE TAC).

    minimize_x  1/2 x^T P x + q^T x      subject to   l <= C x <= u              (eq. 10 as posed)

DAQP solves the least-distance problem (LDP) a QP becomes with the Cholesky factor ``P = R^T R``: with
``z = R x``,

    minimize_z  1/2 ||z||^2 + w^T z      subject to   l <= M z <= u,    M = C R^-1,  w = R^-T q,

and ``x = R^-1 z``. Given ``P`` itself, DAQP forms ``R^-1`` and ``M`` at every update with plain loops (the
``M`` product alone ~40 us for G1's 49 x 35 rows); here the LDP is formed with LAPACK instead (``dpotrf``,
one ``dtrtrs`` over ``[C^T | q]``, :mod:`.lapack`) and DAQP is given ``P = I``, which it recognises as
diagonal and takes as is: the update is then ``O(m n)``. Callgrind on the QPs of CMU 131_02 on G1: 475 000 ->
327 000 instructions a solve. The same QP, so the same solution to DAQP's tolerances (iterations equal on
all 2090 recorded problems, solutions 5e-6 apart relative at most: a row met within DAQP's primal tolerance
either way).

DAQP works on the dense ``M`` (a few tens of columns and rows here: no sparsity to exploit) and ends on an
exact vertex of its working set: every row met to its primal tolerance (1e-6, absolute, on the rows DAQP
scales to unit norm), where OSQP's ADMM iterate stops within ``eps_rel`` of the rows' scale (1e-4 outside
them on real captures). One ``daqp.Model`` per QP holds its workspace (allocated at the first solve); each
solve writes the step's ``w``, ``M`` and bounds into it and starts from an empty active set. A hot start from
the previous solve's active set was measured and not kept: it cut DAQP's iterations 3x (4.3 -> 1.4 on CMU
131_02, G1) but not its time (median 68-90 us cold, 100 us hot: the working set is factorised again, row by
row). A bound at or beyond DAQP's infinity (``DAQP_INF`` = 1e30 of its ``constants.h``) bounds nothing; rows
without a bound on either side stay in ``C`` and are never added to the working set. ROS-free.
"""

from __future__ import annotations

import daqp
import numpy as np

from dynik_ros.core.lapack import dpotrf, dtrtrs

INFINITY = 1e30  # DAQP_INF (daqp/include/constants.h): a bound at least this large is absent
OPTIMAL = 1  # DAQP's exitflag for an optimal solution (2, soft optimal, needs soft rows: none here)
NOT_POSITIVE_DEFINITE = -5  # DAQP_EXIT_NONCONVEX, which DAQP itself gives a P without a Cholesky factor


class ActiveSetQP:
    """One DAQP workspace for QPs of a fixed size (``n`` columns, ``m`` rows of ``C``): :meth:`solve` returns
    the minimiser or ``None`` (infeasible, iteration limit, a ``P`` that is not positive definite, non-finite
    data or result); every solve starts from an empty active set."""

    def __init__(self, n: int, m: int):
        self.n, self.m = n, m
        self._model = daqp.Model()
        self._set_up = False
        self._cold = np.zeros(m, dtype=np.intc)  # DAQP keeps and writes the sense array it is given
        # the arrays every solve writes its data into (new ones per solve cost their allocation): the bounds
        # as DAQP takes them, and [C^T | q] in Fortran order, which dtrtrs turns into [M^T | w] in place
        self._lower, self._upper = np.empty(m), np.empty(m)
        self._floor, self._ceiling = np.full(m, -INFINITY), np.full(m, INFINITY)  # (no scalar per call)
        self._stacked = np.empty((n, m + 1), order="F")
        # M (C order) and w as views of it, made once: what dtrtrs gives when it solves in place (it does
        # on a Fortran-order float64 array; else views of its answer are made per solve)
        self._ldp = self._stacked[:, :m].T, self._stacked[:, m]
        # the last LDP formed, (L, M, w), for a re-solve of the same P, q and C (``same_ldp``); None if none
        self._formed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.iterations = 0
        self.exitflag = 0

    def solve(
        self,
        hessian: np.ndarray,
        gradient: np.ndarray,
        rows: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        same_ldp: bool = False,
    ) -> np.ndarray | None:
        """``argmin 1/2 x^T P x + q^T x`` s.t. ``lower <= rows x <= upper``, or ``None`` where DAQP does not
        report it optimal. Shapes other than those set up are refused: DAQP's ``update`` would ignore such an
        array silently and answer the previous problem. ``same_ldp``: the caller vouches that ``P``, ``q`` and
        ``C`` are the same floats as at the last call; the factor and ``[M | w]`` formed then are used again
        (the same LAPACK calls on the same floats gave them; DAQP reads them, never writes them), only the
        bounds are new: a re-solve of one step with other bounds skips ~30 us of its ~100."""
        n, m = self.n, self.m
        if rows.shape != (m, n) or hessian.shape != (n, n):
            raise ValueError(f"ActiveSetQP set up for {m} x {n} rows, given {rows.shape}")
        lower = np.maximum(lower, self._floor, out=self._lower)
        upper = np.minimum(upper, self._ceiling, out=self._upper)
        if same_ldp and self._formed is not None:
            factor, ldp_rows, linear = self._formed
        else:
            factor, ldp_rows, linear = self._form(hessian, gradient, rows)
            if factor is None:
                return self._failed(NOT_POSITIVE_DEFINITE)
        self._cold.fill(0)
        if self._set_up:
            flag = self._model.update(f=linear, A=ldp_rows, bupper=upper, blower=lower, sense=self._cold)
        else:
            identity = np.eye(n)  # kept by DAQP's model: P = I, diagonal, so M is taken as given
            flag, _ = self._model.setup(identity, linear, ldp_rows, upper, lower, self._cold)
            self._set_up = flag >= 0
        # a rejected update leaves the model on the previous problem: its solve would answer that one
        if flag < 0:
            return self._failed(flag)
        z, _, exitflag, info = self._model.solve()
        self.iterations = int(info["iterations"])
        if exitflag != OPTIMAL:
            return self._failed(exitflag)
        x, _ = dtrtrs(factor, z, lower=1, trans=1)  # R x = L^T x = z
        if np.count_nonzero(np.isfinite(x)) != n:  # (not .all(): its wrappers cost ~4 us a call in the IK)
            return self._failed(exitflag)
        self.exitflag = exitflag
        return x

    def _form(self, hessian: np.ndarray, gradient: np.ndarray, rows: np.ndarray) -> tuple:
        """The LDP of ``(P, q, C)``: ``(L, M, w)``, kept for a re-solve; ``(None, None, None)`` if ``P`` has
        no Cholesky factor. (Solving for ``w`` alone would not do for a new ``q``: ``dtrtrs`` on ``q`` by
        itself gives other floats than ``q``'s column of ``[C^T | q]``, ~1e-10 apart on walk60's QPs.)"""
        m = self.m
        self._formed = None
        # P = L L^T from P's upper triangle in C order (the lower one of its transpose, a Fortran-order view
        # LAPACK takes without a copy): L = R^T, the factor of the module docstring. Its other triangle is
        # left as P's (clean=0): dtrtrs reads only the lower one (LAPACK: "not referenced")
        factor, info = dpotrf(hessian.T, lower=1, clean=0)
        if info != 0:
            return None, None, None
        stacked = self._stacked  # [C^T | q] -> [M^T | w]: R^T X = L X = [C^T | q]
        stacked[:, :m] = rows.T
        stacked[:, m] = gradient
        # (a factor dpotrf returned has a positive diagonal: the triangular solves cannot fail; NaN data
        # gives a non-finite x, refused below)
        solved, _ = dtrtrs(factor, stacked, lower=1, overwrite_b=1)
        # M (C order: a view), w
        ldp_rows, linear = self._ldp if solved is stacked else (solved[:, :m].T, solved[:, m])
        self._formed = factor, ldp_rows, linear
        return self._formed

    def _failed(self, flag: int) -> None:
        """No solution: DAQP's verdict (or :data:`NOT_POSITIVE_DEFINITE`) kept in :attr:`exitflag`."""
        self.exitflag = int(flag)
        return None
