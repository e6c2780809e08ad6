"""Smoothness of a written joint trajectory: accelerations by second differences and their chatter.

A position-controlled robot replaying a trajectory is asked for the accelerations of the samples it is
given, not for the solver's ``nu``. The acceleration of joint ``j`` at an interior sample ``k`` is the
second divided difference of the written positions (unequal steps ``h- = t_k - t_{k-1}``,
``h+ = t_{k+1} - t_k``)::

    a_k = 2 ((s_{k+1} - s_k) / h+ - (s_k - s_{k-1}) / h-) / (h- + h+)

*Chatter* is a joint's acceleration changing sign from one sample to the next with ``|a|`` above
``threshold`` on both sides (a sample-to-sample zig-zag that no smooth motion at this rate produces); its
share counts such (sample, joint) pairs among all consecutive pairs. ROS-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHATTER_THRESHOLD = 100.0  # rad/s^2: |a| on both sides of a sign flip counted as chatter


def second_differences(positions: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Accelerations ``(n - 2, joints)`` of ``positions`` ``(n, joints)`` at the interior samples."""
    s = np.asarray(positions, dtype=float)
    t = np.asarray(times, dtype=float)
    if s.ndim != 2 or len(t) != len(s):
        raise ValueError(f"positions {s.shape} and times {t.shape} do not match")
    if len(s) < 3:
        return np.zeros((0, s.shape[1]))
    h = np.diff(t)
    if not np.all(h > 0):
        raise ValueError("sample times must increase strictly")
    slope = np.diff(s, axis=0) / h[:, None]
    return 2.0 * np.diff(slope, axis=0) / (h[:-1] + h[1:])[:, None]


def chatter_flags(accelerations: np.ndarray, threshold: float = CHATTER_THRESHOLD) -> np.ndarray:
    """``(n - 1, joints)``: ``a`` flips sign between consecutive samples with ``|a| > threshold`` on both."""
    a = np.asarray(accelerations, dtype=float)
    big = np.abs(a) > threshold
    return (a[1:] * a[:-1] < 0) & big[1:] & big[:-1]


@dataclass(frozen=True)
class Smoothness:
    """Per-joint acceleration figures of a written trajectory (rad/s^2) and the chatter share."""

    median: np.ndarray  # per joint, median |a|
    p99: np.ndarray  # per joint, 99th percentile of |a|
    max: np.ndarray  # per joint, max |a|
    chatter: np.ndarray  # per joint, share of consecutive sample pairs that chatter
    threshold: float

    @property
    def chatter_share(self) -> float:
        """Share of all (consecutive pair, joint) that chatter."""
        return float(self.chatter.mean()) if self.chatter.size else 0.0

    def worst(self, figure: str) -> tuple[float, int]:
        """Largest per-joint value of ``figure`` (``median``, ``p99``, ``max``, ``chatter``) and its joint."""
        values = getattr(self, figure)
        if not values.size:
            return 0.0, -1
        j = int(np.argmax(values))
        return float(values[j]), j


def smoothness(positions: np.ndarray, times: np.ndarray, threshold: float = CHATTER_THRESHOLD) -> Smoothness:
    """:class:`Smoothness` of joint ``positions`` ``(n, joints)`` sampled at ``times``."""
    a = np.abs(second_differences(positions, times))
    joints = np.asarray(positions).shape[1]
    if not len(a):
        zeros = np.zeros(joints)
        return Smoothness(zeros, zeros, zeros, zeros, threshold)
    flags = chatter_flags(second_differences(positions, times), threshold)
    chatter = flags.mean(axis=0) if len(flags) else np.zeros(joints)
    return Smoothness(
        median=np.median(a, axis=0),
        p99=np.percentile(a, 99, axis=0),
        max=a.max(axis=0),
        chatter=chatter,
        threshold=threshold,
    )
