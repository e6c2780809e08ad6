"""Invariants on what the nodes put on the wire, checked continuously by the fuzz and soak harnesses.

ROS-free and bounded in memory (counters, the last command, fixed-size histograms), so a run of any length
keeps a constant footprint:

* :class:`WireChecks`: IK outputs finite and inside the position limits; commands finite, inside the limits
  and no joint faster than its velocity limit, ``|Δq| / Δt <= v_max`` with ``Δt`` the time between the two
  commands (message time when the bridge follows the input stamps);
* :class:`RecoveryTracker`: message time from the last bad input until the tracking error is back at the
  clean baseline, per mutation kind (p50 and max from a 1 ms histogram), bursts never recovered although a
  second of clean input followed, and freezes (a second of clean input without any output);
* :func:`orientation_error`: the tracking error itself, mean geodesic angle between two sets of rotations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

NS = 1_000_000_000


def orientation_error(r_model: np.ndarray, r_truth: np.ndarray) -> float:
    """Mean over links of the angle [rad] between ``(L, 3, 3)`` rotations (exact for small angles:
    ``|R - R*|_F = 2 sqrt(2) sin(angle / 2)``)."""
    diff = np.linalg.norm((np.asarray(r_model) - np.asarray(r_truth)).reshape(len(r_truth), 9), axis=1)
    return float(np.mean(2.0 * np.arcsin(np.clip(diff / (2.0 * np.sqrt(2.0)), 0.0, 1.0))))


class WireChecks:
    """Checks on IK outputs and commands as received; ``breaches`` counts each kind of violation and
    ``examples`` keeps the first detail of each."""

    def __init__(
        self,
        lower: np.ndarray,
        upper: np.ndarray,
        velocity: np.ndarray,
        position_tolerance: float = 1e-9,
        time_slack_ns: int = 0,
    ):
        """``time_slack_ns`` widens each ``Δt`` of the speed check (commands timed by a wall clock that
        is read a little apart from the bridge's own reading); 0 when ``Δt`` comes from message stamps."""
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)
        self.velocity = np.asarray(velocity, float)
        self.tolerance = position_tolerance
        self.time_slack_ns = int(time_slack_ns)
        self.breaches: Counter = Counter()
        self.examples: dict[str, str] = {}
        self.joint_states = 0
        self.commands = 0
        self.max_speed_ratio = 0.0  # largest |Δq| / (v_max Δt) seen over all joints and commands
        self._last: tuple[np.ndarray, int | None] | None = None

    def _breach(self, what: str, detail: str) -> None:
        self.breaches[what] += 1
        self.examples.setdefault(what, detail)

    def _outside(self, values: np.ndarray) -> np.ndarray:
        return (values < self.lower - self.tolerance) | (values > self.upper + self.tolerance)

    def joint_state(self, stamp_ns: int, position: np.ndarray, velocity: np.ndarray | None = None) -> None:
        """An IK output (``/dynik/joint_states``): finite, inside the position limits."""
        self.joint_states += 1
        position = np.asarray(position, float)
        if position.shape != self.lower.shape:
            self._breach("ik_output_wrong_size", f"stamp {stamp_ns}: {position.shape}")
        elif not (np.all(np.isfinite(position)) and (velocity is None or np.all(np.isfinite(velocity)))):
            self._breach("ik_output_not_finite", f"stamp {stamp_ns}")
        elif np.any(self._outside(position)):
            j = int(np.argmax(np.maximum(self.lower - position, position - self.upper)))
            self._breach("ik_output_outside_limits", f"stamp {stamp_ns}: joint {j} at {position[j]:.6g}")

    def command(self, values: np.ndarray, time_ns: int | None = None) -> None:
        """A command as received; ``time_ns`` the time it was sent for (None: no speed check)."""
        self.commands += 1
        values = np.asarray(values, float)
        if values.shape != self.lower.shape:
            self._breach("command_wrong_size", f"command {self.commands}: {values.shape}")
            return
        if not np.all(np.isfinite(values)):
            self._breach("command_not_finite", f"command {self.commands}")
            return
        if np.any(self._outside(values)):
            j = int(np.argmax(np.maximum(self.lower - values, values - self.upper)))
            self._breach("command_outside_limits", f"command {self.commands}: joint {j} at {values[j]:.6g}")
        last = self._last
        self._last = (values, time_ns)
        if last is None or time_ns is None or last[1] is None:
            return
        step = np.abs(values - last[0])
        dt = (time_ns - last[1] + self.time_slack_ns) / NS
        if dt <= 0.0:
            if np.any(step > 0.0):
                self._breach("command_too_fast", f"command {self.commands}: moved in {dt * 1e3:.3f} ms")
                self.max_speed_ratio = np.inf
            return
        ratio = float(np.max(step / (self.velocity * dt)))
        self.max_speed_ratio = max(self.max_speed_ratio, ratio)
        if ratio > 1.0 + 1e-9 and np.any(step > self.velocity * dt + 1e-12):
            j = int(np.argmax(step / (self.velocity * dt)))
            self._breach(
                "command_too_fast",
                f"command {self.commands}: joint {j} at {ratio:.3f} x its velocity limit "
                f"over {dt * 1e3:.3f} ms",
            )

    def restart(self) -> None:
        """The command stream starts over (nodes reconfigured): no speed check across the gap."""
        self._last = None


class DurationHistogram:
    """Durations in 1 ms bins up to ``span_ms`` (longer ones in an overflow bin), plus count and max:
    constant memory, exact p50 to 1 ms."""

    def __init__(self, span_ms: int = 60_000):
        self.bins = np.zeros(span_ms + 1, dtype=np.int64)
        self.count = 0
        self.max_ms = float("nan")

    def add(self, ms: float) -> None:
        self.bins[min(int(ms), len(self.bins) - 1)] += 1
        self.count += 1
        self.max_ms = ms if not self.max_ms >= ms else self.max_ms

    def percentile(self, q: float) -> float:
        """Upper edge [ms] of the bin holding the ``q``-th percentile, at most the maximum (NaN when
        empty)."""
        if not self.count:
            return float("nan")
        rank = int(np.ceil(q / 100.0 * self.count))
        edge = float(np.searchsorted(np.cumsum(self.bins), max(rank, 1)) + 1)
        return min(edge, self.max_ms)


class RecoveryTracker:
    """Per burst of bad input: how long (message time) until the tracking error is back at the clean
    baseline, and whether the output froze.

    Call :meth:`bad` for each burst (the message time of its last bad input and its kind), then
    :meth:`clean` for every clean input that follows, in stamp order, with its tracking error (``None``
    when the input got no output). Times run from the last bad input; results go to the kind of the
    first burst since tracking was last at the baseline. A burst is recovered at the first clean output
    within ``threshold``;
    it is ``unrecovered`` when it was not recovered ``limit_ns`` (1 s) after its last bad input (judged at
    the first clean input that late; a later recovery still records its time). A ``freeze`` is
    ``limit_ns`` of consecutive clean inputs without any output (counted once per run of them, for the
    kind of the latest burst before the silence began: what stopped the output).
    """

    def __init__(self, threshold: float, limit_ns: int = NS):
        self.threshold = float(threshold)
        self.limit_ns = int(limit_ns)
        self.times: dict[str, DurationHistogram] = {}
        self.all_times = DurationHistogram()
        self.unrecovered: Counter = Counter()
        self.freezes: Counter = Counter()
        self.bursts: Counter = Counter()
        self.failures: list[str] = []  # the first 20 unrecovered bursts, described (chain of kinds, error)
        self._chain: list[str] = []  # kinds of the bursts since tracking was last at the baseline
        self.without_output = 0
        self._kind: str | None = None  # first burst since tracking was last at the baseline
        self._last_kind = "start"  # the latest burst
        self._bad_ns = 0
        self._recovered = True
        self._judged = True
        self._silent_since: int | None = None
        self._silent_kind = "start"
        self._frozen = False

    def bad(self, stamp_ns: int, kind: str) -> None:
        """A burst of ``kind`` whose last bad input has message time ``stamp_ns``. Recovery (its time, or
        its failure) is attributed to the first burst since tracking was last at the baseline: a harmless
        burst in the middle of another one's recovery does not take the blame (or the credit)."""
        self.bursts[kind] += 1
        self._last_kind = kind
        if self._recovered:
            self._kind = kind
            self._chain = []
        if len(self._chain) < 10:
            self._chain.append(kind)
        self._bad_ns = int(stamp_ns)
        self._recovered, self._judged = False, False

    def clean(self, stamp_ns: int, error: float | None) -> None:
        """A clean input and its tracking error (``None``: no output for it)."""
        kind = self._kind or "start"
        if error is None:
            self.without_output += 1
            if self._silent_since is None:
                self._silent_since, self._silent_kind = stamp_ns, self._last_kind
            if not self._frozen and stamp_ns - self._silent_since >= self.limit_ns:
                self._frozen = True
                self.freezes[self._silent_kind] += 1  # the burst before the silence began
        else:
            self._silent_since, self._frozen = None, False
        if self._recovered or self._kind is None:
            return
        since = stamp_ns - self._bad_ns
        if error is not None and error <= self.threshold:
            self._recovered = True
            ms = since / 1e6
            self.times.setdefault(kind, DurationHistogram()).add(ms)
            self.all_times.add(ms)
            if since > self.limit_ns and not self._judged:
                self._judged = True
                self._unrecovered(kind, stamp_ns, error)
        elif since >= self.limit_ns and not self._judged:
            self._judged = True
            self._unrecovered(kind, stamp_ns, error)

    def _unrecovered(self, kind: str, stamp_ns: int, error: float | None) -> None:
        self.unrecovered[kind] += 1
        if len(self.failures) < 20:
            shown = "no output" if error is None else f"error {error:.2e} rad"
            self.failures.append(
                f"{kind} at message time {stamp_ns / NS:.3f} s: {shown} "
                f"{(stamp_ns - self._bad_ns) / 1e6:.0f} ms after the last bad input; "
                f"bursts since the baseline: {' > '.join(self._chain)}"
            )

    @property
    def frozen(self) -> bool:
        """The output is frozen right now (``limit_ns`` of clean input without output, still going on)."""
        return self._frozen

    def breaches(self) -> int:
        return sum(self.unrecovered.values()) + sum(self.freezes.values())

    def kinds(self) -> Iterable[str]:
        return sorted(set(self.bursts) | set(self.freezes))
