"""Bounded per-sample statistics: a fixed-size ring of the most recent samples.

Nodes record a value per sample (solve time, callback time, tracking error) for hours at up to 240 Hz;
a Python list of them grows without bound (measured: 178 MB an hour in a 120 Hz soak). A
:class:`RollingSamples` holds the last ``capacity`` values (or rows) in one preallocated numpy array, so
its memory is fixed, and resident, from creation; percentiles and means are over that recent window.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

DEFAULT_CAPACITY = 100_000
# rows of a node's figure log read at the end of a run (base poses, commands): 10 min at 60 Hz, 48 s at
# 750 Hz; a few MB as numpy rows (a deque of 2*10^5 tuples of floats took 67 MB)
LOG_ROWS = 36_000


class RollingSamples:
    """The last ``capacity`` samples, each a float (``width`` 0) or a row of ``width`` floats.

    Behaves like a read-only sequence in arrival order (``len``, indexing, slicing, iteration,
    ``np.asarray``) over the retained window; ``total`` counts every sample ever appended.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, width: int = 0, dtype: type = np.float64):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        # np.zeros would leave the pages to the kernel until first written: the process's resident memory
        # then grows as the ring fills (minutes to half an hour at 60-240 Hz), which a soak reads as a leak.
        # Writing every element now makes the memory resident, and fixed, from the start.
        self._data = np.empty((self.capacity, width) if width else self.capacity, dtype=dtype)
        self._data.fill(0.0)
        self._next = 0
        self.total = 0

    def append(self, value) -> None:
        self._data[self._next] = value
        self._next = (self._next + 1) % self.capacity
        self.total += 1

    def clear(self) -> None:
        self._next, self.total = 0, 0

    def __len__(self) -> int:
        return min(self.total, self.capacity)

    def array(self) -> np.ndarray:
        """The retained samples in arrival order (a copy)."""
        if self.total <= self.capacity:
            return self._data[: self.total].copy()
        return np.concatenate((self._data[self._next :], self._data[: self._next]))

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.array()
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, index):
        return self.array()[index]

    def __iter__(self) -> Iterator:
        return iter(self.array())

    def recent(self, count: int) -> np.ndarray:
        """The last ``count`` samples (fewer if fewer were kept), copied without the rest of the ring."""
        n = min(count, len(self))
        start = self._next - n
        if n <= 0:
            return self._data[:0].copy()
        if start >= 0:
            return self._data[start : self._next].copy()
        return np.concatenate((self._data[start:], self._data[: self._next]))  # wrapped: the ring is full

    def __contains__(self, value) -> bool:
        """Whether a retained sample (floats only) equals ``value`` (no copy, arrival order not needed)."""
        return bool(np.any(self._data[: len(self)] == value))

    def percentile(self, q: float) -> float:
        """``q``-th percentile of the retained samples; NaN when empty (floats only)."""
        data = self.array()
        return float(np.percentile(data, q)) if data.size else float("nan")
