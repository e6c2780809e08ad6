"""``dynik-demo``: the README's main job.

By default: replay a synthetic 4 km/h walk (23 Xsens-like links) through the full ROS 2 pipeline in one
process (wearable_node -> ik_node retargeting to the Unitree G1 -> bridge_node), write the output bag and
print the metrics; the nodes talk over real DDS in a private domain on this machine only.
``--core``: the solver alone, tracking the walk on Human66 against the forward-kinematics ground truth.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from dynik_ros.core.dynamical_ik import DynamicalIK
from dynik_ros.core.metrics import TrackingEvaluator
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.models.assets import human_tracking_targets, urdf_path
from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
from dynik_ros.motion.synthetic import SCENARIOS, NoiseSpec, synthesize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dynik-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--core", action="store_true", help="solver only, on Human66, against ground truth")
    parser.add_argument("--pipeline", default="g1_retargeting", help="pipeline of config/pipelines/")
    parser.add_argument("--out", default="out/demo", help="directory for the output bag")
    parser.add_argument(
        "--domain-id",
        type=int,
        default=None,
        help="ROS domain id (default: a private one derived from the process id, so no robot listens)",
    )
    parser.add_argument("--model", default="human66", choices=("human66", "human48"), help="with --core")
    parser.add_argument("--scenario", default="walking", choices=SCENARIOS)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds")
    parser.add_argument("--rate", type=float, default=60.0, help="Hz")
    parser.add_argument("--gain", type=float, default=10.0, help="K of eq. (9), 1/s")
    parser.add_argument("--noise", type=float, default=0.0, help="orientation noise std, rad")
    args = parser.parse_args(argv)
    if not args.core:
        return run_full_pipeline(args)
    return track_on_human(args)


def run_full_pipeline(args: argparse.Namespace) -> int:
    """The ROS 2 pipeline, offline (deterministic), through :func:`dynik_ros.cli.run.run_pipeline`."""
    from dynik_ros.cli.run import PipelineError, run_pipeline

    domain = args.domain_id if args.domain_id is not None else 110 + os.getpid() % 100
    overrides = {"wearable_node.scenario": args.scenario, "wearable_node.rate": args.rate}
    try:
        metrics = run_pipeline(
            args.pipeline, overrides, args.out, offline=True, duration=args.duration, domain_id=domain
        )
    except PipelineError as exc:
        print(f"dynik-demo: {exc}")
        return 2
    return 1 if metrics.get("timed_out") else 0


def track_on_human(args: argparse.Namespace) -> int:
    """The dynamical IK alone on a human model, with errors against the forward-kinematics truth."""
    robot = RobotModel.from_urdf_file(urdf_path(args.model))
    targets = human_tracking_targets(args.gain)
    height = pelvis_height(Subject())
    noise = NoiseSpec(orientation=args.noise, angular_velocity=10 * args.noise) if args.noise else None
    motion = synthesize(
        robot, args.scenario, args.duration, args.rate, list(XSENS_SEGMENTS), height, noise=noise, seed=1
    )
    q0 = robot.neutral_configuration()
    q0[:3] = motion.positions[0, 0]
    ik = DynamicalIK(robot, targets, q0=q0)
    evaluator = TrackingEvaluator(robot, targets)
    dt = 1.0 / args.rate
    times, errors = [], []
    print(
        f"{args.model} ({robot.nv} velocity variables, {len(targets.targets)} targets) tracking "
        f"{args.scenario} for {args.duration:g} s at {args.rate:g} Hz"
    )
    print(f"{'t [s]':>6} {'MNTE':>10} {'omega RMSE':>11} {'pos RMSE [m]':>13} {'joint err [rad]':>16}")
    for k, m in enumerate(motion.measurements(targets)):
        start = time.perf_counter()
        q, v = ik.step(m, dt)
        times.append(time.perf_counter() - start)
        err = evaluator.evaluate(q, v, m)
        errors.append(err)
        if k % int(args.rate) == 0:
            joint_err = np.abs(q[7:] - motion.q[k, 7:]).max()
            print(
                f"{motion.times[k]:6.1f} {err.mnte:10.2e} {err.angular_velocity_rmse:11.2e} "
                f"{err.position_rmse:13.2e} {joint_err:16.2e}"
            )
    settled = errors[int(2 * args.rate) :] or errors
    t = np.array(times[1:]) * 1e3
    print(
        f"after the 2 s transient: MNTE {np.mean([e.mnte for e in settled]):.2e}, "
        f"angular-velocity RMSE {np.mean([e.angular_velocity_rmse for e in settled]):.2e} rad/s, "
        f"position RMSE {np.mean([e.position_rmse for e in settled]):.2e} m"
    )
    print(
        f"step time: mean {t.mean():.3f} ms, p50 {np.percentile(t, 50):.3f} ms, "
        f"p99 {np.percentile(t, 99):.3f} ms, max {t.max():.3f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
