"""Whole-body instantaneous IK solved by IPOPT via casadi (benchmark only; sec. 5.1 of Rapetti et al. 2020).

The paper's whole-body baseline solves eq. (17) at every sample with IPOPT (iDynTree for the kinematics),
warm-started from the previous sample, and stops on pose-error accuracy. Here the forward kinematics are
written symbolically in casadi from the pinocchio model (:func:`casadi_frame_poses`; the ``pin`` wheel has no
``pinocchio.casadi``), derivatives come from casadi's algorithmic differentiation, and IPOPT is the one
bundled with the ``casadi`` wheel. Nothing in :mod:`dynik_ros.core` imports casadi: it is a benchmark-only,
pip-only dependency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import casadi as ca
import numpy as np
import pinocchio as pin

from dynik_ros.core.frame_kinematics import FrameKinematics
from dynik_ros.core.instantaneous_ik import IterationInfo
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet

_REVOLUTE = {"JointModelRX", "JointModelRY", "JointModelRZ", "JointModelRevoluteUnaligned"}
_UNBOUNDED = {"JointModelRUBX", "JointModelRUBY", "JointModelRUBZ", "JointModelRevoluteUnboundedUnaligned"}
_PRISMATIC = {"JointModelPX", "JointModelPY", "JointModelPZ", "JointModelPrismaticUnaligned"}
_FREE_FLYER = "JointModelFreeFlyer"

# |theta|^2 below which Rodrigues' coefficients are evaluated by their Taylor series (error < 1e-20 there).
_SMALL_ANGLE2 = 1e-4


# --------------------------------------------------------------------------------------------- kinematics
def _joint_axis(joint: pin.JointModel, angular: bool) -> np.ndarray:
    """Unit axis of a 1-DoF joint, read from its motion subspace (works for the unaligned variants too,
    some of which do not expose ``axis`` in Python)."""
    data = joint.createData()
    q = np.array([1.0, 0.0]) if joint.nq == 2 else np.zeros(joint.nq)
    joint.calc(data, q)
    column = np.asarray(data.S, dtype=float).reshape(6)
    axis = column[3:] if angular else column[:3]
    return axis / np.linalg.norm(axis)


def _axis_rotation(axis: np.ndarray, c, s) -> ca.SX:
    """Rotation by the angle of cosine ``c`` and sine ``s`` about the constant unit ``axis``."""
    x, y, z = (float(a) for a in axis)
    k = ca.SX(np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]]))
    outer = ca.SX(np.outer(axis, axis))
    return c * ca.SX.eye(3) + s * k + (1 - c) * outer


def quaternion_rotation(quat) -> ca.SX:
    """Rotation matrix of a unit quaternion in pinocchio's ``(x, y, z, w)`` order (casadi expression)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
    )


def rodrigues(theta) -> ca.SX:
    """``exp(S(theta))`` as a casadi expression, smooth through ``theta = 0``.

    Below ``|theta|^2 = 1e-4`` the coefficients ``sin t / t`` and ``(1 - cos t) / t^2`` come from their
    Taylor series; above, from the closed forms evaluated at a square root that never sees 0, so neither the
    values nor the first and second derivatives contain 0/0 in the branch that is not taken.
    """
    t2 = ca.sumsqr(theta)
    small = t2 < _SMALL_ANGLE2
    t = ca.sqrt(ca.if_else(small, 1.0, t2))
    half = t / 2
    # sin t / t and (1 - cos t) / t^2 = (sin(t/2) / (t/2))^2 / 2 (no cancellation), series to t^6
    a = ca.if_else(small, 1 - t2 / 6 * (1 - t2 / 20 * (1 - t2 / 42)), ca.sin(t) / t)
    b = ca.if_else(small, (1 - t2 / 12 * (1 - t2 / 30 * (1 - t2 / 56))) / 2, (ca.sin(half) / half) ** 2 / 2)
    k = ca.skew(theta)
    return ca.SX.eye(3) + a * k + b * ca.mtimes(k, k)


def casadi_frame_poses(
    model: pin.Model,
    frame_ids: Sequence[int],
    q,
    root_pose: tuple | None = None,
) -> list[tuple[ca.SX, ca.SX]]:
    """World ``(position 3x1, rotation 3x3)`` of ``model.frames[i]`` for ``i`` in ``frame_ids``, as casadi SX
    expressions of ``q`` (pinocchio layout, ``model.nq`` entries).

    Joints are composed in index order (parents come first in pinocchio): ``oMi = oMparent * jointPlacement *
    motion(q_i)``; a frame is ``oMi * frame.placement``. Only the joints that support the requested frames
    are built. Supported joints: free-flyer (``q = (x, y, z, qx, qy, qz, qw)``, unit quaternion assumed),
    revolute about x/y/z or an unaligned axis, continuous (``RUB*``, ``q = (cos, sin)``) and prismatic;
    :class:`ValueError` names any other joint. ``root_pose = (p, R)`` replaces the motion of a free-flyer
    joint 1 by the given position and rotation expressions (its 7 entries of ``q`` are then ignored).
    """
    q = ca.SX(q) if not isinstance(q, ca.SX) else q
    if q.numel() != model.nq:
        raise ValueError(f"q has {q.numel()} entries, the model has nq = {model.nq}")
    if root_pose is not None and (model.njoints < 2 or model.joints[1].shortname() != _FREE_FLYER):
        raise ValueError("root_pose needs a model whose joint 1 is a free-flyer")
    needed: set[int] = set()
    for fid in frame_ids:
        if not 0 <= fid < len(model.frames):
            raise ValueError(f"frame index {fid} out of range (the model has {len(model.frames)} frames)")
        needed.update(j for j in model.supports[model.frames[fid].parentJoint] if j > 0)
    rotations: dict[int, ca.SX] = {0: ca.SX.eye(3)}
    positions: dict[int, ca.SX] = {0: ca.SX.zeros(3, 1)}
    for jid in sorted(needed):
        joint, name = model.joints[jid], str(model.names[jid])
        kind = joint.shortname()
        placement = model.jointPlacements[jid]
        parent = model.parents[jid]
        rot = ca.mtimes(rotations[parent], ca.SX(placement.rotation))
        pos = positions[parent] + ca.mtimes(rotations[parent], ca.SX(placement.translation))
        qj = q[joint.idx_q : joint.idx_q + joint.nq]
        if kind == _FREE_FLYER:
            if root_pose is not None and jid == 1:
                m_pos, m_rot = root_pose
            else:
                m_pos, m_rot = qj[:3], quaternion_rotation(qj[3:7])
            pos = pos + ca.mtimes(rot, m_pos)
            rot = ca.mtimes(rot, m_rot)
        elif kind in _REVOLUTE:
            rot = ca.mtimes(rot, _axis_rotation(_joint_axis(joint, True), ca.cos(qj[0]), ca.sin(qj[0])))
        elif kind in _UNBOUNDED:
            rot = ca.mtimes(rot, _axis_rotation(_joint_axis(joint, True), qj[0], qj[1]))
        elif kind in _PRISMATIC:
            pos = pos + ca.mtimes(rot, ca.SX(_joint_axis(joint, False)) * qj[0])
        else:
            raise ValueError(
                f"joint '{name}' ({kind}) is not supported by the casadi kinematics: only free-flyer, "
                "revolute (x/y/z/unaligned), continuous (RUB) and prismatic joints are"
            )
        rotations[jid], positions[jid] = rot, pos
    poses = []
    for fid in frame_ids:
        frame = model.frames[fid]
        r_parent, p_parent = rotations[frame.parentJoint], positions[frame.parentJoint]
        poses.append(
            (
                p_parent + ca.mtimes(r_parent, ca.SX(frame.placement.translation)),
                ca.mtimes(r_parent, ca.SX(frame.placement.rotation)),
            )
        )
    return poses


def casadi_pose_residual(positions, rotations, target_positions, target_rotations) -> ca.SX:
    """Residual ``r`` of eq. (5) exactly as :func:`~dynik_ros.core.frame_kinematics.pose_residual`: position
    errors, then world-frame rotation errors ``sk(R* R^T)^vee`` (= ``R sk(R^T R*)^vee``)."""
    rows = [target - p for p, target in zip(positions, target_positions, strict=True)]
    for r_model, r_target in zip(rotations, target_rotations, strict=True):
        m = ca.mtimes(r_target, r_model.T)
        rows.append(0.5 * ca.vertcat(m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]))
    return ca.vertcat(*rows)


# --------------------------------------------------------------------------------------------- solver
@dataclass
class IpoptInfo(IterationInfo):
    """:class:`IterationInfo` plus IPOPT's last return status (``User_Requested_Stop`` when the accuracy
    rule stopped it, ``Solve_Succeeded`` at a KKT point, ``Maximum_Iterations_Exceeded``...), the largest
    residual component at the returned solution and the number of continuation stages solved (1 normally)."""

    status: str = ""
    max_residual: float = float("nan")
    stages: int = 1


class _AccuracyStop(ca.Callback):
    """IPOPT iteration callback (called at every iterate, the starting point included): asks IPOPT to stop
    once :meth:`IpoptWholeBodyIK._accurate` holds at the current iterate."""

    def __init__(self, nx: int, accurate):
        ca.Callback.__init__(self)
        self.nx, self.accurate = nx, accurate
        self.params: np.ndarray | None = None
        self.construct("ipopt_accuracy_stop", {})

    def get_n_in(self):
        return ca.nlpsol_n_out()

    def get_n_out(self):
        return 1

    def get_name_in(self, i):
        return ca.nlpsol_out(i)

    def get_name_out(self, i):
        return "ret"

    def get_sparsity_in(self, i):
        name = ca.nlpsol_out(i)
        if name == "f":
            return ca.Sparsity.scalar()
        if name in ("x", "lam_x"):
            return ca.Sparsity.dense(self.nx)
        return ca.Sparsity(0, 0)

    def eval(self, arg):
        return [1 if self.accurate(arg[0], self.params)[0] else 0]


class IpoptWholeBodyIK:
    """Eq. (17) per sample with IPOPT: ``min sum_i (w_i r_i(q))^2`` with ``r`` of eq. (5) (world-frame
    rotation rows, as :func:`~dynik_ros.core.frame_kinematics.pose_residual`) and the joint limits as
    variable bounds; the coupled-joint rows ``A s <= b`` of ``robot.constraints`` (eq. 17b; iCub's shoulder
    cables) are linear inequality constraints of the NLP.

    * Variables: base position ``p`` (absolute), a rotation vector ``theta`` with ``R = exp(theta) R_prev``
      (a world-frame increment on the previous sample's base rotation, as in
      :class:`~dynik_ros.core.instantaneous_ik.WholeBodyIK`; :func:`rodrigues` is smooth through 0), and the
      joint positions ``s`` bounded by ``robot.lower`` / ``robot.upper``. Fixed-base models have ``s`` only.
    * The NLP (``nlpsol('ipopt')``) is built once in the constructor; ``R_prev`` and the measurements are its
      parameters. Gradient and Hessian come from casadi's algorithmic differentiation (SX graphs).
    * ``hessian="exact"`` (default, kept): on Human66 walking at 60 Hz it needs 2.2 IPOPT iterations a
      sample (at most 3); ``"limited-memory"`` (L-BFGS) needs about 45, misses the tolerance within 50
      iterations on 6 % of the samples, and is about 16x slower per sample.
    * Warm start: the primal point only, the previous solution with ``theta = 0`` (IPOPT's ``bound_push``
      moves a joint resting on a limit about 1e-2 inside), and a small initial barrier parameter
      ``mu_init = 1e-8`` (monotone): near the solution the cost is ~1e-6, and IPOPT's default of 0.1 would
      first drag every joint towards the middle of its range (3 instead of 2.2 iterations a sample on
      Human66 walking). Also passing the previous bound multipliers (``warm_start_init_point``) was tried
      and not kept: 2.0 instead of 2.2 iterations on Human66 walking, but spikes of 10-16 on Human66 running
      (mean 4.3) where this start takes 3 on every sample.
    * Stopping rule, the paper's pose-error accuracy: an IPOPT iteration callback evaluates the residual at
      every iterate, the warm start included, and stops IPOPT as soon as every component is below
      ``tolerance`` (1e-4 rad or m, as :class:`WholeBodyIK`), every orientation target is within 90 deg of
      its measurement and ``A s <= b`` holds to :attr:`CONSTRAINT_TOLERANCE`. ``sk(.)^vee`` is the ``sin`` of
      the angle, so it also vanishes for a link turned by 180 deg: such "flipped" zeros are true minima of
      eq. (17) and are not accepted as converged. Otherwise IPOPT stops at a KKT point (``tol = 1e-8``, or
      its "acceptable" level ``1e-6`` once; e.g. unreachable robot targets, where the residual cannot get
      below the tolerance: on G1 walking the MNTE is the same to 7 digits as with ``tol = 1e-10``, which
      costs 15 instead of 5 iterations on 1-2 % of the samples) or after ``max_iterations``.
      ``info.converged`` is the accuracy rule at the returned solution.
    * Continuation: because of those flipped minima, a start far from the measurement (a cold start, or a
      jump of a target) can converge to a flipped link. When some orientation target is more than 45 deg from
      the warm start, the sample is solved in ``ceil(angle / 45 deg)`` stages whose targets move from the
      warm-start pose to the measurement along geodesics (straight lines for positions), each stage
      warm-started from the previous one; ``info.iterations`` sums them. In the benchmark this only happens
      on the first sample (the cold start from ``q0``).
    * ``ipopt_options`` / ``casadi_options`` are merged over the defaults (e.g. ``casadi_options={"jit": True,
      "compiler": "shell", "jit_options": {"flags": ["-O1"]}}`` compiles the derivatives with a C compiler:
      about 1.5 ms less per sample on Human66 walking, but 6-16 s more per construction; not used by default).
    """

    CONTINUATION_STEP = np.pi / 4
    CONSTRAINT_TOLERANCE = 1e-8  # largest A s - b accepted by the accuracy rule

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet | Sequence[FrameTarget],
        tolerance: float = 1e-4,
        max_iterations: int = 50,
        q0: np.ndarray | None = None,
        hessian: str = "exact",
        ipopt_options: dict | None = None,
        casadi_options: dict | None = None,
    ):
        if hessian not in ("exact", "limited-memory"):
            raise ValueError(f"hessian must be 'exact' or 'limited-memory', got '{hessian}'")
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.tolerance, self.max_iterations = tolerance, max_iterations
        self.weights = self.targets.weights()
        self.q = robot.neutral_configuration() if q0 is None else np.array(q0, dtype=float)
        self.kinematics = FrameKinematics.for_targets(robot, self.targets)
        n_pos, n_ori = self.targets.n_position, self.targets.n_orientation
        nb, n = (6 if robot.floating_base else 0), robot.n_joints
        self._nb = nb

        x = ca.SX.sym("x", nb + n)
        params = ca.SX.sym("params", 9 + 3 * n_pos + 9 * n_ori)
        s = x[nb:]
        if robot.floating_base:
            r_prev = ca.reshape(params[:9], 3, 3)  # column-major: see _parameters
            root = (x[:3], ca.mtimes(rodrigues(x[3:6]), r_prev))
            q = ca.vertcat(ca.SX.zeros(7), s)
        else:
            root, q = None, s
        frames = [robot.frame_id(t.frame) for t in self.targets.position_targets]
        frames += [robot.frame_id(t.frame) for t in self.targets.orientation_targets]
        poses = casadi_frame_poses(robot.model, frames, q, root_pose=root)
        target_positions = [params[9 + 3 * i : 12 + 3 * i] for i in range(n_pos)]
        first = 9 + 3 * n_pos
        target_rotations = [ca.reshape(params[first + 9 * i : first + 9 * i + 9], 3, 3) for i in range(n_ori)]
        model_rotations = [r for _, r in poses[n_pos:]]
        residual = casadi_pose_residual(
            [p for p, _ in poses[:n_pos]], model_rotations, target_positions, target_rotations
        )
        cost = ca.sumsqr(ca.DM(self.weights) * residual)
        # cosine of the angle between each orientation target and its frame: tr(R^T R*) = 1 + 2 cos
        cosines = [
            (ca.trace(ca.mtimes(r.T, t)) - 1) / 2
            for r, t in zip(model_rotations, target_rotations, strict=True)
        ]
        worst_residual = ca.mmax(ca.fabs(residual)) if residual.numel() else ca.SX(0)
        worst_cosine = ca.mmin(ca.vertcat(*cosines)) if cosines else ca.SX(1)
        accurate = ca.logic_and(worst_residual < tolerance, worst_cosine > 0)
        nlp = {"x": x, "p": params, "f": cost}
        self._ubg = np.zeros(0)
        if robot.constraints is not None:
            nlp["g"] = ca.mtimes(ca.DM(robot.constraints.A), s)
            self._ubg = np.asarray(robot.constraints.b, dtype=float)
            # an iterate that violates A s <= b is not an answer, however accurate
            excess = ca.mmax(nlp["g"] - ca.DM(self._ubg))
            accurate = ca.logic_and(accurate, excess <= self.CONSTRAINT_TOLERANCE)
        self._accurate = ca.Function("accurate", [x, params], [accurate, worst_residual])

        self._stop = _AccuracyStop(x.numel(), self._accurate)
        options = {
            "ipopt": {
                "print_level": 0,
                "sb": "yes",
                "max_iter": max_iterations,
                # KKT exits, for targets the accuracy rule cannot reach (robots): IPOPT's default tol, and
                # its "acceptable" level after one iterate (the residual has stopped moving by then; a
                # tighter tol only adds iterations that fight round-off in the line search)
                "tol": 1e-8,
                "acceptable_tol": 1e-6,
                "acceptable_iter": 1,
                "hessian_approximation": hessian,
                "mu_strategy": "monotone",
                "mu_init": 1e-8,
            }
            | dict(ipopt_options or {}),
            "print_time": False,
            "iteration_callback": self._stop,
            "iteration_callback_ignore_errors": False,
        } | dict(casadi_options or {})
        self._solver = ca.nlpsol("whole_body_ipopt", "ipopt", nlp, options)
        inf = np.full(nb, np.inf)
        self._lbx = np.concatenate((-inf, robot.lower))
        self._ubx = np.concatenate((inf, robot.upper))
        self.info = IpoptInfo()

    @staticmethod
    def _parameters(base_rotation: np.ndarray, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        # casadi reshapes column-major: every matrix goes in as its transpose read row by row.
        return np.concatenate(
            (base_rotation.T.reshape(-1), positions.reshape(-1), np.swapaxes(rotations, 1, 2).reshape(-1))
        )

    def _stages(self, q: np.ndarray, measurements: Measurements) -> list[tuple[np.ndarray, np.ndarray]]:
        """Targets of the continuation stages (just the measurement when every orientation target is within
        :attr:`CONTINUATION_STEP` of the pose at ``q``)."""
        positions = np.asarray(measurements.positions, dtype=float).reshape(-1, 3)
        rotations = np.asarray(measurements.rotations, dtype=float).reshape(-1, 3, 3)
        if not self.targets.n_orientation:
            return [(positions, rotations)]
        start_positions, start_rotations = self.kinematics.poses(q)
        # largest angle between a frame and its target, from tr(R^T R*) = 1 + 2 cos(angle) (no log per target
        # on the common path: this runs inside the timed step)
        cosine = (np.einsum("kij,kij->k", start_rotations, rotations).min() - 1.0) / 2.0
        if cosine >= np.cos(self.CONTINUATION_STEP):
            return [(positions, rotations)]
        # rotation vectors taking each frame to its target, world frame: R* = exp(phi) R
        phis = np.array([pin.log3(t @ r.T) for r, t in zip(start_rotations, rotations, strict=True)])
        worst = float(np.linalg.norm(phis, axis=1).max())
        count = int(np.ceil(worst / self.CONTINUATION_STEP - 1e-9))
        if count <= 1:
            return [(positions, rotations)]
        stages = []
        for k in range(1, count):
            alpha = k / count
            stage_rotations = np.array(
                [pin.exp3(alpha * phi) @ r for phi, r in zip(phis, start_rotations, strict=True)]
            )
            stages.append((start_positions + alpha * (positions - start_positions), stage_rotations))
        return stages + [(positions, rotations)]

    def step(self, measurements: Measurements, dt: float) -> tuple[np.ndarray, np.ndarray]:
        measurements.validate(self.targets)
        previous = self.q.copy()
        q = self.q
        iterations, status = 0, ""
        stages = self._stages(q, measurements)
        for positions, rotations in stages:
            p0, r0, s0 = self.robot.split(q)
            s0 = np.clip(s0, self.robot.lower, self.robot.upper)
            x0 = np.concatenate((p0, np.zeros(3), s0)) if self._nb else s0
            params = self._parameters(r0, positions, rotations)
            self._stop.params = params
            bounds = {"lbx": self._lbx, "ubx": self._ubx}
            if self._ubg.size:
                bounds |= {"lbg": np.full(self._ubg.size, -np.inf), "ubg": self._ubg}
            result = self._solver(x0=x0, p=params, **bounds)
            stats = self._solver.stats()
            iterations += int(stats.get("iter_count", 0))
            status = str(stats.get("return_status", ""))
            x = np.asarray(result["x"], dtype=float).reshape(-1)
            if not np.all(np.isfinite(x)):  # IPOPT gave up on an invalid number: keep the last good pose
                x = x0.copy()
                status = f"{status} (non-finite solution discarded)"
            # IPOPT may relax bounds by ~1e-8: clip, and report the accuracy of what is returned
            x[self._nb :] = np.clip(x[self._nb :], self.robot.lower, self.robot.upper)
            q = self.robot.join(x[:3], exp_so3(x[3:6]) @ r0, x[self._nb :]) if self._nb else x.copy()
        accurate, worst = self._accurate(x, params)
        self.q = q
        self.info = IpoptInfo(iterations, bool(accurate), status, float(worst), len(stages))
        return self.q, pin.difference(self.robot.model, previous, self.q) / dt


__all__ = ["IpoptInfo", "IpoptWholeBodyIK", "casadi_frame_poses", "casadi_pose_residual", "rodrigues"]
