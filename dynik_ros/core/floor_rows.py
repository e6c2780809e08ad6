"""Floor rows: chosen sole points never go under the floor, as inequality rows of the velocity QP (issue 9).

The floor is a property of the world, not of the human: weighted foot targets (eq. 10a) are traded off
against every other target, so a foot pulled by the rest of the body (or lagging at its velocity limits)
went up to 12 mm under the ground on real captures. Here each chosen point ``p`` (a frame and a point in it:
the corners of the map's soles, :func:`points_of_feet`) with height ``d = z_p - h`` above
the floor ``h`` must end the step with

    d_k >= (1 - gamma) d_{k-1}          (0 < gamma <= 1)

a discrete-time barrier: a point on or above the floor stays on or above it, a point under it comes back by
``gamma`` of its depth per step (per step of the take as given: a step covering ``n`` of them,
``sample_period``, uses ``1 - (1 - gamma)^n``, :mod:`.step_gain`). Linearised where the step is predicted to
end, like the loop rows (:mod:`.loop_closure`): with ``m = w_0 nu_k + c`` the step's mean velocity (the
integration rule's weights, :mod:`.step_integration`) and ``d_pred`` the height at the predicted
configuration ``q_{k-1} + dt m_pred``, ``d_k ~ d_pred + dt J_z (m - m_pred)``, so the rows are

    w_0 J_z nu_k >= ((1 - gamma) d_{k-1} - d_pred) / dt + J_z (m_pred - c) =: b - J_z c

(``J_z``: the vertical row of the point's velocity, mixed coordinates). The rows bound the step's mean
velocity, so they hold for what is integrated and written, not only for ``nu_k``.

Feasibility. Standing still (``m = 0``) meets the velocity bounds and every row of a point on or above the
floor; a point under it asks for a rise the velocity limits may not allow, and hard stance or loop rows may
contradict the rows. When the QP with the rows fails (no usable solution, or any of its rows missed by more
than :data:`MISS`: contradicting rows leave OSQP at its iteration limit), the step is solved again with the
rows *softened* (``J_z m >= min(b, 0)``: no point sinks further, none is pushed up; standing still meets
them) and, if that fails too, *without* them; the step's ``StepInfo.floor`` says which.

A row that binds pins the mean ``m`` along it, so with the trapezoid ``nu_k = (m - c) / w_0`` may alternate
from step to step (root -1 of the rule: no growth). Restarting the velocity history of the columns that move
a bound point at the step's mean (as :mod:`.step_integration` does at a joint bound) was tried and not kept:
on the capture table it left the depths as they are and made slides and tilts worse (the MVN export on TALOS
slide 1.0 -> 2.3 mm, the Xsens take on G1 tilt 2.0 -> 3.0 deg, the kneel on TALOS slides 5.5/2.7 ->
9.9/11.1 mm); without it the chatter share is unchanged on every row. ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.frame_kinematics import mixed_jacobian
from dynik_ros.core.frame_placements import flat_view, placement_view, pose_indices
from dynik_ros.core.small_arrays import dot as _dot
from dynik_ros.core.small_arrays import einsum
from dynik_ros.core.sole import sole_polygon
from dynik_ros.core.step_gain import per_step_gain

MODES = ("hard", "softened", "dropped")  # StepInfo.floor: the rows as posed, softened, left out this step
MISS = 1e-4  # m/s, rad/s: a solution outside a row by more than this did not meet it


@dataclass(frozen=True)
class FloorConfig:
    """Points kept above the floor: ``(frame, (x, y, z) in the frame)``; the floor height ``height`` (world
    z, m) and the barrier's ``gain`` (``gamma`` above, per step). No points: no rows."""

    points: tuple[tuple[str, tuple[float, float, float]], ...] = ()
    height: float = 0.0
    gain: float = 0.5  # measured on the capture table: 1.0 the same counts, 0.25 four rows lost on tilt

    def __post_init__(self) -> None:
        if not (np.isfinite(self.gain) and 0.0 < self.gain <= 1.0):
            raise ValueError(f"floor gain must be in (0, 1], got {self.gain}")
        if not np.isfinite(self.height):
            raise ValueError(f"floor height must be finite, got {self.height}")
        for frame, point in self.points:
            if len(point) != 3 or not np.all(np.isfinite(point)):
                raise ValueError(f"floor point of '{frame}' must be 3 finite values, got {point}")

    @property
    def enabled(self) -> bool:
        return bool(self.points)


class FloorRows:
    """The floor rows of one robot: per step :meth:`observe` (heights at ``q_{k-1}``), :meth:`prepare` (at
    the step's linearisation point), then :meth:`rows` for the integration rule's weights. ``targets``
    (the IK's :class:`~dynik_ros.core.targets.TargetSet`): where every point's frame has a position and an
    orientation target, ``J_z`` comes from the rows of the IK's stacked Jacobian (eq. 3) of those targets;
    otherwise from pinocchio."""

    def __init__(self, robot, config: FloorConfig, targets=None, sample_period: float = 0.0):
        self.robot = robot
        self.config = config
        self.sample_period = sample_period  # s, the step gamma is per (0: every step; core/step_gain.py)
        frames = sorted({frame for frame, _ in config.points})
        self._frame_ids = [robot.frame_id(f) for f in frames]
        self._point_frame = np.array([frames.index(frame) for frame, _ in config.points], dtype=int)
        self._offsets = np.array([point for _, point in config.points], dtype=float).reshape(-1, 3)
        self.n_rows = len(config.points)
        self._gather = pose_indices([self._frame_ids[f] for f in self._point_frame])
        self._gather_flat = np.ravel_multi_index(self._gather, (robot.model.nframes, 12))  # (flat_view)
        # per point: its frame's third rotation row and origin height (entries 6-8, 11 of _gather), all that
        # heights needs: a third of the gather
        self._gather_z = self._gather_flat[:, [6, 7, 8, 11]].copy()
        self._viewed: pin.Data | None = None  # the pin.Data whose placement table _table is (_levers)
        self._table: np.ndarray | None = None
        self._table_flat: np.ndarray | None = None
        self._stacked_rows = None  # rows of the stacked Jacobian: vertical, angular x, angular y per point
        # the same rows as three slices of the stacked Jacobian, one row per frame, where the points come
        # frame by frame, as many per frame (the soles' corners): views instead of a gather (_frame_slices)
        self._frame_rows: tuple[tuple, tuple, tuple] | None = None
        if targets is not None:
            position = [t.frame for t in targets.position_targets]
            orientation = [t.frame for t in targets.orientation_targets]
            if all(f in position and f in orientation for f in frames):
                offset = 3 * len(position)
                frame_rows = [(3 * position.index(f) + 2, offset + 3 * orientation.index(f)) for f in frames]
                vertical = np.array([frame_rows[f][0] for f in self._point_frame])
                angular = np.array([frame_rows[f][1] for f in self._point_frame])
                self._stacked_rows = np.concatenate((vertical, angular, angular + 1))  # one gather a step
                self._frame_rows = _frame_slices(self._point_frame, frame_rows)
        self.previous = np.zeros(self.n_rows)  # d_{k-1}: heights above the floor at the step's start
        self._jacobian = np.zeros((self.n_rows, robot.nv))  # J_z of each point (mixed coordinates)
        self._bound = np.zeros(self.n_rows)  # b: the rows' bound on J_z m (written in place by prepare)
        self._lever_rows = np.zeros((self.n_rows, robot.nv))  # prepare's l_x w_y, written in place
        # (frames, points per frame) of the frame-by-frame path (_frame_rows)
        self._blocks = (len(frames), self.n_rows // max(len(frames), 1))
        self._kept = np.zeros(self.n_rows)  # prepare's (1 - gamma) d_{k-1}, written in place
        self.mode = MODES[0]
        self.counts = dict.fromkeys(MODES[1:], 0)  # steps softened / dropped since construction

    def __getstate__(self) -> dict:
        """A copy views no ``pin.Data`` (a copied view is a snapshot): it makes its own on first use."""
        return {**self.__dict__, "_viewed": None, "_table": None, "_table_flat": None}

    def _view(self, data: pin.Data) -> None:
        """The views of ``data``'s placement table (:mod:`.frame_placements`), made once per ``data``."""
        if data is not self._viewed:
            self._viewed, self._table = data, placement_view(self.robot.model, data)
            self._table_flat = flat_view(self._table)

    def _levers(self, data: pin.Data) -> tuple[np.ndarray, np.ndarray]:
        """Per point, its frame's origin and the lever from that origin to the point (world), from
        ``data``'s frame placements (one gather from their table, :mod:`.frame_placements`, once made for
        ``data``; else frame by frame)."""
        self._view(data)
        if self._table is not None:  # per point: its frame's rotation (row-major), translation
            flat = self._table_flat
            poses = flat[self._gather_flat] if flat is not None else self._table[self._gather]
            origins, rotations = poses[:, 9:], poses[:, :9].reshape(-1, 3, 3)
        else:
            omf = data.oMf  # (concatenated: np.array of the list costs more)
            poses = np.concatenate([omf[i].homogeneous for i in self._frame_ids]).reshape(-1, 4, 4)
            poses = poses[self._point_frame]
            origins, rotations = poses[:, :3, 3], poses[:, :3, :3]
        return origins, einsum("nij,nj->ni", rotations, self._offsets)

    def heights(self, data: pin.Data) -> np.ndarray:
        """Height above the floor of every point with ``data``'s frame placements (world z minus ``h``). From
        the flat table only the rotations' third rows and the origins' heights are read: the z of the
        levers' product is the same sum of the same three products (``test_floor_rows_fast``), and ``o + l``
        is ``l + o`` to the bit; ``- h`` is left out at ``h = 0`` (``x - 0.0`` is ``x``)."""
        self._view(data)
        flat = self._table_flat
        if flat is None:
            origins, levers = self._levers(data)
            return origins[:, 2] + levers[:, 2] - self.config.height
        rows = flat[self._gather_z]
        heights = einsum("nj,nj->n", rows[:, :3], self._offsets)
        heights += rows[:, 3]
        if self.config.height != 0.0:
            heights -= self.config.height
        return heights

    def observe(self, data: pin.Data) -> None:
        """``d_{k-1}``, from ``data``'s frame placements at ``q_{k-1}``."""
        self.previous = self.heights(data)

    def prepare(
        self,
        model: pin.Model,
        data: pin.Data,
        dt: float,
        predicted_mean: np.ndarray,
        jacobian: np.ndarray | None = None,
    ) -> None:
        """``J_z`` and ``b`` of this step from ``data`` at the linearisation point (its joint Jacobians and
        frame placements: the predicted configuration, or ``q_{k-1}`` with ``predicted_mean`` zero) and the
        IK's stacked ``jacobian`` there (used where the targets allow, see the class docstring)."""
        self._view(data)
        flat = self._table_flat
        if flat is not None:  # _levers' gather and product, inline: per point its pose, then its lever
            poses = flat[self._gather_flat]
            origin_z, levers = (
                poses[:, 11],
                einsum("nij,nj->ni", poses[:, :9].reshape(-1, 3, 3), self._offsets),
            )
        else:
            origins, levers = self._levers(data)
            origin_z = origins[:, 2]
        # vertical velocity of the point: v_z + (omega x lever)_z, written in place (a sum is the same either
        # way round: l_y w_x + v_z is v_z + l_y w_x to the bit), the product l_x w_y too
        if jacobian is not None and self._frame_rows is not None:
            # per frame its three rows (views), broadcast over its points: the same products and sums per
            # entry as the gathered rows below
            sliced, scratch = self._frame_rows, self._lever_rows.reshape(*self._blocks, -1)
            jacobian_z, levers = self._jacobian.reshape(*self._blocks, -1), levers.reshape(*self._blocks, 3)
            np.multiply(levers[:, :, 1:2], jacobian[sliced[1]], out=jacobian_z)
            jacobian_z += jacobian[sliced[0]]
            jacobian_z -= np.multiply(levers[:, :, 0:1], jacobian[sliced[2]], out=scratch)
            jacobian_z, levers = self._jacobian, levers.reshape(-1, 3)
        else:
            if jacobian is not None and self._stacked_rows is not None:
                vertical, ang_x, ang_y = jacobian[self._stacked_rows].reshape(3, self.n_rows, -1)
            else:
                vertical, ang_x, ang_y = self._pinocchio_rows(model, data)
            jacobian_z = np.multiply(levers[:, 1:2], ang_x, out=self._jacobian)
            jacobian_z += vertical
            jacobian_z -= np.multiply(levers[:, 0:1], ang_y, out=self._lever_rows)
        # b = ((1 - gamma) d_{k-1} - d_pred) / dt + J_z m_pred, the same operations in place (d_pred =
        # o_z + l_z - h, where - 0.0 changes nothing)
        bound = np.add(origin_z, levers[:, 2], out=self._bound)
        if self.config.height != 0.0:
            bound -= self.config.height
        gain = self.config.gain
        if self.sample_period > 0.0:  # a step over several of the take's steps (core/step_gain.py)
            gain = per_step_gain(gain, dt / self.sample_period)
        np.subtract(np.multiply(1.0 - gain, self.previous, out=self._kept), bound, out=bound)
        bound /= dt
        bound += _dot(jacobian_z, predicted_mean)

    def _pinocchio_rows(self, model: pin.Model, data: pin.Data) -> tuple[np.ndarray, ...]:
        """Per point, its frame origin's vertical velocity row and the angular x, y rows (mixed ``nu``)."""
        nb = self.robot.base_dofs
        blocks = []
        for fid in self._frame_ids:
            jac = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            if nb:  # pinocchio's base-local twist -> mixed (world) base velocity
                jac = mixed_jacobian(jac, data.oMi[1].rotation)
            blocks.append(jac)
        stacked = np.array(blocks)[self._point_frame]
        return stacked[:, 2], stacked[:, 3], stacked[:, 4]

    def rows(
        self,
        w0: float,
        carried: np.ndarray,
        mode: str = "hard",
        out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A, l, u)`` on ``nu_k`` for the mean ``m = w0 nu_k + carried``: ``mode`` ``hard`` (the barrier),
        ``softened`` (``J_z m >= min(b, 0)``) or ``dropped`` (zero, unbounded rows); written into ``out``
        (e.g. views of the step's dynamic rows) if given."""
        self.mode = mode
        if out is None:
            out = np.empty_like(self._jacobian), np.empty(self.n_rows), np.empty(self.n_rows)
        a, lower, upper = out
        if mode == "dropped":
            a[:], lower[:], upper[:] = 0.0, -np.inf, np.inf
            return out
        bound = self._bound if mode == "hard" else np.minimum(self._bound, 0.0)
        np.multiply(w0, self._jacobian, out=a)
        # (np.dot's own C function: @'s BLAS call)
        np.subtract(bound, _dot(self._jacobian, carried), out=lower)
        upper[:] = np.inf
        return out


def _frame_slices(
    point_frame: np.ndarray, frame_rows: list[tuple[int, int]]
) -> tuple[tuple, tuple, tuple] | None:
    """The stacked Jacobian's vertical, angular x and angular y rows of the points' frames as indices of
    basic slicing, ``(slice, None)``: per block of points one row, shaped ``(frames, 1, nv)`` to broadcast
    over the block's points. ``None`` unless the points come frame by frame, as many per frame, each frame in
    one block, and each kind of row is evenly spaced from block to block (always so for one or two frames)."""
    n = len(point_frame)
    frames = len(frame_rows)
    if frames == 0 or n % frames:
        return None
    blocks = point_frame.reshape(frames, n // frames)
    if not (blocks == blocks[:, :1]).all() or len(set(blocks[:, 0].tolist())) != frames:
        return None
    order = blocks[:, 0].tolist()
    kinds = (
        [frame_rows[f][0] for f in order],
        [frame_rows[f][1] for f in order],
        [frame_rows[f][1] + 1 for f in order],
    )
    slices = []
    for rows in kinds:
        step = rows[1] - rows[0] if len(rows) > 1 else 1
        if step == 0 or any(b - a != step for a, b in zip(rows, rows[1:], strict=False)):
            return None
        stop = rows[-1] + step
        slices.append((slice(rows[0], stop if stop >= 0 else None, step), None))
    return slices[0], slices[1], slices[2]


def points_of_feet(feet: Sequence, half_width: float) -> tuple[tuple[str, tuple[float, float, float]], ...]:
    """The sole corners of a map's feet (``FootSpec``: ``frame``, ``sole``; :func:`.sole.sole_polygon` with
    the sole's ``half_width``) as :attr:`FloorConfig.points`."""
    return tuple((foot.frame, point) for foot in feet for point in sole_polygon(foot.sole, half_width))
