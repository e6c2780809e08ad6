"""Message timing across nodes: the time each (event, source stamp) first happened, and latencies from it.

Nodes call their ``trace`` hook with an event name (``link_states``, ``ik_output``, ``command``...) and the
source stamp the message carries. The runner hooks every node to one :class:`Tracer`; when the nodes run
in separate processes, each process keeps its own and the runner merges them (:meth:`Tracer.dump` /
:meth:`Tracer.merge`): ``time.monotonic`` is CLOCK_MONOTONIC, one clock for every process of the machine.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import numpy as np


class Tracer:
    """Time of the first occurrence of each (event, source stamp): latency between events.

    Bounded: each event keeps its ``capacity`` most recent stamps (latencies are over that window; an
    hour at 240 Hz would otherwise hold ~10^6 entries per event); ``counts`` and ``newest`` cover the
    whole run."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self.events: dict[str, OrderedDict[int, float]] = {}
        self.counts: dict[str, int] = {}
        self.newest: dict[str, int] = {}
        self.oldest: dict[str, int] = {}

    def hook(self, node_label: str):
        def record(event: str, stamp: int) -> None:
            self._add(event, stamp, time.monotonic())

        return record

    def _add(self, event: str, stamp: int, when: float, count: bool = True) -> None:
        table = self.events.get(event)
        if table is None:
            table = self.events[event] = OrderedDict()
        if stamp in table:
            if when < table[stamp]:  # merged from another process: keep the first occurrence
                table[stamp] = when
            return
        table[stamp] = when
        if len(table) > self.capacity:
            table.popitem(last=False)
        if count:
            self.counts[event] = self.counts.get(event, 0) + 1
        if stamp > self.newest.get(event, -(2**63)):
            self.newest[event] = stamp
        if stamp < self.oldest.get(event, 2**63):
            self.oldest[event] = stamp

    def latencies(self, start: str, end: str) -> np.ndarray:
        a, b = self.events.get(start, {}), self.events.get(end, {})
        return np.array([b[s] - a[s] for s in b if s in a])

    def dump(self) -> dict[str, Any]:
        """JSON-able state, for :meth:`merge` in another process."""
        return {
            "events": {event: [[s, t] for s, t in table.items()] for event, table in self.events.items()},
            "counts": dict(self.counts),
            "newest": dict(self.newest),
            "oldest": dict(self.oldest),
        }

    def merge(self, dumped: dict[str, Any]) -> None:
        """Add another process's :meth:`dump` (an event's count is the larger of the two: every event is
        emitted by one kind of node, a stamp seen by two processes is one occurrence)."""
        for event, rows in dumped.get("events", {}).items():
            for stamp, when in rows:
                self._add(event, int(stamp), float(when), count=False)
        for event, count in dumped.get("counts", {}).items():
            self.counts[event] = max(self.counts.get(event, 0), int(count))
        for event, stamp in dumped.get("newest", {}).items():
            self.newest[event] = max(self.newest.get(event, -(2**63)), int(stamp))
        for event, stamp in dumped.get("oldest", {}).items():
            self.oldest[event] = min(self.oldest.get(event, 2**63), int(stamp))
