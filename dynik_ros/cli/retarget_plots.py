"""``dynik-retarget``'s plots: ``joints.png`` (Figure 9 style), ``phase.png`` (Figure 3 style: velocity
against position inside the eq. 12 bounds) and ``errors.png`` (errors over time); matplotlib, headless."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np


def _plot_stride(n: int, points: int = 3000) -> int:
    """Sample stride that keeps about ``points`` points per line (plots of long takes stay fast)."""
    return max(1, n // points)


def plot_joints(path: Path, robot: Any, result: Any, limit_gain: float) -> list[Path]:
    """``joints.png`` (Figure 9 style: trajectories and dashed limits), ``phase.png`` (Figure 3 style: joint
    velocity against position, bounded by eq. 12 for the joints that came closest to their limits)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nb, nvb = (7, 6) if robot.floating_base else (0, 0)
    every = _plot_stride(len(result.times))
    s, s_dot = result.q[::every, nb:], result.v[::every, nvb:]
    t = result.times[::every] - result.times[0]
    n = robot.n_joints
    cols = 4
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 1.9 * rows), sharex=True, squeeze=False)
    for i in range(rows * cols):
        ax = axes[i // cols][i % cols]
        if i >= n:
            ax.axis("off")
            continue
        ax.plot(t, np.degrees(s[:, i]), color="tab:orange", lw=1.0)
        for bound in (robot.lower[i], robot.upper[i]):
            ax.axhline(math.degrees(bound), color="k", ls="--", lw=0.8)
        ax.set_title(robot.joint_names[i], fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("time [s]", fontsize=8)
    fig.suptitle(f"{robot.name}: joint angles [deg] with their limits (dashed)", fontsize=10)
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.06, top=0.93, hspace=0.45, wspace=0.25)
    joints_png = path / "joints.png"
    fig.savefig(joints_png, dpi=90)
    plt.close(fig)

    margin = np.minimum((s - robot.lower).min(axis=0), (robot.upper - s).min(axis=0))
    chosen = list(np.argsort(margin)[: min(6, n)])
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), squeeze=False)
    for slot in range(6):
        ax = axes[slot // 3][slot % 3]
        if slot >= len(chosen):
            ax.axis("off")
            continue
        i = chosen[slot]
        lo, hi, vmax = robot.lower[i], robot.upper[i], robot.velocity_limit[i]
        grid = np.linspace(lo, hi, 200)
        upper = vmax * np.tanh(limit_gain * (hi - grid))
        lower = -vmax * np.tanh(limit_gain * (grid - lo))
        ax.fill_between(np.degrees(grid), np.degrees(lower), np.degrees(upper), color="gold", alpha=0.35)
        ax.plot(np.degrees(grid), np.degrees(upper), color="tab:blue", lw=1, label="upper bound (12)")
        ax.plot(np.degrees(grid), np.degrees(lower), color="tab:red", lw=1, label="lower bound (12)")
        ax.plot(np.degrees(s[:, i]), np.degrees(s_dot[:, i]), color="tab:orange", lw=0.8, label="IK")
        for bound in (lo, hi):
            ax.axvline(math.degrees(bound), color="k", ls="--", lw=0.8)
        ax.set_title(robot.joint_names[i], fontsize=9)
        ax.set_xlabel("angle [deg]", fontsize=8)
        ax.set_ylabel("velocity [deg/s]", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle("joint velocity against angle inside the limit-avoidance bounds of eq. (12)", fontsize=10)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.9, hspace=0.4, wspace=0.3)
    phase_png = path / "phase.png"
    fig.savefig(phase_png, dpi=90)
    plt.close(fig)
    return [joints_png, phase_png]


def plot_errors(path: Path, retargeter: Any, result: Any) -> Path:
    """``errors.png``: MNTE, per-link orientation error, angular-velocity and position RMSE over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    every = _plot_stride(len(result.times))
    t = result.times[::every] - result.times[0]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    axes[0].semilogy(t, np.maximum(result.mnte[::every], 1e-12), color="k", lw=1)
    axes[0].set_ylabel("MNTE, eq. (15)")
    frames = [tg.frame for tg in retargeter.targets.orientation_targets]
    err = np.degrees(result.orientation_error[::every])
    worst = np.argsort(err.max(axis=0))[::-1][:6] if err.size else []
    for j in worst:
        axes[1].plot(t, err[:, j], lw=0.9, label=frames[j])
    axes[1].set_ylabel("orientation error [deg]")
    if len(worst):
        axes[1].legend(fontsize=7, ncol=3, loc="upper right")
    axes[2].plot(
        t, result.angular_velocity_rmse[::every], lw=0.9, label="angular-velocity RMSE, eq. (16) [rad/s]"
    )
    axes[2].plot(t, result.position_rmse[::every], lw=0.9, label="position RMSE [m]")
    for f in range(result.contacts.shape[1]):
        in_contact = result.contacts[::every, f] >= 0
        axes[2].fill_between(
            t, 0, 1, where=in_contact, transform=axes[2].get_xaxis_transform(), alpha=0.08, color=f"C{f + 3}"
        )
    axes[2].set_xlabel("time [s] (shaded: foot contact)")
    axes[2].legend(fontsize=8)
    fig.suptitle(f"{retargeter.config.name}: tracking error over time", fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.07, top=0.94, hspace=0.15)
    out = path / "errors.png"
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
