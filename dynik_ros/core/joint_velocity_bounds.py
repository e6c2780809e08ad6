"""Bounds on the joint rows of the dynamical IK's QP (Rapetti et al. 2020, eq. 12-13b).

A mixin of :class:`~dynik_ros.core.dynamical_ik.DynamicalIK`. With ``discrete_limit_guard`` (default) the
bounds are put on the step's mean velocity, i.e. on the output trajectory itself (see the docstring of
:meth:`JointVelocityBounds._velocity_bounds`); otherwise eq. (12)-(13b) as printed, on ``nu_k``.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.core.velocity_qp import UNBOUNDED


class JointVelocityBounds:
    """Writes the bounds of the QP's joint rows and coupled rows into ``_lower`` / ``_upper`` of
    :class:`DynamicalIK` (and reads the quadrature planned by :class:`StepIntegration`)."""

    def _velocity_bounds(self, dt: float) -> None:
        """Bounds on ``nu_k``'s joint rows and coupled rows (eq. 12, 13b), written in place.

        The joints move by ``dt m`` with ``m = w_0 nu_k + c`` (the quadrature's mean velocity, ``c`` the
        part carried by earlier samples). Eq. (12)'s ``tanh`` bounds, the velocity limit and the position
        limits (``discrete_limit_guard``) are imposed on ``m``, i.e. on the output trajectory itself, and
        ``nu_k`` is also kept within the velocity limit. The set for ``m`` always holds ``m = 0`` (the
        joints stay inside their limits), so with Euler (``w_0 = 1, c = 0``) the QP is always feasible;
        when the history ``c`` makes the bounds on ``nu_k`` empty, this step is integrated by Euler.
        """
        if not self.config.discrete_limit_guard:  # the paper: eq. (12)-(13b) on nu_k alone
            self._paper_bounds()
            return
        robot, kg, n = self.robot, self.config.limit_gain, self.robot.n_joints
        vmax = robot.velocity_limit
        below = self.joint_positions - robot.lower  # >= 0: the joints are kept inside their limits
        above = robot.upper - self.joint_positions
        m_low = -np.minimum(vmax * np.tanh(kg * below), below / dt)
        m_high = np.minimum(vmax * np.tanh(kg * above), above / dt)
        if self._n_coupled:
            c = robot.constraints
            slack = np.maximum(c.b - c.A @ self.joint_positions, 0.0)
            row_high = np.minimum(c.velocity_bound * np.tanh(kg * slack), slack / dt)
        for attempt in range(2):
            w0 = self._corrector[0]
            carried = self._carried_velocity[robot.base_dofs :]
            lower = np.maximum((m_low - carried) / w0, -vmax)
            upper = np.minimum((m_high - carried) / w0, vmax)
            feasible = np.count_nonzero(lower <= upper) == n  # all (without .all()'s wrappers)
            if feasible and self._followers:  # a leader must also keep each follower within its bounds
                self._lower[:n], self._upper[:n] = lower, upper
                low, high = self._free_bounds()
                feasible = bool((low <= high).all())
            if self._n_coupled:
                rows_upper = (row_high - c.A @ carried) / w0
            if feasible and self._n_coupled:
                feasible = self._still_meets_rows(carried, w0, lower, upper, rows_upper)
            if feasible or attempt:
                break
            self._use_euler_for_this_step()
        self._lower[:n], self._upper[:n] = lower, upper
        if self._n_coupled:
            self._lower[n:] = -UNBOUNDED
            self._upper[n:] = rows_upper

    def _still_meets_rows(
        self, carried: np.ndarray, w0: float, lower: np.ndarray, upper: np.ndarray, rows_upper: np.ndarray
    ) -> bool:
        """Sufficient test that the coupled rows leave ``nu_k`` a choice: the ``nu_k`` that keeps the joints
        still, clipped into the box ``[lower, upper]``, meets every row.

        ``np.clip`` and ``np.all`` as their ufuncs, without numpy's Python wrappers (~3 us a step): ``carried
        / -w0`` is ``-carried / w0`` bit for bit (IEEE division is odd in each operand), and ``minimum`` of
        ``maximum`` is the clip's value (NaN propagates through both); only a zero's sign may differ, which
        neither the product with ``A`` nor ``<=`` can tell apart."""
        still = np.minimum(np.maximum(carried / -w0, lower), upper)
        return np.count_nonzero(self.robot.constraints.A @ still <= rows_upper + 1e-12) == self._n_coupled

    def _free_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the free joints' velocities (QP columns) from the per-joint bounds in ``_lower`` and
        ``_upper``: a leader's interval is cut to keep each follower ``m s_dot_leader`` within its own."""
        low, high = self._lower[self._free_rows].copy(), self._upper[self._free_rows].copy()
        for row, column, multiplier in self._followers:
            a, b = self._lower[row] / multiplier, self._upper[row] / multiplier
            low[column] = max(low[column], min(a, b))
            high[column] = min(high[column], max(a, b))
        return low, high

    def _paper_bounds(self) -> None:
        """Eq. (12) per joint and eq. (13b) per coupled row on ``nu_k``, as printed."""
        robot, kg, n = self.robot, self.config.limit_gain, self.robot.n_joints
        s, vmax = self.joint_positions, robot.velocity_limit
        self._lower[:n] = -vmax * np.tanh(kg * (s - robot.lower))
        self._upper[:n] = vmax * np.tanh(kg * (robot.upper - s))
        if self._n_coupled:
            c = robot.constraints
            self._lower[n:] = -UNBOUNDED
            self._upper[n:] = c.velocity_bound * np.tanh(kg * (c.b - c.A @ s))
