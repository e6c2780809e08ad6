"""Forward kinematics ``h(q)`` and the stacked Jacobian ``J(q)`` of eq. (3) for a fixed list of frames.

Kinematics run once per step in pinocchio (``computeJointJacobians`` + ``updateFramePlacements``); the
per-frame Jacobians are then assembled for all frames at once with numpy from the world-frame joint
Jacobian, using each frame's kinematic support fixed at construction.

The base velocity is in *mixed* coordinates ``nu = (I p_dot_B, I omega_B, s_dot)`` as in sec. 2.2 of the
paper (pinocchio's free-flyer tangent is base-local instead; :meth:`to_pinocchio_velocity` converts).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from dynik_ros.core.frame_placements import flat_view, placement_table, pose_indices
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.small_arrays import vector
from dynik_ros.core.so3 import (
    log_residual_rows,
    orientation_log_residual_world,
    orientation_residual_world,
    transposed_times,
)
from dynik_ros.core.targets import TargetSet

# -S(d) row by row as indices into (d, -d, 0): ((0, d_z, -d_y), (-d_z, 0, d_x), (d_y, -d_x, 0))
_MINUS_SKEW = np.array([6, 2, 4, 5, 6, 0, 1, 3, 6])


class FrameKinematics:
    """Poses and world-aligned Jacobians of ``position_frames`` (linear rows) and ``orientation_frames``
    (angular rows) of a :class:`RobotModel`."""

    def __init__(self, robot: RobotModel, position_frames: list[str], orientation_frames: list[str]):
        self.robot = robot
        self.model = robot.model
        self.data = self.model.createData()
        self.position_ids = [robot.frame_id(f) for f in position_frames]
        self.orientation_ids = [robot.frame_id(f) for f in orientation_frames]
        self._all_ids = self.position_ids + self.orientation_ids
        self._n_pos = len(self.position_ids)
        nb, nv = robot.base_dofs, robot.nv
        self._nb = nb
        # support[i, c]: joint column c moves frame i (columns of the actuated joints only).
        support = np.zeros((len(self._all_ids), nv - nb), dtype=bool)
        for row, fid in enumerate(self._all_ids):
            jid = self.model.frames[fid].parentJoint
            for j in self.model.supports[jid]:
                if j == 0 or (robot.floating_base and j == 1):
                    continue
                start = self.model.joints[j].idx_v - nb
                support[row, start : start + self.model.joints[j].nv] = True
        self.support = support  # per frame (position frames, then orientation frames)
        # every frame placement as one numpy view (None: read frame by frame), and the gathers of ours
        self._table = placement_table(self.model, self.data)
        self._pose_gather = pose_indices(self._all_ids)  # per frame: rotation row-major, translation
        self._position_gather = tuple(g[: self._n_pos, 9:] for g in self._pose_gather)
        # the same gathers as flat indices into the table's flat view (flat_view: ~1.4 us less a gather)
        self._pose_flat = np.ravel_multi_index(self._pose_gather, (self.model.nframes, 12))
        self._position_flat = self._pose_flat[: self._n_pos, 9:].copy()
        self._table_flat = flat_view(self._table)
        self._support_pos = support[: self._n_pos]
        # the same mask as floats, shaped for the linear rows (multiplying by the bools cast them every step)
        self._support_factor = self._support_pos[:, None, :].astype(float)
        # Gather indices of the angular rows' structural non-zeros: row, column of J, axis in data.J.
        frame, column = np.nonzero(support[self._n_pos :])
        axis = np.tile(np.arange(3), frame.size)
        self._ori_rows = 3 * (self._n_pos + np.repeat(frame, 3)) + axis
        self._ori_src = (3 + axis, nb + np.repeat(column, 3))
        self.rows = 3 * len(self._all_ids)
        self.jacobian = np.zeros((self.rows, nv))
        # the same gather and scatter as flat indices (pinocchio's data.J is column-major): a third the cost
        self._ori_src_flat = np.ravel_multi_index(self._ori_src, (6, nv), order="F")
        self._ori_dst_flat = np.ravel_multi_index((self._ori_rows, self._ori_src[1]), self.jacobian.shape)
        self._jacobian_flat = self.jacobian.reshape(-1)  # a view
        # stacked_jacobian's skews of p (fixed base) or of p and p - p_B: one gather from (d, -d, 0) flat
        self._skew_indices = _minus_skew_indices((2 if nb else 1) * self._n_pos)
        # ... written in place into one array each step (its last entry stays zero; the views: _skew_views)
        self._skew_source = np.zeros(6 * (2 if nb else 1) * self._n_pos + 1)
        self._skew_parts = _skew_views(self._skew_source, self._n_pos, nb)
        if nb:
            self.jacobian[: 3 * self._n_pos, :3] = np.tile(np.eye(3), (self._n_pos, 1))
            self.jacobian[3 * self._n_pos :, 3:6] = np.tile(np.eye(3), (len(self.orientation_ids), 1))

    def __getstate__(self) -> dict:
        """A copy (``copy.deepcopy``, pickling) gets data of its own and its own views (:meth:`__setstate__`):
        a copied view would be a snapshot, never written again."""
        return {
            **self.__dict__,
            **dict.fromkeys(("_table", "_table_flat", "data", "_jacobian_flat", "_skew_parts")),
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.data = self.model.createData()
        self._table = placement_table(self.model, self.data)
        self._table_flat = flat_view(self._table)
        self._jacobian_flat = self.jacobian.reshape(-1)  # a view
        self._skew_parts = _skew_views(self._skew_source, self._n_pos, self._nb)

    @classmethod
    def for_targets(cls, robot: RobotModel, targets: TargetSet) -> FrameKinematics:
        """Kinematics of the frames of ``targets``: position targets then orientation targets (eq. 3)."""
        return cls(
            robot, [t.frame for t in targets.position_targets], [t.frame for t in targets.orientation_targets]
        )

    def pattern(self) -> np.ndarray:
        """Structural non-zeros of :attr:`jacobian` (fixed for the model and frame list)."""
        pat = np.zeros((self.rows, self.robot.nv), dtype=bool)
        if self._nb:
            pat[: 3 * self._n_pos, :6] = True
            pat[3 * self._n_pos :, 3:6] = True
        pat[: 3 * self._n_pos, self._nb :] = np.repeat(self._support_pos, 3, axis=0)
        pat[self._ori_rows, self._ori_src[1]] = True
        return pat

    def update(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kinematics and Jacobians at ``q``; positions ``(n_p, 3)`` and rotations ``(n_o, 3, 3)``."""
        pin.computeJointJacobians(self.model, self.data, q)
        return self._frame_poses()

    def update_jacobian(self, q: np.ndarray) -> None:
        """Kinematics and Jacobians at ``q`` for :meth:`stacked_jacobian` only (no orientation poses)."""
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        if self._table is not None:
            flat = self._table_flat
            gathered = flat[self._position_flat] if flat is not None else self._table[self._position_gather]
            self._positions_all = gathered
        else:
            omf = self.data.oMf
            self._positions_all = np.array([omf[i].translation for i in self.position_ids]).reshape(-1, 3)

    def poses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Forward kinematics ``h(q)`` only (no Jacobian); same outputs as :meth:`update`."""
        pin.forwardKinematics(self.model, self.data, q)
        return self._frame_poses()

    def _frame_poses(self) -> tuple[np.ndarray, np.ndarray]:
        pin.updateFramePlacements(self.model, self.data)
        if self._table is not None:  # one gather (frame_placements.py)
            flat = self._table_flat
            poses = flat[self._pose_flat] if flat is not None else self._table[self._pose_gather]
            self._positions_all = poses[:, 9:]
            return poses[: self._n_pos, 9:], poses[self._n_pos :, :9].reshape(-1, 3, 3)
        omf = self.data.oMf
        # concatenated (np.array of a list of arrays costs 1.5x as much)
        poses = np.concatenate([omf[i].homogeneous for i in self._all_ids]).reshape(-1, 4, 4)
        self._positions_all = poses[:, :3, 3]
        return poses[: self._n_pos, :3, 3], poses[self._n_pos :, :3, :3]

    def stacked_jacobian(self, base_position: np.ndarray) -> np.ndarray:
        """``J(q)`` of eq. (3) at the last :meth:`update`, w.r.t. mixed ``nu``; rows: linear of the position
        frames, then angular of the orientation frames (all world-aligned)."""
        nb, npos = self._nb, self._n_pos
        jw = self.data.J  # (6, nv): world-frame spatial Jacobian columns (velocity of the world origin).
        lin, ang = jw[:3, nb:], jw[3:, nb:]
        out = self.jacobian
        if npos:
            p = self._positions_all[:npos]
            # the skews of p and of p - p_B gathered in one go from (d, -d, 0), d = (p, p - p_B) written in
            # place: the same entries, ~1.7 us less a step than concatenating them
            positions, relative, d, minus_d = self._skew_parts
            positions[:] = p
            if nb:
                np.subtract(p, base_position, out=relative)
            np.negative(d, out=minus_d)
            skews = self._skew_source[self._skew_indices]
            # velocity of point p: v_O + omega x p = v_O - S(p) omega, for every joint column and every frame
            # at once: the frames' -S(p) stacked (3 npos x 3) times the angular rows, one product
            velocity = (skews[: 3 * npos] @ ang).reshape(npos, 3, -1)
            velocity += lin
            velocity *= self._support_factor
            out[: 3 * npos, nb:] = velocity.reshape(3 * npos, -1)
            if nb:
                # d/d omega_B of (p_B_dot + omega_B x (p - p_B)) = -S(p - p_B)
                out[: 3 * npos, 3:6] = skews[3 * npos :]
        # angular rows: the world angular velocity of every supporting joint column, copied in place
        if jw.flags.f_contiguous:
            self._jacobian_flat[self._ori_dst_flat] = jw.reshape(-1, order="F")[self._ori_src_flat]
        else:
            out[self._ori_rows, self._ori_src[1]] = jw[self._ori_src]
        return out


def _skew_views(source: np.ndarray, n_pos: int, nb: int) -> tuple[np.ndarray, ...]:
    """Views of :meth:`FrameKinematics.stacked_jacobian`'s ``(d, -d, 0)``, ``d = (p, p - p_B)`` (``p`` alone
    with a fixed base): ``p`` and ``p - p_B`` as ``(n_pos, 3)``, ``d`` and ``-d`` flat."""
    size = 3 * (2 if nb else 1) * n_pos
    positions = source[: 3 * n_pos].reshape(n_pos, 3)
    relative = source[3 * n_pos : 6 * n_pos].reshape(n_pos, 3) if nb else None
    return positions, relative, source[:size], source[size : 2 * size]


def _minus_skew_indices(n: int) -> np.ndarray:
    """Indices into ``(d, -d, 0)`` (``d``: ``n`` 3-vectors flattened) of ``-S(d_i)`` for every ``i``, stacked
    ``(3n, 3)``, as one gather from one flat array (~3 us less a step than concatenating ``d``, ``-d`` and a
    zero column along rows and gathering their columns by :data:`_MINUS_SKEW`)."""
    row = np.arange(n)[:, None]
    entry = _MINUS_SKEW[None, :]  # 0-2: d, 3-5: -d, 6: zero
    flat = np.where(entry < 3, 3 * row + entry, np.where(entry < 6, 3 * n + 3 * row + entry - 3, 6 * n))
    return flat.reshape(-1, 3)


def pose_residual(
    positions: np.ndarray,
    rotations: np.ndarray,
    target_positions: np.ndarray,
    target_rotations: np.ndarray,
    rotation_log: bool = False,
) -> np.ndarray:
    """Residual ``r`` of eq. (5), stacked like ``J``: position errors, then world-frame rotation errors
    (``sk(R* R^T)^vee`` as in eq. 5, or the rotation vector ``log(R* R^T)^vee`` with ``rotation_log``).
    The log residual is made in floats where it can (:func:`~.so3.log_residual_rows`: the same bits)."""
    if rotation_log:
        rows = log_residual_rows(target_rotations @ np.swapaxes(rotations, -1, -2))
        if rows is not None:
            return vector((target_positions - positions).reshape(-1).tolist() + rows)
    orientation = orientation_log_residual_world if rotation_log else orientation_residual_world
    return np.concatenate(
        (
            (target_positions - positions).reshape(-1),
            orientation(rotations, target_rotations).reshape(-1),
        )
    )


def to_pinocchio_velocity(nu_mixed: np.ndarray, base_rotation: np.ndarray, floating_base: bool) -> np.ndarray:
    """Mixed ``(I p_dot_B, I omega_B, s_dot)`` -> pinocchio tangent ``(B v_B, B omega_B, s_dot)``.

    ``R_B^T v`` of both 3-vectors in floats (:func:`transposed_times`: the matrix-vector product's own sums,
    two numpy products and their slices cost more than the rest of the step's output)."""
    if not floating_base:
        return np.array(nu_mixed, dtype=float)
    out = np.array(nu_mixed, dtype=float)
    rows = base_rotation.tolist()
    vx, vy, vz, wx, wy, wz = out[:6].tolist()
    out[:6] = (*transposed_times(rows, vx, vy, vz), *transposed_times(rows, wx, wy, wz))
    return out


def to_mixed_velocity(v_pinocchio: np.ndarray, base_rotation: np.ndarray, floating_base: bool) -> np.ndarray:
    """Inverse of :func:`to_pinocchio_velocity`."""
    if not floating_base:
        return np.array(v_pinocchio, dtype=float)
    out = np.array(v_pinocchio, dtype=float)
    out[:3] = base_rotation @ v_pinocchio[:3]
    out[3:6] = base_rotation @ v_pinocchio[3:6]
    return out


def mixed_jacobian(jacobian: np.ndarray, base_rotation: np.ndarray) -> np.ndarray:
    """A pinocchio Jacobian (columns on the base-local free-flyer tangent) on mixed ``nu`` instead: the base
    columns times ``R_B^T`` (:func:`to_pinocchio_velocity`); a new array."""
    out = np.array(jacobian, dtype=float)
    out[:, :3] = out[:, :3] @ base_rotation.T
    out[:, 3:6] = out[:, 3:6] @ base_rotation.T
    return out
