"""Foot contact from kinematics alone: sole height above the ground and horizontal speed, with hysteresis.

One rule for the whole package: the retargeter's :class:`~dynik_ros.retarget.foot_contact.FootContact` and the
dynamics estimator's fallback when no force/torque shoes are present both call these functions.

A foot goes into contact when its sole is lower than ``height_on`` above the ground *and* it moves slower
than ``speed_on`` horizontally; it leaves contact when the sole rises above ``height_off`` *or* moves faster
than ``speed_off`` (``height_off > height_on``, ``speed_off > speed_on``: the band between is hysteresis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class ContactThresholds(Protocol):
    """The thresholds the rule reads (e.g. :class:`dynik_ros.retarget.config.ContactSpec`)."""

    enabled: bool
    height_on: float
    height_off: float
    speed_on: float
    speed_off: float


def sole_heights(
    p: np.ndarray, groups: Sequence[Sequence[int]], clearances: Sequence[np.ndarray], ground: float
) -> np.ndarray:
    """Height of each sole above ``ground`` ``(N, n_feet)`` from link positions ``p`` ``(N, L, 3)``: the
    lowest of a foot's links (``groups``: link indices per foot, e.g. foot and toe) less each link's
    standing clearance; 0 when standing flat."""
    return np.stack(
        [
            (p[:, group, 2] - ground - clearance).min(axis=1)
            for group, clearance in zip(groups, clearances, strict=True)
        ],
        axis=1,
    )


def foot_speeds(v: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Horizontal speed of each foot ``(N, n_feet)`` from link velocities ``v`` ``(N, L, 3)``: the slower
    of its links (the toe is still while the heel rises)."""
    return np.stack([np.linalg.norm(v[:, group, :2], axis=2).min(axis=1) for group in groups], axis=1)


def next_contact(in_contact: bool, height: float, speed: float, spec: ContactThresholds) -> bool:
    """Contact state after one sample of sole ``height`` and ``speed`` (module docstring)."""
    if in_contact:
        return not (height > spec.height_off or speed > spec.speed_off)
    return bool(spec.enabled and height < spec.height_on and speed < spec.speed_on)


def contact_sequence(
    heights: np.ndarray, speeds: np.ndarray, spec: ContactThresholds, initial: Sequence[bool] | None = None
) -> np.ndarray:
    """:func:`next_contact` run over ``(N, n_feet)`` heights and speeds; returns ``(N, n_feet)`` booleans."""
    n, feet = heights.shape
    state = list(initial) if initial is not None else [False] * feet
    out = np.zeros((n, feet), dtype=bool)
    h_list, s_list = heights.tolist(), speeds.tolist()
    for k in range(n):
        for f in range(feet):
            state[f] = next_contact(state[f], h_list[k][f], s_list[k][f], spec)
            out[k, f] = state[f]
    return out
