"""``dynik-ros``'s command line: ``run <pipeline>`` (:func:`dynik_ros.cli.run.run_pipeline`) and ``list``.

``--rt-priority P`` runs the pipeline ``SCHED_FIFO`` at priority ``P`` in-process (the README's ``chrt -f
20 dynik-ros run ...`` without ``chrt``): the calling thread, which spins the executor, and every thread and
process started during the run (rclpy's DDS threads, the node processes of ``--processes``) inherit the
policy; normal scheduling is restored after the run. Refused (``EPERM``: no root, ``CAP_SYS_NICE`` or
``rtprio`` limit) the command exits with status 2 and says what is missing, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dynik_ros.bench.load import fifo_priority
from dynik_ros.cli.arguments import finite
from dynik_ros.cli.run import (
    EXECUTORS,
    PipelineError,
    RunInterrupted,
    available_pipelines,
    load_pipeline,
    parse_overrides,
    run_pipeline,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``dynik-ros`` argument parser (``run`` and ``list``)."""
    parser = argparse.ArgumentParser(prog="dynik-ros", description="Run dynik_ros pipelines in one process.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a pipeline (config/pipelines/<name>.yaml or a YAML path)")
    run.add_argument("pipeline")
    run.add_argument(
        "--param", action="append", default=[], metavar="[NODE.]NAME:=VALUE", help="parameter override"
    )
    run.add_argument("--out", default="out", help="directory for the output bag (default: out)")
    run.add_argument("--no-record", action="store_true", help="do not write a bag")
    run.add_argument("--duration", type=float, help="synthetic motion length / longest bag span [s]")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--offline", dest="offline", action="store_true", default=None, help="IK-paced replay")
    mode.add_argument("--realtime", dest="offline", action="store_false", help="publish at the sample rate")
    run.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="auto",
        help="auto (default): rclpy's EventsExecutor where available (Kilted), else single-threaded",
    )
    run.add_argument(
        "--processes",
        choices=("single", "per-node", "source-ik+bridge"),
        default="single",
        help="single (default): every node in this process; per-node: one process per node; "
        "source-ik+bridge: wearable_node and ik_node together, the bridge (and sim) apart",
    )
    run.add_argument("--timeout", type=finite(positive=True), default=600.0, help="wall-time limit [s]")
    run.add_argument("--domain-id", type=int, help="ROS domain id (default: $ROS_DOMAIN_ID)")
    run.add_argument(
        "--video",
        metavar="FILE",
        help="pipelines with sim_node: draw the simulated robot: .png (6 instants side by side), .gif or "
        ".mp4 (the run at 20 fps of sim time; ffmpeg from PATH or the imageio-ffmpeg wheel)",
    )
    run.add_argument(
        "--rt-priority",
        type=int,
        default=0,
        metavar="P",
        help="run the pipeline SCHED_FIFO at priority P (1-99), as 'chrt -f P dynik-ros run ...': this "
        "process's threads (executor, DDS) and the node processes it starts; needs root, CAP_SYS_NICE or an "
        "rtprio limit >= P (ulimit -r); 0 (default): normal scheduling",
    )
    sub.add_parser("list", help="list the pipelines")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run" and not 0 <= args.rt_priority <= 99:
        parser.error(f"--rt-priority must be 0 (off) or a SCHED_FIFO priority 1-99, got {args.rt_priority}")
    if args.command == "list":
        for name in available_pipelines():
            print(f"{name:20s} {load_pipeline(name).description}")
        return 0
    if args.video:
        try:
            sims = [e for e in load_pipeline(args.pipeline).nodes if e.executable == "sim_node"]
        except PipelineError as exc:
            print(f"dynik-ros: {exc}", file=sys.stderr)
            return 2
        if not sims or args.no_record:
            print("dynik-ros: --video needs a recorded run of a pipeline with sim_node", file=sys.stderr)
            return 2
        from dynik_ros.sim.render import check_video_path

        try:
            check_video_path(args.video)  # before the run: an MP4 without ffmpeg is refused at once
        except ValueError as exc:
            print(f"dynik-ros: {exc}", file=sys.stderr)
            return 2
    try:
        with fifo_priority(args.rt_priority):  # the threads and processes started inside inherit it
            metrics = run_pipeline(
                args.pipeline,
                parse_overrides(args.param),
                None if args.no_record else args.out,
                args.offline,
                duration=args.duration,
                executor=args.executor,
                timeout=args.timeout,
                domain_id=args.domain_id,
                processes=args.processes,
            )
    except PermissionError as exc:  # SCHED_FIFO refused (EPERM): before anything ran
        print(f"dynik-ros: --rt-priority: {exc}", file=sys.stderr)
        return 2
    except PipelineError as exc:
        print(f"dynik-ros: {exc}", file=sys.stderr)
        return 130 if isinstance(exc, RunInterrupted) else 2
    if args.video and "bag" in metrics and "sim" in metrics:
        from dynik_ros.sim.render import render_in_subprocess

        try:
            print(
                f"  video         {render_in_subprocess(metrics['bag'], metrics['sim']['robot'], args.video)}"
            )
        except RuntimeError as exc:
            print(f"dynik-ros: {exc}", file=sys.stderr)
            return 1
    return 1 if metrics.get("timed_out") else 0


if __name__ == "__main__":
    raise SystemExit(main())
