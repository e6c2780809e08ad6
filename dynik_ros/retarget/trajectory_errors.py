"""Tracking errors of a whole retargeted trajectory at once: eq. (15), (16), position RMSE, every orientation
target's angle and the feet, from one forward-kinematics pass per sample.

The per-sample evaluator (:class:`dynik_ros.core.metrics.TrackingEvaluator`) builds Python lists of frame
placements and frame velocities per sample; over a 60 s take at 120 Hz that cost a third of the whole
retargeting (pinocchio's per-object accessors cost ~2 us each, more than its forward kinematics). Here the
joints the target frames hang on are placed for all samples at once, along the chains with array algebra
(:func:`joint_kinematics`), and each frame follows rigidly: ``oMf = oMi iMf``, world angular velocity
``omega_i`` of its joint. Same formulas as the core metrics:

* MNTE (eq. 15): mean over the orientation targets of ``tr(I - R^T R*) / 2``;
* angular-velocity RMSE (eq. 16): ``sqrt(mean_j |omega_j - omega*_j|^2 / 3)``;
* position RMSE: root mean square over the position targets and axes (the targets themselves are kept:
  ``dynik-retarget``'s verdict measures the written trajectory against them, :func:`frame_positions`);
* orientation error per target: ``arccos((tr(R^T R*) - 1) / 2)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import Measurements, TargetSet
from dynik_ros.retarget.fixed_products import times_fixed


@dataclass
class TrajectoryErrors:
    """Per-sample errors of a trajectory (see the module docstring)."""

    mnte: np.ndarray  # (N,)
    angular_velocity_rmse: np.ndarray  # (N,), NaN where the measurement had no angular velocities
    position_rmse: np.ndarray  # (N,)
    position_targets: np.ndarray  # (N, n_p, 3) the position targets the trajectory was solved against
    orientation_error: np.ndarray  # (N, n_o) rad
    foot_positions: np.ndarray  # (N, n_feet, 3)
    contact_points: np.ndarray  # (N, n_feet, 3), NaN without contact
    # (N, n_p, 3) the position targets' frames on the trajectory: the summary's verdict reads them
    # (``dynik-retarget``), a second forward kinematics over the take if it had to place them again
    achieved_positions: np.ndarray | None = None


def trajectory_errors(
    robot: RobotModel,
    targets: TargetSet,
    q: np.ndarray,
    v: np.ndarray,
    measurements: Sequence[Measurements],
    foot_frames: Sequence[str] = (),
    soles: Sequence[np.ndarray] = (),
    contacts: np.ndarray | None = None,
) -> TrajectoryErrors:
    """Errors of ``(q, v)`` ``(N, nq)``, ``(N, nv)`` against ``measurements`` (one per sample); the foot
    frames' positions, and with ``contacts`` ``(N, n_feet)`` (index into ``soles[f]``, -1 none) the world
    position of the sole point in contact."""
    model = robot.model
    n = len(q)
    pos_frames = [robot.frame_id(t.frame) for t in targets.position_targets]
    ori_frames = [robot.frame_id(t.frame) for t in targets.orientation_targets]
    foot_ids = [robot.frame_id(f) for f in foot_frames]
    frames = pos_frames + ori_frames + foot_ids
    joints = sorted({model.frames[i].parentJoint for i in frames})
    rot, pos, omega = _joint_chains(model, np.asarray(q, float), np.asarray(v, float), joints)
    # each frame's rotation and position only where a figure reads it (the feet need both, for the contact
    # points): the orientation targets' positions and the position targets' rotations were a third of this
    r_model = _frame_rotations(model, rot, ori_frames)
    w_model = _stacked(omega, [model.frames[i].parentJoint for i in ori_frames], (n, 0, 3))
    p_model = _frame_positions(model, rot, pos, pos_frames)
    r_feet = _frame_rotations(model, rot, foot_ids)
    p_feet = _frame_positions(model, rot, pos, foot_ids)
    r_meas = np.array([m.rotations for m in measurements]).reshape(n, len(ori_frames), 3, 3)
    p_meas = np.array([m.positions for m in measurements]).reshape(n, len(pos_frames), 3)
    trace = np.einsum("nfij,nfij->nf", r_model, r_meas)
    mnte = np.mean(0.5 * (3.0 - trace), axis=1) if ori_frames else np.zeros(n)
    orientation_error = np.arccos(np.clip((trace - 1.0) / 2.0, -1.0, 1.0))
    position_rmse = np.sqrt(np.mean((p_meas - p_model) ** 2, axis=(1, 2))) if pos_frames else np.zeros(n)
    angular_rmse = np.full(n, np.nan)
    measured = np.array([m.angular_velocities is not None for m in measurements], dtype=bool)
    if measured.any():
        rows = np.flatnonzero(measured)
        w_meas = np.array([measurements[k].angular_velocities for k in rows]).reshape(len(rows), -1, 3)
        diff = w_meas - w_model[rows]
        angular_rmse[rows] = np.sqrt(np.mean(np.sum(diff**2, axis=-1) / 3.0, axis=1))
    points = np.full((n, len(foot_ids), 3), np.nan)
    if contacts is not None:
        for f in range(len(foot_ids)):
            sole = np.asarray(soles[f], dtype=float).reshape(-1, 3)
            rows = np.flatnonzero(contacts[:, f] >= 0)
            if rows.size:
                lever = sole[contacts[rows, f]]
                points[rows, f] = p_feet[rows, f] + np.einsum("nij,nj->ni", r_feet[rows, f], lever)
    return TrajectoryErrors(
        mnte, angular_rmse, position_rmse, p_meas, orientation_error, p_feet, points, p_model
    )


def _stacked(arrays: dict[int, np.ndarray], keys: Sequence[int], empty: tuple[int, ...]) -> np.ndarray:
    """``arrays[k]`` of ``keys`` stacked on axis 1 (``empty``'s shape without keys)."""
    return np.stack([arrays[k] for k in keys], axis=1) if keys else np.zeros(empty)


def _frame_rotations(model: pin.Model, rot: dict[int, np.ndarray], ids: Sequence[int]) -> np.ndarray:
    """World rotations ``(N, F, 3, 3)`` of the frames ``ids``, rigidly on their joints' world rotations
    ``rot[joint]`` ``(N, 3, 3)``: ``oRf = oRi iRf``, each a single product of the whole take
    (:func:`.fixed_products.times_fixed`)."""
    n = len(rot[0])
    out = np.empty((n, len(ids), 3, 3))
    for f, i in enumerate(ids):
        frame = model.frames[i]
        out[:, f] = times_fixed(rot[frame.parentJoint], frame.placement.rotation)
    return out


def _frame_positions(
    model: pin.Model, rot: dict[int, np.ndarray], pos: dict[int, np.ndarray], ids: Sequence[int]
) -> np.ndarray:
    """World positions ``(N, F, 3)`` of the frames ``ids`` on their joints' world rotations ``rot[joint]``
    and positions ``pos[joint]``: ``opf = opi + oRi ipf``."""
    joints = [model.frames[i].parentJoint for i in ids]
    n = len(rot[0])
    if not ids:
        return np.zeros((n, 0, 3))
    # the operands laid out as before (4x4 placements, their 3x3 and 3 parts strided views): einsum's
    # inner loop is picked by the strides and rounds differently with a contiguous ``local`` (iCub's hands)
    joint = np.empty((n, len(ids), 4, 4))
    joint[:, :, :3, :3] = _stacked(rot, joints, ())
    joint[:, :, :3, 3] = _stacked(pos, joints, ())
    local = np.array([model.frames[i].placement.homogeneous for i in ids]).reshape(-1, 4, 4)
    return joint[:, :, :3, 3] + np.einsum("nfij,fj->nfi", joint[:, :, :3, :3], local[:, :3, 3])


def frame_positions(robot: RobotModel, q: np.ndarray, frames: Sequence[str]) -> np.ndarray:
    """World positions ``(N, F, 3)`` of the named ``frames`` for ``N`` configurations ``q`` (all samples at
    once, :func:`joint_kinematics`)."""
    model = robot.model
    q = np.asarray(q, dtype=float)
    ids = [robot.frame_id(f) for f in frames]
    joints = sorted({model.frames[i].parentJoint for i in ids})
    rot, pos, _ = _joint_chains(model, q, np.zeros((len(q), model.nv)), joints)
    return _frame_positions(model, rot, pos, ids)


_AXES = {"X": np.array((1.0, 0.0, 0.0)), "Y": np.array((0.0, 1.0, 0.0)), "Z": np.array((0.0, 0.0, 1.0))}


def _joint_kind(joint) -> tuple[str, np.ndarray | None]:
    """``("free" | "revolute" | "prismatic", axis)`` of a pinocchio joint model, ``("other", None)`` else."""
    name = joint.shortname()
    if name == "JointModelFreeFlyer":
        return "free", None
    if name in ("JointModelRX", "JointModelRY", "JointModelRZ"):
        return "revolute", _AXES[name[-1]]
    if name == "JointModelRevoluteUnaligned":
        return "revolute", np.asarray(joint.extract().axis, dtype=float)
    if name in ("JointModelPX", "JointModelPY", "JointModelPZ"):
        return "prismatic", _AXES[name[-1]]
    return "other", None


Chains = tuple[dict[int, np.ndarray], dict[int, np.ndarray], dict[int, np.ndarray]]


def joint_kinematics(
    model: pin.Model, q: np.ndarray, v: np.ndarray, joints: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """World placements ``(N, J, 4, 4)`` and world angular velocities ``(N, J, 3)`` of ``joints`` for ``N``
    configurations and velocities (pinocchio layout), what ``forwardKinematics(q, v)`` gives as ``oMi`` and
    ``oMi.rotation @ v[j].angular`` (:func:`_joint_chains`)."""
    n = len(q)
    rot, pos, omega = _joint_chains(model, q, v, joints)
    placements = np.zeros((n, len(joints), 4, 4))
    placements[:, :, 3, 3] = 1.0
    for c, j in enumerate(joints):
        placements[:, c, :3, :3] = rot[j]
        placements[:, c, :3, 3] = pos[j]
    return placements, _stacked(omega, list(joints), (n, 0, 3))


def _joint_chains(model: pin.Model, q: np.ndarray, v: np.ndarray, joints: Sequence[int]) -> Chains:
    """World rotations ``(N, 3, 3)``, positions ``(N, 3)`` and angular velocities ``(N, 3)`` of ``joints``
    and their ancestors (dicts by joint index, 0 the world) for ``N`` configurations and velocities,
    computed over all samples at once along the chains (free-flyer, revolute and prismatic joints:
    ``oMi = oMparent jMi J(q_i)``, ``omega_i = omega_parent + R_i a qdot_i``). Other joint types fall back to
    pinocchio sample by sample."""
    n = len(q)
    needed: set[int] = set()
    for j in joints:
        while j > 0 and j not in needed:
            needed.add(j)
            j = model.parents[j]
    kinds = {j: _joint_kind(model.joints[j]) for j in needed}
    if any(kind == "other" for kind, _ in kinds.values()):
        return _joint_chains_pinocchio(model, q, v, joints)
    rot = {0: np.broadcast_to(np.eye(3), (n, 3, 3))}
    pos = {0: np.zeros((n, 3))}
    omega = {0: np.zeros((n, 3))}
    for j in sorted(needed):
        parent, placement = model.parents[j], model.jointPlacements[j]
        joint = model.joints[j]
        iq, iv = joint.idx_q, joint.idx_v
        r_fixed = times_fixed(rot[parent], placement.rotation)
        p_fixed = pos[parent] + times_fixed(rot[parent], placement.translation)
        kind, axis = kinds[j]
        if kind == "free":
            x, y, z, w = (q[:, iq + 3 + c] for c in range(4))  # pinocchio's quaternion: x y z w
            r_joint = np.stack(
                (
                    np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)), axis=-1),
                    np.stack((2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)), axis=-1),
                    np.stack((2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)), axis=-1),
                ),
                axis=1,
            )
            rot[j] = r_fixed @ r_joint
            pos[j] = p_fixed + np.einsum("nij,nj->ni", r_fixed, q[:, iq : iq + 3])
            omega[j] = omega[parent] + np.einsum("nij,nj->ni", rot[j], v[:, iv + 3 : iv + 6])
        elif kind == "revolute":
            angle = q[:, iq]
            s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
            skew = pin.skew(axis)
            rot[j] = r_fixed @ (np.eye(3) + s * skew + (1.0 - c) * (skew @ skew))
            pos[j] = p_fixed
            omega[j] = omega[parent] + times_fixed(r_fixed, axis) * v[:, iv, None]
        else:  # prismatic
            rot[j] = r_fixed
            pos[j] = p_fixed + times_fixed(r_fixed, axis) * q[:, iq, None]
            omega[j] = omega[parent]
    return rot, pos, omega


def _joint_chains_pinocchio(model: pin.Model, q: np.ndarray, v: np.ndarray, joints: Sequence[int]) -> Chains:
    """:func:`_joint_chains` by pinocchio, one sample at a time (``joints`` only, and the world)."""
    n = len(q)
    data = model.createData()
    rot: dict[int, np.ndarray] = {0: np.broadcast_to(np.eye(3), (n, 3, 3))}
    pos, omega = {0: np.zeros((n, 3))}, {0: np.zeros((n, 3))}
    for j in joints:
        rot[j], pos[j], omega[j] = np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 3))
    for k in range(n):
        pin.forwardKinematics(model, data, q[k], v[k])
        for j in joints:
            placement = data.oMi[j]
            rot[j][k], pos[j][k] = placement.rotation, placement.translation
            omega[j][k] = placement.rotation @ data.v[j].angular
    return rot, pos, omega
