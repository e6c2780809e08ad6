"""Physical plausibility of link states: finite is not enough.

A suit, a network or a replay can deliver finite values no human produces: a pelvis 1e20 m away, a 1e30
rad/s twist, a link teleported 100 m between two samples. :class:`PlausibilityGuard` refuses such a sample
with a reason (``implausible_position``, ``implausible_speed``, ``implausible_jump``) so nodes count it
like other refused input. Bounds (defaults generous for fast human motion: a thrown hand reaches ~25 m/s
and ~40 rad/s):

* every link within ``max_position`` of the world origin;
* every linear speed below ``max_linear_speed``, every angular speed below ``max_angular_speed``;
* per sample, every link's displacement below ``max_linear_speed * dt + jump_margin`` and rotation below
  ``max_angular_speed * dt + jump_angle_margin`` from the last accepted sample;
* when angular velocities are measured, every link's rotation within
  ``jump_angle_margin + max_angular_acceleration * dt**2 / 2`` of the one its measured angular velocities
  predict (``exp(dt (w0 + w1) / 2) R0``). The speed bound alone let a half turn of the whole world through
  after two refused samples (25 ms at 120 Hz allow 3.5 rad at 100 rad/s), and the IK then tracked a 2 rad
  error down for a second; the links' own gyros said they turned 0.01 rad.

A teleport that then stays (the person re-registered, the world origin reset) is accepted after
``confirm`` consecutive samples that agree with each other (each plausible relative to the previous
one): the guard then re-bases on them and says so (``rebased``), so the IK can restart from there.

A stream that comes *back* within ``return_window`` (0.1 s) of such a re-base was not moved: the
excursion was a glitch (a few samples of another frame, or one sample repeated at a teleported place).
When stamps are given, a sample that jumps away from the excursion but continues the last sample accepted
before it (:meth:`PlausibilityGuard._continues`: every link within the jump bounds of it, and the typical
link where its own twist predicts) is accepted at once as ``returned``; the IK can then resume from its
state before the excursion instead of re-basing a second time (a second re-base kept the posture the
excursion froze, and the IK took 0.4-1.1 s to close that gap).
"""

from __future__ import annotations

import math

import numpy as np

from dynik_ros.core.so3 import exp_so3

POSITION, SPEED, JUMP = "implausible_position", "implausible_speed", "implausible_jump"
RETURNED = "returned"  # accepted: the stream came back from an excursion (see the module docstring)
REASONS = (POSITION, SPEED, JUMP)


class PlausibilityGuard:
    """Checks of the module docstring over ``(L, 3)`` positions, ``(L, 3, 3)`` rotations and velocities."""

    def __init__(
        self,
        max_position: float = 1e5,
        max_linear_speed: float = 50.0,
        max_angular_speed: float = 100.0,
        jump_margin: float = 0.5,
        jump_angle_margin: float = 1.0,
        confirm: int = 3,
        max_angular_acceleration: float = 500.0,
        return_window: float = 0.1,
    ):
        self.max_position = max_position
        self.max_linear_speed = max_linear_speed
        self.max_angular_speed = max_angular_speed
        self.jump_margin = jump_margin
        self.jump_angle_margin = jump_angle_margin
        self.confirm = max(1, int(confirm))
        self.max_angular_acceleration = max_angular_acceleration
        self.return_window = return_window
        self.reset()

    def reset(self) -> None:
        self._last: Sample | None = None
        self._last_ns: int | None = None
        self._last_linear: np.ndarray | None = None
        self._pending: list[Sample] = []
        # the last sample accepted before an excursion: itself, its stamp, its linear velocities
        self._before: tuple[Sample, int, np.ndarray | None] | None = None

    def check(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        linear_velocities: np.ndarray | None,
        angular_velocities: np.ndarray | None,
        dt: float,
        stamp_ns: int | None = None,
    ) -> tuple[str | None, str]:
        """``(None, "")`` if plausible (``("rebased", detail)`` when a confirmed teleport is accepted,
        ``(RETURNED, detail)`` when the stream came back from one: only with ``stamp_ns``), else
        ``(reason, detail)``. The accepted sample becomes the reference for the jump check."""
        far = float(np.abs(positions).max(initial=0.0))
        if far > self.max_position:
            return POSITION, f"a link {far:.3g} m from the origin (limit {self.max_position:g} m)"
        for values, limit, unit in (
            (linear_velocities, self.max_linear_speed, "m/s"),
            (angular_velocities, self.max_angular_speed, "rad/s"),
        ):
            if values is not None and values.size:
                fastest = float(np.sqrt(np.einsum("ij,ij->i", values, values).max()))
                if fastest > limit:
                    return SPEED, f"a link at {fastest:.3g} {unit} (limit {limit:g} {unit})"
        sample = (positions, rotations, angular_velocities)
        if self._last is not None:
            detail = self._jump(self._last, sample, dt)
            if detail:
                if self._came_back(sample, linear_velocities, stamp_ns):
                    self._accept(sample, stamp_ns, linear_velocities)
                    self._before = None  # the excursion is over
                    return RETURNED, f"back where the stream was before the last re-base ({detail})"
                pending = self._pending
                if pending and self._jump(pending[-1], sample, dt):
                    pending.clear()
                pending.append(_copy(sample))
                if len(pending) < self.confirm:
                    return JUMP, detail
                before = (self._last, self._last_ns, self._last_linear)
                self._accept(sample, stamp_ns, linear_velocities)
                if stamp_ns is not None and before[1] is not None:
                    self._before = before  # type: ignore[assignment]
                return "rebased", f"{self.confirm} consistent samples after a jump: {detail}"
        self._accept(sample, stamp_ns, linear_velocities)
        return None, ""

    def _accept(self, sample: Sample, stamp_ns: int | None, linear_velocities: np.ndarray | None) -> None:
        self._pending = []
        self._last, self._last_ns = _copy(sample), stamp_ns
        self._last_linear = None if linear_velocities is None else np.array(linear_velocities, dtype=float)
        if self._before is not None and (
            stamp_ns is None or stamp_ns - self._before[1] > self.return_window * 1e9
        ):
            self._before = None

    def _came_back(self, sample: Sample, linear_velocities: np.ndarray | None, stamp_ns: int | None) -> bool:
        """``sample`` continues the last sample accepted before the latest re-base (within
        ``return_window``): see :meth:`_continues`."""
        if self._before is None or stamp_ns is None:
            return False
        before, before_ns, before_linear = self._before
        elapsed = (stamp_ns - before_ns) * 1e-9
        if not 0.0 < elapsed <= self.return_window:
            return False
        return self._continues(before, before_linear, sample, linear_velocities, elapsed)

    def _continues(
        self,
        before: Sample,
        before_linear: np.ndarray | None,
        after: Sample,
        linear_velocities: np.ndarray | None,
        elapsed: float,
    ) -> bool:
        """Stricter than "plausible" (its bounds over a long gap admit a half turn): no link beyond the
        jump bounds, and the median link within ``0.1 m + 50 m/s² elapsed²/2`` of where its twist
        (mean of the two samples') carries it and ``0.2 rad + 100 rad/s² elapsed²/2`` of the rotation
        its angular velocity predicts. The median: the trunk moves as predicted, a flailing hand may not."""
        if self._jump(before, after, elapsed):
            return False
        (p0, r0, w0), (p1, r1, w1) = before, after
        if p0.shape != p1.shape or r0.shape != r1.shape:
            return False
        if r0.size and w0 is not None and w1 is not None and w0.shape == w1.shape == (len(r0), 3):
            off = _angles(r1, exp_so3(0.5 * elapsed * (w0 + w1)) @ r0)
            if float(np.median(off)) > 0.2 + 50.0 * elapsed * elapsed:
                return False
        if p0.size:
            known = [v for v in (before_linear, linear_velocities) if v is not None and v.shape == p1.shape]
            velocity = sum(known) / len(known) if known else np.zeros_like(p1)
            predicted = p0 + elapsed * velocity
            miss = np.sqrt(np.einsum("ij,ij->i", p1 - predicted, p1 - predicted))
            if float(np.median(miss)) > 0.1 + 25.0 * elapsed * elapsed:
                return False
        return True

    def _jump(self, before: Sample, after: Sample, dt: float) -> str:
        """Why ``after`` cannot follow ``before`` within ``dt`` ('' if it can)."""
        (p0, r0, w0), (p1, r1, w1) = before, after
        if p0.shape != p1.shape or r0.shape != r1.shape:
            return ""
        moved = float(np.sqrt(np.einsum("ij,ij->i", p1 - p0, p1 - p0).max(initial=0.0)))
        allowed = self.max_linear_speed * dt + self.jump_margin
        if moved > allowed:
            return f"a link moved {moved:.3g} m in {dt:.3g} s (allowed {allowed:.3g} m)"
        if r0.size:
            cos = np.clip((np.einsum("nij,nij->n", r0, r1) - 1.0) / 2.0, -1.0, 1.0)
            turned = float(np.arccos(cos.min()))
            allowed = self.max_angular_speed * dt + self.jump_angle_margin
            if turned > allowed:
                return f"a link turned {np.degrees(turned):.0f} deg in {dt:.3g} s"
            if w0 is not None and w1 is not None and w0.shape == w1.shape == (len(r0), 3):
                allowed = self.jump_angle_margin + 0.5 * self.max_angular_acceleration * dt * dt
                step = 0.5 * dt * (w0 + w1)
                # the angle to the prediction is at most the turn plus the predicted turn (triangle
                # inequality on SO(3)): far inside the bound (every normal sample) it needs no check
                predicted = math.sqrt(float(np.einsum("ij,ij->i", step, step).max(initial=0.0)))
                if turned + predicted < allowed - 1e-6:
                    return ""
                off = _angles(r1, exp_so3(step) @ r0)
                worst = int(np.argmax(off))
                if off[worst] > allowed:
                    return (
                        f"a link turned {np.degrees(off[worst]):.0f} deg away from what its angular velocity "
                        f"predicts in {dt:.3g} s (allowed {np.degrees(allowed):.0f} deg)"
                    )
        return ""


Sample = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]  # positions, rotations, angular velocities


def _copy(sample: Sample) -> Sample:
    return tuple(None if a is None else np.array(a, dtype=float) for a in sample)  # type: ignore[return-value]


def _angles(r1: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """Geodesic angles between ``(n, 3, 3)`` rotations."""
    return np.arccos(np.clip((np.einsum("nij,nij->n", r0, r1) - 1.0) / 2.0, -1.0, 1.0))
