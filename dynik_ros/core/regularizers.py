"""The second seed's regularizers (Schumacher et al. 2021, sec. IV-C b and IV-D) as cost terms of the QP.

**State regularizer** ``R_state(s) = 1/2 |s - s_bar|^2`` (towards the previous state). One step moves the
state by ``dt m`` with ``m = w_0 nu_k + c`` (the quadrature's mean velocity, as in the integration), so the
seed's term is ``1/2 dt^2 |m|^2``; it is used divided by ``dt^2``, ``1/2 w_state |m|^2``, to keep the weight
independent of the sample rate and in the units of the velocity rows of eq. (10a).

**Velocity regularizer** on body angular velocities, eq. (4)-(5) of the seed:

    R_vel(s) = sum_i g_reg(3 - tr[R(q_bar_i)^T R(q_i)]),   g_reg(x) = 0 for x <= t_vel,

non-zero with its gradient only above the threshold. Over one step body ``i`` turns by ``theta_i = dt
omega_i`` (``omega_i = J_omega,i m``, its world angular velocity, ``m`` the step's mean velocity), and
``x_i = 3 - tr(R_bar^T exp(theta) R_bar) = 2 (1 - cos|theta|) = |theta|^2 (1 + O(theta^2))``. The text of
eq. (5) in our copy of the seed is garbled past "g_reg(x) = ... if x > t_vel, 0 otherwise" and the
statement that the regularizer and its gradient vanish at the threshold; we use ``g_reg(x) = w_vel
(sqrt(x) - sqrt(t_vel))^2 / dt^2`` above ``t_vel``, which has that property and, with ``sqrt(x) = dt
|omega|``, reads ``w_vel (|omega_i| - omega_t)^2``: the excess body speed squared, in the units of the
velocity rows, independent of the sample rate (``t_vel = 2 (1 - cos(omega_t dt))``; the seed's ``1.11e-5``
at 1200 frames/s is ``omega_t = 4.0 rad/s``). A quartic ``g_reg`` (``(x - t_vel)^2``) was tried first: its
Newton steps from a spike shrink it by only 2/3 per QP solve, so a 78 rad/s spike stayed above 50 rad/s.

``R_vel`` is convex in ``m`` (a convex non-decreasing hinge of the convex ``|J_i m|``). The QP gets its
second-order (Newton) model at an expansion point: with ``s_i = |omega_i| > omega_t``, ``e_i = omega_i /
s_i`` and ``g_i = J_i^T e_i``, gradient ``2 w sum (s_i - omega_t) g_i`` and Hessian ``2 w sum [(omega_t /
s_i) g_i g_i^T + (1 - omega_t / s_i) J_i^T J_i]`` (positive semi-definite). The first model is taken at
the previous step's velocity; while a body is above the threshold the step re-solves with the model at its
own solution (sequential QP, as the seed's SQP, at most ``iterations`` solves): the speed of a singularity
rises within a few samples, and a model one sample late lets the spike through. Such a step is integrated
by Euler (Adams' carried history made the regularized ``nu_k`` alternate). Bodies below the threshold add
nothing, and with both weights 0 nothing is computed at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel


@dataclass(frozen=True)
class RegularizerConfig:
    """``state_weight`` ``w_state`` [1] and ``velocity_weight`` ``w_vel`` [s^2/rad^2 per (rad/s)^2 of
    excess], ``velocity_threshold`` ``omega_t`` [rad/s]: body angular speed above which ``R_vel`` acts."""

    state_weight: float = 0.0
    velocity_weight: float = 0.0
    velocity_threshold: float = 4.0
    iterations: int = 4  # QP solves per step at most while a body is above the threshold

    def __post_init__(self) -> None:
        for name in ("state_weight", "velocity_weight", "velocity_threshold"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"regularizers.{name} must be finite and >= 0, got {value}")
        if self.iterations < 1:
            raise ValueError(f"regularizers.iterations must be >= 1, got {self.iterations}")

    @property
    def enabled(self) -> bool:
        return self.state_weight > 0 or self.velocity_weight > 0


class Regularizers:
    """Cost terms ``(H, g)`` on ``nu_k`` for one :class:`RobotModel` (see the module docstring)."""

    def __init__(self, robot: RobotModel, config: RegularizerConfig):
        self.robot = robot
        self.config = config
        model, nb, nv = robot.model, robot.base_dofs, robot.nv
        # support[i, c]: column c of mixed nu turns body i (the child of pinocchio joint i + 1)
        bodies = range(1, model.njoints)
        support = np.zeros((len(bodies), nv), dtype=bool)
        for row, j in enumerate(bodies):
            for k in model.supports[j]:
                if k == 0:
                    continue
                if nb and k == 1:
                    support[row, 3:6] = True  # the base's world angular velocity turns every body
                    continue
                start = model.joints[k].idx_v
                support[row, start : start + model.joints[k].nv] = True
        self.support = support.astype(float)
        self._angular = np.zeros((3, nv))
        if nb:
            self._angular[:, 3:6] = np.eye(3)
        self.last_active = 0  # bodies above the threshold in the last step
        self._checked: tuple | None = None  # (m0, (omegas, speeds) or None) of the last any_active
        # |omega|^2 below this leaves every body at or under the threshold (a margin of 1e-12 over the
        # rounding of omega_t^2 itself)
        self._clear = config.velocity_threshold**2 * (1.0 - 1e-12)
        self._diagonal = slice(None, None, nv + 1)  # the diagonal in a flat view (strided, no gather)
        self._step_data: pin.Data | None = None  # data whose Jacobians _angular holds this step (begin_step)
        self._step_gram: np.ndarray | None = None  # A^T A of this step, built once

    def body_speeds(self, data: pin.Data, m0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(omega_i, |omega_i|)`` of every body at the mean velocity ``m0``, ``data`` holding the step's
        joint Jacobians; sets ``last_active`` (bodies above the threshold)."""
        omegas, squares = self._squared_speeds(data, m0)
        speeds = np.sqrt(squares)
        self.last_active = int(np.count_nonzero(speeds > self.config.velocity_threshold))
        return omegas, speeds

    def begin_step(self, data: pin.Data) -> None:
        """``data`` holds this step's joint Jacobians until :meth:`end_step` (:class:`ExtraTerms` brackets its
        use of the regularizers in one step with both): their angular columns are copied once, not at every
        check and cost of the sequential QP, and ``A^T A`` is built at most once."""
        self._step_data = None
        self._load(data)
        self._step_data = data

    def end_step(self) -> None:
        """Back to copying the Jacobians at every call (``data`` may change between calls)."""
        self._step_data = None
        self._step_gram = None

    def _load(self, data: pin.Data) -> None:
        """The world angular velocity of each joint column (``data.J``'s angular rows) into ``_angular``,
        unless they are this step's and already there; another ``data`` ends the step's reuse."""
        if data is self._step_data:
            return
        self.end_step()
        nb = self.robot.base_dofs
        self._angular[:, nb:] = data.J[3:, nb:]

    def _gram(self) -> np.ndarray:
        """``A^T A`` of the loaded angular columns (once per step inside :meth:`begin_step`)."""
        if self._step_data is None:
            return self._angular.T @ self._angular
        if self._step_gram is None:
            self._step_gram = self._angular.T @ self._angular
        return self._step_gram

    def _squared_speeds(self, data: pin.Data, m0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(omega_i, |omega_i|^2)`` of every body at ``m0`` (:meth:`body_speeds` before the root)."""
        self._load(data)
        angular = self._angular
        omegas = (self.support * m0) @ angular.T  # (bodies, 3)
        return omegas, np.einsum("ij,ij->i", omegas, omegas)

    def _fast_bodies(self, data: pin.Data, m0: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`body_speeds` when a body may be above the threshold, else ``None`` (``last_active`` 0)
        without the square roots and the count: every ``|omega_i|^2`` below ``omega_t^2`` (kept a few ulps
        under it, :attr:`_clear`) gives ``|omega_i| <= omega_t`` after the correctly rounded, monotone
        square root, i.e. no body above the threshold either way."""
        omegas, squares = self._squared_speeds(data, m0)
        if squares.max() < self._clear:
            self.last_active = 0
            return None
        speeds = np.sqrt(squares)
        self.last_active = int(np.count_nonzero(speeds > self.config.velocity_threshold))
        return omegas, speeds

    def any_active(self, data: pin.Data, m0: np.ndarray) -> bool:
        """Whether a body turns faster than the threshold at ``m0`` (no cost built; sets ``last_active``)."""
        if self.config.velocity_weight <= 0:
            self.last_active = 0
            return False
        self._checked = (m0, self._fast_bodies(data, m0))  # reused once if the next cost is about this m0
        return bool(self.last_active)

    def cost(self, data: pin.Data, w0: float, carried: np.ndarray, m0: np.ndarray):
        """``(H, g)`` on ``nu_k`` with ``data`` holding the step's joint Jacobians; ``carried`` is the part
        of the step's mean velocity known before the QP (``m = w0 nu_k + carried``), ``m0`` the expansion
        point of the velocity regularizer's model (a mean velocity). With no body above the threshold the
        state term alone is the diagonal ``w_state I`` (built without the dense products)."""
        active = self._active_cost(data, w0, carried, m0)
        if active is not None:
            return active
        hessian = np.zeros((self.robot.nv,) * 2)  # the state term alone: w_state I (or nothing)
        hessian.reshape(-1)[self._diagonal] = w0 * w0 * self.config.state_weight
        return hessian, w0 * (self.config.state_weight * carried)

    def cost_plus(self, base, data: pin.Data, w0: float, carried: np.ndarray, m0: np.ndarray):
        """``base + cost(...)`` for another cost ``base = (H, g)`` (or ``None``), ``base`` left untouched:
        with a body above the threshold ``base`` is added onto the fresh arrays of the regularizer's cost,
        without one the state diagonal is added to a copy of ``H`` (no dense zero matrix to add)."""
        if base is None:
            return self.cost(data, w0, carried, m0)
        active = self._active_cost(data, w0, carried, m0)
        if active is not None:
            hessian, gradient = active  # fresh arrays: a + b == b + a bit for bit
            hessian += base[0]
            gradient += base[1]
            return hessian, gradient
        state = self.config.state_weight
        hessian = base[0].copy()
        hessian.reshape(-1)[self._diagonal] += w0 * w0 * state
        return hessian, base[1] + w0 * (state * carried)

    def _active_cost(self, data: pin.Data, w0: float, carried: np.ndarray, m0: np.ndarray):
        """:meth:`cost` while a body is above the threshold (the Newton model plus the state term), else
        ``None`` (sets ``last_active``)."""
        config = self.config
        self.last_active = 0
        if config.velocity_weight <= 0:
            return None
        checked, self._checked = self._checked, None
        if checked is not None and checked[0] is m0:  # any_active just computed them (same data, same m0)
            bodies = checked[1]
            if bodies is not None:
                self.last_active = int(np.count_nonzero(bodies[1] > config.velocity_threshold))
        else:
            bodies = self._fast_bodies(data, m0)
        if not self.last_active:
            return None
        omegas, speeds = bodies
        threshold = config.velocity_threshold
        active = np.flatnonzero(speeds > threshold)
        w2 = 2 * config.velocity_weight
        angular = self._angular
        s = self.support[active]
        speed = speeds[active]
        column = speed[:, None]
        ratio = threshold / column  # (t / s_i) as a column
        g = ((omegas[active] / column) @ angular) * s  # rows g_i = J_i^T e_i
        # 2 w (sum (t/s_i) g_i g_i^T + gram * S^T diag(1 - t/s_i) S), accumulated in place (same products)
        hessian_m = s.T @ ((1.0 - ratio) * s)
        hessian_m *= self._gram()
        hessian_m += (ratio * g).T @ g
        hessian_m *= w2
        # Newton model about m0: gradient at m0 minus the Hessian's pull back to m0
        gradient_m = w2 * (g.T @ (speed - threshold))
        gradient_m -= hessian_m @ m0
        if config.state_weight > 0:
            hessian_m.reshape(-1)[self._diagonal] += config.state_weight
        gradient_m += hessian_m @ carried
        if w0 != 1.0:  # (x * 1.0 == x: the Euler steps of the sequential QP skip the scaling)
            gradient_m *= w0
            hessian_m *= w0 * w0
        return hessian_m, gradient_m
