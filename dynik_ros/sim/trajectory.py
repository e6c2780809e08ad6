"""Joint reference generation the way ros2_control's controllers do it, without ROS.

:class:`JointTrajectoryFollower` keeps one position reference per controller joint and updates it from

* trajectories (``joint_trajectory_controller`` semantics): points at ``time_from_start`` after the
  trajectory's start time (a zero stamp means "on reception"); between two points the reference is
  linear in position when the points give positions only, a cubic Hermite spline when they give
  velocities, a quintic when they also give accelerations; before the first point it starts from the
  reference held at the start time; after the last point it holds the last position. A new trajectory
  replaces the current one from its start time (a future start leaves the current one running until
  then). Joints a trajectory does not name hold their reference.
* forward position commands (``forward_command_controller``): the reference jumps to the command.

Commands outside the position limits are clipped (counted); a command with NaN/inf, unknown or repeated
joint names, mismatched lengths or non-increasing times is refused whole (counted) and the reference
holds. Nothing non-finite or outside ``[lower, upper]`` ever leaves :meth:`sample`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

REFUSED_NAN = "nan"
REFUSED_UNKNOWN_JOINT = "unknown_joint"
REFUSED_MALFORMED = "malformed"
REFUSALS = (REFUSED_NAN, REFUSED_UNKNOWN_JOINT, REFUSED_MALFORMED)


class CommandRefused(ValueError):
    """A command refused whole; ``reason`` is one of :data:`REFUSALS`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass
class _Trajectory:
    start: float  # absolute time of time_from_start = 0
    index: np.ndarray  # controller-joint indices of the columns
    times: np.ndarray  # (K,) time_from_start, strictly increasing
    positions: np.ndarray  # (K, m)
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None
    # the reference at the start (filled when the trajectory becomes active)
    start_position: np.ndarray | None = None
    start_velocity: np.ndarray | None = None


@dataclass
class FollowerCounts:
    """Commands accepted, clipped (at least one value outside the limits) and refused by reason."""

    accepted: int = 0
    clipped_commands: int = 0
    clipped_values: int = 0
    refused: dict[str, int] = field(default_factory=lambda: {r: 0 for r in REFUSALS})

    @property
    def refused_total(self) -> int:
        return sum(self.refused.values())


def _hermite(t: float, d: float, p0, v0, a0, p1, v1, a1, order: int) -> tuple[np.ndarray, np.ndarray]:
    """Position and velocity at ``t`` in [0, d] of the linear (1), cubic (3) or quintic (5) polynomial
    matching the end positions (and velocities, accelerations)."""
    if d <= 0.0:
        return p1.copy(), (v1.copy() if v1 is not None else np.zeros_like(p1))
    s = min(max(t / d, 0.0), 1.0)
    if order == 1:
        return p0 + s * (p1 - p0), (p1 - p0) / d
    if order == 3:
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        g00, g10, g01, g11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        pos = h00 * p0 + h10 * d * v0 + h01 * p1 + h11 * d * v1
        vel = (g00 * p0 + g01 * p1) / d + g10 * v0 + g11 * v1
        return pos, vel
    # quintic: coefficients of p(s) with p, dp/ds, d2p/ds2 given at s = 0 and 1
    dv0, dv1, da0, da1 = d * v0, d * v1, d * d * a0, d * d * a1
    c3 = 10 * (p1 - p0) - 6 * dv0 - 4 * dv1 - 1.5 * da0 + 0.5 * da1
    c4 = -15 * (p1 - p0) + 8 * dv0 + 7 * dv1 + 1.5 * da0 - da1
    c5 = 6 * (p1 - p0) - 3 * dv0 - 3 * dv1 - 0.5 * da0 + 0.5 * da1
    pos = p0 + dv0 * s + 0.5 * da0 * s**2 + c3 * s**3 + c4 * s**4 + c5 * s**5
    vel = (dv0 + da0 * s + 3 * c3 * s**2 + 4 * c4 * s**3 + 5 * c5 * s**4) / d
    return pos, vel


class JointTrajectoryFollower:
    """Position (and velocity) reference of ``joint_names``; see the module docstring."""

    def __init__(self, joint_names: list[str], lower: np.ndarray, upper: np.ndarray, initial: np.ndarray):
        self.joint_names = list(joint_names)
        self._lookup = {name: i for i, name in enumerate(self.joint_names)}
        self.lower = np.asarray(lower, dtype=float).copy()
        self.upper = np.asarray(upper, dtype=float).copy()
        if not (self.lower.shape == self.upper.shape == (len(self.joint_names),)):
            raise ValueError("joint_names, lower and upper must have the same length")
        self.position = np.clip(np.asarray(initial, dtype=float), self.lower, self.upper)
        if not np.all(np.isfinite(self.position)):
            raise ValueError("initial positions must be finite")
        self.velocity = np.zeros(len(self.joint_names))
        self.counts = FollowerCounts()
        self._active: _Trajectory | None = None
        self._pending: list[_Trajectory] = []

    # ----------------------------------------------------------------- commands
    def _clip(self, index: np.ndarray, positions: np.ndarray) -> np.ndarray:
        lower, upper = self.lower[index], self.upper[index]
        clipped = np.clip(positions, lower, upper)
        outside = int(np.count_nonzero(clipped != positions))
        if outside:
            self.counts.clipped_commands += 1
            self.counts.clipped_values += outside
        return clipped

    def _refuse(self, reason: str, detail: str) -> None:
        self.counts.refused[reason] += 1
        raise CommandRefused(reason, detail)

    def _indices(self, names: list[str]) -> np.ndarray:
        unknown = [n for n in names if n not in self._lookup]
        if unknown:
            self._refuse(REFUSED_UNKNOWN_JOINT, f"joints {unknown[:5]} are not controlled here")
        if len(set(names)) != len(names):
            self._refuse(REFUSED_MALFORMED, "repeated joint names")
        return np.array([self._lookup[n] for n in names], dtype=int)

    def set_positions(self, positions: np.ndarray | list[float], now: float) -> None:
        """Forward position command for every joint, in :attr:`joint_names` order, effective at once.
        Raises :class:`CommandRefused` (counted) and leaves the reference unchanged when refused."""
        values = np.asarray(positions, dtype=float).reshape(-1)
        if values.size != len(self.joint_names):
            self._refuse(REFUSED_MALFORMED, f"{values.size} values for {len(self.joint_names)} joints")
        if not np.all(np.isfinite(values)):
            self._refuse(REFUSED_NAN, "non-finite position")
        index = np.arange(len(self.joint_names))
        self.position = self._clip(index, values)
        self.velocity = np.zeros_like(self.position)
        self._active = None
        self._pending.clear()
        self.counts.accepted += 1

    def hold(self, positions: np.ndarray) -> None:
        """Drop any trajectory and hold ``positions`` (clipped; not a command: nothing is counted)."""
        values = np.asarray(positions, dtype=float).reshape(-1)
        if values.size != len(self.joint_names) or not np.all(np.isfinite(values)):
            raise ValueError("hold: one finite position per joint")
        self.position = np.clip(values, self.lower, self.upper)
        self.velocity = np.zeros_like(self.position)
        self._active = None
        self._pending.clear()

    def set_trajectory(
        self,
        joint_names: list[str],
        times: np.ndarray | list[float],
        positions: np.ndarray | list[list[float]],
        now: float,
        velocities: np.ndarray | list[list[float]] | None = None,
        accelerations: np.ndarray | list[list[float]] | None = None,
        start: float | None = None,
    ) -> None:
        """A trajectory: ``positions[k]`` (one value per name) at ``start + times[k]``; ``start=None`` is
        ``now`` (a zero header stamp). An empty trajectory stops: hold the current reference."""
        times_arr = np.asarray(times, dtype=float).reshape(-1)
        index = self._indices(list(joint_names))
        start_time = now if start is None else float(start)
        if times_arr.size == 0:
            self._active = None
            self._pending.clear()
            self.velocity = np.zeros_like(self.velocity)
            self.counts.accepted += 1
            return
        m = index.size
        try:
            pos = np.asarray(positions, dtype=float).reshape(times_arr.size, m)
            vel = None if velocities is None else np.asarray(velocities, dtype=float).reshape(pos.shape)
            acc = None if accelerations is None else np.asarray(accelerations, dtype=float).reshape(pos.shape)
        except ValueError:
            self._refuse(REFUSED_MALFORMED, "point lengths do not match the joint names")
        arrays = [times_arr, pos] + [a for a in (vel, acc) if a is not None]
        if not all(np.all(np.isfinite(a)) for a in arrays) or not np.isfinite(start_time):
            self._refuse(REFUSED_NAN, "non-finite time, position, velocity or acceleration")
        if times_arr[0] < 0 or np.any(np.diff(times_arr) <= 0):
            self._refuse(REFUSED_MALFORMED, "time_from_start must be >= 0 and strictly increasing")
        if acc is not None and vel is None:
            acc = None  # accelerations without velocities: JTC ignores them too
        trajectory = _Trajectory(start_time, index, times_arr, self._clip(index, pos), vel, acc)
        self.counts.accepted += 1
        if start_time <= now:
            self._pending = []
            self._activate(trajectory)
        else:  # replaces from its start; later starts only stay pending behind it
            self._pending = [t for t in self._pending if t.start < start_time] + [trajectory]

    def _activate(self, trajectory: _Trajectory) -> None:
        others = np.setdiff1d(np.arange(len(self.joint_names)), trajectory.index)
        self.velocity[others] = 0.0  # joints the trajectory does not name hold
        trajectory.start_position = self.position[trajectory.index].copy()
        trajectory.start_velocity = self.velocity[trajectory.index].copy()
        self._active = trajectory

    # ----------------------------------------------------------------- sampling
    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The reference position and velocity at time ``t`` (non-decreasing across calls)."""
        while self._pending and self._pending[0].start <= t:
            nxt = self._pending.pop(0)
            self._advance(nxt.start)  # the current trajectory up to the new one's start
            self._activate(nxt)
        self._advance(t)
        return self.position, self.velocity

    def _advance(self, t: float) -> None:
        """Evaluate the active trajectory at ``t`` into :attr:`position` / :attr:`velocity`."""
        traj = self._active
        if traj is None:
            return
        tau = t - traj.start
        times = traj.times
        order = 5 if traj.accelerations is not None else 3 if traj.velocities is not None else 1
        if tau >= times[-1]:
            pos = traj.positions[-1].copy()
            vel = np.zeros_like(pos)
            self._active = None
        else:
            k = int(np.searchsorted(times, tau, side="right"))  # segment k: point k-1 -> point k
            zero = np.zeros(traj.index.size)
            if k == 0:
                t0, p0 = 0.0, traj.start_position
                v0 = traj.start_velocity if order > 1 else zero
                a0 = zero
            else:
                t0, p0 = times[k - 1], traj.positions[k - 1]
                v0 = traj.velocities[k - 1] if order > 1 else zero
                a0 = traj.accelerations[k - 1] if order > 3 else zero
            v1 = traj.velocities[k] if order > 1 else zero
            a1 = traj.accelerations[k] if order > 3 else zero
            pos, vel = _hermite(tau - t0, times[k] - t0, p0, v0, a0, traj.positions[k], v1, a1, order)
        lower, upper = self.lower[traj.index], self.upper[traj.index]
        self.position[traj.index] = np.clip(pos, lower, upper)
        self.velocity[traj.index] = np.where((pos <= lower) | (pos >= upper), 0.0, vel)
