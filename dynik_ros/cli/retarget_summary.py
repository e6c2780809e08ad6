"""``dynik-retarget``'s summary: accuracy (eq. 15, 16), limit margins, peak joint speeds measured on the
written trajectory, the foot figures (``retarget/foot_figures.py``) and the exit verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynik_ros.io.human_motion import HumanMotion
from dynik_ros.retarget.foot_figures import foot_figures, frame_poses, toe_flags
from dynik_ros.retarget.runaway import runaway
from dynik_ros.retarget.smoothness import smoothness
from dynik_ros.retarget.trajectory_errors import frame_positions

LIMIT_TOLERANCE = 1e-6  # rad
LOWER_BODY = ("Pelvis", "UpperLeg", "LowerLeg", "Foot", "Toe")  # the root and legs; the rest is upper body


@dataclass
class Summary:
    text: str
    ok: bool
    stats: dict[str, float]


def summarize(retargeter: Any, result: Any, motion: HumanMotion, settle: float, elapsed: float) -> Summary:
    """The summary table: accuracy (eq. 15, 16), limit margins, peak joint speeds, timing.

    Joint speeds are those of the written trajectory, ``|s_k - s_{k-1}| / (t_k - t_{k-1})``, not the
    solver's velocity ``nu``: that is what a robot replaying the file would be asked to do."""
    robot = retargeter.robot
    nb = 7 if robot.floating_base else 0
    s = result.q[:, nb:]
    times = np.asarray(result.times, dtype=float)
    s_dot = np.diff(s, axis=0) / np.diff(times)[:, None] if len(s) > 1 else np.zeros((0, robot.n_joints))
    finite = bool(np.all(np.isfinite(result.q)) and np.all(np.isfinite(result.v)))
    below, above = s - robot.lower, robot.upper - s
    margin = np.minimum(below.min(axis=0), above.min(axis=0))
    violation = max(0.0, -float(margin.min())) if margin.size else 0.0
    margin = np.where(margin > -1e-12, np.maximum(margin, 0.0), margin)  # no "-0.00" from rounding
    # the margins that say something: joints the IK moves (locked ones and their mimics rest where the URDF
    # put them, Romeo's 22 finger joints on a limit: they made "smallest margin 0.00 deg" and 44 % of samples)
    moving = robot.joint_expansion().any(axis=1) if robot.has_reductions else np.ones(robot.n_joints, bool)
    moving_margin = np.where(moving, margin, np.inf)
    ratio = np.abs(s_dot).max(axis=0) / robot.velocity_limit if s_dot.size else np.zeros(robot.n_joints)
    speed_breaches = int(np.sum(np.abs(s_dot) > robot.velocity_limit * (1.0 + 1e-6)))
    saturated = np.abs(s_dot) >= 0.99 * robot.velocity_limit  # a joint held back by its velocity limit
    at_speed_limit = float(np.mean(saturated.any(axis=1))) if s_dot.size else 0.0
    near = np.minimum(below, above)[:, moving]
    at_limit = float(np.mean(near < math.radians(1.0))) if near.size else 0.0
    ms = result.solve_time * 1e3
    ori_deg = np.degrees(result.orientation_error)
    frames = [t.frame for t in retargeter.targets.orientation_targets]
    worst_link = frames[int(ori_deg.max(axis=0).argmax())] if ori_deg.size else "-"
    blend, half = retargeter.config.contact.blend_time, retargeter.config.balance.sole_half_width
    toe = toe_flags(retargeter, result)  # the toe class of the compute() these results ran
    feet_of_map, contacts = retargeter.config.feet, result.contacts
    poses = frame_poses(robot, result.q, [f.frame for f in feet_of_map])  # placed once for both figures
    feet = foot_figures(
        robot, result.q, times, contacts, feet_of_map, blend, toe=toe, half_width=half, poses=poses
    )
    on_toes = toe is not None and bool(toe.any())
    as_flat = (  # the same trajectory with every contact sample after the blend counted flat (no toe class)
        foot_figures(robot, result.q, times, contacts, feet_of_map, blend, half_width=half, poses=poses)
        if on_toes
        else []
    )
    legs = np.array(
        [any(k in retargeter.config.target(f).link for k in LOWER_BODY) for f in frames], dtype=bool
    )
    per_target = 1.0 - np.cos(result.orientation_error)  # eq. (15) per target: tr(I - R^T R*) / 2
    # the position targets against the written configurations (forward kinematics): the verdict's figures
    pos_frames = [t.frame for t in retargeter.targets.position_targets]
    targets = np.asarray(result.position_targets, dtype=float).reshape(len(result.q), len(pos_frames), 3)
    achieved = getattr(result, "achieved_positions", None)  # placed by the errors' pass over the take
    placed_at = getattr(result, "achieved_q", None)  # at this q: a result given another q is placed again
    if achieved is None or np.shape(achieved) != targets.shape or not np.array_equal(placed_at, result.q):
        achieved = frame_positions(robot, result.q, pos_frames)
    distance = np.linalg.norm(targets - achieved, axis=2)
    root = retargeter.config.root.frame
    base_errors = distance[:, pos_frames.index(root)] if robot.floating_base and root in pos_frames else None
    stats = {
        "mnte_mean": float(result.mnte.mean()),
        "mnte_upper_body_mean": float(per_target[:, ~legs].mean()) if (~legs).any() else float("nan"),
        "mnte_legs_mean": float(per_target[:, legs].mean()) if legs.any() else float("nan"),
        "mnte_p95": float(np.percentile(result.mnte, 95)),
        "angular_velocity_rmse": float(result.angular_velocity_rmse.mean()),
        "position_rmse": float(np.sqrt(np.mean(distance**2, axis=1) / 3.0).mean()) if pos_frames else 0.0,
        "base_error_max": float(base_errors.max()) if base_errors is not None else float("nan"),
        "max_orientation_error_deg": float(ori_deg.max()) if ori_deg.size else 0.0,
        "min_limit_margin_deg": math.degrees(float(moving_margin.min())) if margin.size else float("inf"),
        "limit_violation_rad": violation,
        "peak_velocity_ratio": float(ratio.max()) if ratio.size else 0.0,
        "speed_breaches": float(speed_breaches),
        "samples_at_velocity_limit": at_speed_limit,
        "step_p50_ms": float(np.percentile(ms, 50)),
        "step_p99_ms": float(np.percentile(ms, 99)),
        "qp_failures": float((~result.solved).sum()),
        "elapsed_s": elapsed,
    }
    smooth = smoothness(s, times)  # second differences of the written joints (retarget/smoothness.py)
    stats["joint_acceleration_p99"], p99_joint = smooth.worst("p99")
    stats["joint_acceleration_max"], max_joint = smooth.worst("max")
    stats["chatter_share"] = smooth.chatter_share
    for figures in feet:
        stats[f"foot_{figures.side}_tilt_flat_max_deg"] = figures.tilt_flat_max_deg
        stats[f"foot_{figures.side}_penetration_max_mm"] = figures.penetration_max_mm
        stats[f"foot_{figures.side}_above_flat_max_mm"] = figures.above_flat_max_mm
        stats[f"foot_{figures.side}_slide_max_mm"] = figures.slide_max_mm
    failures = (
        ["NaN in output"]
        if not finite
        else runaway(
            stats["position_rmse"],
            base_errors,
            [(f.side, float(np.nanmax([f.slide_max_mm, f.toe_slide_max_mm]))) for f in feet],
            retargeter.calibration.robot_root_height,
        )
    )
    if violation > LIMIT_TOLERANCE:
        failures.append("joint limit left")
    if speed_breaches:
        failures.append("velocity limit exceeded")
    ok = not failures
    verdict = "OK" if ok else "FAILED: " + "; ".join(failures)
    duration = float(motion.times[-1] - motion.times[0]) if len(motion) > 1 else 0.0
    lines = [
        f"dynik-retarget: {retargeter.config.name} <- {motion.source} "
        f"({len(motion)} samples, {duration:.2f} s)",
        f"settled {settle:g} s on the first frame; world yaw alignment "
        + (
            f"{math.degrees(retargeter.alignment.yaw):+.1f} deg"
            if retargeter.alignment is not None and retargeter.config.alignment != "none"
            else "off"
        ),
        "",
        f"{'metric':<44} value",
        f"{'-' * 44} {'-' * 40}",
        f"{'MNTE, eq. (15): mean / p95 / max':<44} {stats['mnte_mean']:.2e} / {stats['mnte_p95']:.2e} / "
        f"{result.mnte.max():.2e}",
        f"{'MNTE: trunk, head, arms / pelvis and legs':<44} {stats['mnte_upper_body_mean']:.2e} / "
        f"{stats['mnte_legs_mean']:.2e}",
        f"{'angular-velocity RMSE, eq. (16): mean':<44} {stats['angular_velocity_rmse']:.3f} rad/s",
        f"{'position RMSE: mean':<44} {1e3 * stats['position_rmse']:.1f} mm",
        f"{'base from its target: max':<44} "
        + (f"{1e3 * stats['base_error_max']:.1f} mm ({root})" if base_errors is not None else "-"),
        f"{'largest orientation error (link)':<44} {stats['max_orientation_error_deg']:.1f} deg "
        f"({worst_link})",
        f"{'smallest joint-limit margin (joint)':<44} {stats['min_limit_margin_deg']:.2f} deg "
        f"({robot.joint_names[int(moving_margin.argmin())] if moving.any() else '-'}"
        f"{'; locked joints left out' if not moving.all() else ''})",
        f"{'limit violation (tolerance 1e-6 rad)':<44} {violation:.1e} rad",
        f"{'samples within 1 deg of a limit':<44} {100 * at_limit:.1f} % of joint samples"
        f"{' (joints that move)' if not moving.all() else ''}",
        f"{'peak |ds/dt| / velocity limit (joint)':<44} {stats['peak_velocity_ratio']:.2f} "
        f"({robot.joint_names[int(ratio.argmax())] if ratio.size else '-'}; output finite differences)",
        f"{'joint-samples above the velocity limit':<44} {speed_breaches}",
        f"{'samples with a joint at its velocity limit':<44} {100 * at_speed_limit:.1f} % (>= 0.99 of it; "
        "a slower take: --time-scale)",
        f"{'joint |d2s/dt2|: largest p99 / max (joint)':<44} {stats['joint_acceleration_p99']:.0f} / "
        f"{stats['joint_acceleration_max']:.0f} rad/s^2 "
        f"({_name(robot, p99_joint)} / {_name(robot, max_joint)})",
        f"{'chatter (a flips sign, |a| > 100 both sides)':<44} {100 * stats['chatter_share']:.2f} % of "
        "joint-samples",
    ]
    for figures in feet:  # measured on the written trajectory (retarget/foot_figures.py)
        lines.append(f"{'foot ' + figures.side:<44} {figures.line()}")
    if retargeter.config.contact.anchor == "robot":  # retarget/robot_anchor.py
        shifts = np.array(result.anchor_shifts, dtype=float).reshape(-1, 4)
        moved = (
            f"{len(shifts)} contacts; moved median / max {1e3 * np.median(shifts[:, 2]):.1f} / "
            f"{1e3 * shifts[:, 2].max():.1f} mm, turned max "
            f"{math.degrees(np.abs(shifts[:, 3]).max()):.1f} deg"
            if len(shifts)
            else "no contact turned flat"
        )
        lines.append(f"{'holds moved onto the robot soles':<44} {moved}")
    for figures in as_flat:
        lines.append(
            f"{'foot ' + figures.side + ', toe samples counted flat':<44} flat: tilt max "
            f"{figures.tilt_flat_max_deg:.1f} deg, slide max {figures.slide_max_mm:.1f} mm"
        )
    lines += [
        f"{'IK step p50 / p99 / max':<44} {stats['step_p50_ms']:.3f} / {stats['step_p99_ms']:.3f} / "
        f"{ms.max():.3f} ms",
        f"{'QP failures (step held)':<44} {int(stats['qp_failures'])}",
        f"{'wall time (targets + IK + metrics)':<44} {elapsed:.2f} s",
        f"{'result':<44} {verdict}",
        "",
        f"{'joint':<28} {'min':>8} {'max':>8} {'lower':>8} {'upper':>8} {'margin':>7} "
        f"{'|ds/dt|':>7} {'v lim':>7} {'ratio':>5}",
        f"{'':<28} {'deg':>8} {'deg':>8} {'deg':>8} {'deg':>8} {'deg':>7} {'rad/s':>7} {'rad/s':>7}",
    ]
    peak = np.abs(s_dot).max(axis=0) if s_dot.size else np.zeros(robot.n_joints)
    for i, name in enumerate(robot.joint_names):
        lines.append(
            f"{name:<28} {math.degrees(s[:, i].min()):8.1f} {math.degrees(s[:, i].max()):8.1f} "
            f"{math.degrees(robot.lower[i]):8.1f} {math.degrees(robot.upper[i]):8.1f} "
            f"{math.degrees(margin[i]):7.2f} {peak[i]:7.2f} {robot.velocity_limit[i]:7.2f} {ratio[i]:5.2f}"
        )
    return Summary("\n".join(lines), ok, stats)


def _name(robot: Any, joint: int) -> str:
    return robot.joint_names[joint] if joint >= 0 else "-"
