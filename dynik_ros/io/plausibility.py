"""Physical plausibility of link states: finite is not enough.

A suit, a network or a replay can deliver finite values no human produces: a pelvis 1e20 m away, a 1e30
rad/s twist, a link teleported 100 m between two samples. :class:`PlausibilityGuard` refuses such a sample
with a reason (``implausible_position``, ``implausible_speed``, ``implausible_jump``) so nodes count it
like other refused input. Bounds (defaults generous for fast human motion: a thrown hand reaches ~25 m/s
and ~40 rad/s):

* every link within ``max_position`` of the world origin;
* every linear speed below ``max_linear_speed``, every angular speed below ``max_angular_speed``;
* per sample, every link's displacement below ``max_linear_speed * dt + jump_margin`` and rotation below
  ``max_angular_speed * dt + jump_angle_margin`` from the last accepted sample.

A teleport that then stays (the person re-registered, the world origin reset) is accepted after
``confirm`` consecutive samples that agree with each other (each plausible relative to the previous
one): the guard then re-bases on them and says so (``rebased``), so the IK can restart from there.
"""

from __future__ import annotations

import numpy as np

POSITION, SPEED, JUMP = "implausible_position", "implausible_speed", "implausible_jump"
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
    ):
        self.max_position = max_position
        self.max_linear_speed = max_linear_speed
        self.max_angular_speed = max_angular_speed
        self.jump_margin = jump_margin
        self.jump_angle_margin = jump_angle_margin
        self.confirm = max(1, int(confirm))
        self.reset()

    def reset(self) -> None:
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def check(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        linear_velocities: np.ndarray | None,
        angular_velocities: np.ndarray | None,
        dt: float,
    ) -> tuple[str | None, str]:
        """``(None, "")`` if plausible (or ``("rebased", detail)`` when a confirmed teleport is accepted),
        else ``(reason, detail)``. The accepted sample becomes the reference for the jump check."""
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
        sample = (positions, rotations)
        if self._last is not None:
            detail = self._jump(self._last, sample, dt)
            if detail:
                pending = self._pending
                if pending and self._jump(pending[-1], sample, dt):
                    pending.clear()
                pending.append((positions.copy(), rotations.copy()))
                if len(pending) < self.confirm:
                    return JUMP, detail
                self._pending = []
                self._last = (positions.copy(), rotations.copy())
                return "rebased", f"{self.confirm} consistent samples after a jump: {detail}"
        self._pending = []
        self._last = (positions.copy(), rotations.copy())
        return None, ""

    def _jump(
        self, before: tuple[np.ndarray, np.ndarray], after: tuple[np.ndarray, np.ndarray], dt: float
    ) -> str:
        """Why ``after`` cannot follow ``before`` within ``dt`` ('' if it can)."""
        (p0, r0), (p1, r1) = before, after
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
        return ""
