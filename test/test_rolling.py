"""RollingSamples' memory is resident from creation: filling the ring does not grow the process."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import os
import numpy as np
from dynik_ros.core.rolling import RollingSamples

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

before = resident()
ring = RollingSamples(capacity=8_000_000)
created = resident()
ring._data[:] = np.arange(ring.capacity)  # the same writes as 8e6 appends, at numpy speed
filled = resident()
print((created - before) / 1e6, (filled - created) / 1e6)
"""


def test_filling_the_ring_does_not_grow_resident_memory():
    """A 64 MB ring (8e6 doubles, above glibc's largest mmap threshold, so always fresh pages) in a fresh
    process: creating it makes the 64 MB resident; filling it adds none. With np.zeros the pages stayed
    untouched until written, and the process grew while the ring filled (what the one-hour soak read as a
    5 MB/h leak)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    created, filled = (float(x) for x in out.stdout.split())
    assert created > 60, f"the ring is not resident at creation ({created:.1f} MB)"
    assert filled < 4, f"filling grew the process by {filled:.1f} MB"


def test_recent_and_membership_read_the_last_samples_at_every_fill_level():
    """``recent`` copies only the last samples (it copied the whole ring first: 10^5 rows for the last
    500); checked against the appended values before, at and after the wrap; int64 rows keep epoch stamps
    in nanoseconds exactly (float64 would not)."""
    import numpy as np

    from dynik_ros.core.rolling import RollingSamples

    ring = RollingSamples(capacity=7, dtype=np.int64)
    appended: list[int] = []
    for i in range(20):
        stamp = 1_700_000_000_000_000_000 + i
        ring.append(stamp)
        appended.append(stamp)
        for count in (0, 1, 3, 7, 9):
            expected = appended[-7:][-count:] if count else []
            assert ring.recent(count).tolist() == expected, (i, count)
        assert stamp in ring and (i < 7 or appended[-8] not in ring)
