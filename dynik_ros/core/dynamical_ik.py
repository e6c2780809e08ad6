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

Accurate near the motion *and* robust far from it. The accuracy options above stay on everywhere; what
broke them far from the motion was measured (G1, 15 links, K = 20, 100 Hz, the robot's own joint
sinusoids as targets) and each cause removed by design:

* limits on the output, not on ``nu``: eq. (12)'s bounds, the velocity limit and the position limits are
  imposed on the step's mean velocity ``w_0 nu_k + c`` (what ``(s_k - s_{k-1}) / dt`` will be), and
  ``nu_k`` itself stays within the velocity limit. That set always holds "stand still", so it is never
  empty with Euler; when Adams' carried history ``c`` leaves no admissible ``nu_k`` (a reversal at full
  speed beside a limit), that one step is integrated by Euler (``info.euler_fallback``). Before: 98-156
  samples outside a limit (up to 0.098 rad) and finite-difference speeds up to 1.64x the limit from a far
  start; 17 % over on a real TALOS capture. After: none, on every robot and start, and in a property test
  of random, unreachable, flipping and absurd targets;
* ``orientation_residual="log"``: the rotation vector ``log(R* R^T)`` instead of eq. (5)'s ``sin``
  residual (identical to first order near the motion, so the steady accuracy is unchanged). The ``sin``
  residual has no pull at a half turn: from a 180 deg yaw the G1 stayed at MNTE 0.04 with 3.9 rad/s of
  chatter; with the log it converges in 0.5 s;
* branch recovery (:mod:`~dynik_ros.core.branch_recovery`): a limb on the wrong IK branch pressed against
  a limit is a local minimum no local scheme leaves (the paper's robust settings included: MNTE 0.06 for
  10 s from the far ends of the ranges); a shadow IK restarted from the home posture on the off limbs
  shows whether the home branch is better and the IK moves over through its own QP;
* ``v*`` is capped per target (``max_linear_speed``, ``max_angular_speed``), and a failed QP holds
  still and drops OSQP's warm start, so one absurd sample (a 1e30 twist) can no longer freeze OSQP.

Switching to the paper's robust scheme far from the motion was tried and not kept: with these changes the
accurate scheme converges from every start as fast or faster (G1 from neutral 0.24 s, the paper's
settings 4.4 s to their own floor of 2.8e-3), so a switch would only add a mode.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field, replace

import numpy as np
import osqp

from dynik_ros.core.adams import MAX_HISTORY, adams_weights
from dynik_ros.core.base_integration import SCHEMES, integrate_rotation
from dynik_ros.core.branch_recovery import BranchRecovery, BranchRecoveryConfig
from dynik_ros.core.com_objective import BalanceConfig
from dynik_ros.core.extra_terms import ExtraTerms
from dynik_ros.core.frame_change import (
    base_target_indices,
    estimate_change,
    first_on_base,
    transform_measurements,
)
from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual, to_pinocchio_velocity
from dynik_ros.core.loop_closure import LoopClosure
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import determinant, exp_so3, orthonormality_error
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP

_INFINITY = float(osqp.constant("OSQP_INFTY"))
RESIDUAL_TIMINGS = ("consistent", "paper")
INTEGRATIONS = ("adams", "trapezoidal", "euler")
JACOBIAN_POINTS = ("predicted", "previous")
ORIENTATION_RESIDUALS = ("log", "paper")
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
    max_linear_speed: float = 50.0  # m/s: cap on each position row-triple of v* (eq. 9)
    max_angular_speed: float = 100.0  # rad/s: cap on each orientation row-triple of v*
    discrete_limit_guard: bool = True
    rotation_tolerance: float = 1e-3
    residual_timing: str = "consistent"
    integration: str = "adams"
    jacobian_at: str = "predicted"
    orientation_residual: str = "log"
    branch_recovery: BranchRecoveryConfig = field(default_factory=BranchRecoveryConfig)
    qp: QPSettings = field(default_factory=QPSettings)
    balance: BalanceConfig = field(default_factory=BalanceConfig)  # CoM rows (core/com_objective.py)
    regularizers: RegularizerConfig = field(default_factory=RegularizerConfig)  # core/regularizers.py
    loops: tuple[LoopClosure, ...] = ()  # loop-closure equality rows (core/loop_closure.py)

    def __post_init__(self) -> None:
        for name, allowed in (
            ("residual_timing", RESIDUAL_TIMINGS),
            ("jacobian_at", JACOBIAN_POINTS),
            ("orientation_residual", ORIENTATION_RESIDUALS),
            ("integration", INTEGRATIONS),
            ("rotation_integration", SCHEMES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got '{getattr(self, name)}'")
        for name in (
            "limit_gain",
            "orthonormality_gain",
            "max_gain_dt",
            "rotation_tolerance",
            "max_linear_speed",
            "max_angular_speed",
        ):
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
    euler_fallback: bool = False  # the history made the limits infeasible: this step used Euler


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
        home: np.ndarray | None = None,
    ):
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.config = config or DynamicalIKConfig()
        self.kinematics = FrameKinematics.for_targets(robot, self.targets)
        self.gains = self.targets.gains()
        self._speed_caps = np.concatenate(
            (
                np.full(self.targets.n_position, self.config.max_linear_speed),
                np.full(self.targets.n_orientation, self.config.max_angular_speed),
            )
        )
        self.weights = self.targets.weights()
        nb, n = robot.base_dofs, robot.n_joints
        rows = [np.hstack((np.zeros((n, nb)), np.eye(n)))]
        self._n_coupled = 0
        if robot.constraints is not None:
            rows.append(np.hstack((np.zeros((robot.constraints.A.shape[0], nb)), robot.constraints.A)))
            self._n_coupled = robot.constraints.A.shape[0]
        expansion = None
        self._followers: list[tuple[int, int, float]] = []  # (follower row, leader's free column, multiplier)
        if robot.has_reductions:  # locked and mimic joints: the QP solves for the free joints only
            joints = robot.joint_expansion()
            expansion = np.zeros((robot.nv, nb + joints.shape[1]))
            expansion[:nb, :nb] = np.eye(nb)
            expansion[nb:, nb:] = joints
            self._columns = joints
            self._free_rows = np.array(
                [i for i, j in enumerate(robot.joint_names) if not robot.locked[i] and j not in robot.mimic],
                dtype=int,
            )
            for follower, (leader, multiplier, _) in robot.mimic.items():
                column = np.flatnonzero(joints[robot.joint_index(leader)])
                if column.size:
                    self._followers.append((robot.joint_index(follower), int(column[0]), multiplier))
        self._expansion = expansion
        self.extra = ExtraTerms(self) if ExtraTerms.wanted(self.config) else None  # second seed's terms
        self.balance = self.extra.balance if self.extra is not None else None
        self.regularizers = self.extra.regularizers if self.extra is not None else None
        self.qp = VelocityQP(
            self.kinematics.pattern(),
            np.vstack(rows),
            self.config.qp,
            expansion,
            dense_cost=self.extra is not None,
            dynamic_rows=self.extra.dynamic_rows if self.extra is not None else 0,
        )
        self._predicted_mean = np.zeros(robot.nv)
        self._lower = np.empty(n + self._n_coupled)
        self._upper = np.empty(n + self._n_coupled)
        self.info = StepInfo()
        self.last_error = float("nan")
        self._target_squares = np.zeros(self.targets.n_position + self.targets.n_orientation)
        self.home = (
            robot.neutral_configuration(warn=False)
            if home is None
            else self._checked_configuration(home, "home")
        )
        self.recovery = BranchRecovery(self.config.branch_recovery, self._shadow_at)
        self._regularization = (np.zeros(robot.nv), np.zeros(robot.nv))
        self._base_velocity: tuple[np.ndarray, float] | None = None  # set_base_velocity, for one step
        self.reset(q0)

    # ----------------------------------------------------------------- state
    def reset(self, q0: np.ndarray | None = None) -> None:
        """Restart from ``q0`` (pinocchio layout; default: neutral), joints clipped into their limits."""
        q0 = self.robot.neutral_configuration() if q0 is None else q0
        self.base_position, self.base_rotation, joints = self.robot.split(
            self._checked_configuration(q0, "q0")
        )
        self.joint_positions = self.robot.apply_reductions(joints) if self._expansion is not None else joints
        self.nu = np.zeros(self.robot.nv)
        # nu_{k-2}, nu_{k-3}, ... and the lengths of the steps that ended at them (most recent first)
        self._past_nu = np.zeros((MAX_HISTORY, self.robot.nv))
        self._past_dt: list[float] = []
        self._weights_key: tuple[float, ...] | None = None
        self._predictor = self._corrector = _EULER
        self._reference: Measurements | None = None
        self.qp.reset_warm_start()
        self.recovery.reset()

    def _checked_configuration(self, q: np.ndarray, label: str) -> np.ndarray:
        """``q`` (pinocchio layout) validated, joints clipped into their limits with a warning."""
        q = np.array(q, dtype=float)
        if q.shape != (self.robot.nq,) or not np.all(np.isfinite(q)):
            raise ValueError(f"{label} must be {self.robot.nq} finite values")
        offset = self.robot.nq - self.robot.n_joints
        joints = q[offset:]
        clipped = np.clip(joints, self.robot.lower, self.robot.upper)
        if np.any(clipped != joints):
            moved = [self.robot.joint_names[i] for i in np.flatnonzero(clipped != joints)]
            warnings.warn(f"{label}: joint positions clipped into their limits: {moved}", stacklevel=3)
        q[offset:] = clipped
        return q

    def _shadow_at(self, home: np.ndarray) -> DynamicalIK:
        """The branch-recovery shadow (built once), reset to the current state with the joints of the
        limbs that are off their targets moved to the home posture (see :meth:`_joints_to_restart`)."""
        _, _, home_joints = self.robot.split(home)
        joints = self.joint_positions.copy()
        restart = self._joints_to_restart()
        joints[restart] = home_joints[restart]
        base_position, base_rotation = self._base_from_targets()
        q0 = self.robot.join(base_position, base_rotation, joints)
        shadow = getattr(self, "_shadow", None)
        if shadow is None:
            config = replace(self.config, branch_recovery=replace(self.config.branch_recovery, enabled=False))
            shadow = self._shadow = DynamicalIK(self.robot, self.targets, config, q0)
        else:
            shadow.reset(q0)
        shadow.gains[:] = self.gains
        return shadow

    @property
    def q(self) -> np.ndarray:
        """Current configuration in pinocchio's layout ``(p, quaternion xyzw, s)``."""
        return self.robot.join(self.base_position, self.base_rotation, self.joint_positions)

    @property
    def joint_velocities(self) -> np.ndarray:
        """``s_dot`` of the last step (the joint part of ``nu``)."""
        return self.nu[self.robot.base_dofs :]

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

    def set_base_velocity(self, linear: np.ndarray, angular: np.ndarray, weight: float = 1.0e3) -> None:
        """Hold the next step's base twist (world frame, ``nu``'s base rows) near a measured one: adds
        ``weight^2 / 2 |nu_b - (linear, angular)|^2`` to that step's QP cost, so the joints are solved for
        the base moving as measured (e.g. mocap feedback's twist) instead of as the IK would move it.
        Non-finite values raise ``ValueError``; cleared after the step."""
        twist = np.concatenate((np.asarray(linear, dtype=float), np.asarray(angular, dtype=float)))
        if twist.shape != (6,) or not np.all(np.isfinite(twist)) or not (np.isfinite(weight) and weight > 0):
            raise ValueError("base velocity must be 6 finite values and the weight positive")
        if not self.robot.floating_base:
            raise ValueError(f"{self.robot.name} has a fixed base")
        self._base_velocity = (twist, weight**2)

    def rebase(self, measurements: Measurements, dt: float) -> None:
        """The measurements' world frame moved between the last step and ``measurements`` (``dt`` later):
        estimate the change ``C`` from the base-attached target (:mod:`~dynik_ros.core.frame_change`) and
        re-express the base pose, the reference ``x_{k-1}`` and the world-frame velocity history in the new
        frame, so the next step's residual is the one it would have been without the change. Without a
        reference or a base-attached target the reference is dropped (eq. 9 as written pairs ``q_{k-1}``
        with ``x_k``). Keeping the old-frame reference left 0.08-0.13 rad after a half turn of the world,
        0.6-1.1 s to decay at ``K = 10``. Invalid ``measurements`` raise before any state changes."""
        measurements.validate(self.targets, self.config.rotation_tolerance)
        old, indices = self._reference, base_target_indices(self.robot, self.targets)
        if old is None or indices is None or not (np.isfinite(dt) and dt > 0):
            self._reference = None
            return
        rotation, translation = change = estimate_change(old, measurements, *indices, dt)
        self.base_position = rotation @ self.base_position + translation
        self.base_rotation = rotation @ self.base_rotation
        self._reference = transform_measurements(old, change)
        for nu in (self.nu, *self._past_nu):  # world-frame base twist (eq. 14): turned, in place
            nu[:3], nu[3:6] = rotation @ nu[:3], rotation @ nu[3:6]

    _STATE = ("base_position", "base_rotation", "joint_positions", "nu", "_past_nu", "_past_dt",
              "_weights_key", "_predictor", "_corrector", "_reference")  # fmt: skip

    def save_state(self) -> dict:
        """A copy of the integration state (pose, ``nu`` and its history, the reference ``x_{k-1}``):
        :meth:`restore_state` returns to it, e.g. when input that was followed for a while turns out to
        have been a glitch."""
        return {name: deepcopy(getattr(self, name)) for name in self._STATE}

    def restore_state(self, state: dict) -> None:
        """Back to a :meth:`save_state` copy (the warm start is dropped: it belonged to later steps)."""
        for name in self._STATE:
            setattr(self, name, deepcopy(state[name]))
        self.qp.reset_warm_start()

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

    @property
    def target_errors(self) -> np.ndarray:
        """Per target, the weighted RMS of its residual rows at the last step (rad or m)."""
        return np.sqrt(self._target_squares / 3.0)

    def _base_from_targets(self) -> tuple[np.ndarray, np.ndarray]:
        """The base pose that puts the targets attached to the base (e.g. the pelvis) on their last
        measurement; the current base pose where no such target exists. A shadow started there does not
        inherit a base that is itself turned the wrong way."""
        position, rotation = self.base_position, self.base_rotation
        m = self._reference
        if m is None or not self.robot.floating_base:
            return position, rotation
        o = first_on_base(self.robot, self.targets.orientation_targets)
        if o is not None:
            frame = self.robot.model.frames[self.robot.frame_id(self.targets.orientation_targets[o].frame)]
            rotation = m.rotations[o] @ frame.placement.rotation.T
        p = first_on_base(self.robot, self.targets.position_targets)
        if p is not None:
            frame = self.robot.model.frames[self.robot.frame_id(self.targets.position_targets[p].frame)]
            position = m.positions[p] - rotation @ frame.placement.translation
        return position, rotation

    def _joints_to_restart(self) -> np.ndarray:
        """Joints a branch-recovery trial moves home: those carrying a target that is off (error above
        the recovery threshold), except joints that also carry a target on track elsewhere in the body
        (not below an off target). All joints when that leaves none (e.g. the root is off)."""
        support = self.kinematics.support
        off = self.target_errors > self.config.branch_recovery.threshold
        restart = support[off].any(axis=0)
        for i in np.flatnonzero(~off):
            below_off = any(np.all(support[j] <= support[i]) for j in np.flatnonzero(off))
            if not below_off:
                restart &= ~support[i]
        return restart if restart.any() else np.ones(self.robot.n_joints, dtype=bool)

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
        self._fell_back = False
        self._plan_integration(dt)
        predicted = self.config.jacobian_at == "predicted"
        kinematics = self.kinematics
        positions, rotations = kinematics.poses(self.q) if predicted else kinematics.update(self.q)
        extra_terms = self.extra
        if extra_terms is not None:
            extra_terms.observe(kinematics, measurements)
        ref_pos, ref_rot = self._reference_pose(measurements)
        residual = pose_residual(
            positions, rotations, ref_pos, ref_rot, self.config.orientation_residual == "log"
        )
        feed_forward = np.concatenate(
            (
                _zeros_if_none(measurements.linear_velocities, self.targets.n_position),
                _zeros_if_none(measurements.angular_velocities, self.targets.n_orientation),
            )
        )
        gains = np.minimum(self.gains, self.config.max_gain_dt / dt)
        corrected = self._capped(feed_forward + gains * residual)  # v* of eq. (9)
        if predicted:
            base_position, q_next = self._predicted_configuration(dt)
            kinematics.update_jacobian(q_next)
            jacobian = kinematics.stacked_jacobian(base_position)
        else:
            self._predicted_mean[:] = 0.0
            jacobian = kinematics.stacked_jacobian(self.base_position)
        extra = dynamic = None
        if extra_terms is not None:
            extra_terms.before_bounds(self)
        self._velocity_bounds(dt)
        if extra_terms is not None:
            base = base_position if predicted else self.base_position
            extra, dynamic = extra_terms.terms(self, kinematics, measurements, base, dt)
        weights, regularization = self.weights, None
        task = self.recovery.before_step(dt, self.joint_positions)
        nb = self.robot.base_dofs
        if task is not None or self._base_velocity is not None:
            regularization = self._regularization
            for part in regularization:
                part[:] = 0.0
        if task is not None:  # moving over to the shadow's branch (core/branch_recovery.py)
            weights = self.weights * task.tracking_scale
            regularization[0][nb:] = task.weight**2
            regularization[1][nb:] = task.velocity
        if self._base_velocity is not None:  # the measured base twist (set_base_velocity)
            regularization[1][:nb], regularization[0][:nb] = self._base_velocity
            self._base_velocity = None
        qp_args = (jacobian, corrected, weights, self._lower, self._upper, regularization)
        solution = self.qp.solve(*qp_args, extra, dynamic)
        if extra_terms is not None:  # the velocity regularizer's sequential QP (core/regularizers.py)
            resolve = lambda terms: self.qp.solve(*qp_args, terms, dynamic)  # noqa: E731
            solution = extra_terms.iterate(self, kinematics, solution, resolve, dt)
        nu = solution.nu
        nb, n = self.robot.base_dofs, self.robot.n_joints
        if solution.solved:
            if self._expansion is None:
                nu[nb:] = np.clip(nu[nb:], self._lower[:n], self._upper[:n])
            else:
                low, high = self._free_bounds()
                nu[nb:] = self._columns @ np.clip(nu[nb:][self._free_rows], low, high)
            self._integrate(nu, dt)
            if extra_terms is not None:
                extra_terms.after_integration(self)
        else:  # hold: no motion at all this step, and the next solve starts from scratch
            self.stop()
            self.qp.reset_warm_start()
        self._reference = measurements
        weighted = self.weights * residual
        self._target_squares = np.einsum("ij,ij->i", *(weighted.reshape(-1, 3),) * 2)
        self.last_error = math.sqrt(self._target_squares.sum() / residual.size)
        self.recovery.after_step(self.last_error, dt, self.home, measurements, self.joint_positions)
        self.info = StepInfo(
            status=solution.status,
            iterations=solution.iterations,
            solved=solution.solved,
            residual_norm=float(np.linalg.norm(residual)),
            solve_time=time.perf_counter() - start,
            held=not solution.solved,
            euler_fallback=self._fell_back,
        )
        return self.q, self.v

    def _capped(self, velocity: np.ndarray) -> np.ndarray:
        """``v*`` with every target's 3-vector scaled down to ``max_linear_speed`` / ``max_angular_speed``.

        A sensor glitch (a 1e30 twist, a pelvis 1e20 m away) then asks for a fast but finite motion that
        the QP solves normally; unscaled, such values make OSQP fail on that step and the next ones."""
        rows = velocity.reshape(-1, 3)
        squares = np.einsum("ij,ij->i", rows, rows)
        caps = self._speed_caps
        if (squares <= caps * caps).all():
            return velocity
        scale = np.minimum(1.0, caps / np.maximum(np.sqrt(squares), 1e-300))
        return (rows * scale[:, None]).reshape(-1)

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
        self._predicted_mean[:] = mean
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
            feasible = bool((lower <= upper).all())
            if feasible and self._followers:  # a leader must also keep each follower within its bounds
                self._lower[:n], self._upper[:n] = lower, upper
                low, high = self._free_bounds()
                feasible = bool((low <= high).all())
            if self._n_coupled:
                rows_upper = (row_high - c.A @ carried) / w0
            if feasible and self._n_coupled:
                # sufficient test: the nu_k that keeps the joints still (clipped to the box) meets every row
                still = np.clip(-carried / w0, lower, upper)
                feasible = bool(np.all(c.A @ still <= rows_upper + 1e-12))
            if feasible or attempt:
                break
            self._use_euler_for_this_step()
        self._lower[:n], self._upper[:n] = lower, upper
        if self._n_coupled:
            self._lower[n:] = -_INFINITY
            self._upper[n:] = rows_upper

    def _free_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounds of the free joints' velocities (QP columns) from the per-joint bounds in ``_lower`` and
        ``_upper``: a leader's interval is cut to keep each follower ``m s_dot_leader`` within its own."""
        low, high = self._lower[self._free_rows].copy(), self._upper[self._free_rows].copy()
        for row, column, multiplier in self._followers:
            a, b = self._lower[row] / multiplier, self._upper[row] / multiplier
            low[column] = max(low[column], min(a, b))
            high[column] = min(high[column], max(a, b))
        return low, high

    def integrate_this_step_by_euler(self) -> None:
        """This step moves by ``dt nu_k`` alone (no carried history, not reported as a fallback)."""
        self._corrector = _EULER
        self._carried_velocity = np.zeros(self.robot.nv)
        self._weights_key = None

    def _use_euler_for_this_step(self) -> None:
        """Integrate the current step by ``nu_k`` alone (no carried history): always feasible."""
        self.integrate_this_step_by_euler()
        self._fell_back = True

    def _paper_bounds(self) -> None:
        """Eq. (12) per joint and eq. (13b) per coupled row on ``nu_k``, as printed."""
        robot, kg, n = self.robot, self.config.limit_gain, self.robot.n_joints
        s, vmax = self.joint_positions, robot.velocity_limit
        self._lower[:n] = -vmax * np.tanh(kg * (s - robot.lower))
        self._upper[:n] = vmax * np.tanh(kg * (robot.upper - s))
        if self._n_coupled:
            c = robot.constraints
            self._lower[n:] = -_INFINITY
            self._upper[n:] = c.velocity_bound * np.tanh(kg * (c.b - c.A @ s))

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
        # the bounds keep the step inside the limits; the clip only removes OSQP's tolerance and round-off
        joints = self.joint_positions + dt * mean[nb:]
        if self._expansion is not None:  # locked joints exactly still, followers exactly on their leader
            joints = self.robot.apply_reductions(joints)
        self.joint_positions = np.clip(joints, self.robot.lower, self.robot.upper)
        self._past_nu[1:] = self._past_nu[:-1]
        self._past_nu[0] = self.nu
        self._past_dt = [dt, *self._past_dt[: MAX_HISTORY - 1]]
        self.nu = nu


def _zeros_if_none(values: np.ndarray | None, count: int) -> np.ndarray:
    return np.zeros(3 * count) if values is None else np.asarray(values, dtype=float).reshape(-1)
