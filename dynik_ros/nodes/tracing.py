"""Message timing across nodes: the time each (event, source stamp) first happened, and latencies from it.

Nodes call their ``trace`` hook with an event name (``link_states``, ``ik_output``, ``command``...) and the
source stamp the message carries. The runner hooks every node to one :class:`Tracer`; when the nodes run
in separate processes, each process keeps its own and the runner merges them (:meth:`Tracer.dump` /
:meth:`Tracer.merge`): ``time.monotonic`` is CLOCK_MONOTONIC, one clock for every process of the machine.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from dynik_ros.core.rolling import RollingSamples

REPEAT_WINDOW = 1024  # a stamp traced again within an event's last this many is a repeat (the bridge's hold)


def first_occurrences(stamps: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unique ``stamps`` (sorted) and the earliest of the ``times`` each one has."""
    order = np.lexsort((times, stamps))  # by stamp, then earliest time first
    stamps, times = stamps[order], times[order]
    keep = np.ones(len(stamps), dtype=bool)
    keep[1:] = stamps[1:] != stamps[:-1]
    return stamps[keep], times[keep]


class _EventLog:
    """One event's recent (source stamp, first time) pairs: two numpy rings, 16 bytes a pair (an ordered
    dict of Python ints and floats took ~140: 43 MB for three events at 10^5 each)."""

    def __init__(self, capacity: int) -> None:
        self.stamps = RollingSamples(capacity, dtype=np.int64)
        self.times = RollingSamples(capacity)
        self._recent: deque[int] = deque(maxlen=REPEAT_WINDOW)  # the last stamps, as a set for look-ups
        self._recent_set: set[int] = set()

    def add(self, stamp: int, when: float) -> bool:
        """Record ``stamp`` at ``when``; False (nothing kept) if it is among the last REPEAT_WINDOW."""
        if stamp in self._recent_set:
            return False
        if len(self._recent) == REPEAT_WINDOW:
            self._recent_set.discard(self._recent[0])
        self._recent.append(stamp)
        self._recent_set.add(stamp)
        self.stamps.append(stamp)
        self.times.append(when)
        return True

    def __contains__(self, stamp: int) -> bool:
        return stamp in self._recent_set or stamp in self.stamps

    def first(self) -> tuple[np.ndarray, np.ndarray]:
        """Unique stamps (sorted) and the time of each one's first occurrence in the window."""
        return first_occurrences(self.stamps.array(), self.times.array())

    def reset(self, stamps: np.ndarray, times: np.ndarray) -> None:
        """Hold exactly these pairs (in this order; the last ``capacity`` if more)."""
        self.stamps.clear()
        self.times.clear()
        self._recent.clear()
        self._recent_set.clear()
        for stamp, when in zip(stamps[-self.stamps.capacity :], times[-self.times.capacity :], strict=True):
            self.add(int(stamp), float(when))


class Tracer:
    """Time of the first occurrence of each (event, source stamp): latency between events.

    Bounded: each event keeps its ``capacity`` most recent stamps in numpy rings (1.6 MB an event at
    10^5; latencies are over that window); ``counts`` and ``newest`` cover the whole run."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self.events: dict[str, _EventLog] = {}
        self.counts: dict[str, int] = {}
        self.newest: dict[str, int] = {}
        self.oldest: dict[str, int] = {}

    def hook(self, node_label: str):
        def record(event: str, stamp: int) -> None:
            self._add(event, stamp, time.monotonic())

        return record

    def _log(self, event: str) -> _EventLog:
        log = self.events.get(event)
        if log is None:
            log = self.events[event] = _EventLog(self.capacity)
        return log

    def _add(self, event: str, stamp: int, when: float) -> None:
        if not self._log(event).add(stamp, when):
            return
        self.counts[event] = self.counts.get(event, 0) + 1
        if stamp > self.newest.get(event, -(2**63)):
            self.newest[event] = stamp
        if stamp < self.oldest.get(event, 2**63):
            self.oldest[event] = stamp

    def seen(self, event: str, stamp: int) -> bool:
        """Whether ``event`` happened for source ``stamp`` (within its window)."""
        log = self.events.get(event)
        return log is not None and stamp in log

    def latencies(self, start: str, end: str) -> np.ndarray:
        """``end`` minus ``start`` time of every stamp both have in their windows [s]."""
        if start not in self.events or end not in self.events:
            return np.zeros(0)
        (a, ta), (b, tb) = self.events[start].first(), self.events[end].first()
        _, ia, ib = np.intersect1d(a, b, assume_unique=True, return_indices=True)
        return tb[ib] - ta[ia]

    def dump(self) -> dict[str, Any]:
        """JSON-able state, for :meth:`merge` in another process."""
        return {
            "events": {
                event: [[int(s), float(t)] for s, t in zip(*log.first(), strict=True)]
                for event, log in self.events.items()
            },
            "counts": dict(self.counts),
            "newest": dict(self.newest),
            "oldest": dict(self.oldest),
        }

    def merge(self, dumped: dict[str, Any]) -> None:
        """Add another process's :meth:`dump`: a stamp seen by both keeps its first time (an event's count
        is the larger of the two: every event is emitted by one kind of node, a stamp seen by two processes
        is one occurrence)."""
        for event, rows in dumped.get("events", {}).items():
            log = self._log(event)
            mine_stamps, mine_times = log.first()
            stamps, times = first_occurrences(
                np.concatenate((mine_stamps, np.array([r[0] for r in rows], dtype=np.int64))),
                np.concatenate((mine_times, np.array([r[1] for r in rows], dtype=float))),
            )
            by_time = np.argsort(times, kind="stable")  # the window keeps the latest occurrences
            log.reset(stamps[by_time], times[by_time])
        for event, count in dumped.get("counts", {}).items():
            self.counts[event] = max(self.counts.get(event, 0), int(count))
        for event, stamp in dumped.get("newest", {}).items():
            self.newest[event] = max(self.newest.get(event, -(2**63)), int(stamp))
        for event, stamp in dumped.get("oldest", {}).items():
            self.oldest[event] = min(self.oldest.get(event, 2**63), int(stamp))
