"""RollingSamples' memory is resident from creation: filling the ring does not grow the process."""

from __future__ import annotations

import os

import numpy as np

from dynik_ros.core.rolling import RollingSamples


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_filling_the_ring_does_not_grow_resident_memory():
    """A 16 MB ring (2e6 doubles): creating it makes the 16 MB resident; appending 2e6 samples adds none.
    With np.zeros the pages stayed untouched until written, and the process grew by 16 MB while the ring
    filled (what the one-hour soak read as a 5 MB/h leak)."""
    before = _resident_bytes()
    ring = RollingSamples(capacity=2_000_000)
    created = _resident_bytes()
    ring._data[:] = np.arange(ring.capacity)  # the same writes as 2e6 appends, at numpy speed
    ring._next, ring.total = 0, ring.capacity
    filled = _resident_bytes()
    grown = (created - before) / 1e6
    assert grown > 12, f"the ring is not resident at creation ({grown:.1f} MB)"
    assert filled - created < 2e6, f"filling grew the process by {(filled - created) / 1e6:.1f} MB"
    ring.append(1.0)
    assert len(ring) == ring.capacity and ring[-1] == 1.0
