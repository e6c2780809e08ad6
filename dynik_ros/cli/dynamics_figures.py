"""What ``dynik-ros run`` prints for a pipeline with ``dynamics_node`` (issue 13): counts, step time,
contact states, the legs' torques and, for a synthetic source, the error against the inverse-dynamics
truth of the same motion (:mod:`dynik_ros.estimation.synthetic_dynamics`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dynik_ros.estimation.contact_classification import STATE_NAMES

LEG_JOINTS = tuple(f"j{side}{joint}_roty" for side in ("Right", "Left") for joint in ("Hip", "Knee", "Ankle"))


def dynamics_summary(node: Any, wearable: Any, first_stamp_ns: int | None) -> dict[str, Any]:
    """Figures of a run from ``node`` (a DynamicsNode after the run) and the source ``wearable``
    (its parameters say whether a synthetic truth exists); ``first_stamp_ns``: the first link-state stamp
    published (the truth's t = 0)."""
    times, cpu = node.step_times.array(), node.step_cpu_times.array()
    out: dict[str, Any] = {
        "received": node.received,
        "estimates": node.estimates,
        "refused": {k: v for k, v in node.rejections.counts.items() if v},
        "shoes_received": list(node.shoes_received),
        "shoes_missing": node.shoes_missing,
        "step_p50_ms": 1e3 * float(np.percentile(times, 50)) if len(times) else math.nan,
        "first_stamp_ns": first_stamp_ns,
        "step_cpu_p50_ms": 1e3 * float(np.percentile(cpu, 50)) if len(cpu) else math.nan,
        "step_cpu_p99_ms": 1e3 * float(np.percentile(cpu, 99)) if len(cpu) else math.nan,
        "step_p99_ms": 1e3 * float(np.percentile(times, 99)) if len(times) else math.nan,
    }
    if not len(node.torque_log):
        return out
    names = list(node.pipeline.robot.joint_names)
    stamps, tau, codes = node.torque_log.arrays()
    states = [STATE_NAMES[int(c)] for c in codes]
    peak = int(np.abs(tau).max(axis=0).argmax())
    out.update(
        {
            "contact_states": {s: 100.0 * states.count(s) / len(states) for s in sorted(set(states))},
            "peak_torque": float(np.abs(tau).max()),
            "peak_joint": names[peak],
            "leg_rms": {j: float(np.sqrt(np.mean(tau[:, names.index(j)] ** 2))) for j in LEG_JOINTS},
        }
    )
    p = wearable.params
    if p.get("source") == "synthetic" and first_stamp_ns is not None:
        from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
        from dynik_ros.nodes.wearable_params import synthetic_duration

        _, truth = human_dynamics_truth(p["scenario"], synthetic_duration(p), p["rate"], kind=p["model"])
        index = np.round((stamps - first_stamp_ns) * 1e-9 * p["rate"]).astype(int)
        ok = (index >= 0) & (index < len(truth.times))
        error = tau[ok] - truth.tau[index[ok]]
        out["truth_rmse"] = float(np.sqrt(np.mean(error**2)))
        out["truth_peak"] = float(np.abs(truth.tau).max())
        out["truth_samples"] = int(ok.sum())
    return out


def dynamics_lines(s: dict[str, Any]) -> list[str]:
    refused = ", ".join(f"{k} {v}" for k, v in s["refused"].items()) or "none"
    lines = [
        f"  dynamics_node {s['received']} received (refused: {refused}), {s['estimates']} estimates, shoes "
        f"{s['shoes_received'][0]} right / {s['shoes_received'][1]} left ({s['shoes_missing']} samples "
        "without both)",
        f"  step          wall p50 {s['step_p50_ms']:.2f} ms, p99 {s['step_p99_ms']:.2f} ms; CPU of the "
        f"thread p50 {s['step_cpu_p50_ms']:.2f} ms, p99 {s['step_cpu_p99_ms']:.2f} ms (time.thread_time)",
    ]
    if "peak_torque" in s:
        states = ", ".join(f"{k} {v:.0f} %" for k, v in s["contact_states"].items())
        legs = ", ".join(f"{j[1:-5]} {v:.1f}" for j, v in s["leg_rms"].items())
        lines += [
            f"  torques       peak {s['peak_torque']:.1f} N m ({s['peak_joint']}); RMS [N m] {legs}",
            f"  contacts      {states}",
        ]
    if "truth_rmse" in s:
        share = 100 * s["truth_rmse"] / s["truth_peak"]
        lines.append(
            f"  vs truth      torque RMSE {s['truth_rmse']:.4f} N m ({share:.3f} % of the "
            f"{s['truth_peak']:.0f} N m peak) over {s['truth_samples']} samples (inverse dynamics of the "
            "synthetic motion)"
        )
    return lines
