"""Dense dual active-set solves of the IK step's QP with DAQP (Arnstrom, Bemporad, Axehill 2022, "A dual
active-set solver for embedded quadratic programming using recursive LDL^T updates", IEEE TAC).

    minimize_x  1/2 x^T P x + q^T x      subject to   l <= C x <= u              (eq. 10 as posed)

DAQP works on the dense ``P`` and ``C`` (a few tens of columns and rows here: no sparsity to exploit) and
ends on an exact vertex of its working set: every row met to its primal tolerance (1e-6, absolute), where
OSQP's ADMM iterate stops within ``eps_rel`` of the rows' scale (1e-4 outside them on real captures). One
``daqp.Model`` per QP holds its workspace (allocated at the first solve); each solve writes the step's
``P``, ``q``, ``C`` and bounds into it and starts from an empty active set. A hot start from the previous
solve's active set was measured and not kept: it cut DAQP's iterations 3x (4.3 -> 1.4 on CMU 131_02, G1) but
not its time (median 68-90 us cold, 100 us hot: the working set is factorised again, row by row).
A bound at or beyond DAQP's infinity (``DAQP_INF`` = 1e30 of its ``constants.h``) bounds nothing; rows
without a bound on either side stay in ``C`` and are never added to the working set. ROS-free.
"""

from __future__ import annotations

import daqp
import numpy as np

INFINITY = 1e30  # DAQP_INF (daqp/include/constants.h): a bound at least this large is absent
OPTIMAL = 1  # DAQP's exitflag for an optimal solution (2, soft optimal, needs soft rows: none here)


class ActiveSetQP:
    """One DAQP workspace for QPs of a fixed size (``n`` columns, ``m`` rows of ``C``): :meth:`solve` returns
    the minimiser or ``None`` (infeasible, iteration limit, a ``P`` that is not positive semi-definite,
    non-finite data or result); every solve starts from an empty active set."""

    def __init__(self, n: int, m: int):
        self.n, self.m = n, m
        self._model = daqp.Model()
        self._set_up = False
        self._cold = np.zeros(m, dtype=np.intc)  # DAQP keeps and writes the sense array it is given
        self.iterations = 0
        self.exitflag = 0

    def solve(
        self,
        hessian: np.ndarray,
        gradient: np.ndarray,
        rows: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> np.ndarray | None:
        """``argmin 1/2 x^T P x + q^T x`` s.t. ``lower <= rows x <= upper``, or ``None`` where DAQP does not
        report it optimal. Shapes other than those set up are refused: DAQP's ``update`` would ignore such an
        array silently and answer the previous problem."""
        if rows.shape != (self.m, self.n) or hessian.shape != (self.n, self.n):
            raise ValueError(f"ActiveSetQP set up for {self.m} x {self.n} rows, given {rows.shape}")
        lower = np.maximum(lower, -INFINITY)
        upper = np.minimum(upper, INFINITY)
        self._cold[:] = 0
        if self._set_up:
            flag = self._model.update(
                H=hessian, f=gradient, A=rows, bupper=upper, blower=lower, sense=self._cold
            )
        else:
            flag, _ = self._model.setup(hessian, gradient, rows, upper, lower, self._cold)
            self._set_up = flag >= 0
        # a rejected update leaves the model on the previous problem: its solve would answer that one
        if flag < 0:
            return self._failed(flag)
        x, _, exitflag, info = self._model.solve()
        self.iterations = int(info["iterations"])
        if exitflag != OPTIMAL or not np.isfinite(x).all():
            return self._failed(exitflag)
        self.exitflag = exitflag
        return x

    def _failed(self, flag: int) -> None:
        """No solution: DAQP's verdict kept in :attr:`exitflag`."""
        self.exitflag = int(flag)
        return None
