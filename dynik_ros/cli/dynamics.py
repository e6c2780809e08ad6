"""``dynik-dynamics``: human joint torques and foot wrenches offline, from a bag (the suit's link states and,
optionally, the shoes' ``WrenchStamped`` topics) or the synthetic walk (issue 13, Latella et al. 2019).

    dynik-dynamics --bag rec/ --out out/dynamics.npz --plot out/torques.png
    dynik-dynamics --bag rec/ --no-shoes                  # kinematic contact, no measured wrenches
    dynik-dynamics --synthetic walking --duration 5       # the synthetic walk with its true shoe readings

The same chain as ``dynamics_node`` (:class:`~dynik_ros.estimation.dynamics_pipeline.HumanDynamicsPipeline`).
The ``.npz`` holds ``times``, ``joint_names``, ``q``, ``tau``, ``wrenches`` (N, 2, 6: right, left foot,
foot frames), ``contact`` (0 none, 1 right, 2 left, 3 double) and ``from_shoes``. The plot is in the style
of the seed's Fig. 10: sagittal hip, knee and ankle angles and torques of both legs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from dynik_ros.estimation.contact_classification import STATE_NAMES
from dynik_ros.estimation.dynamics_pipeline import FEET, HumanDynamicsPipeline, PipelineConfig, ShoeBuffer
from dynik_ros.estimation.suit_kinematics import SuitSample

LEG_JOINTS = ("Hip", "Knee", "Ankle")


def _bag_samples(path: Path, topic: str, links: tuple[str, ...]) -> list[SuitSample]:
    from dynik_ros.io.bags import read_link_states

    samples, origin = [], None
    for index, (stamp, poses, twists) in enumerate(read_link_states(path, topic, stamp_ns=True)):
        origin = stamp if origin is None else origin
        missing = [n for n in links if n not in poses or n not in twists]
        if missing:
            raise ValueError(f"message {index} of '{topic}' in '{path}': no pose or twist for {missing[:4]}")
        samples.append(
            SuitSample(  # time from the first stamp: epoch seconds in a float keep only ~0.2 us
                (stamp - origin) * 1e-9,
                np.array([poses[n][0] for n in links]),
                np.array([poses[n][1] for n in links]),
                np.array([twists[n][0] for n in links]),
                np.array([twists[n][1] for n in links]),
                int(stamp),
            )
        )
    return samples


def _bag_shoes(path: Path, topics: list[str], max_age: float) -> ShoeBuffer:
    from dynik_ros.io.bags import read_messages

    buffer = ShoeBuffer(max_age, depth=10**7)
    for item in read_messages(path, topics):
        foot = topics.index(item.topic)
        msg = item.msg
        if msg.header.frame_id not in ("", FEET[foot]):
            raise ValueError(
                f"'{item.topic}' in '{path}': frame '{msg.header.frame_id}', expected {FEET[foot]}"
            )
        f, m = msg.wrench.force, msg.wrench.torque
        stamp = int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec)
        buffer.add(foot, stamp, np.array([f.x, f.y, f.z, m.x, m.y, m.z]))
    return buffer


def _synthetic(scenario: str, duration: float, rate: float, kind: str, height: float, mass: float):
    from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.motion.synthetic import synthesize

    robot, truth = human_dynamics_truth(scenario, duration, rate, kind=kind, height=height, mass=mass)
    standing = pelvis_height(Subject(height=height, mass=mass))
    motion = synthesize(robot, scenario, duration, rate, list(XSENS_SEGMENTS), standing)
    samples = [
        SuitSample(
            motion.times[k], motion.positions[k], motion.rotations[k], motion.linear_velocities[k],
            motion.angular_velocities[k], int(round(motion.times[k] * 1e9)),
        )
        for k in range(len(motion.times))
    ]  # fmt: skip
    buffer = ShoeBuffer(0.5 / rate, depth=len(samples) + 1)
    for k, sample in enumerate(samples):
        for f in range(2):
            buffer.add(f, sample.stamp_ns, truth.wrenches[k, f])
    return samples, buffer, truth


def plot_legs(path: Path, times: np.ndarray, joint_names: list[str], q: np.ndarray, tau: np.ndarray) -> bool:
    """Fig. 10 style PNG; ``False`` when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(3, 2, figsize=(9, 7), sharex=True)
    for col, side in enumerate(("Right", "Left")):
        for row, joint in enumerate(LEG_JOINTS):
            i = joint_names.index(f"j{side}{joint}_roty")
            ax = axes[row, col]
            ax.plot(times, np.degrees(q[:, i]), "k")
            ax.set_ylabel("s [deg]")
            twin = ax.twinx()
            twin.plot(times, tau[:, i], "b")
            twin.set_ylabel("tau [N m]", color="b")
            ax.set_title(f"{side.lower()} {joint.lower()} (y)", fontsize=9)
        axes[2, col].set_xlabel("t [s]")
    fig.suptitle("Joint angles (black) and estimated torques (blue), cf. Latella et al. 2019, Fig. 10")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dynik-dynamics", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bag", type=Path, help="rosbag2 (mcap or sqlite3) with the suit's link states")
    source.add_argument("--synthetic", choices=("tpose", "walking", "running"), help="a synthetic motion")
    parser.add_argument(
        "--topic", default="/human/link_states", help="link-state topic (default: %(default)s)"
    )
    parser.add_argument(
        "--shoes", default="/human/shoes/right,/human/shoes/left",
        help="right,left WrenchStamped topics in the bag (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--no-shoes", action="store_true", help="ignore the shoes: kinematic contact only")
    parser.add_argument("--max-shoe-age", type=float, default=0.02, help="[s] (default: %(default)s)")
    parser.add_argument("--base-velocity", choices=("suit", "contacts"), default="suit")
    parser.add_argument("--model", choices=("human66", "human48"), default="human66", help="human model")
    parser.add_argument("--height", type=float, default=1.75, help="subject height [m]")
    parser.add_argument("--mass", type=float, default=75.0, help="subject mass [kg]")
    parser.add_argument("--duration", type=float, default=5.5, help="synthetic: seconds (default 5.5)")
    parser.add_argument("--rate", type=float, default=60.0, help="synthetic: Hz (default 60)")
    parser.add_argument("--out", type=Path, help="write the estimates (.npz)")
    parser.add_argument("--plot", type=Path, help="write the Fig. 10-style PNG")
    args = parser.parse_args(argv)
    from dynik_ros.models.human import Subject
    from dynik_ros.retarget.human import human_model

    try:
        Subject(height=args.height, mass=args.mass)
        if not (args.duration > 0 and args.rate > 0 and args.max_shoe_age >= 0):
            raise ValueError("--duration and --rate must be positive, --max-shoe-age >= 0")
        if args.out is not None and args.out.suffix != ".npz":
            raise ValueError(f"--out must end in .npz, got '{args.out}'")
        robot = human_model(args.model, args.height, args.mass)
        config = PipelineConfig(args.height, args.mass, base_velocity=args.base_velocity)
        pipeline = HumanDynamicsPipeline(robot, config)
        truth = None
        if args.bag is not None:
            samples = _bag_samples(args.bag, args.topic, pipeline.links)
            topics = [t.strip() for t in args.shoes.split(",")]
            if len(topics) != 2 or not all(topics):
                raise ValueError(f"--shoes needs two topics 'right,left', got '{args.shoes}'")
            shoes = None if args.no_shoes else _bag_shoes(args.bag, topics, args.max_shoe_age)
        else:
            samples, shoes, truth = _synthetic(
                args.synthetic, args.duration, args.rate, args.model, args.height, args.mass
            )
            shoes = None if args.no_shoes else shoes
    except (ValueError, FileNotFoundError) as exc:
        print(f"dynik-dynamics: {exc}", file=sys.stderr)
        return 2
    if len(samples) < 3:
        print(f"dynik-dynamics: {len(samples)} link-state samples; need at least 3", file=sys.stderr)
        return 2
    start = time.perf_counter()
    outputs = []
    lookup = (lambda s: shoes.at(s.stamp_ns)) if shoes is not None else None
    for sample in samples:
        try:
            out = pipeline.push(sample, lookup)
        except ValueError as exc:
            print(f"dynik-dynamics: sample at {sample.time:.6f} s: {exc}", file=sys.stderr)
            return 2
        if out is not None:
            outputs.append(out)
    elapsed = time.perf_counter() - start
    times = np.array([o.stamp_ns for o in outputs]) * 1e-9
    tau = np.array([o.tau for o in outputs])
    q = np.array([o.q[7:] for o in outputs])
    wrenches = np.array([o.wrenches for o in outputs])
    contact = np.array([o.state for o in outputs])
    names = list(robot.joint_names)
    per_sample = 1e3 * elapsed / len(samples)
    used = sum(o.from_shoes for o in outputs)
    print(
        f"{len(samples)} suit samples, {len(outputs)} estimates ({per_sample:.2f} ms a sample), "
        f"shoes used on {used}"
    )
    print(
        "contact: " + ", ".join(f"{STATE_NAMES[s]} {100 * np.mean(contact == s):.0f} %" for s in STATE_NAMES)
    )
    for joint in LEG_JOINTS:
        peaks = [np.abs(tau[:, names.index(f"j{side}{joint}_roty")]).max() for side in ("Right", "Left")]
        print(f"peak |tau| {joint.lower():5s} (y): right {peaks[0]:.1f} N m, left {peaks[1]:.1f} N m")
    if truth is not None:
        index = [int(round(t * args.rate)) for t in times]
        error = float(np.sqrt(np.mean((tau - truth.tau[index]) ** 2)))
        print(
            f"against the ground truth: torque RMSE {error:.4f} N m (peak {np.abs(truth.tau).max():.1f} N m)"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            args.out, times=times, joint_names=np.array(names), q=q, tau=tau, wrenches=wrenches,
            contact=contact, from_shoes=np.array([o.from_shoes for o in outputs]),
        )  # fmt: skip
        print(f"wrote {args.out}")
    if args.plot is not None:
        if plot_legs(args.plot, times - times[0], names, q, tau):
            print(f"wrote {args.plot}")
        else:
            print("matplotlib not available: no plot", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
