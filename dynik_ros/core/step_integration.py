"""Integration of the dynamical IK's velocity over a step (Rapetti et al. 2020, sec. 3.3; Figure 2, task 3).

A mixin of :class:`~dynik_ros.core.dynamical_ik.DynamicalIK`: the quadrature weights of the step
(explicit Euler as in the paper, trapezoidal, or fourth-order Adams over the last samples,
:mod:`~dynik_ros.core.adams`), the configuration the step is predicted to reach (where the Jacobian is
taken) and the integration of ``nu`` into the base pose (eq. 14 on SO(3)) and the joints.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.core.adams import MAX_HISTORY, adams_weights
from dynik_ros.core.base_integration import integrate_rotation
from dynik_ros.core.lapack import dpocon, dpotrf, dtrtrs
from dynik_ros.core.small_arrays import dot as _dot
from dynik_ros.core.small_arrays import matrix3
from dynik_ros.core.so3 import exp_so3_entries

TRAPEZOID_WEIGHTS, EULER_WEIGHTS = np.array([0.5, 0.5]), np.ones(1)  # quadrature weights
TRAPEZOID_WEIGHTS.flags.writeable = EULER_WEIGHTS.flags.writeable = False
ROW_ROUND_OFF = 1e-4  # rad: a coupled row crossed by at most this is put back (OSQP's tolerance, not a jump)
BOUND_TOLERANCE = 1e-6  # relative: nu_k within this of a bound counts as on it (OSQP's eps is 1e-5 absolute)
REPEATED_DIRECTION = 1e-12  # eigenvalue of the held rows' Gram matrix, relative: below it not a direction
WELL_CONDITIONED = 1e-8  # rcond of that Gram matrix above which its Cholesky factor orthonormalises the rows


class StepIntegration:
    """Quadrature planning, prediction and integration of :class:`DynamicalIK` (uses its state:
    ``base_position``, ``base_rotation``, ``joint_positions``, ``nu`` and the history ``_past_nu``,
    ``_past_dt``)."""

    def _plan_integration(self, dt: float) -> None:
        """Quadrature weights of this step: ``_corrector`` over ``(nu_k, nu_{k-1}, ...)`` integrates the step,
        ``_predictor`` over ``(nu_{k-1}, ...)`` predicts where it ends (see :mod:`~dynik_ros.core.adams`);
        ``_carried_velocity`` is the part of the step's mean velocity already known before the QP."""
        scheme = self.config.integration
        if scheme != "adams":
            self._corrector = TRAPEZOID_WEIGHTS if scheme == "trapezoidal" else EULER_WEIGHTS
            self._predictor = EULER_WEIGHTS
        elif (key := tuple(round(h / dt, 6) for h in self._past_dt)) != self._weights_key:
            # the weights depend on the step ratios only; stamps in integer ns make equal steps differ by
            # 1 ns (2e-7 of 240 Hz), so ratios are rounded to 1e-6 to keep reusing them
            self._corrector = adams_weights(1.0, key, implicit=True)
            self._predictor = adams_weights(1.0, key, implicit=False)
            self._weights_key = key
        self._carried_velocity = (
            self._past_velocity_sum(self._corrector[1:])
            if len(self._corrector) > 1
            else np.zeros(self.robot.nv)
        )

    @property
    def _keeps_history(self) -> bool:
        """Whether ``_past_nu`` (``nu_{k-2}, nu_{k-3}, ...``) is kept: only Adams' weights reach past
        ``nu_{k-1}`` (:meth:`_plan_integration`: the trapezoid carries ``nu_{k-1}`` alone, its predictor and
        Euler none), so with another rule it stays as :meth:`DynamicalIK.reset` left it (zeros) and its
        shift and restarts are skipped: the same steps to the bit (``test_step_integration_history``),
        ~10 us a held step less (the restart's two products on the history)."""
        return self.config.integration == "adams"

    def _past_velocity_sum(self, weights: np.ndarray) -> np.ndarray:
        """``sum_i weights[i] nu_{k-1-i}``."""
        total = weights[0] * self.nu
        return total + weights[1:] @ self._past_nu[: weights.size - 1] if weights.size > 1 else total

    def _predicted_configuration(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """``q_{k-1}`` advanced over the step by the predictor: where the step ends, to linearise there."""
        mean = self._past_velocity_sum(self._predictor)
        self._predicted_mean[:] = mean
        return self.advanced(mean, dt)

    def advanced(self, mean: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
        """``(base position, q)``: ``q_{k-1}`` moved for ``h`` seconds at the mean velocity ``mean`` (mixed
        ``nu``), as :meth:`_integrate` moves it (base rotation by the exponential, without eq. 14's
        correction: it is orthonormal to round-off)."""
        nb = self.robot.base_dofs
        step = h * mean  # (one product for all three parts: its entries are h * mean[i] as in each slice's)
        joints = self.joint_positions + step[nb:]
        if not nb:
            return self.base_position, self.robot.join(self.base_position, self.base_rotation, joints)
        position = self.base_position + step[:3]
        # exp_so3(h * mean[3:6]) from the same floats, without its array checks
        rotation = _dot(matrix3(exp_so3_entries(*step[3:6].tolist())), self.base_rotation)  # (@'s BLAS call)
        return position, self.robot.join(position, rotation, joints)

    def integrate_this_step_by_euler(self) -> None:
        """This step moves by ``dt nu_k`` alone (no carried history, not reported as a fallback)."""
        self._corrector = EULER_WEIGHTS
        self._carried_velocity = np.zeros(self.robot.nv)
        self._weights_key = None

    def _use_euler_for_this_step(self) -> None:
        """Integrate the current step by ``nu_k`` alone (no carried history): always feasible."""
        self.integrate_this_step_by_euler()
        self._fell_back = True

    @property
    def step_quadrature(self) -> tuple[float, np.ndarray]:
        """``(w_0, c)`` of this step: it integrates the mean velocity ``w_0 nu_k + c``, ``c`` carried from the
        history (:meth:`_plan_integration`); rows that bound the step's mean bound ``nu_k`` through them."""
        return float(self._corrector[0]), self._carried_velocity

    def step_mean(self, nu: np.ndarray) -> np.ndarray:
        """The mean velocity the step integrates with the QP's ``nu``: its corrector weight times ``nu`` plus
        the part carried from the history (:meth:`_plan_integration`)."""
        return self._corrector[0] * nu + self._carried_velocity

    def _integrate(self, nu: np.ndarray, dt: float, held: np.ndarray | None = None) -> None:
        """Integrate mixed ``nu`` over ``dt`` (sec. 3.3): ``p_B`` and ``s`` linearly, ``R_B`` by eq. (14).

        The step moves by ``dt`` times the corrector-weighted mean velocity: ``nu_k`` alone for ``"euler"``
        (the paper), the mean of ``nu_{k-1}`` and ``nu_k`` for ``"trapezoidal"``, Adams-Moulton over four
        samples for ``"adams"``. A rule of order ``p`` leaves a steady tracking error of about
        ``dt^p |d^p nu/dt^p| / K``. ``held``: rows spanning the directions of ``nu`` whose mean the step's
        rows imposed (a held foot's, :mod:`.stance_rows`): the history restarts at that mean along them
        (:meth:`_restart_along`).
        """
        nb = self.robot.base_dofs
        mean = self.step_mean(nu)
        step = dt * mean  # (one product for the base position and the joints: the slices' entries)
        if nb:
            self.base_position = self.base_position + step[:3]
            self.base_rotation = integrate_rotation(
                self.base_rotation,
                mean[3:6],
                dt,
                self.config.orthonormality_gain,
                self.config.rotation_integration,
            )
        # the bounds keep the step inside the limits; the clip only removes OSQP's tolerance and round-off
        joints = self.joint_positions + step[nb:]
        if self._expansion is not None:  # locked joints exactly still, followers exactly on their leader
            joints = self.robot.apply_reductions(joints)
        previous = self.joint_positions
        # np.clip's result, without its wrappers
        self.joint_positions = np.minimum(np.maximum(joints, self.robot.lower), self.robot.upper)
        if self._n_coupled:
            self._back_inside_coupled_rows(previous, dt)
        if self._keeps_history:
            self._past_nu[1:] = self._past_nu[:-1]
            self._past_nu[0] = self.nu
        self._past_dt = [dt, *self._past_dt[: MAX_HISTORY - 1]]
        self.nu = nu
        if len(self._corrector) == 1:
            return
        at_bounds = self._columns_at_bounds() if self.config.restart_at_bounds else None
        if held is not None:
            self._restart_along(held, mean, at_bounds)
        elif at_bounds is not None:
            self._restart_history(at_bounds, mean[at_bounds])

    def _restart_history(self, columns: np.ndarray, mean: np.ndarray) -> None:
        """``nu_k = nu_{k-1} = ... = m`` on ``columns``: the step's own mean velocity ``mean`` there, a
        constant the rule integrates exactly. Where a row fixes the mean, ``nu_k = (m - c) / w_0``
        deconvolves the history through the rule's weights (:meth:`_columns_at_bounds`): with the
        trapezoid ``nu_k = 2 m_k - nu_{k-1}`` alternates for as long as the row holds."""
        self.nu[columns] = mean
        if self._keeps_history:
            self._past_nu[:, columns] = mean

    def _restart_along(self, rows: np.ndarray, mean: np.ndarray, columns: np.ndarray | None) -> None:
        """:meth:`_restart_history` along the row space of ``rows`` (the held feet's rows) and ``columns``
        (joints on a bound, :meth:`_columns_at_bounds`) instead of whole columns: with ``V`` an orthonormal
        basis of both, ``nu <- nu + V^T V (m - nu)`` for ``nu_k`` and every past ``nu``, so
        ``V nu_k = V nu_{k-1} = ... = V m``; what ``V`` leaves out (motions that move no held foot) keeps its
        history. The two restarted one after the other would undo each other: a held leg's joint on its bound,
        restarted last, moved the foot the history carries off the rows' mean, which then alternated there.
        ``V``: the columns themselves, and ``rows`` with those columns zeroed (the same span, orthogonal to
        them) orthonormalised through their Gram matrix ``G = J J^T``: ``V_J = L^-1 J`` with ``G = L L^T``
        (Cholesky, LAPACK) where ``G`` is well conditioned (``rcond`` above :data:`WELL_CONDITIONED`: the
        usual held step, 12 independent rows), else ``G = U diag(l) U^T`` and ``V_J = diag(l)^-1/2 U^T J``
        on the eigenvalues above ``REPEATED_DIRECTION`` of the largest (rows that repeat or vanish on the
        bound columns). Both give ``V_J^T V_J = J^T G^+ J``; the factor costs ~1/20 of numpy's ``eigh`` on
        12 x 12 (4 against 74 us in one process; an SVD of the stack cost ~10x the ``eigh``)."""
        if columns is not None:
            rows = rows.copy()
            rows[:, columns] = 0.0
        gram = _dot(rows, rows.T)  # (np.dot's C function: @'s BLAS call, small_arrays.dot)
        basis = _cholesky_basis(rows, gram)
        if basis is None:
            values, vectors = np.linalg.eigh(gram)
            kept = values > REPEATED_DIRECTION * values[-1]
            basis = (vectors[:, kept].T @ rows) / np.sqrt(values[kept])[:, None]
        self.nu += _dot(basis.T, _dot(basis, mean - self.nu))
        if self._keeps_history:
            self._past_nu += (mean - self._past_nu) @ basis.T @ basis
        if columns is not None:
            self._restart_history(columns, mean[columns])

    def _back_inside_coupled_rows(self, previous: np.ndarray, dt: float) -> None:
        """``A s <= b`` (eq. 11) where the step crossed a row by no more than ``ROW_ROUND_OFF``: as the clip
        into the joint box, a least-norm move back along the crossed rows, then clipped into the box and
        within the velocity limit of ``previous`` (the joints before the step).

        The rows bound the step's mean with OSQP's tolerance; a row met with zero slack gets no pull back
        from eq. (13b), so those crossings added up over a contact held for seconds (iCub's shoulder
        coupling pressed for 3 s: 1.1e-6 rad with the trapezoid)."""
        c, s = self.robot.constraints, self.joint_positions
        products = _dot(c.A, s)  # (@'s BLAS call, small_arrays.dot)
        # the usual step crosses no row: ``A s > b`` holds wherever ``A s - b > 0`` does (a positive rounded
        # difference needs a larger minuend), so none there is none crossed; counted without .any()'s wrapper
        if not np.count_nonzero(products > c.b):
            return
        excess = products - c.b
        over = (excess > 0.0) & (excess <= ROW_ROUND_OFF)
        if not over.any():
            return
        rows = c.A[over]
        s = s - rows.T @ np.linalg.lstsq(rows @ rows.T, excess[over], rcond=None)[0]
        if self._expansion is not None:
            s = self.robot.apply_reductions(s)
        reach = dt * self.robot.velocity_limit
        s = np.clip(s, previous - reach, previous + reach)
        self.joint_positions = np.clip(s, self.robot.lower, self.robot.upper)

    def _columns_at_bounds(self) -> np.ndarray | None:
        """The columns of the joints whose ``nu_k`` ended on a bound of the QP (``None``: none), whose
        history becomes the step's own mean velocity ``m`` (``nu_k = nu_{k-1} = ... = m``): what the joint
        did, a constant the rule integrates exactly.

        On a bound the QP does not choose ``nu_k``: the bound fixes the mean ``m = w_0 nu_k + c`` and
        ``nu_k = (m - c) / w_0``, i.e. the history is deconvolved through the rule's weights, whose
        polynomial ``9 z^3 + 19 z^2 - 5 z + 1`` (Adams-Moulton) has a root at ``z = -2.37``: each step on
        the bound multiplies the alternating part of ``nu`` by -2.37 until the velocity limit cuts it, and
        the written joint zig-zags (the trapezoid's root ``-1`` keeps it alternating without growth).
        """
        nb, n = self.robot.base_dofs, self.robot.n_joints
        s_dot, vmax = self.nu[nb:], self.robot.velocity_limit
        lower, upper = self._lower[:n], self._upper[:n]
        slack = BOUND_TOLERANCE * (1.0 + np.maximum(np.abs(lower), np.abs(upper)))
        # only the bounds on the mean deconvolve; nu_k held at its own velocity limit is a constant
        active = ((s_dot >= upper - slack) & (upper < vmax)) | ((s_dot <= lower + slack) & (lower > -vmax))
        columns = active.nonzero()[0]  # (np.flatnonzero's own call, without its wrapper and a count first)
        return nb + columns if columns.size else None


def _cholesky_basis(rows: np.ndarray, gram: np.ndarray) -> np.ndarray | None:
    """``L^-1 rows`` with ``gram = rows rows^T = L L^T``: an orthonormal basis of the rows' span (``V V^T =
    L^-1 G L^-T = I``); ``None`` where ``gram`` is not positive definite or its reciprocal condition number
    (LAPACK's ``dpocon`` estimate, 1-norm) is below :data:`WELL_CONDITIONED`, where the eigen-decomposition
    decides which directions are there."""
    factor, info = dpotrf(gram, lower=1, clean=1)
    if info != 0:
        return None
    # the 1-norm, as .sum(axis=0).max() computes it (their ufunc reductions, without the Python wrappers)
    norm = float(np.maximum.reduce(np.add.reduce(np.abs(gram), axis=0)))
    rcond, _ = dpocon(factor, norm, uplo="L")
    if not rcond > WELL_CONDITIONED:  # (NaN fails too)
        return None
    return dtrtrs(factor, rows, lower=1)[0]  # a factor of positive diagonal: the solve cannot fail
