"""``dynik-retarget``: retarget a human motion onto a humanoid robot offline with the dynamical IK.

Input (one of):
  --motion walking|running|tpose   synthetic human motion (Human66 forward kinematics), --duration, --rate
  --bag PATH                       rosbag2 with sensor_msgs/msg/MultiDOFJointState on /human/link_states
                                   (names = link names, transforms = world poses, twist = world velocities)
  --npz PATH                       motion file: times (N,), links (L,), positions (N,L,3), rotations
                                   (N,L,3,3) or quaternions (N,L,4, x y z w), optional linear_velocities and
                                   angular_velocities (N,L,3); missing velocities are finite-differenced

Output in --out DIR: ``bag/`` (rosbag2, mcap: sensor_msgs/msg/JointState on /dynik/joint_states and
nav_msgs/msg/Odometry on /dynik/base_odom, stamped with the input stamps, exact to the nanosecond;
synthetic motions start at 0), ``trajectory.csv``,
``retarget.npz``, ``calibration.yaml`` (what was used), ``summary.txt``, and PNG plots: ``joints.png``
(joint trajectories against their limits, like Figure 9 of Rapetti et al. 2020), ``phase.png`` (joint
velocity against position inside the eq. (12) bounds, like Figure 3) and ``errors.png`` (error over time).

Exit status: 0 on success; 1 if the result has NaN, leaves a joint limit by more than 1e-6 rad or moves a
joint faster than its velocity limit (finite differences of the output); 2 on bad arguments, an invalid
map or an input file that cannot be read (truncated, corrupted, wrong format: one line naming the file).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from dynik_ros.io.human_motion import (  # noqa: F401 - re-exported: the CLI's motion readers live in io
    HumanMotion,
    _ordered,
    finite_difference_twists,
    read_npz_motion,
    save_npz_motion,
)
from dynik_ros.retarget.foot_figures import foot_figures

LIMIT_TOLERANCE = 1e-6  # rad
JOINT_STATES_TOPIC = "/dynik/joint_states"
BASE_ODOM_TOPIC = "/dynik/base_odom"


# ---------------------------------------------------------------------------- progress
class ProgressBar:
    """A plain-text progress bar on a stream (stderr): redrawn in place on a terminal, one line per 10 %
    otherwise (logs, CI)."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True, width: int = 30):
        self.label, self.width, self.enabled = label, width, enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self._last_decile = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        fraction = done / total
        elapsed = time.perf_counter() - self.start
        eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
        filled = int(round(self.width * fraction))
        text = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:5.1f}% "
            f"{done}/{total}  {elapsed:6.1f} s, {eta:5.1f} s left"
        )
        if self.tty:
            self.stream.write("\r" + text + ("\n" if done >= total else ""))
            self.stream.flush()
        else:
            decile = int(10 * fraction)
            if decile != self._last_decile or done >= total:
                self._last_decile = decile
                self.stream.write(text + "\n")
                self.stream.flush()


LOWER_BODY = ("Pelvis", "UpperLeg", "LowerLeg", "Foot", "Toe")  # the root and legs; the rest is upper body


# ---------------------------------------------------------------------------- input


def synthetic_motion(
    scenario: str,
    duration: float,
    rate: float,
    heading_deg: float = 0.0,
    height: float = 1.75,
    mass: float = 75.0,
) -> HumanMotion:
    """A synthetic human motion (:func:`dynik_ros.retarget.human.synthetic_human_motion`)."""
    from dynik_ros.retarget.human import synthetic_human_motion

    motion = synthetic_human_motion(scenario, duration, rate, heading_deg, height, mass)
    return HumanMotion(
        name=scenario,
        times=motion.times,
        links=list(motion.links),
        positions=motion.positions,
        rotations=motion.rotations,
        linear_velocities=motion.linear_velocities,
        angular_velocities=motion.angular_velocities,
        source=f"synthetic {scenario}, {duration:g} s at {rate:g} Hz"
        + (f", heading {heading_deg:g} deg" if heading_deg else ""),
    )


def read_bag_motion(path: str | Path, topic: str = "/human/link_states") -> HumanMotion:
    """Link states of a rosbag2 (``MultiDOFJointState``); stamps are the messages' header stamps, kept
    exact to the nanosecond (times count from the first one)."""
    from dynik_ros.io.bags import read_link_states, read_messages

    frames, twists = [], []
    for _, poses, twist in read_link_states(path, topic):
        frames.append(poses)
        twists.append(twist)
    if not frames:
        raise ValueError(f"bag '{path}' has no messages on '{topic}'")
    stamps_ns = [
        int(m.msg.header.stamp.sec) * 1_000_000_000 + int(m.msg.header.stamp.nanosec)
        for m in read_messages(path, [topic])
    ]
    origin = min(stamps_ns)
    links = list(frames[0])
    for k, poses in enumerate(frames):
        missing = [name for name in links if name not in poses]
        if missing:
            raise ValueError(f"bag '{path}': message {k} on '{topic}' lacks links {missing}")
    times = (np.array(stamps_ns, dtype=np.int64) - origin) * 1e-9
    positions = np.array([[poses[name][0] for name in links] for poses in frames])
    rotations = np.array([[poses[name][1] for name in links] for poses in frames])
    measured = all(twist and all(name in twist for name in links) for twist in twists)
    if measured:
        linear = np.array([[twist[name][0] for name in links] for twist in twists])
        angular = np.array([[twist[name][1] for name in links] for twist in twists])
    else:
        linear = angular = np.zeros_like(positions)
    motion = HumanMotion(
        Path(path).name, times, links, positions, rotations, linear, angular, f"bag {path}", origin
    )
    return _ordered(motion, differentiate=not measured)


# ---------------------------------------------------------------------------- output
def write_bag(
    path: Path, robot: Any, root_frame: str, result: Any, storage: str = "mcap", stamp_origin_ns: int = 0
) -> Path:
    """JointState (``/dynik/joint_states``) and, for a floating base, Odometry (``/dynik/base_odom``) per
    sample, stamped with the input stamps (``stamp_origin_ns`` + sample time); the odometry twist is in
    the base frame, as the message says."""
    from dynik_ros.io.bags import BagWriter

    names = list(robot.joint_names)
    empty = np.zeros(0)
    with BagWriter(path, storage=storage) as bag:
        types = bag.typestore.types
        time_t, header_t = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
        joint_state_t = types["sensor_msgs/msg/JointState"]
        vector_t, point_t, quat_t = (
            types["geometry_msgs/msg/Vector3"],
            types["geometry_msgs/msg/Point"],
            types["geometry_msgs/msg/Quaternion"],
        )
        pose_t, twist_t = types["geometry_msgs/msg/Pose"], types["geometry_msgs/msg/Twist"]
        pose_cov_t, twist_cov_t = (
            types["geometry_msgs/msg/PoseWithCovariance"],
            types["geometry_msgs/msg/TwistWithCovariance"],
        )
        odometry_t = types["nav_msgs/msg/Odometry"]
        nb = 7 if robot.floating_base else 0
        nvb = 6 if robot.floating_base else 0
        stamps = stamp_origin_ns + np.round(np.asarray(result.times) * 1e9).astype(np.int64)
        for k, stamp in enumerate(stamps.tolist()):
            sec, nanosec = divmod(stamp, 1_000_000_000)
            q, v = result.q[k], result.v[k]
            bag.write(
                JOINT_STATES_TOPIC,
                joint_state_t(
                    header=header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id=""),
                    name=names,
                    position=np.ascontiguousarray(q[nb:], dtype=np.float64),
                    velocity=np.ascontiguousarray(v[nvb:], dtype=np.float64),
                    effort=empty,
                ),
            )
            if not robot.floating_base:
                continue
            x, y, z, qx, qy, qz, qw = (float(c) for c in q[:7])
            lin, ang = v[:3], v[3:6]  # pinocchio's free-flyer velocity is in the base frame already
            bag.write(
                BASE_ODOM_TOPIC,
                odometry_t(
                    header=header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id="world"),
                    child_frame_id=root_frame,
                    pose=pose_cov_t(
                        pose=pose_t(
                            position=point_t(x=x, y=y, z=z), orientation=quat_t(x=qx, y=qy, z=qz, w=qw)
                        ),
                        covariance=np.zeros(36),
                    ),
                    twist=twist_cov_t(
                        twist=twist_t(
                            linear=vector_t(x=float(lin[0]), y=float(lin[1]), z=float(lin[2])),
                            angular=vector_t(x=float(ang[0]), y=float(ang[1]), z=float(ang[2])),
                        ),
                        covariance=np.zeros(36),
                    ),
                ),
            )
    return path


def write_csv(path: Path, robot: Any, result: Any, stamp_origin_ns: int = 0) -> Path:
    """One row per sample: time (input stamp, s, exact to the ns), base pose (if floating), joint
    positions, then joint velocities."""
    nvb = 6 if robot.floating_base else 0
    header = ["time"]
    if robot.floating_base:
        header += ["base_x", "base_y", "base_z", "base_qx", "base_qy", "base_qz", "base_qw"]
    header += list(robot.joint_names) + [f"{j}_velocity" for j in robot.joint_names]
    stamps = stamp_origin_ns + np.round(np.asarray(result.times) * 1e9).astype(np.int64)
    values = np.concatenate((result.q, result.v[:, nvb:]), axis=1).tolist()
    row_format = "%d.%09d" + ",%.9g" * (len(header) - 1) + "\r\n"  # csv's dialect: '\r\n' rows
    with open(path, "w", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerow(header)
        stream.writelines(
            row_format % (*divmod(stamp, 1_000_000_000), *row)
            for stamp, row in zip(stamps.tolist(), values, strict=True)
        )
    return path


def write_npz(path: Path, retargeter: Any, result: Any, stamp_origin_ns: int = 0) -> Path:
    """Trajectory and diagnostics; ``times`` count from ``stamp_origin_ns`` (int64 ns of the input)."""
    robot = retargeter.robot
    np.savez_compressed(
        path,
        times=result.times,
        stamp_origin_ns=np.int64(stamp_origin_ns),
        joint_names=np.array(robot.joint_names),
        q=result.q,
        v=result.v,
        nu=result.nu,
        lower=robot.lower,
        upper=robot.upper,
        velocity_limit=robot.velocity_limit,
        mnte=result.mnte,
        angular_velocity_rmse=result.angular_velocity_rmse,
        position_rmse=result.position_rmse,
        orientation_error=result.orientation_error,
        orientation_frames=np.array([t.frame for t in retargeter.targets.orientation_targets]),
        solve_time=result.solve_time,
        solved=result.solved,
        contacts=result.contacts,
        contact_points=result.contact_points,
        feet=np.array([f.frame for f in retargeter.config.feet]),
    )
    return path


# ---------------------------------------------------------------------------- summary
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
    ratio = np.abs(s_dot).max(axis=0) / robot.velocity_limit if s_dot.size else np.zeros(robot.n_joints)
    speed_breaches = int(np.sum(np.abs(s_dot) > robot.velocity_limit * (1.0 + 1e-6)))
    saturated = np.abs(s_dot) >= 0.99 * robot.velocity_limit  # a joint held back by its velocity limit
    at_speed_limit = float(np.mean(saturated.any(axis=1))) if s_dot.size else 0.0
    at_limit = float(np.mean(np.minimum(below, above) < math.radians(1.0))) if s.size else 0.0
    ms = result.solve_time * 1e3
    ori_deg = np.degrees(result.orientation_error)
    frames = [t.frame for t in retargeter.targets.orientation_targets]
    worst_link = frames[int(ori_deg.max(axis=0).argmax())] if ori_deg.size else "-"
    feet = foot_figures(
        robot, result.q, times, result.contacts, retargeter.config.feet, retargeter.config.contact.blend_time
    )
    legs = np.array(
        [any(k in retargeter.config.target(f).link for k in LOWER_BODY) for f in frames], dtype=bool
    )
    per_target = 1.0 - np.cos(result.orientation_error)  # eq. (15) per target: tr(I - R^T R*) / 2
    stats = {
        "mnte_mean": float(result.mnte.mean()),
        "mnte_upper_body_mean": float(per_target[:, ~legs].mean()) if (~legs).any() else float("nan"),
        "mnte_legs_mean": float(per_target[:, legs].mean()) if legs.any() else float("nan"),
        "mnte_p95": float(np.percentile(result.mnte, 95)),
        "angular_velocity_rmse": float(result.angular_velocity_rmse.mean()),
        "position_rmse": float(result.position_rmse.mean()),
        "max_orientation_error_deg": float(ori_deg.max()) if ori_deg.size else 0.0,
        "min_limit_margin_deg": math.degrees(float(margin.min())) if margin.size else float("inf"),
        "limit_violation_rad": violation,
        "peak_velocity_ratio": float(ratio.max()) if ratio.size else 0.0,
        "speed_breaches": float(speed_breaches),
        "samples_at_velocity_limit": at_speed_limit,
        "step_p50_ms": float(np.percentile(ms, 50)),
        "step_p99_ms": float(np.percentile(ms, 99)),
        "qp_failures": float((~result.solved).sum()),
        "elapsed_s": elapsed,
    }
    for figures in feet:
        stats[f"foot_{figures.side}_tilt_flat_max_deg"] = figures.tilt_flat_max_deg
        stats[f"foot_{figures.side}_penetration_max_mm"] = figures.penetration_max_mm
        stats[f"foot_{figures.side}_slide_max_mm"] = figures.slide_max_mm
    ok = finite and violation <= LIMIT_TOLERANCE and speed_breaches == 0
    verdict = (
        "OK"
        if ok
        else "FAILED: "
        + (
            "NaN in output"
            if not finite
            else ("joint limit left" if violation > LIMIT_TOLERANCE else "velocity limit exceeded")
        )
    )
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
        f"{'largest orientation error (link)':<44} {stats['max_orientation_error_deg']:.1f} deg "
        f"({worst_link})",
        f"{'smallest joint-limit margin (joint)':<44} {stats['min_limit_margin_deg']:.2f} deg "
        f"({robot.joint_names[int(margin.argmin())] if margin.size else '-'})",
        f"{'limit violation (tolerance 1e-6 rad)':<44} {violation:.1e} rad",
        f"{'samples within 1 deg of a limit':<44} {100 * at_limit:.1f} % of joint samples",
        f"{'peak |ds/dt| / velocity limit (joint)':<44} {stats['peak_velocity_ratio']:.2f} "
        f"({robot.joint_names[int(ratio.argmax())] if ratio.size else '-'}; output finite differences)",
        f"{'joint-samples above the velocity limit':<44} {speed_breaches}",
        f"{'samples with a joint at its velocity limit':<44} {100 * at_speed_limit:.1f} % (>= 0.99 of it; "
        "a slower take: --time-scale)",
    ]
    for figures in feet:  # measured on the written trajectory (retarget/foot_figures.py)
        lines.append(f"{'foot ' + figures.side:<44} {figures.line()}")
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


# ---------------------------------------------------------------------------- plots
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


# ---------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    from dynik_ros.motion.synthetic import SCENARIOS

    parser = argparse.ArgumentParser(
        prog="dynik-retarget",
        description="Retarget a human motion onto a humanoid robot with the dynamical IK (offline).",
        epilog="Robots: the maps in config/ (see 'dynik-retarget --list') or a path to a YAML map.",
    )
    parser.add_argument(
        "input",
        nargs="?",
        type=Path,
        help="capture file: Xsens .mvnx, .bvh, .npz (format detected from the content)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--motion", choices=SCENARIOS, help="synthetic human motion (default: walking)")
    source.add_argument("--bag", type=Path, help="rosbag2 with MultiDOFJointState link states")
    source.add_argument("--npz", type=Path, help="motion file (.npz)")
    parser.add_argument("--robot", default="g1", help="robot name or YAML map path (default: g1)")
    parser.add_argument("--out", type=Path, default=Path("retarget_out"), help="output directory")
    parser.add_argument("--duration", type=float, default=10.0, help="synthetic motion length, s")
    parser.add_argument("--rate", type=float, default=100.0, help="synthetic motion rate, Hz")
    parser.add_argument("--heading", type=float, default=0.0, help="synthetic motion heading, deg")
    parser.add_argument("--topic", default="/human/link_states", help="link-state topic of --bag")
    parser.add_argument("--calibration", type=Path, help="calibration YAML to use (default: the map's/auto)")
    parser.add_argument(
        "--calibration-frame", type=int, help="calibrate from this input sample (the subject in T-pose)"
    )
    parser.add_argument(
        "--skeleton", help="BVH skeleton map: cmu, lafan1, mixamo, mvn or a YAML path (default: detected)"
    )
    parser.add_argument(
        "--unit", choices=("m", "cmu", "cm", "inch", "mm"), help="BVH length unit (default: detected)"
    )
    parser.add_argument("--tpose-frame", type=int, help="BVH frame where the subject stands in T-pose")
    parser.add_argument(
        "--floor",
        choices=("apply", "report"),
        default="apply",
        help="floor height from the feet: shift or only report",
    )
    parser.add_argument(
        "--force-calibration", action="store_true", help="calibrate even on a frame far from a T-pose"
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="play the capture this many times slower (2: half speed, stamps x2, velocities /2), so a robot "
        "with lower velocity limits can follow (default 1)",
    )
    parser.add_argument("--settle", type=float, default=1.0, help="IK seconds spent on the first frame first")
    parser.add_argument("--gain", type=float, help="set every target gain K of eq. (9), 1/s")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="output bag storage")
    parser.add_argument("--no-bag", action="store_true", help="do not write the rosbag2")
    parser.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    parser.add_argument(
        "--balance",
        action="store_true",
        help="keep the CoM over the feet in contact (quasi-static; the map's balance: section switched on): "
        "summary line and com_track.png",
    )
    parser.add_argument(
        "--video",
        type=Path,
        help="also render the human and the robot side by side: .png (a strip of --frames), .gif or .mp4",
    )
    parser.add_argument("--frames", type=int, default=8, help="frames in a --video .png strip (default 8)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--list", action="store_true", help="list the robots with a map and exit")
    return parser


class InputFileError(ValueError):
    """An input file that cannot be read: its name and the reader's reason, on one line."""


def _read_motion_file(args: argparse.Namespace) -> HumanMotion:
    """``--bag`` or ``--npz``; any failure of the reader (truncated or corrupted file, wrong format,
    missing metadata) becomes one :class:`InputFileError` naming the file (exit 2, no traceback)."""
    from dynik_ros.io.motion_files import describe, detect_format, read_motion_file

    path = args.bag if args.bag is not None else args.npz if args.npz is not None else args.input
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    found = detect_format(path)
    if args.npz is not None and path.is_file() and found != "npz":
        hint = f": pass it without --npz (dynik-retarget {path})" if found in ("mvnx", "bvh") else ""
        raise InputFileError(f"cannot read {path} as a .npz motion file: it is {describe(found)}{hint}")
    if args.input is not None and found == "bag":
        raise InputFileError(f"{path} is a rosbag2: pass it with --bag")
    if args.input is not None and found is None:
        raise InputFileError(f"cannot read {path}: {describe(found)}")
    try:
        if args.input is not None:
            options = {"floor": args.floor}
            if found == "bvh":
                options.update(skeleton=args.skeleton, unit=args.unit, tpose_frame=args.tpose_frame)
            return read_motion_file(path, found, **options)
        motion = read_bag_motion(path, args.topic) if args.bag is not None else read_npz_motion(path)
        from dynik_ros.io.capture_checks import check_motion

        return check_motion(motion, str(path), floor="report")  # taken as they are: the floor only reported
    except Exception as exc:  # noqa: BLE001 - a reader's own error types vary (rosbags, zipfile, numpy)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = (
            "a rosbag2"
            if args.bag is not None
            else "a .npz motion file"
            if args.npz is not None
            else describe(found)
        )
        if reason.startswith(f"{path}: "):  # the capture readers name the file themselves
            reason = reason[len(f"{path}: ") :]
        raise InputFileError(f"cannot read {path} as {kind}: {reason} ({type(exc).__name__})") from exc


def _calibrate(retargeter: Any, poses: dict, where: str, force: bool) -> None:
    """Calibrate on ``poses`` after checking it is a T-pose (a warning with the angle; refused beyond
    the limit of :func:`dynik_ros.io.capture_checks.check_calibration_pose` unless ``force``)."""
    from dynik_ros.io.capture_checks import check_calibration_pose

    warning = check_calibration_pose(poses, where, force=force)
    if warning:
        print(f"dynik-retarget: warning: {warning}", file=sys.stderr)
    retargeter.calibrate(poses)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from dynik_ros.retarget import RetargetConfigError, Retargeter, available_robots

    if args.list:
        print("\n".join(available_robots()))
        return 0
    if args.duration <= 0 or args.rate <= 0:
        parser.error("--duration and --rate must be positive")
    if not (math.isfinite(args.time_scale) and args.time_scale > 0):
        parser.error("--time-scale must be positive")
    if args.video is not None:
        from dynik_ros.retarget.render import check_video_path

        try:
            check_video_path(args.video)
        except ValueError as exc:
            print(f"dynik-retarget: error: {exc}", file=sys.stderr)
            return 2
    try:
        retargeter = Retargeter.from_config(args.robot, args.calibration)
        if args.balance:
            from dataclasses import replace

            balance = replace(retargeter.config.balance, enabled=True)
            retargeter.config = replace(retargeter.config, balance=balance)
        if sum(x is not None for x in (args.input, args.bag, args.npz, args.motion)) > 1:
            parser.error("give one input: a capture file, --bag, --npz or --motion")
        if args.bag is not None or args.npz is not None or args.input is not None:
            motion = _read_motion_file(args)
            for notice in getattr(motion, "notices", []):
                print(f"dynik-retarget: {notice}", file=sys.stderr)
        else:
            motion = synthetic_motion(
                args.motion or "walking",
                args.duration,
                args.rate,
                args.heading,
                retargeter.config.human.height,
                retargeter.config.human.mass,
            )
        if args.calibration_frame is not None:
            if not 0 <= args.calibration_frame < len(motion):
                raise ValueError(f"--calibration-frame {args.calibration_frame} outside 0..{len(motion) - 1}")
            _calibrate(
                retargeter,
                motion.sample(args.calibration_frame),
                f"{motion.name}: frame {args.calibration_frame}",
                args.force_calibration,
            )
        elif args.calibration is None and getattr(motion, "calibration", None):
            from dynik_ros.io.mvnx import calibration_frame

            kind, poses = calibration_frame(motion) or (None, None)
            if poses is not None:
                _calibrate(
                    retargeter, poses, f"{motion.name}: the file's {kind} frame", args.force_calibration
                )
                print(f"dynik-retarget: calibrated on the file's {kind} frame", file=sys.stderr)
    except (RetargetConfigError, KeyError, ValueError, FileNotFoundError, FileExistsError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"dynik-retarget: error: {message}", file=sys.stderr)
        return 2
    if len(motion) < 2:
        print("dynik-retarget: error: the motion needs at least two samples", file=sys.stderr)
        return 2
    from dynik_ros.io.human_motion import time_scaled

    motion = time_scaled(motion, args.time_scale)
    if args.time_scale != 1.0:  # the same footfalls: contact speeds and blend times follow the clock
        retargeter.time_scale_contact(args.time_scale)

    args.out.mkdir(parents=True, exist_ok=True)
    bag_path = args.out / "bag"
    if not args.no_bag and bag_path.exists():
        print(f"dynik-retarget: error: {bag_path} exists (bags are never overwritten)", file=sys.stderr)
        return 2

    from dynik_ros.core.dynamical_ik import DynamicalIKConfig

    ik_config = DynamicalIKConfig()
    start = time.perf_counter()
    retargeter.reset()
    try:
        measurements, contacts = retargeter.compute(*retargeter.motion_arrays(motion))
        measurements = retargeter.balanced(motion.times, measurements, contacts)
        ik = retargeter.make_ik(ik_config)
        if args.gain is not None:
            ik.set_gains(args.gain, args.gain)
    except ValueError as exc:  # InvalidMeasurementError: missing links, NaN, non-rotations
        print(f"dynik-retarget: error: {exc}", file=sys.stderr)
        return 2
    progress = ProgressBar(f"retarget {retargeter.config.name}", enabled=not args.quiet)
    result = retargeter.run(
        motion.times, measurements, ik=ik, settle=args.settle, progress=progress, contacts=contacts
    )
    elapsed = time.perf_counter() - start

    summary = summarize(retargeter, result, motion, args.settle, elapsed)
    if retargeter.config.balance.enabled:
        from dynik_ros.retarget.balance import balance_report

        line, plot = balance_report(retargeter, result, None if args.no_plots else args.out / "com_track.png")
        summary.text += "\n" + line
        extra_plots = [plot] if plot is not None else []
    else:
        extra_plots = []
    written = [
        retargeter.save_calibration(args.out / "calibration.yaml"),
        write_csv(args.out / "trajectory.csv", retargeter.robot, result, motion.stamp_origin_ns),
        write_npz(args.out / "retarget.npz", retargeter, result, motion.stamp_origin_ns),
    ]
    if not args.no_bag:
        root = retargeter.config.root.frame
        written.append(
            write_bag(bag_path, retargeter.robot, root, result, args.storage, motion.stamp_origin_ns)
        )
    if not args.no_plots:
        written += plot_joints(args.out, retargeter.robot, result, ik_config.limit_gain)
        written.append(plot_errors(args.out, retargeter, result))
    written += extra_plots
    if args.video is not None:
        from dynik_ros.retarget.render import SideBySide, render

        scene = SideBySide(
            motion.links, motion.positions, retargeter.robot, result.q, result.times,
            retargeter.config.feet, result.contacts, retargeter.config.name,
        )  # fmt: skip
        try:
            written.append(render(args.video, scene, frames=args.frames))
        except ValueError as exc:
            print(f"dynik-retarget: error: {exc}", file=sys.stderr)
            return 2
    summary_path = args.out / "summary.txt"
    summary_path.write_text(summary.text + "\n", encoding="utf-8")
    written.append(summary_path)
    print(summary.text)
    print("\nwrote: " + ", ".join(str(p) for p in written))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
