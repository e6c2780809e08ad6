"""Dynamical inverse kinematics (Rapetti et al. 2020, sec. 2.4 and 3; Figure 2).

Each :meth:`DynamicalIK.step` does the three tasks of Figure 2 once:

1. velocity correction ``v* = v + K r(q_{k-1}, x_k)`` with the residual of eq. (5) (eq. 9);
2. inverse differential kinematics: the QP of eq. (10) with the ``tanh`` joint-limit avoidance of eq. (12)
   and the linear joint constraints of eq. (13), solved by OSQP;
3. integration of ``nu`` into ``q``: joints and base position by a quadrature of ``nu`` over the step, base
   rotation on SO(3) with the orthonormality correction of eq. (14).

Beyond the paper (each can be switched back to the paper's choice in :class:`DynamicalIKConfig`):

* time-consistent residual: eq. (9) pairs ``q_{k-1}`` with ``x_k``; together with the feed-forward ``v_k``
  that counts the motion of the step twice and leaves a steady error of about ``v dt`` for any ``K``.
  We compare ``q_{k-1}`` with ``x_{k-1}`` instead (``residual_timing``);
* ``nu`` integrated by a fourth-order Adams-Moulton rule over the last four samples (``integration``,
  :mod:`~dynik_ros.core.adams`) instead of explicit Euler; ``"trapezoidal"`` is the second-order option;
* the Jacobian of eq. (9)-(10) taken at the configuration the step is heading to (predicted by
  Adams-Bashforth, or ``q_{k-1} + nu_{k-1} dt`` with the simpler rules) rather than at ``q_{k-1}``
  (``jacobian_at``), so ``nu_k`` is the velocity at ``t_k``. On noise-free walking at 60 Hz (K = 10) the
  MNTE goes from 1.5e-4 (paper) to 2.2e-5 (consistent residual), 2e-8 (+ trapezoidal, predicted
  Jacobian) and 6e-11 (Adams);
* the gain is capped at ``max_gain_dt / dt`` (Remark 2's variable gain, keeping the discrete loop
  ``r+ = (1 - K dt) r`` stable for any ``dt``);
* the joint velocity bounds also keep the next integration step inside the limits (the ``tanh`` bound
  alone can overshoot, see the remark under Figure 3).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import osqp

from dynik_ros.core.adams import MAX_HISTORY, adams_weights
from dynik_ros.core.base_integration import SCHEMES, integrate_rotation
from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual, to_pinocchio_velocity
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import determinant, exp_so3, orthonormality_error
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP

_INFINITY = float(osqp.constant("OSQP_INFTY"))
RESIDUAL_TIMINGS = ("consistent", "paper")
INTEGRATIONS = ("adams", "trapezoidal", "euler")
JACOBIAN_POINTS = ("predicted", "previous")
_TRAPEZOID, _EULER = np.array([0.5, 0.5]), np.ones(1)  # quadrature weights
_TRAPEZOID.flags.writeable = _EULER.flags.writeable = False


@dataclass(frozen=True)
class DynamicalIKConfig:
    """Solver options. ``limit_gain`` is ``k_g`` of eq. (12) and the diagonal of ``K_g`` in eq. (13);
    ``orthonormality_gain`` is ``rho`` of eq. (14a)."""

    limit_gain: float = 10.0
    orthonormality_gain: float = 10.0
    rotation_integration: str = "exp"
    max_gain_dt: float = 1.0
    discrete_limit_guard: bool = True
    rotation_tolerance: float = 1e-3
    residual_timing: str = "consistent"
    integration: str = "adams"
    jacobian_at: str = "predicted"
    qp: QPSettings = field(default_factory=QPSettings)

    def __post_init__(self) -> None:
        if self.residual_timing not in RESIDUAL_TIMINGS:
            raise ValueError(
                f"residual_timing must be one of {RESIDUAL_TIMINGS}, got '{self.residual_timing}'"
            )
        if self.jacobian_at not in JACOBIAN_POINTS:
            raise ValueError(f"jacobian_at must be one of {JACOBIAN_POINTS}, got '{self.jacobian_at}'")
        if self.integration not in INTEGRATIONS:
            raise ValueError(f"integration must be one of {INTEGRATIONS}, got '{self.integration}'")
        if self.rotation_integration not in SCHEMES:
            raise ValueError(
                f"rotation_integration must be one of {SCHEMES}, got '{self.rotation_integration}'"
            )
        for name in ("limit_gain", "orthonormality_gain", "max_gain_dt", "rotation_tolerance"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {value}")


@dataclass
class StepInfo:
    """What the last step did: OSQP status, iterations, residual size and wall time."""

    status: str = "not run"
    iterations: int = 0
    solved: bool = True
    residual_norm: float = float("nan")
    solve_time: float = 0.0
    held: bool = False


class DynamicalIK:
    """Closed-loop IK of Figure 2 for a :class:`RobotModel` and a set of :class:`FrameTarget`.

    State: base position, base rotation matrix, joint positions, and the last velocity ``nu`` in mixed
    coordinates ``(I p_dot_B, I omega_B, s_dot)``. :meth:`step` returns pinocchio's ``q`` and tangent ``v``.
    """

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet | Sequence[FrameTarget],
        config: DynamicalIKConfig | None = None,
        q0: np.ndarray | None = None,
    ):
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.config = config or DynamicalIKConfig()
        self.kinematics = FrameKinematics.for_targets(robot, self.targets)
        self.gains = self.targets.gains()
        self.weights = self.targets.weights()
        nb, n = robot.base_dofs, robot.n_joints
        rows = [np.hstack((np.zeros((n, nb)), np.eye(n)))]
        self._n_coupled = 0
        if robot.constraints is not None:
            rows.append(np.hstack((np.zeros((robot.constraints.A.shape[0], nb)), robot.constraints.A)))
            self._n_coupled = robot.constraints.A.shape[0]
        self.qp = VelocityQP(self.kinematics.pattern(), np.vstack(rows), self.config.qp)
        self._lower = np.empty(n + self._n_coupled)
        self._upper = np.empty(n + self._n_coupled)
        self.info = StepInfo()
        self.reset(q0)

    # ----------------------------------------------------------------- state
    def reset(self, q0: np.ndarray | None = None) -> None:
        """Restart from ``q0`` (pinocchio layout; default: neutral), joints clipped into their limits."""
        q0 = self.robot.neutral_configuration() if q0 is None else np.asarray(q0, dtype=float)
        if q0.shape != (self.robot.nq,) or not np.all(np.isfinite(q0)):
            raise ValueError(f"q0 must be {self.robot.nq} finite values")
        self.base_position, self.base_rotation, joints = self.robot.split(q0)
        clipped = np.clip(joints, self.robot.lower, self.robot.upper)
        if np.any(clipped != joints):
            moved = [self.robot.joint_names[i] for i in np.flatnonzero(clipped != joints)]
            warnings.warn(f"initial joint positions clipped into their limits: {moved}", stacklevel=2)
        self.joint_positions = clipped
        self.nu = np.zeros(self.robot.nv)
        # nu_{k-2}, nu_{k-3}, ... and the lengths of the steps that ended at them (most recent first)
        self._past_nu = np.zeros((MAX_HISTORY, self.robot.nv))
        self._past_dt: list[float] = []
        self._weights_key: tuple[float, ...] | None = None
        self._predictor = self._corrector = _EULER
        self._reference: Measurements | None = None
        self.qp.reset_warm_start()

    @property
    def q(self) -> np.ndarray:
        """Current configuration in pinocchio's layout ``(p, quaternion xyzw, s)``."""
        return self.robot.join(self.base_position, self.base_rotation, self.joint_positions)

    @property
    def v(self) -> np.ndarray:
        """Current velocity in pinocchio's tangent layout (base twist in the base frame)."""
        return to_pinocchio_velocity(self.nu, self.base_rotation, self.robot.floating_base)

    def set_base_pose(self, position: np.ndarray, rotation: np.ndarray) -> None:
        """Overwrite the base pose with an external estimate (e.g. mocap feedback) before the next step."""
        position = np.asarray(position, dtype=float).reshape(3)
        rotation = np.asarray(rotation, dtype=float).reshape(3, 3)
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(rotation))):
            raise ValueError("base pose must be finite")
        if orthonormality_error(rotation) > self.config.rotation_tolerance or determinant(rotation) <= 0:
            raise ValueError("base rotation is not a rotation matrix")
        if not self.robot.floating_base:
            raise ValueError(f"{self.robot.name} has a fixed base")
        self.base_position, self.base_rotation = position.copy(), rotation.copy()

    def stop(self) -> None:
        """Zero the velocity and its integration history (the model is at rest; the pose is kept)."""
        self.nu = np.zeros(self.robot.nv)
        self._past_nu[:] = 0.0

    def set_gains(self, position_gain: float | None = None, orientation_gain: float | None = None) -> None:
        """Set every position and/or orientation gain of ``K`` (eq. 7) at run time; must be >= 0."""
        n_pos = 3 * self.targets.n_position
        for value, rows in ((position_gain, slice(0, n_pos)), (orientation_gain, slice(n_pos, None))):
            if value is None:
                continue
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"gains must be finite and >= 0, got {value}")
            self.gains[rows] = value

    # ----------------------------------------------------------------- the step
    def step(self, measurements: Measurements, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Advance by ``dt`` seconds towards ``measurements``; returns ``(q, v)`` (pinocchio layout).

        Invalid input (``dt`` not positive and finite, NaN, wrong shapes, non-rotations) raises
        ``ValueError`` before any state changes.
        """
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be positive and finite, got {dt}")
        measurements.validate(self.targets, self.config.rotation_tolerance)
        start = time.perf_counter()
        self._plan_integration(dt)
        predicted = self.config.jacobian_at == "predicted"
        kinematics = self.kinematics
        positions, rotations = kinematics.poses(self.q) if predicted else kinematics.update(self.q)
        ref_pos, ref_rot = self._reference_pose(measurements)
        residual = pose_residual(positions, rotations, ref_pos, ref_rot)
        feed_forward = np.concatenate(
            (
                _zeros_if_none(measurements.linear_velocities, self.targets.n_position),
                _zeros_if_none(measurements.angular_velocities, self.targets.n_orientation),
            )
        )
        gains = np.minimum(self.gains, self.config.max_gain_dt / dt)
        corrected = feed_forward + gains * residual  # v* of eq. (9)
        if predicted:
            base_position, q_next = self._predicted_configuration(dt)
            kinematics.update(q_next)
            jacobian = kinematics.stacked_jacobian(base_position)
        else:
            jacobian = kinematics.stacked_jacobian(self.base_position)
        self._velocity_bounds(dt)
        solution = self.qp.solve(jacobian, corrected, self.weights, self._lower, self._upper)
        nu = solution.nu
        nb, n = self.robot.base_dofs, self.robot.n_joints
        nu[nb:] = np.clip(nu[nb:], self._lower[:n], self._upper[:n])
        self._integrate(nu, dt)
        self._reference = measurements
        self.info = StepInfo(
            status=solution.status,
            iterations=solution.iterations,
            solved=solution.solved,
            residual_norm=float(np.linalg.norm(residual)),
            solve_time=time.perf_counter() - start,
            held=not solution.solved,
        )
        return self.q, self.v

    def _plan_integration(self, dt: float) -> None:
        """Quadrature weights of this step: ``_corrector`` over ``(nu_k, nu_{k-1}, ...)`` integrates the step,
        ``_predictor`` over ``(nu_{k-1}, ...)`` predicts where it ends (see :mod:`~dynik_ros.core.adams`);
        ``_carried_velocity`` is the part of the step's mean velocity already known before the QP."""
        scheme = self.config.integration
        if scheme != "adams":
            self._corrector = _TRAPEZOID if scheme == "trapezoidal" else _EULER
            self._predictor = _EULER
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

    def _past_velocity_sum(self, weights: np.ndarray) -> np.ndarray:
        """``sum_i weights[i] nu_{k-1-i}``."""
        total = weights[0] * self.nu
        return total + weights[1:] @ self._past_nu[: weights.size - 1] if weights.size > 1 else total

    def _predicted_configuration(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """``q_{k-1}`` advanced over the step by the predictor: where the step ends, to linearise there."""
        nb = self.robot.base_dofs
        mean = self._past_velocity_sum(self._predictor)
        joints = self.joint_positions + dt * mean[nb:]
        if not nb:
            return self.base_position, self.robot.join(self.base_position, self.base_rotation, joints)
        position = self.base_position + dt * mean[:3]
        rotation = exp_so3(dt * mean[3:6]) @ self.base_rotation
        return position, self.robot.join(position, rotation, joints)

    def _reference_pose(self, measurements: Measurements) -> tuple[np.ndarray, np.ndarray]:
        """The target pose that the residual compares ``q_{k-1}`` with.

        ``"paper"`` pairs ``q_{k-1}`` with ``x_k`` (eq. 9). With the velocity feed-forward ``v_k`` that
        double-counts the motion over the step: in steady state the model leads the measurement by about
        ``v dt`` whatever ``K``. ``"consistent"`` pairs ``q_{k-1}`` with ``x_{k-1}``, so the correction only
        acts on the tracking error and the feed-forward carries the motion.
        """
        previous = self._reference
        if self.config.residual_timing == "paper" or previous is None:
            return measurements.positions, measurements.rotations
        return previous.positions, previous.rotations

    def _velocity_bounds(self, dt: float) -> None:
        """Joint velocity bounds of eq. (12) and coupled-row bounds of eq. (13b), written in place."""
        robot, kg, n = self.robot, self.config.limit_gain, self.robot.n_joints
        s = self.joint_positions
        vmax = robot.velocity_limit
        lower = -vmax * np.tanh(kg * (s - robot.lower))
        upper = vmax * np.tanh(kg * (robot.upper - s))
        # The next joint positions are s + h s_dot + carry (see _integrate): keep them inside the limits.
        h = self._corrector[0] * dt
        carry = dt * self._carried_velocity[robot.base_dofs :]
        if self.config.discrete_limit_guard:
            lower = np.maximum(lower, (robot.lower - s - carry) / h)
            upper = np.minimum(upper, (robot.upper - s - carry) / h)
        self._lower[:n] = np.minimum(lower, upper)
        self._upper[:n] = upper
        if self._n_coupled:
            c = robot.constraints
            slack = c.b - c.A @ s
            bound = c.velocity_bound * np.tanh(kg * slack)
            if self.config.discrete_limit_guard:
                bound = np.minimum(bound, (slack - c.A @ carry) / h)
            self._lower[n:] = -_INFINITY
            self._upper[n:] = bound

    def _integrate(self, nu: np.ndarray, dt: float) -> None:
        """Integrate mixed ``nu`` over ``dt`` (sec. 3.3): ``p_B`` and ``s`` linearly, ``R_B`` by eq. (14).

        The step moves by ``dt`` times the corrector-weighted mean velocity: ``nu_k`` alone for ``"euler"``
        (the paper), the mean of ``nu_{k-1}`` and ``nu_k`` for ``"trapezoidal"``, Adams-Moulton over four
        samples for ``"adams"``. A rule of order ``p`` leaves a steady tracking error of about
        ``dt^p |d^p nu/dt^p| / K``.
        """
        nb = self.robot.base_dofs
        mean = self._corrector[0] * nu + self._carried_velocity
        if nb:
            self.base_position = self.base_position + dt * mean[:3]
            self.base_rotation = integrate_rotation(
                self.base_rotation,
                mean[3:6],
                dt,
                self.config.orthonormality_gain,
                self.config.rotation_integration,
            )
        self.joint_positions = self.joint_positions + dt * mean[nb:]
        self._past_nu[1:] = self._past_nu[:-1]
        self._past_nu[0] = self.nu
        self._past_dt = [dt, *self._past_dt[: MAX_HISTORY - 1]]
        self.nu = nu


def _zeros_if_none(values: np.ndarray | None, count: int) -> np.ndarray:
    return np.zeros(3 * count) if values is None else np.asarray(values, dtype=float).reshape(-1)
