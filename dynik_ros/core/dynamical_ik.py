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
import operator
import time
import warnings
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field, replace

import numpy as np

from dynik_ros.core.adams import MAX_HISTORY
from dynik_ros.core.base_integration import SCHEMES
from dynik_ros.core.branch_recovery import BranchRecovery, BranchRecoveryConfig
from dynik_ros.core.com_objective import BalanceConfig
from dynik_ros.core.extra_terms import ExtraTerms
from dynik_ros.core.floor_rows import FloorConfig
from dynik_ros.core.frame_change import (
    base_target_indices,
    estimate_change,
    first_on_base,
    transform_measurements,
)
from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual, to_pinocchio_velocity
from dynik_ros.core.joint_velocity_bounds import JointVelocityBounds
from dynik_ros.core.loop_closure import LoopClosure
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.small_arrays import einsum
from dynik_ros.core.so3 import determinant, orthonormality_error
from dynik_ros.core.step_integration import EULER_WEIGHTS, StepIntegration
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP

RESIDUAL_TIMINGS = ("consistent", "paper")
INTEGRATIONS = ("adams", "trapezoidal", "euler")
JACOBIAN_POINTS = ("predicted", "previous")
ORIENTATION_RESIDUALS = ("log", "paper")


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
    restart_at_bounds: bool = True  # the history of a joint on a bound restarts (step_integration.py)
    jacobian_at: str = "predicted"
    orientation_residual: str = "log"
    branch_recovery: BranchRecoveryConfig = field(default_factory=BranchRecoveryConfig)
    qp: QPSettings = field(default_factory=QPSettings)
    balance: BalanceConfig = field(default_factory=BalanceConfig)  # CoM rows (core/com_objective.py)
    regularizers: RegularizerConfig = field(default_factory=RegularizerConfig)  # core/regularizers.py
    loops: tuple[LoopClosure, ...] = ()  # loop-closure equality rows (core/loop_closure.py)
    stance_frames: tuple[str, ...] = ()  # targets imposed as rows while in contact (core/stance_rows.py)
    stance_priority: bool = True  # those rows centred on priority 1's y* (core/stance_priority.py), or on v*
    floor: FloorConfig = field(default_factory=FloorConfig)  # sole points kept above it (core/floor_rows.py)
    sample_period: float = 0.0  # s, the step per-step gains are tuned at (0: every step; core/step_gain.py)

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
        if not (np.isfinite(self.sample_period) and self.sample_period >= 0):
            raise ValueError(f"sample_period must be finite and >= 0, got {self.sample_period}")


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
    floor: str = ""  # floor rows this step (core/floor_rows.py): hard, softened, dropped; "" without
    stance: str = ""  # stance priority 1 (core/stance_priority.py): met, yielded, failed; "" without


class DynamicalIK(StepIntegration, JointVelocityBounds):
    """Closed-loop IK of Figure 2 for a :class:`RobotModel` and a set of :class:`FrameTarget`.

    State: base position, base rotation matrix, joint positions, and the last velocity ``nu`` in mixed
    coordinates ``(I p_dot_B, I omega_B, s_dot)``. :meth:`step` returns pinocchio's ``q`` and tangent ``v``.
    The integration of ``nu`` is in :mod:`~dynik_ros.core.step_integration`, the bounds of the QP's joint
    rows in :mod:`~dynik_ros.core.joint_velocity_bounds`.
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
        self._squared_speed_caps = self._speed_caps * self._speed_caps
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
        constraint_matrix = np.vstack(rows)
        self.extra = ExtraTerms(self, constraint_matrix) if ExtraTerms.wanted(self.config) else None
        self.balance = self.extra.balance if self.extra is not None else None
        self.regularizers = self.extra.regularizers if self.extra is not None else None
        self.qp = VelocityQP(
            self.kinematics.pattern(),
            constraint_matrix,
            self.config.qp,
            expansion,
            dense_cost=self.extra is not None and self.extra.has_cost,
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
        self._joined: tuple[tuple, np.ndarray] | None = None  # (pose arrays, q): see q
        self.reset(q0)

    # ----------------------------------------------------------------- state
    def reset(self, q0: np.ndarray | None = None) -> None:
        """Restart from ``q0`` (pinocchio layout; default: neutral), joints clipped into their limits; the
        steps that follow are those of a new IK started there: its QP solver restarted too (OSQP adapts its
        ``rho`` as it solves) and the branch-recovery shadow rebuilt when next needed."""
        self._start_at(q0)
        self.qp.restart()
        if self.extra is not None:
            self.extra.restart()
        self._shadow = None

    def _start_at(self, q0: np.ndarray | None) -> None:
        """The state of :meth:`reset` (pose, velocity history, reference, warm start, recovery)."""
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
        self._predictor = self._corrector = EULER_WEIGHTS
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
            shadow._start_at(q0)  # its solver carries on from its last trial
        shadow.gains[:] = self.gains
        return shadow

    @property
    def q(self) -> np.ndarray:
        """Current configuration in pinocchio's layout ``(p, quaternion xyzw, s)``, a new array.

        Joined once per pose (the step, the next step and the caller between them read it: three joins,
        each converting the base rotation to a quaternion, became one): the base pose and the joints are
        always replaced by new arrays, never written in place, so the arrays themselves say whether the
        pose changed."""
        return self._configuration().copy()

    def _configuration(self) -> np.ndarray:
        """:attr:`q` itself, the cached array, not a copy: for the step's own reads (pinocchio's kinematics
        only read it), a copy less a step."""
        state = (self.base_position, self.base_rotation, self.joint_positions)
        cached = self._joined
        if cached is None or not all(map(operator.is_, cached[0], state)):
            cached = self._joined = (state, self.robot.join(*state))
        return cached[1]

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

    def replace_reference(self, measurements: Measurements) -> None:
        """The last step's targets as changed after it (a hold moved, :mod:`dynik_ros.retarget.offline_run`):
        what the next step's residual compares ``q_{k-1}`` with (``residual_timing`` consistent)."""
        self._reference = measurements

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
    def step(
        self, measurements: Measurements, dt: float, checked: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Advance by ``dt`` seconds towards ``measurements``; returns ``(q, v)`` (pinocchio layout).

        Invalid input (``dt`` not positive and finite, NaN, wrong shapes, non-rotations) raises
        ``ValueError`` before any state changes. ``checked``: the caller guarantees what
        :meth:`Measurements.validate` checks (the targets' shapes, finite values, rotations within
        ``rotation_tolerance``: e.g. ik_node's decoded link states, rotations made from unit quaternions),
        and the check is skipped.
        """
        if not (math.isfinite(dt) and dt > 0):  # (np.isfinite of a float costs a microsecond a step)
            raise ValueError(f"dt must be positive and finite, got {dt}")
        if not checked:
            measurements.validate(self.targets, self.config.rotation_tolerance)
        start = time.perf_counter()
        self._fell_back = False
        self._plan_integration(dt)
        predicted = self.config.jacobian_at == "predicted"
        kinematics = self.kinematics
        q = self._configuration()
        positions, rotations = kinematics.poses(q) if predicted else kinematics.update(q)
        extra_terms = self.extra
        if extra_terms is not None:
            extra_terms.observe(kinematics, measurements)
        ref_pos, ref_rot = self._reference_pose(measurements)
        residual = pose_residual(
            positions, rotations, ref_pos, ref_rot, self.config.orientation_residual == "log"
        )
        linear, angular = measurements.linear_velocities, measurements.angular_velocities
        if linear is not None and angular is not None:  # both measured: flattened and joined in one call
            feed_forward = np.concatenate((linear, angular), axis=None)
        else:
            feed_forward = np.concatenate(
                (
                    _zeros_if_none(linear, self.targets.n_position),
                    _zeros_if_none(angular, self.targets.n_orientation),
                )
            )
        gains = self.gains if measurements.min_gain is None else np.maximum(self.gains, measurements.min_gain)
        gains = np.minimum(gains, self.config.max_gain_dt / dt)
        corrected = self._capped(feed_forward + gains * residual)  # v* of eq. (9)
        if predicted:
            base_position, q_next = self._predicted_configuration(dt)
            kinematics.update_jacobian(q_next)
            jacobian = kinematics.stacked_jacobian(base_position)
        else:
            self._predicted_mean[:] = 0.0
            jacobian = kinematics.stacked_jacobian(self.base_position)
        extra = dynamic = None
        weights, regularization = self.weights, None
        if measurements.weight_scale is not None:  # this step's factors on the targets' weights
            weights = weights * measurements.weight_scale
        if extra_terms is not None:
            extra_terms.before_bounds(self)
        self._velocity_bounds(dt)
        if extra_terms is not None:
            base = base_position if predicted else self.base_position
            extra, dynamic = extra_terms.terms(
                self, kinematics, measurements, base, dt, jacobian, corrected, weights
            )
        task = self.recovery.before_step(dt, self.joint_positions)
        nb = self.robot.base_dofs
        if task is not None or self._base_velocity is not None:
            regularization = self._regularization
            for part in regularization:
                part[:] = 0.0
        if task is not None:  # moving over to the shadow's branch (core/branch_recovery.py)
            weights = weights * task.tracking_scale
            regularization[0][nb:] = task.weight**2
            regularization[1][nb:] = task.velocity
        if self._base_velocity is not None:  # the measured base twist (set_base_velocity)
            regularization[1][:nb], regularization[0][:nb] = self._base_velocity
            self._base_velocity = None
        qp_args = (jacobian, corrected, weights, self._lower, self._upper, regularization)
        solution = self.qp.solve(*qp_args, extra, dynamic)
        if extra_terms is not None:
            # floor rows missed: softened, then left out (core/floor_rows.py)
            again = lambda rows: self.qp.resolve(self._lower, self._upper, extra, rows)  # noqa: E731
            solution = extra_terms.floor_checked(self, solution, again)
            # the stance rows linearised half-way along the step (core/extra_terms.py)
            solution = extra_terms.stance_secant(self, solution, again, dt)
            # the velocity regularizer's sequential QP (core/regularizers.py)
            resolve = lambda terms: self.qp.resolve(  # noqa: E731
                self._lower, self._upper, terms, extra_terms.dynamic
            )
            solution = extra_terms.iterate(self, kinematics, solution, resolve, dt)
        nu = solution.nu
        nb, n = self.robot.base_dofs, self.robot.n_joints
        if solution.solved:
            if self._expansion is None:  # (np.clip's own result, without its wrappers)
                nu[nb:] = np.minimum(np.maximum(nu[nb:], self._lower[:n]), self._upper[:n])
            else:
                low, high = self._free_bounds()
                nu[nb:] = self._columns @ np.clip(nu[nb:][self._free_rows], low, high)
            self._integrate(nu, dt, extra_terms.held_rows() if extra_terms is not None else None)
            if extra_terms is not None:
                extra_terms.after_integration(self)
        else:  # hold: no motion at all this step, and the next solve starts from scratch
            self.stop()
            self.qp.reset_warm_start()
        if extra_terms is not None:
            extra_terms.count_step()
        self._reference = measurements
        weighted = self.weights * residual
        self._target_squares = einsum("ij,ij->i", *(weighted.reshape(-1, 3),) * 2)
        self.last_error = math.sqrt(self._target_squares.sum() / residual.size)
        self.recovery.after_step(self.last_error, dt, self.home, measurements, self.joint_positions)
        self.info = StepInfo(
            status=solution.status,
            iterations=solution.iterations,
            solved=solution.solved,
            residual_norm=math.sqrt(residual.dot(residual)),  # np.linalg.norm's formula, without its checks
            solve_time=time.perf_counter() - start,
            held=not solution.solved,
            euler_fallback=self._fell_back,
            floor=extra_terms.floor.mode if extra_terms is not None and extra_terms.floor is not None else "",
            stance=extra_terms.priority.state if extra_terms is not None and extra_terms.priority else "",
        )
        return self.q, self.v

    def _capped(self, velocity: np.ndarray) -> np.ndarray:
        """``v*`` with every target's 3-vector scaled down to ``max_linear_speed`` / ``max_angular_speed``.

        A sensor glitch (a 1e30 twist, a pelvis 1e20 m away) then asks for a fast but finite motion that
        the QP solves normally; unscaled, such values make OSQP fail on that step and the next ones."""
        rows = velocity.reshape(-1, 3)
        squares = einsum("ij,ij->i", rows, rows)
        if np.count_nonzero(squares <= self._squared_speed_caps) == squares.size:  # all, without .all()
            return velocity
        scale = np.minimum(1.0, self._speed_caps / np.maximum(np.sqrt(squares), 1e-300))
        return (rows * scale[:, None]).reshape(-1)

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


def _zeros_if_none(values: np.ndarray | None, count: int) -> np.ndarray:
    return np.zeros(3 * count) if values is None else np.asarray(values, dtype=float).reshape(-1)
