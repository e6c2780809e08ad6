"""Figures of the closed loop through the mocap (ROS-free): how far an estimated base pose is from the
simulated truth, compared at the estimate's stamps.

Poses are rows ``(stamp [s], x, y, z, qx, qy, qz, qw)``. The truth (``/sim/base_pose_true``, 100 Hz) is
interpolated at each estimate stamp inside its span: positions linearly, rotations along the geodesic
(``R0 exp(a log(R0^T R1))``); at 1 m/s and 1 rad/s that interpolation is exact to ~0.1 mm and ~0.01 deg.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dynik_ros.core.quaternion import rotation_from_quaternion
from dynik_ros.core.so3 import exp_so3, orientation_log_residual_world


def _as_rows(poses: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    rows = np.asarray(poses, dtype=float).reshape(-1, 8)
    return rows[np.argsort(rows[:, 0], kind="stable")]


def pose_errors(
    estimate: Sequence[Sequence[float]] | np.ndarray, truth: Sequence[Sequence[float]] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per estimate inside the truth's span: its stamp, position error [m] and angle error [rad]."""
    est, ref = _as_rows(estimate), _as_rows(truth)
    if len(est) == 0 or len(ref) < 2:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    inside = (est[:, 0] >= ref[0, 0]) & (est[:, 0] <= ref[-1, 0])
    est = est[inside]
    k = np.clip(np.searchsorted(ref[:, 0], est[:, 0], side="right") - 1, 0, len(ref) - 2)
    t0, t1 = ref[k, 0], ref[k + 1, 0]
    a = np.where(t1 > t0, (est[:, 0] - t0) / np.where(t1 > t0, t1 - t0, 1.0), 0.0)
    positions = ref[k, 1:4] + a[:, None] * (ref[k + 1, 1:4] - ref[k, 1:4])
    position_error = np.linalg.norm(est[:, 1:4] - positions, axis=1)
    # the geodesic R0 exp(a log(R0^T R1)) = exp(a log(R1 R0^T)) R0, all rows at once (a run's end summary
    # over 36,000 poses took ~30 s one pose at a time)
    r0, r1 = rotation_from_quaternion(ref[k, 4:8]), rotation_from_quaternion(ref[k + 1, 4:8])
    r = exp_so3(a[:, None] * orientation_log_residual_world(r0, r1)) @ r0
    angle = orientation_log_residual_world(r, rotation_from_quaternion(est[:, 4:8]))
    return est[:, 0], position_error, np.linalg.norm(angle, axis=-1)


def error_summary(
    estimate: Sequence[Sequence[float]] | np.ndarray,
    truth: Sequence[Sequence[float]] | np.ndarray,
    settle: float = 0.0,
) -> dict[str, float]:
    """RMS, p99 and max of the position [mm] and angle [deg] errors, leaving out the first ``settle`` s of
    the estimate; ``n`` poses compared."""
    stamps, position, angle = pose_errors(estimate, truth)
    if len(stamps):
        keep = stamps >= stamps[0] + settle
        position, angle = position[keep], angle[keep]
    if not len(position):
        return {"n": 0}
    mm, deg = position * 1e3, np.degrees(angle)
    return {
        "n": int(len(position)),
        "position_rms_mm": float(math.sqrt(np.mean(mm**2))),
        "position_p99_mm": float(np.percentile(mm, 99)),
        "position_max_mm": float(mm.max()),
        "angle_rms_deg": float(math.sqrt(np.mean(deg**2))),
        "angle_p99_deg": float(np.percentile(deg, 99)),
        "angle_max_deg": float(deg.max()),
    }


def loop_summary(mocap, ik, sim, settle: float = 1.0) -> dict:
    """The closed loop's base figures from the nodes' logs (``mocap_node.published_log``,
    ``ik_node.base_log``, ``sim_node.base_log``): mocap_node's estimate against the simulated truth at its
    stamps, the IK's base against the simulated base at the moment the IK answered (and how far behind
    its input stamps it was), after ``settle`` s, and mocap_node's counts."""
    truth = sim.base_log.array()
    out: dict = {"mocap": error_summary(mocap.published_log.array(), truth, settle)}
    if ik is not None and len(getattr(ik, "base_log", ())):
        rows = ik.base_log.array()  # stamp, pose, clock when the IK answered
        # the IK's base against the simulated base at the moment the IK answered (its commands act then)
        out["ik"] = error_summary(rows[:, [8, 1, 2, 3, 4, 5, 6, 7]], truth, settle)
        out["ik_lag_p50_ms"] = float(np.median(rows[:, 8] - rows[:, 0]) * 1e3)
        out["ik_base_odom_missing"] = int(getattr(ik, "base_odom_missing", 0))
        out["ik_base_odom_ahead"] = int(getattr(ik, "base_odom_ahead", 0))
    counts = mocap.rejections.counts
    out.update(
        received=int(mocap.received),
        published=int(mocap.published),
        outliers=int(counts.get("outlier", 0)),
        refused=int(mocap.rejections.total),
        occlusions=int(mocap.gaps.occlusions),
        missed_captures=int(mocap.gaps.missed),
        latency_p50_ms=float(mocap.latencies.percentile(50) * 1e3) if len(mocap.latencies) else math.nan,
    )
    return out


def _figures(s: dict) -> str:
    if not s.get("n"):
        return "no poses to compare"
    return (
        f"RMS {s['position_rms_mm']:.2f} mm / {s['angle_rms_deg']:.2f} deg, "
        f"p99 {s['position_p99_mm']:.2f} mm / {s['angle_p99_deg']:.2f} deg, "
        f"max {s['position_max_mm']:.2f} mm / {s['angle_max_deg']:.2f} deg ({s['n']} poses)"
    )


def loop_lines(loop: dict) -> list[str]:
    """The runner's printout of :func:`loop_summary`."""
    lines = [
        f"  mocap_node    {loop['published']} base poses from {loop['received']} rigid-body poses "
        f"({loop['outliers']} outliers and {loop['refused'] - loop['outliers']} others refused, "
        f"{loop['occlusions']} occlusions, {loop['missed_captures']} captures lost; latency p50 "
        f"{loop['latency_p50_ms']:.2f} ms)",
        f"  base error    mocap_node vs /sim/base_pose_true: {_figures(loop['mocap'])}",
    ]
    if "ik" in loop:
        lines.append(
            f"  IK base       vs the simulated base when the IK answered: {_figures(loop['ik'])}; the IK "
            f"{loop['ik_lag_p50_ms']:.0f} ms behind its input stamps (p50), {loop['ik_base_odom_missing']} "
            f"steps without base odometry, {loop['ik_base_odom_ahead']} on odometry newer than the input"
        )
    return lines
