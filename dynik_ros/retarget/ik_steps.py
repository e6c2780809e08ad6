"""A sparse take's human motion on the IK's own step grid, so that the contact rules see every IK step.

:meth:`Retargeter.run <dynik_ros.retarget.retargeter.Retargeter.run>` reaches a sample further than
``max_step`` from the previous one in ``m = ceil(dt / max_step)`` equal IK steps towards targets interpolated
between the two samples' *robot* targets. The robot targets of a foot are not an interpolable signal,
though: the contact rules (:class:`~dynik_ros.retarget.foot_contact.FootContact`) level a sole over
``blend_time`` (0.1 s) after touch-down and fade a release over ``release_time``, and at 10 Hz a blend is a
single sample interval: the target turns from the human's heel-up pitch (13-30 deg on the synthetic walk) to
level between two samples with no feed-forward (the level weight is 0 at one sample and 1 at the next, its
rate is seen at neither), and the IK lags behind it.

Here the *human* links are interpolated instead, onto that same grid ``t_{k-1} + j dt / m`` (positions and
velocities linearly, rotations along the geodesic ``R_a exp(f log(R_a^T R_b))``), the targets (contact
rules included) are computed at every IK step, and only the samples are kept (:func:`at_samples`). Takes
with every interval at most ``max_step`` (50 Hz and more) are returned unchanged.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np

from dynik_ros.core.so3 import exp_so3, orientation_log_residual_world
from dynik_ros.core.targets import Measurements


def steps_over(dt: float, max_step: float) -> int:
    """How many equal IK steps reach a sample ``dt`` seconds after the previous one: ``ceil(dt / max_step)``,
    at least one (``1e-9`` below it: an interval of exactly ``m`` steps is not split into ``m + 1``)."""
    return max(1, math.ceil(float(dt) / max_step - 1e-9))


def step_grid(times: np.ndarray, max_step: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(grid, index, left, fraction)``: the IK step times ``(M,)``, where the samples are in it ``(N,)``,
    and for each grid time the sample before it ``(M,)`` and how far it is towards the next one (0..1)."""
    times = np.asarray(times, dtype=float)
    n = len(times)
    steps = [1] + [steps_over(dt, max_step) for dt in np.diff(times)]
    left, fraction = [0], [0.0]
    for k in range(1, n):
        for j in range(1, steps[k] + 1):
            left.append(k - 1)
            fraction.append(j / steps[k])
    left_a, fraction_a = np.array(left, dtype=int), np.array(fraction)
    right = np.minimum(left_a + 1, n - 1)
    grid = times[left_a] + fraction_a * (times[right] - times[left_a])
    grid[0] = times[0]
    index = np.cumsum(steps) - 1
    grid[index] = times  # the samples exactly (no rounding)
    return grid, index, left_a, fraction_a


def first_step_dt(t0: float, t1: float, max_step: float, max_gap: float = math.inf) -> float:
    """The IK step of a take's first sample, once the second one is known: :meth:`Retargeter.run
    <dynik_ros.retarget.retargeter.Retargeter.run>` gives it the first interval of :func:`step_grid` (a
    sample ``t1 - t0`` after it: ``(t1 - t0) / ceil((t1 - t0) / max_step)``). A stream stepped once a sample
    (``max_step`` 0) or a second sample further than ``max_gap`` (a lost stretch, stepped once with
    ``max_gap``) gives ``min(t1 - t0, max_gap)``."""
    interval = float(t1) - float(t0)
    if max_step <= 0.0 or interval > max_gap + 1e-9:
        return min(interval, max_gap)
    grid = step_grid(np.array([t0, t1], dtype=float), max_step)[0]
    return float(grid[1] - grid[0])


def on_ik_steps(
    times: np.ndarray,
    positions: np.ndarray,
    rotations: np.ndarray,
    linear_velocities: np.ndarray | None,
    angular_velocities: np.ndarray | None,
    max_step: float,
) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
    """The human links ``(times, positions (N, L, 3), rotations (N, L, 3, 3), velocities)`` interpolated onto
    :func:`step_grid` and the samples' indices there; ``None`` instead when no interval exceeds ``max_step``
    (the arrays then come back unchanged)."""
    times = np.asarray(times, dtype=float)
    arrays = (times, positions, rotations, linear_velocities, angular_velocities)
    if len(times) < 2 or float(np.diff(times).max()) <= max_step + 1e-12:
        return arrays, None
    grid, index, left, f = step_grid(times, max_step)
    right = np.minimum(left + 1, len(times) - 1)
    w = f[:, None, None]

    def lerp(x: np.ndarray | None) -> np.ndarray | None:
        if x is None:
            return None
        x = np.asarray(x, dtype=float)
        return x[left] + w * (x[right] - x[left])

    r = np.asarray(rotations, dtype=float)
    turn = orientation_log_residual_world(r[left], r[right])  # log(R_b R_a^T), world frame (M, L, 3)
    dense_rotations = exp_so3(w * turn) @ r[left]
    return (grid, lerp(positions), dense_rotations, lerp(linear_velocities), lerp(angular_velocities)), index


def at_samples(result, index: np.ndarray | None, contact=None):
    """A :class:`~dynik_ros.retarget.offline_run.RetargetResult` of the step grid cut back to the samples
    (every per-step array indexed by ``index``), and the per-step flags of ``contact`` (a
    :class:`~dynik_ros.retarget.foot_contact.FootContact`: ``flat``, ``toe``) with it; ``result`` itself when
    ``index`` is ``None``."""
    if index is None:
        return result
    n = len(result.times)
    cut = {}
    for f in fields(result):
        value = getattr(result, f.name)
        if isinstance(value, np.ndarray) and value.ndim and value.shape[0] == n:
            cut[f.name] = value[index]
    for name in ("flat", "toe"):
        flags = getattr(contact, name, None)
        if isinstance(flags, np.ndarray) and flags.shape[:1] == (n,):
            setattr(contact, name, flags[index])
    return replace(result, **cut)


def between(a: Measurements, b: Measurements, f: float) -> Measurements:
    """Targets a fraction ``f`` of the way from sample ``a`` to sample ``b``: positions and velocities
    linearly, rotations along the geodesic ``R_a exp(f log(R_a^T R_b)) = exp(f log(R_b R_a^T)) R_a``
    (all links at once with the solver's own SO(3) maps); the rest (CoM, supports) is ``b``'s."""

    def lerp(x: np.ndarray | None, y: np.ndarray | None) -> np.ndarray | None:
        return None if x is None or y is None else x + f * (y - x)

    ra = np.asarray(a.rotations, dtype=float)
    rotations = exp_so3(f * orientation_log_residual_world(ra, b.rotations)) @ ra
    return replace(
        b,
        positions=lerp(a.positions, b.positions),
        rotations=rotations.reshape(np.shape(b.rotations)),
        linear_velocities=lerp(a.linear_velocities, b.linear_velocities),
        angular_velocities=lerp(a.angular_velocities, b.angular_velocities),
    )
