"""Hard stance rows: a foot in contact moves exactly as its targets command, as QP constraints.

A weighted target (eq. 10a) is traded off against every other target; on real captures the other
targets of the motion pull a standing foot off its held place (tilt, slide, depth). With stance rows, the
rows of eq. (9) of a stance frame's targets (position and orientation, both in the stacked residual) become
bounds on ``nu``:

    v*_i - tol <= J_i nu <= v*_i + tol      (i: the rows of the frames flagged in contact this step)

so the foot follows ``v* = v_ff + K e`` (its held pose and the feed-forward) and every other target gives way.
Where the joint, floor or loop rows do not let the foot follow ``v*``, the rows are centred on priority 1's
``y*`` instead (:mod:`.stance_priority`: the nearest the limits allow), so the step never turns infeasible.
Frames out of contact get zero, unbounded rows (the QP's row count stays fixed). Like the floor rows
(:mod:`.floor_rows`) the rows bound the step's mean velocity ``m = w_0 nu_k + c`` (the integration rule's
weights, :mod:`.step_integration`), ``w_0 J_i nu_k`` within ``tol`` of ``v*_i - J_i c``, so what is integrated
and written moves the foot as ``v*`` asks and the step keeps its rule (it was switched to Euler, which dropped
the trapezoid's carried velocity of every joint). A row that fixes the mean makes ``nu_k = (m - c) / w_0``
alternate (the trapezoid's ``2 m_k - nu_{k-1}``: Xsens take on G1, 6 % of the joint-steps zig-zag, the stance
rows yielding on 59 steps), so the history restarts at the step's mean along the directions they fix, the row
space of their Jacobian (:meth:`~.extra_terms.ExtraTerms.held_rows`), not on the base's and held legs'
whole columns (which also delayed the base's motions that move no held foot, the trunk and arms with them).
The foot moves by ``dt J(q_mid) m`` (``q_mid`` half-way along the step), not by ``dt J m`` with the step's
Jacobian (where the step was predicted to end): where the
two differ the rows are posed again on ``J(q_mid)`` (:meth:`~.extra_terms.ExtraTerms.stance_secant`); they are
first posed with the predicted step's offset, as the floor rows are linearised
(:meth:`~.extra_terms.ExtraTerms._predicted`).
ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.small_arrays import dot as _dot

TOLERANCE = 1e-4  # m/s, rad/s: half-width of each row's band


class StanceRows:
    """Row indices of the stance frames' targets in the stacked residual, and their bounds per step."""

    def __init__(self, targets, frames: Sequence[str], nv: int, tolerance: float = TOLERANCE):
        position = [t.frame for t in targets.position_targets]
        orientation = [t.frame for t in targets.orientation_targets]
        missing = [f for f in frames if f not in position and f not in orientation]
        if missing:
            raise ValueError(f"stance frames without a target: {missing}")
        offset = 3 * len(position)
        self.frames = tuple(frames)
        self.rows: list[np.ndarray] = []
        for f in self.frames:
            rows = []
            if f in position:
                rows += [3 * position.index(f) + j for j in range(3)]
            if f in orientation:
                rows += [offset + 3 * orientation.index(f) + j for j in range(3)]
            self.rows.append(np.array(rows, dtype=int))
        self.n_rows = int(sum(len(r) for r in self.rows))
        self.nv = nv
        self.tolerance = float(tolerance)
        self._flags = np.zeros(len(self.frames), dtype=bool)
        self.active = self._flags.view()  # this step's flags, written by observe only (read-only view)
        self.active.flags.writeable = False
        self._patterns: dict[bytes, StancePattern] = {}  # per combination of flags seen (at most 2^frames)
        self.pattern = self._pattern()

    def observe(self, flags: np.ndarray | None) -> None:
        """This step's stance flags (one per frame; ``None``: none in contact). Flags given as a boolean
        array of the frames' shape whose pattern is known (every step but a new combination's first) are
        taken by their bytes, without the copy into the flags unless they changed."""
        if type(flags) is np.ndarray and flags.dtype == np.bool_ and flags.shape == self._flags.shape:
            pattern = self._patterns.get(flags.tobytes())
            if pattern is not None:
                if pattern is not self.pattern:
                    self._flags[:] = flags
                    self.pattern = pattern
                return
        if flags is None:
            self._flags[:] = False
        else:
            flags = np.asarray(flags, dtype=bool)
            if flags.shape != self._flags.shape:
                raise ValueError(f"stance must hold {len(self.frames)} flags, got shape {flags.shape}")
            self._flags[:] = flags
        self.pattern = self._pattern()

    def _pattern(self) -> StancePattern:
        """The :class:`StancePattern` of the flags as observed, built the first time they occur."""
        key = self._flags.tobytes()
        pattern = self._patterns.get(key)
        if pattern is None:
            pattern = self._patterns[key] = StancePattern.of(self.rows, self._flags)
        return pattern

    @property
    def imposed(self) -> bool:
        return self.pattern.imposed

    def bounds(
        self,
        jacobian: np.ndarray,
        corrected: np.ndarray,
        w0: float = 1.0,
        carried: np.ndarray | None = None,
        out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        held: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A, l, u)`` on ``nu_k`` of the rows: the frames in contact bound to ``v*`` within the tolerance,
        on the step's mean velocity ``m = w0 nu_k + carried`` (the integration rule's weights); written into
        ``out`` (``A``, ``l``, ``u`` of the rows: e.g. views of the step's dynamic rows) if given. ``held``:
        ``jacobian[pattern.rows]`` if the caller has it (the step's, :mod:`.extra_terms`), read frame by
        frame as contiguous slices instead of a gather per frame: each frame's ``J_i c`` stays a product of
        its own rows (one product of all the rows rounds differently)."""
        if out is None:
            out = np.empty((self.n_rows, self.nv)), np.empty(self.n_rows), np.empty(self.n_rows)
        a, lower, upper = out
        tolerance, start = self.tolerance, 0
        for on, block, rows in self.pattern.blocks:
            if not on:
                a[block], lower[block], upper[block] = 0.0, -np.inf, np.inf
                continue
            if held is None:
                rows_jacobian = jacobian[rows]
            else:
                stop = start + len(rows)
                rows_jacobian, start = held[start:stop], stop
            np.multiply(w0, rows_jacobian, out=a[block])  # (on_mean's w0 J, written where it goes)
            centre = corrected[rows] if carried is None else corrected[rows] - _dot(rows_jacobian, carried)
            np.subtract(centre, tolerance, out=lower[block])
            np.add(centre, tolerance, out=upper[block])
        return out


@dataclass(frozen=True)
class StancePattern:
    """What one combination of stance flags selects, derived once (:meth:`StanceRows.observe`, the flags
    change only at touch-down and lift-off)."""

    active: tuple[bool, ...]  # the flags, one per stance frame
    imposed: bool  # a frame in contact
    rows: np.ndarray  # the stacked residual's rows of the frames in contact, frame by frame
    mask: np.ndarray  # per row of the stance block (StanceRows.rows concatenated): its frame is in contact
    blocks: tuple[tuple[bool, slice, np.ndarray], ...]  # per frame: in contact, its block rows, residual rows

    @classmethod
    def of(cls, rows: Sequence[np.ndarray], flags: np.ndarray) -> StancePattern:
        sizes = [len(r) for r in rows]
        stops = np.cumsum(sizes)
        blocks = tuple(
            (bool(on), slice(int(stop) - size, int(stop)), r)
            for on, size, stop, r in zip(flags, sizes, stops, rows, strict=True)
        )
        active = [r for on, r in zip(flags, rows, strict=True) if on]
        held = np.concatenate(active) if active else np.zeros(0, dtype=int)
        mask = np.repeat(flags, sizes)
        held.flags.writeable = mask.flags.writeable = False  # kept for every step with these flags
        return cls(tuple(bool(f) for f in flags), bool(flags.any()), held, mask, blocks)


def on_mean(
    jacobian: np.ndarray, velocity: np.ndarray, w0: float, carried: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """``J m = v`` for the step's mean ``m = w0 nu_k + c`` as a row on ``nu_k``: ``(w0 J, v - J c)``."""
    if carried is None:
        return w0 * jacobian, velocity
    return w0 * jacobian, velocity - _dot(jacobian, carried)
