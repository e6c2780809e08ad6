"""``dynik-retarget``'s plots: ``joints.png`` (Figure 9 style), ``phase.png`` (Figure 3 style: velocity
against position inside the eq. 12 bounds) and ``errors.png`` (errors over time).

Drawn with :mod:`dynik_ros.cli.fast_plot` (Pillow), not matplotlib: the same figures cost ~0.3 s of CPU
instead of ~2.5-3 s on a 60 s take (README, *dynik-retarget*). Every sample is drawn (per-pixel-column
envelopes of the time series), so short peaks are not strided away.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

GOLD_BAND = (255, 215, 0, 89)  # matplotlib's "gold" at alpha 0.35
# fast_plot (Pillow) is imported in the functions: `--no-plots` runs do not pay its import


def _time_axis(times: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """Seconds from the first sample and the x limits (2 % margin each side)."""
    from dynik_ros.cli.fast_plot import data_range

    t = np.asarray(times, dtype=float) - float(times[0])
    return t, data_range(t, pad=0.02)


def plot_joints(path: Path, robot: Any, result: Any, limit_gain: float) -> list[Path]:
    """``joints.png`` (Figure 9 style: trajectories and dashed limits), ``phase.png`` (Figure 3 style: joint
    velocity against position, bounded by eq. 12 for the joints that came closest to their limits)."""
    from dynik_ros.cli.fast_plot import BLUE, ORANGE, RED, Figure, data_range

    nb, nvb = (7, 6) if robot.floating_base else (0, 0)
    s, s_dot = result.q[:, nb:], result.v[:, nvb:]
    t, xlim = _time_axis(result.times)
    n = robot.n_joints
    cols = 4
    rows = max(1, math.ceil(n / cols))
    top, cell_h, bottom = 44, 150, 44
    fig = Figure(1440, top + rows * cell_h + bottom)
    fig.text(720, 20, f"{robot.name}: joint angles [deg] with their limits (dashed)", 13)
    cell_w = (1440 - 16) / cols
    for i in range(n):
        r, c = divmod(i, cols)
        x, y = 8 + c * cell_w, top + r * cell_h
        degrees = np.degrees(s[:, i])
        limits = [math.degrees(b) for b in (robot.lower[i], robot.upper[i]) if math.isfinite(b)]
        ax = fig.axes((x + 52, y + 18, x + cell_w - 14, y + cell_h - 14), xlim, data_range(degrees, *limits))
        for bound in limits:
            ax.hline(bound)
        ax.line(t, degrees, ORANGE)
        last_row = i + cols >= n
        ax.decorate(robot.joint_names[i], "time [s]" if last_row else "", xticklabels=last_row)
    joints_png = fig.save(path / "joints.png")

    margin = np.minimum((s - robot.lower).min(axis=0), (robot.upper - s).min(axis=0))
    chosen = list(np.argsort(margin)[: min(6, n)])
    fig = Figure(1080, 600)
    fig.text(540, 16, "joint velocity against angle inside the limit-avoidance bounds of eq. (12)", 13)
    entries = [("upper bound (12)", BLUE), ("lower bound (12)", RED), ("IK", ORANGE)]
    width, _ = fig.legend_size(entries, 9, 3)
    fig.legend(540 - width / 2, 29, entries, 9, ncol=3)
    for slot, i in enumerate(chosen):
        r, c = divmod(slot, 3)
        x, y = c * 360, 56 + r * 272
        lo, hi, vmax = robot.lower[i], robot.upper[i], robot.velocity_limit[i]
        grid = np.linspace(lo, hi, 200)
        upper = np.degrees(vmax * np.tanh(limit_gain * (hi - grid)))
        lower = np.degrees(-vmax * np.tanh(limit_gain * (grid - lo)))
        angle, speed, grid = np.degrees(s[:, i]), np.degrees(s_dot[:, i]), np.degrees(grid)
        ax = fig.axes(
            (x + 70, y + 18, x + 346, y + 222),
            data_range(grid, angle, pad=0.03),
            data_range(upper, lower, speed, pad=0.04),
        )
        ax.fill_between(grid, lower, upper, GOLD_BAND)
        ax.line(grid, upper, BLUE, rising=False)
        ax.line(grid, lower, RED, rising=False)
        ax.line(angle, speed, ORANGE, width=0.8, rising=False)
        for bound in (lo, hi):
            ax.vline(math.degrees(bound))
        ax.decorate(robot.joint_names[i], "angle [deg]", "velocity [deg/s]")
    phase_png = fig.save(path / "phase.png")
    return [joints_png, phase_png]


def plot_errors(path: Path, retargeter: Any, result: Any) -> Path:
    """``errors.png``: MNTE, per-link orientation error, angular-velocity and position RMSE over time."""
    from dynik_ros.cli.fast_plot import TAB10, Figure, data_range

    t, xlim = _time_axis(result.times)
    fig = Figure(900, 740)
    fig.text(450, 16, f"{retargeter.config.name}: tracking error over time", 13)
    left, right, height, gap, top = 88, 884, 200, 22, 34
    boxes = [(left, top + k * (height + gap), right, top + k * (height + gap) + height) for k in range(3)]

    mnte = np.maximum(np.asarray(result.mnte, dtype=float), 1e-12)
    ax = fig.axes(boxes[0], xlim, data_range(np.log10(mnte)), log_y=True)
    ax.line(t, mnte, (0, 0, 0))
    ax.decorate(ylabel="MNTE, eq. (15)", xticklabels=False)

    frames = [tg.frame for tg in retargeter.targets.orientation_targets]
    err = np.degrees(np.asarray(result.orientation_error, dtype=float))
    worst = list(np.argsort(np.fmax.reduce(err, axis=0))[::-1][:6]) if err.size else []
    ax = fig.axes(boxes[1], xlim, data_range(*(err[:, j] for j in worst)) if worst else (0.0, 1.0))
    for k, j in enumerate(worst):
        ax.line(t, err[:, j], TAB10[k])
    ax.decorate(ylabel="orientation error [deg]", xticklabels=False)
    if worst:
        ax.legend([(frames[j], TAB10[k]) for k, j in enumerate(worst)], ncol=3)

    angular, position = result.angular_velocity_rmse, result.position_rmse
    ax = fig.axes(boxes[2], xlim, data_range(angular, position))
    for f in range(result.contacts.shape[1]):
        ax.xspans(t, result.contacts[:, f] >= 0, (*TAB10[(f + 3) % 10], 24))
    ax.line(t, angular, TAB10[0])
    ax.line(t, position, TAB10[1])
    ax.decorate(xlabel="time [s] (shaded: foot contact)")
    ax.legend([("angular-velocity RMSE, eq. (16) [rad/s]", TAB10[0]), ("position RMSE [m]", TAB10[1])])
    return fig.save(path / "errors.png")
