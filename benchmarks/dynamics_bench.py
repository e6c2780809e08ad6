"""Human dynamics benchmark (issue 13, Latella et al. 2019): MAP step time and accuracy on the synthetic
walk, the base velocity from the feet against the suit's pelvis velocity, contact classification, and a
torque plot in the style of the seed's Fig. 10.

    .venv/bin/python benchmarks/dynamics_bench.py                 # 11 s walk at 60 Hz (10 gait cycles)
    .venv/bin/python benchmarks/dynamics_bench.py --quick         # smoke run (a few seconds)
    .venv/bin/python benchmarks/dynamics_bench.py --plot out/fig10.png

Ground truth: :mod:`dynik_ros.estimation.synthetic_dynamics` (pinocchio inverse dynamics of the walk, the
ground reaction split between the feet by a known rule). Noise (white, seeded): suit linear accelerations
0.1 m/s^2, angular accelerations 0.5 rad/s^2, joint accelerations 1 rad/s^2, shoe forces 5 N, moments
1 N m; the MAP's covariances are set to those variances. The baseline is plain inverse dynamics with the
same noisy inputs (pelvis acceleration, joint accelerations, shoe wrenches; nothing fused).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

from dynik_ros.estimation.base_velocity import BaseVelocityFromContacts
from dynik_ros.estimation.contact_classification import (
    DOUBLE,
    OnlineContactClassifier,
    classify_offline,
    state_from_flags,
)
from dynik_ros.estimation.map_dynamics import MapCovariances, MapDynamicsEstimator, plain_inverse_dynamics
from dynik_ros.estimation.synthetic_dynamics import FEET
from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth as _truth

NOISE = {"linear": 0.1, "angular": 0.5, "joint": 1.0, "force": 5.0, "moment": 1.0}
WEIGHT = 75.0 * 9.81


@functools.lru_cache(maxsize=4)
def human_dynamics_truth(scenario: str, duration: float, rate: float, kind: str = "human66"):
    """The ground truth, computed once per set of arguments (every section reads the same walk)."""
    return _truth(scenario, duration, rate, kind=kind)


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def run_map(robot, truth, estimator, link_acc, joint_acc, wrenches):
    taus, forces, times = [], [], []
    for k in range(len(truth.times)):
        start = time.perf_counter(), time.thread_time()
        e = estimator.estimate(
            truth.q[k], truth.v[k], link_acc[k], joint_acc[k], None if wrenches is None else wrenches[k],
            truth.contacts[k],
        )  # fmt: skip
        times.append((time.perf_counter() - start[0], time.thread_time() - start[1]))
        taus.append(e.tau)
        forces.append(e.wrenches)
    return np.array(taus), np.array(forces), np.array(times)


def noisy(truth, n_joints: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n, links = len(truth.times), len(truth.links)
    link_acc = truth.link_accelerations + np.concatenate(
        (rng.normal(0, NOISE["linear"], (n, links, 3)), rng.normal(0, NOISE["angular"], (n, links, 3))), 2
    )
    joint_acc = truth.a[:, 6:] + rng.normal(0, NOISE["joint"], (n, n_joints))
    wrenches = truth.wrenches + np.concatenate(
        (rng.normal(0, NOISE["force"], (n, 2, 3)), rng.normal(0, NOISE["moment"], (n, 2, 3))), 2
    )
    return link_acc, joint_acc, wrenches


def map_section(kind: str, duration: float, rate: float) -> tuple:
    robot, truth = human_dynamics_truth("walking", duration, rate, kind=kind)
    estimator = MapDynamicsEstimator(robot, truth.links, FEET)
    peak = np.abs(truth.tau).max()
    peak_joint = robot.joint_names[int(np.abs(truth.tau).max(axis=0).argmax())]
    acc, s_ddot = truth.link_accelerations, truth.a[:, 6:]
    tau, wr, times = run_map(robot, truth, estimator, acc, s_ddot, truth.wrenches)
    e_tau, e_wr = rms(tau - truth.tau), rms(wr - truth.wrenches)
    wall, cpu = 1e3 * np.percentile(times, [50, 99], axis=0).T
    print(f"\n{kind}: {len(truth.times)} samples at {rate:g} Hz, d = {estimator.size} unknowns ("
          f"{estimator.size - estimator.n} factorized, the torques in closed form), peak torque "
          f"{peak:.1f} N m ({peak_joint})")  # fmt: skip
    print(f"  MAP step [ms]                 wall p50 {wall[0]:.2f} p99 {wall[1]:.2f}; CPU of the thread p50 "
          f"{cpu[0]:.2f} p99 {cpu[1]:.2f}")  # fmt: skip
    print(f"  noise-free, shoes             torque RMSE {e_tau:.2e} N m ({100 * e_tau / peak:.1e} % of peak),"
          f" wrench RMSE {e_wr:.2e} ({100 * e_wr / WEIGHT:.1e} % of body weight)")  # fmt: skip
    tau0, wr0, _ = run_map(robot, truth, estimator, acc, s_ddot, None)
    one = truth.contacts.sum(axis=1) == 1
    e_one, e_two = rms(tau0[one] - truth.tau[one]), rms(tau0[~one] - truth.tau[~one])
    print(f"  noise-free, no shoes          single support: torque RMSE {e_one:.1e} N m; double support "
          f"(split unobservable, the prior decides): torque RMSE {e_two:.1f} N m, wrench "
          f"{rms(wr0[~one] - truth.wrenches[~one]):.1f}")  # fmt: skip
    link_acc, joint_acc, wrenches = noisy(truth, robot.n_joints)
    cov = MapCovariances(
        linear_acceleration=NOISE["linear"] ** 2, angular_acceleration=NOISE["angular"] ** 2,
        joint_acceleration=NOISE["joint"] ** 2, force=NOISE["force"] ** 2, moment=NOISE["moment"] ** 2,
    )  # fmt: skip
    noisy_estimator = MapDynamicsEstimator(robot, truth.links, FEET, cov)
    tau_n, wr_n, _ = run_map(robot, truth, noisy_estimator, link_acc, joint_acc, wrenches)
    plain = np.array([
        plain_inverse_dynamics(robot, truth.q[k], truth.v[k], "Pelvis", link_acc[k, 0], joint_acc[k], FEET,
                               wrenches[k])
        for k in range(len(truth.times))
    ])  # fmt: skip
    legs = [i for i, j in enumerate(robot.joint_names) if any(s in j for s in ("Hip", "Knee", "Ankle"))]
    e_map, e_plain = rms(tau_n - truth.tau), rms(plain - truth.tau)
    e_map_legs, e_plain_legs = (
        rms(tau_n[:, legs] - truth.tau[:, legs]),
        rms(plain[:, legs] - truth.tau[:, legs]),
    )
    print(f"  with noise                    torque RMSE MAP {e_map:.2f} N m vs plain ID {e_plain:.2f} N m "
          f"({e_plain / e_map:.1f}x); legs {e_map_legs:.2f} vs {e_plain_legs:.2f}; wrench RMSE MAP "
          f"{rms(wr_n - truth.wrenches):.2f} vs shoes {rms(wrenches - truth.wrenches):.2f}")  # fmt: skip
    return robot, truth, tau_n, times


def base_velocity_section(duration: float, rate: float) -> None:
    from dynik_ros.retarget.human import synthetic_human_motion

    robot, truth = human_dynamics_truth("walking", duration, rate)
    motion = synthetic_human_motion("walking", duration, rate)
    estimator = BaseVelocityFromContacts(robot, FEET)
    lin, ang, slide = [], [], []
    feet = [motion.links.index(f) for f in FEET]
    for k in range(len(truth.times)):
        linear, angular = estimator.estimate_world(truth.q[k], truth.v[k, 6:], truth.contacts[k])
        lin.append(linear - motion.linear_velocities[k, 0])
        ang.append(angular - motion.angular_velocities[k, 0])
        for f, on in zip(feet, truth.contacts[k], strict=True):
            if on:
                slide.append(np.linalg.norm(motion.linear_velocities[k, f]))
    print(f"\nbase velocity from the feet (eq. 8-10) vs the suit's pelvis velocity, synthetic walk: RMSE "
          f"linear {rms(np.array(lin)):.3f} m/s, angular {rms(np.array(ang)):.3f} rad/s\n  (the synthetic "
          f"walk is not planted: a loaded foot moves at {np.mean(slide):.2f} m/s on average)")  # fmt: skip


def full_form_section(duration: float, rate: float) -> None:
    """The seed's full per-link form of d (eq. 14-23, sparse) against the compact form and the truth."""
    from dynik_ros.estimation.map_full import FullMapDynamicsEstimator

    robot, truth = human_dynamics_truth("walking", duration, rate)
    full = FullMapDynamicsEstimator(robot, truth.links, FEET)
    compact = MapDynamicsEstimator(robot, truth.links, FEET)
    acc, s_ddot = truth.link_accelerations, truth.a[:, 6:]
    tau, _, times = run_map(robot, truth, full, acc, s_ddot, truth.wrenches)
    tau_c, _, _ = run_map(robot, truth, compact, acc, s_ddot, truth.wrenches)
    link_acc, joint_acc, wrenches = noisy(truth, robot.n_joints)
    cov = MapCovariances(
        linear_acceleration=NOISE["linear"] ** 2, angular_acceleration=NOISE["angular"] ** 2,
        joint_acceleration=NOISE["joint"] ** 2, force=NOISE["force"] ** 2, moment=NOISE["moment"] ** 2,
    )  # fmt: skip
    tau_n, _, _ = run_map(robot, truth, FullMapDynamicsEstimator(robot, truth.links, FEET, cov), link_acc,
                          joint_acc, wrenches)  # fmt: skip
    wall, cpu = 1e3 * np.percentile(times, [50, 99], axis=0).T
    print(f"\nfull form (eq. 14-23, d = {full.size} unknowns, scipy.sparse SuperLU), Human66: step wall p50 "
          f"{wall[0]:.2f} p99 {wall[1]:.2f} ms, CPU p50 {cpu[0]:.2f} ms; noise-free torque RMSE "
          f"{rms(tau - truth.tau):.1e} N m, vs the compact form {rms(tau - tau_c):.1e} N m; with noise "
          f"{rms(tau_n - truth.tau):.2f} N m")  # fmt: skip


def pipeline_section(duration: float, rate: float) -> None:
    """What dynamics_node runs per sample, from the suit's link states (Human66 by eq. 6 in closed form,
    central differences for the accelerations) and the shoes."""
    from dynik_ros.estimation.dynamics_pipeline import HumanDynamicsPipeline
    from dynik_ros.estimation.suit_kinematics import SuitSample
    from dynik_ros.retarget.human import synthetic_human_motion

    robot, truth = human_dynamics_truth("walking", duration, rate)
    motion = synthetic_human_motion("walking", duration, rate)
    pipeline = HumanDynamicsPipeline(robot)
    taus, index, times = [], [], []
    for k in range(len(motion.times)):
        sample = SuitSample(
            motion.times[k], motion.positions[k], motion.rotations[k], motion.linear_velocities[k],
            motion.angular_velocities[k], k,
        )  # fmt: skip
        start = time.perf_counter(), time.thread_time()
        out = pipeline.push(sample, truth.wrenches[k])
        times.append((time.perf_counter() - start[0], time.thread_time() - start[1]))
        if out is not None:
            taus.append(out.tau)
            index.append(out.stamp_ns)
    error = rms(np.array(taus) - truth.tau[index])
    wall, cpu = 1e3 * np.percentile(times, [50, 99], axis=0).T
    print(f"\npipeline from the link states (dynamics_node's step), Human66 at {rate:g} Hz: step wall "
          f"p50 {wall[0]:.2f} p99 {wall[1]:.2f} ms, CPU p50 {cpu[0]:.2f} p99 {cpu[1]:.2f} ms; torque RMSE "
          f"{error:.4f} N m (central differences)")  # fmt: skip


def _norms(x: np.ndarray) -> str:
    """Mean +- standard deviation over the samples of the per-sample norm (the seed's Table 4)."""
    n = np.linalg.norm(x.reshape(len(x), -1), axis=1)
    return f"{n.mean():8.2e} +- {n.std():7.1e}"


def fixed_base_section(duration: float, rate: float) -> None:
    """Sec. 4.4: fixed-base (a foot rooted in the world) vs floating-base (pelvis, eq. 8-10) MAP on the
    planted tasks analogous to the seed's T1-T3, noise-free and noisy, both against the truth; and the
    fixed base on the (sliding) synthetic walk."""
    from dynik_ros.estimation.fixed_base import FixedBaseMapEstimator, fixed_vs_floating
    from dynik_ros.estimation.synthetic_dynamics import planted_dynamics_truth

    cov = MapCovariances(
        linear_acceleration=NOISE["linear"] ** 2, angular_acceleration=NOISE["angular"] ** 2,
        joint_acceleration=NOISE["joint"] ** 2, force=NOISE["force"] ** 2, moment=NOISE["moment"] ** 2,
    )  # fmt: skip
    print(f"\nfixed-base vs floating-base MAP (sec. 4.4, Table 4: mean +- std over samples of the norm), "
          f"Human66, {duration:g} s at {rate:g} Hz; tasks: T1 double support (squat, weight sways), T2 right "
          f"foot planted, T3 left (walk angles 4x slower, other leg swinging)")  # fmt: skip
    for task, base, label in (("double", "LeftFoot", "T1"), ("right", "RightFoot", "T2"),
                              ("left", "LeftFoot", "T3")):  # fmt: skip
        robot, truth = planted_dynamics_truth(task, duration, rate)
        link_acc, joint_acc, wrenches = noisy(truth, robot.n_joints)
        for noise, args, c in (
            ("noise-free", (truth.link_accelerations, truth.a[:, 6:], truth.wrenches), None),
            ("noisy", (link_acc, joint_acc, wrenches), cov),
        ):
            r = fixed_vs_floating(robot, truth.q, truth.v[:, 6:], truth.contacts, base, *args, truth.links,
                                  FEET, c)  # fmt: skip
            fx, fl = r["fixed"], r["floating"]
            print(f"  {label} ({base} fixed), {noise}:\n"
                  f"    |e(tau)| fixed-floating {_norms(fx['tau'] - fl['tau'])} N m; vs truth: fixed "
                  f"{_norms(fx['tau'] - truth.tau)}, floating {_norms(fl['tau'] - truth.tau)}\n"
                  f"    |e(f_x)| {_norms(fx['wrenches'][:, :, :3] - fl['wrenches'][:, :, :3])} N, |e(m_x)| "
                  f"{_norms(fx['wrenches'][:, :, 3:] - fl['wrenches'][:, :, 3:])} N m, |e(s_ddot)| "
                  f"{_norms(fx['nu_dot'][:, 6:] - fl['nu_dot'][:, 6:])} rad/s^2, |e(a_lin)| "
                  f"{_norms(fx['pelvis'] - fl['pelvis'])} m/s^2")  # fmt: skip
    robot, truth = human_dynamics_truth("walking", duration, rate)
    fixed = FixedBaseMapEstimator(robot, truth.links, FEET)
    tau = np.array([
        fixed.estimate(truth.q[k], truth.v[k, 6:], FEET[int(np.argmax(truth.shares[k]))],
                       truth.link_accelerations[k], truth.a[k, 6:], truth.wrenches[k], truth.contacts[k]).tau
        for k in range(len(truth.times))
    ])  # fmt: skip
    print(
        f"  synthetic walk (its loaded foot slides), noise-free, fixed base switched to the loaded foot: "
        f"torque RMSE {rms(tau - truth.tau):.2f} N m (floating base: the MAP section's noise-free figure)"
    )


def planted_link_motion(task: str, duration: float, rate: float):
    """The suit's view (23 links by forward kinematics) of a planted task at walking pace (the right or
    left foot still, the walk's joint angles): ground truth for the base feed-forward from contacts."""
    import pinocchio as pin

    from dynik_ros.estimation.synthetic_dynamics import planted_motion
    from dynik_ros.models.human import XSENS_SEGMENTS
    from dynik_ros.motion.synthetic import Motion
    from dynik_ros.retarget.human import human_model, human_tpose

    robot = human_model("human66")
    foot = "LeftFoot" if task == "left" else "RightFoot"
    placement = pin.SE3(np.eye(3), np.asarray(human_tpose()[foot][0], dtype=float))
    times = np.arange(int(round(duration * rate))) / rate
    q, v, _ = planted_motion(robot, task, times, placement, slowdown=1.0)
    model, data = robot.model, robot.model.createData()
    ids = [robot.frame_id(n) for n in XSENS_SEGMENTS]
    n, nl = len(times), len(ids)
    pos, rot, lin, ang = (
        np.zeros((n, nl, 3)),
        np.zeros((n, nl, 3, 3)),
        np.zeros((n, nl, 3)),
        np.zeros((n, nl, 3)),
    )
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for k in range(n):
        pin.forwardKinematics(model, data, q[k], v[k])
        pin.updateFramePlacements(model, data)
        for i, fid in enumerate(ids):
            pos[k, i], rot[k, i] = data.oMf[fid].translation, data.oMf[fid].rotation
            twist = pin.getFrameVelocity(model, data, fid, lwa)
            lin[k, i], ang[k, i] = twist.linear, twist.angular
    return Motion(f"planted_{task}", rate, times, list(XSENS_SEGMENTS), pos, rot, lin, ang, q, v)


def track_with_feed_forward(motion, source: str, rate: float, contacts=None) -> dict[str, np.ndarray]:
    """Human66's dynamical IK tracking ``motion`` with the pelvis feed-forward from ``source``; per sample
    the base position error and the joint-angle RMSE against the truth, and the contact flags used
    (``contacts`` ``(N, 2)``: given, e.g. by the shoes; default: the kinematic rule on the suit's feet)."""
    from dynik_ros.core.dynamical_ik import DynamicalIK
    from dynik_ros.estimation.base_feedforward import BaseFeedForward
    from dynik_ros.models.assets import human_tracking_targets
    from dynik_ros.retarget.human import human_model

    robot, targets = human_model("human66"), human_tracking_targets()
    feed_forward = BaseFeedForward.for_human(robot, targets, source)
    ik = DynamicalIK(robot, targets, q0=motion.q[0])
    base, joints, flags = [], [], []
    for k, m in enumerate(motion.measurements(targets)):
        poses, twists = motion.link_sample(k)
        flag = feed_forward.contacts_from_links(poses, twists) if contacts is None else contacts[k]
        q, _ = ik.step(feed_forward.apply(m, ik.q, flag, ik.joint_velocities), 1.0 / rate)
        base.append(np.linalg.norm(q[:3] - motion.q[k, :3]))
        joints.append(rms(q[7:] - motion.q[k, 7:]))
        flags.append(flag)
    return {"base": np.array(base), "joints": np.array(joints), "contacts": np.array(flags)}


def feed_forward_section(duration: float, rate: float, plot_path: Path | None = None) -> None:
    """The IK's pelvis feed-forward from the suit, from the feet in contact (eq. 8-10) or none, on the
    synthetic walk (its feet slide) and the planted task T2 at walking pace (the right foot still)."""
    from dynik_ros.retarget.human import synthetic_human_motion

    planted = planted_link_motion("right", duration, rate)
    motions = {  # contacts: the kinematic rule on the suit's feet; the planted task's from its truth
        "synthetic walk": (synthetic_human_motion("walking", duration, rate), None),
        "planted walk angles (right foot still)": (planted, np.tile([True, False], (len(planted.times), 1))),
    }
    settle = int(round(0.5 * rate))
    print(f"\nIK base feed-forward (base_velocity_source), Human66 tracking {duration:g} s at {rate:g} Hz, "
          f"errors after 0.5 s against the forward-kinematics truth:")  # fmt: skip
    results = {}
    for label, (motion, contacts) in motions.items():
        for source in ("suit", "contacts", "none"):
            r = track_with_feed_forward(motion, source, rate, contacts)
            results[label, source] = r
            base = 1e3 * r["base"][settle:]
            print(f"  {label:40s} {source:8s}: base position error mean {base.mean():6.1f} "
                  f"mm, max {base.max():6.1f} mm; joint RMSE "
                  f"{np.degrees(r['joints'][settle:].mean()):.2f} deg; a foot in contact on "
                  f"{100 * r['contacts'].any(axis=1).mean():.0f} % of samples")  # fmt: skip
    if plot_path is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot")
        return
    fig, axes = plt.subplots(len(motions), 1, figsize=(8, 6), sharex=True)
    for ax, (label, (motion, _)) in zip(axes, motions.items(), strict=True):
        for source, style in (("suit", "k"), ("contacts", "b"), ("none", "r")):
            ax.plot(motion.times, 1e3 * results[label, source]["base"], style, label=source)
        ax.set_title(label, fontsize=9)
        ax.set_ylabel("base position error [mm]")
    axes[0].legend(title="base_velocity_source", fontsize=8)
    axes[-1].set_xlabel("t [s]")
    fig.suptitle(
        "Human66 dynamical IK: pelvis feed-forward from the suit, the feet in contact (eq. 8-10), none"
    )
    fig.tight_layout()
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(plot_path, dpi=100)
    print(f"wrote {plot_path}")


def contact_section(duration: float, rate: float) -> None:
    robot, truth = human_dynamics_truth("walking", duration, rate)
    fz = truth.vertical_forces(robot)
    states = np.array([state_from_flags(*f) for f in truth.contacts])
    single = states != DOUBLE
    line = "\ncontact classification on the walk (truth: a foot carries load):"
    for fraction in (0.5, 1.0):
        c = classify_offline(fz[:, 0], fz[:, 1], fraction)
        line += (f"\n  Algorithm 1 fraction {fraction:g}: single-support samples right "
                 f"{100 * np.mean(c[single] == states[single]):.1f} %, double-support samples called double "
                 f"{100 * np.mean(c[~single] == DOUBLE):.1f} %")  # fmt: skip
    online = OnlineContactClassifier().run(fz[:, 0], fz[:, 1])
    line += f"\n  online (10 %/5 % of the running weight): {100 * np.mean(online == states):.1f} % of samples"
    print(line)


def plot(path: Path, robot, truth, tau_estimate: np.ndarray, rate: float) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot")
        return
    cycle = truth.times < 1.1 + 0.5 / rate
    fig, axes = plt.subplots(3, 2, figsize=(9, 7), sharex=True)
    for col, side in enumerate(("Right", "Left")):
        for row, joint in enumerate(("Hip", "Knee", "Ankle")):
            i = robot.joint_index(f"j{side}{joint}_roty")
            ax = axes[row, col]
            ax.plot(truth.times[cycle], np.degrees(truth.q[cycle, 7 + i]), "k", label="angle [deg]")
            twin = ax.twinx()
            twin.plot(truth.times[cycle], truth.tau[cycle, i], color="0.6", lw=3, label="true torque")
            twin.plot(truth.times[cycle], tau_estimate[cycle, i], "b", lw=1, label="MAP torque (noisy input)")
            ax.set_title(f"{side.lower()} {joint.lower()} (y)", fontsize=9)
            ax.set_ylabel("s [deg]")
            twin.set_ylabel("tau [N m]", color="b")
            if row == 2:
                ax.set_xlabel("t [s]")
    handles = (
        axes[0, 0].get_legend_handles_labels()[0] + axes[0, 0].figure.axes[-1].get_legend_handles_labels()[0]
    )
    fig.legend(handles, ["angle", "true torque", "MAP torque (noisy input)"], loc="lower center", ncol=3)
    fig.suptitle(
        "Human66, synthetic walk: leg angles and torques over one gait cycle (cf. Latella 2019 Fig. 10)"
    )
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"\nwrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: one gait cycle, Human66 only")
    parser.add_argument("--duration", type=float, default=11.0, help="walk duration [s] (default 11)")
    parser.add_argument("--rate", type=float, default=60.0, help="suit rate [Hz] (default 60)")
    parser.add_argument("--plot", type=Path, help="write the Fig. 10-style PNG here")
    parser.add_argument(
        "--plot-feed-forward", type=Path, help="write the IK base feed-forward comparison PNG here"
    )
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1" and argv is None:
        # "on one core" (issue 13's target): a multi-threaded BLAS on a loaded machine costs 10x at p99
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    if not (args.duration > 0 and args.rate > 0):
        parser.error("duration and rate must be positive")
    duration = 1.1 if args.quick else args.duration
    robot, truth, tau, _ = map_section("human66", duration, args.rate)
    if not args.quick:
        map_section("human48", duration, args.rate)
    full_form_section(0.25 if args.quick else min(duration, 2.2), args.rate)
    pipeline_section(duration, args.rate)
    fixed_base_section(1.1 if args.quick else 4.4, 30.0 if args.quick else args.rate)
    base_velocity_section(duration, args.rate)
    feed_forward_section(1.1 if args.quick else 4.4, args.rate, args.plot_feed_forward)
    contact_section(duration, args.rate)
    if args.plot:
        plot(args.plot, robot, truth, tau, args.rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
