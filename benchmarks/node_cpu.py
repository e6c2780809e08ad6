"""CPU per sample of each node on the hot path, in one process and fed directly, with cProfile tables.

**Pipeline** (one process, one rclpy context, real DDS in a private domain, the executor ``dynik-ros run``
uses: the EventsExecutor on Kilted, ``--executor single`` for the classic one): wearable_node (synthetic
Human66 walk, real time) -> ik_node (Human66, markers on) -> bridge_node (forward commands, all 66 joints),
a probe taking the commands. Every callback of the three nodes is wrapped with ``time.thread_time()``
(the CPU of the thread running it) and ``time.perf_counter()`` (wall), summed per node and divided by the
samples that node handled (published, received, commanded); the process's CPU time per published sample and
over the wall time (the share of one core the whole pipeline used: callbacks, the executor, DDS threads).

**ik_node alone**: the same link states serialized once and handed to ik_node's subscription callback in a
loop (no executor, no subscriber), its marker timer every 8th sample (30 Hz at 240 Hz) and its diagnostics
once a second of samples: the node's own CPU per sample, free of the executor and of DDS delivery.

CPU time is what the targets are about, and far less sensitive to the other work on a shared machine than
wall time (which counts the time other processes held the core): both are printed, with the load average.
``--profile N`` adds a cProfile table (top N functions by own time) per node, from a separate pass (the
profiler's overhead would inflate the timed figures); ``--sections`` times ik_node's sections alone without a
profiler (:mod:`dynik_ros.bench.sections`). ``--compare-messages`` repeats the pipeline with the
outputs built as Python messages (the code before ``nodes/cdr_writer.py``) and times the output paths alone,
alternating in rounds, as in the issue 10 table.

    python benchmarks/node_cpu.py [--quick] [--rate 240] [--duration 10] [--executor events|single]
                                  [--profile N] [--compare-messages] [--sections]

Targets (issue 10): ik_node <= 1.2 ms CPU per sample at 240 Hz with markers on; the pipeline <= 40 % of
one core. Timing on a shared machine is a report, not a pass/fail criterion.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import os
import pstats
import time
from collections import defaultdict
from typing import Any

CALLBACKS = {
    "wearable_node": ("_on_timer", "_on_ack", "_publish_diagnostics"),
    "ik_node": ("_on_link_states", "_on_marker_timer", "publish_diagnostics"),
    "bridge_node": ("_on_input", "_on_timer", "_on_robot_state", "publish_diagnostics"),
}


def _timed(cpu: dict[str, float], wall: dict[str, float], node: str, function: Any, profile: Any) -> Any:
    @functools.wraps(function)  # the EventsExecutor reads a timer callback's signature
    def wrapper(*args: Any) -> Any:
        if profile is not None:
            profile.enable()
        start, start_wall = time.thread_time(), time.perf_counter()
        try:
            return function(*args)
        finally:
            cpu[node] += time.thread_time() - start
            wall[node] += time.perf_counter() - start_wall
            if profile is not None:
                profile.disable()

    return wrapper


def profile_table(profile: cProfile.Profile, count: int, samples: int) -> str:
    """The ``count`` functions with the most own time, per sample (us), from ``profile``."""
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:count]  # type: ignore[attr-defined]
    out = io.StringIO()
    out.write(f"    {'own us/sample':>13s} {'cum us/sample':>13s} {'calls/sample':>12s}  function\n")
    for (path, line, name), (_cc, calls, own, cumulative, _callers) in rows:
        where = f"{os.path.basename(path)}:{line}({name})" if line else name
        out.write(
            f"    {own / samples * 1e6:13.1f} {cumulative / samples * 1e6:13.1f} "
            f"{calls / samples:12.2f}  {where}\n"
        )
    return out.getvalue()


def _message_path() -> None:
    """Make the nodes build messages instead of publishing their serialized templates."""
    from dynik_ros.nodes import bridge_node, ik_node, wearable_node

    def as_message(publisher: Any, data: bytes, message: Any) -> None:
        publisher.publish(message())

    for module in (bridge_node, ik_node, wearable_node):
        module.publish_serialized = as_message


def run_once(
    mode: str,
    rate: float,
    duration: float,
    domain_id: int,
    executor_kind: str = "events",
    profile: bool = False,
) -> dict[str, Any]:
    """The pipeline in one process for ``duration`` s; ``mode`` is ``serialized`` (what the nodes do) or
    ``messages``; with ``profile`` each node's callbacks run under its own cProfile profiler."""
    from dynik_ros.bench import walking_pipeline
    from dynik_ros.cli.run import spin_until
    from dynik_ros.nodes import bridge_node, ik_node, wearable_node

    saved = {m: m.publish_serialized for m in (bridge_node, ik_node, wearable_node)}
    if mode == "messages":
        _message_path()
    commands = [0]
    pipeline = walking_pipeline.start(
        domain_id,
        rate,
        duration,
        controller="cpu_bench",
        probe_name="cpu_probe",
        on_command=lambda _m: commands.__setitem__(0, commands[0] + 1),
    )
    wearable, ik, bridge, probe = pipeline.wearable, pipeline.ik, pipeline.bridge, pipeline.probe
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    profiles = {name: cProfile.Profile() for name in CALLBACKS} if profile else {}
    nodes = pipeline.nodes
    for node in nodes:  # before configure: the subscriptions and timers take these bound callbacks
        name = node.get_name()
        for callback in CALLBACKS[name]:
            setattr(node, callback, _timed(cpu, wall, name, getattr(node, callback), profiles.get(name)))
    try:
        walking_pipeline.configure(pipeline, executor_kind)
        executor = pipeline.executor
        end = time.perf_counter() + 2.0  # discovery
        spin_until(executor, probe, lambda: time.perf_counter() > end, 3.0)
        for node in nodes:
            node.trigger_activate()
        cpu.clear()
        wall.clear()
        wall0, process0 = time.perf_counter(), time.process_time()
        spin_until(executor, probe, lambda: wearable.finished, duration + 30.0)
        elapsed, process = time.perf_counter() - wall0, time.process_time() - process0
        for node in reversed(nodes):
            node.trigger_deactivate()
    finally:
        walking_pipeline.shut_down(pipeline)
        for module, function in saved.items():
            module.publish_serialized = function
    handled = {
        "wearable_node": wearable.published,
        "ik_node": ik.received,
        "bridge_node": bridge.commands_sent,
    }
    return {
        "mode": mode,
        "samples": wearable.published,
        "ik_steps": ik.steps,
        "commands": commands[0],
        "handled": handled,
        "per_sample_us": {name: cpu[name] / max(handled[name], 1) * 1e6 for name in CALLBACKS},
        "wall_per_sample_us": {name: wall[name] / max(handled[name], 1) * 1e6 for name in CALLBACKS},
        "core_share": process / elapsed,
        "process_per_sample_us": process / max(wearable.published, 1) * 1e6,
        "pace": wearable.published / rate / elapsed,
        "profiles": profiles,
    }


def ik_alone(
    rate: float, duration: float, domain_id: int, profile: bool = False, sections: Any = None
) -> dict[str, Any]:
    """ik_node (Human66, markers on) fed serialized link states straight into its subscription callback:
    thread CPU and wall per sample, markers every ``rate / 30`` samples, diagnostics once per ``rate``.
    ``sections``: a :class:`dynik_ros.bench.sections.SectionTimer` filled per section (``--sections``)."""
    import numpy as np
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.cdr_writer import LinkStatesWriter
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.wearable_sources import SyntheticSource

    warm = int(rate)  # the first second is not timed
    source = SyntheticSource("human66", "walking", duration + 1.0, rate, 0.0, 1)
    writer = LinkStatesWriter(source.names, "world")
    messages = [
        writer.serialize(
            int(source.stamps[k]) + 10**9, source.positions[k], source.quaternions[k], source.linear[k],
            source.angular[k],
        )
        for k in range(len(source))
    ]  # fmt: skip
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    parameters = [
        Parameter("model", value="human66"),
        Parameter("publish_markers", value=True),
        Parameter("max_future_stamp", value=0.0),  # stamps from the motion, not the clock
    ]
    node = IKNode("ik_node_alone", context=context, parameter_overrides=parameters)
    marker_every = max(1, round(rate / node.get_parameter("marker_rate").value))
    profiler = cProfile.Profile() if profile else None
    try:
        node.trigger_configure()
        node.trigger_activate()
        labels = None
        if sections is not None:
            from dynik_ros.bench.sections import instrument_ik_node

            labels = instrument_ik_node(node, sections)
        cpu = 0.0
        walls: list[float] = []
        for k, data in enumerate(messages):
            if k == warm and profiler is not None:
                profiler.enable()
            if k == warm and sections is not None:
                sections.clear()
            start, start_wall = time.thread_time(), time.perf_counter()
            node._on_link_states(data)
            if k % marker_every == 0:
                node._on_marker_timer()
            if k % int(rate) == 0:
                node.publish_diagnostics()
            if k >= warm:
                cpu += time.thread_time() - start
                walls.append(time.perf_counter() - start_wall)
        if profiler is not None:
            profiler.disable()
        steps = node.steps
        node.trigger_deactivate()
    finally:
        if sections is not None:
            sections.undo()
        node.destroy_node()
        rclpy.shutdown(context=context)
    timed = len(messages) - warm
    return {
        "samples": timed,
        "steps": steps,
        "cpu_us": cpu / timed * 1e6,
        "wall_us": sum(walls) / timed * 1e6,
        # the samples no other process interrupted: what a quiet machine would give
        "wall_p5_us": float(np.percentile(walls, 5)) * 1e6,
        "profile": profiler,
        "section_labels": labels,
    }


def output_paths(rounds: int, per_round: int, domain_id: int) -> dict[str, tuple[float, float]]:
    """Thread time (us) per sample of each node's outputs, ``(messages, serialized)``."""
    import numpy as np
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.context import Context
    from sensor_msgs.msg import JointState, MultiDOFJointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion
    from dynik_ros.core.robot_model import RobotModel
    from dynik_ros.models.assets import urdf_path
    from dynik_ros.nodes import cdr_writer
    from dynik_ros.nodes.common import RELIABLE_QOS, SENSOR_QOS
    from dynik_ros.nodes.conversions import float_array, joint_state_msg, link_states_to_msg, odometry_msg

    robot = RobotModel.from_urdf_file(urdf_path("human66"))
    names, n = robot.joint_names, robot.n_joints
    rng = np.random.default_rng(1)
    s, ds = rng.normal(size=(2, n))
    p, v, w = rng.normal(size=(3, 3))
    r = rotation_from_quaternion(np.array([0.1, 0.2, 0.3, 0.9]))
    links = [f"L{i}" for i in range(23)]
    lp, lv, lw = rng.normal(size=(3, 23, 3))
    lq = rng.normal(size=(23, 4))
    lq /= np.linalg.norm(lq, axis=1, keepdims=True)
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)
    node = rclpy.create_node("output_path_bench", context=context)
    pub_js = node.create_publisher(JointState, "/bench/js", RELIABLE_QOS)
    pub_odom = node.create_publisher(Odometry, "/bench/odom", RELIABLE_QOS)
    pub_links = node.create_publisher(MultiDOFJointState, "/bench/links", SENSOR_QOS)
    pub_cmd = node.create_publisher(Float64MultiArray, "/bench/cmd", RELIABLE_QOS)
    js, odom = cdr_writer.JointStateWriter(names), cdr_writer.OdometryWriter("world", "Pelvis")
    link_writer, cmd = cdr_writer.LinkStatesWriter(links, "world"), cdr_writer.Float64ArrayWriter(n)
    paths = {
        "ik_node (JointState 66 + Odometry)": (
            lambda: (
                pub_js.publish(joint_state_msg(1, names, s, ds)),
                pub_odom.publish(odometry_msg(1, "world", "Pelvis", p, r, v, w)),
            ),
            lambda: (
                pub_js.publish(js.serialize(1, s, ds)),
                pub_odom.publish(odom.serialize(1, p, quaternion_from_rotation(r), v, w)),
            ),
        ),
        "wearable_node (23 links)": (
            lambda: pub_links.publish(link_states_to_msg(1, links, lp, lq, lv, lw, "world")),
            lambda: pub_links.publish(link_writer.serialize(1, lp, lq, lv, lw)),
        ),
        "bridge_node (66 commands)": (
            lambda: pub_cmd.publish(Float64MultiArray(data=float_array(s))),
            lambda: pub_cmd.publish(cmd.serialize(s)),
        ),
    }
    totals = {name: [0.0, 0.0] for name in paths}
    try:
        for _ in range(rounds):
            for name, pair in paths.items():
                for i, path in enumerate(pair):
                    start = time.thread_time()
                    for _ in range(per_round):
                        path()
                    totals[name][i] += time.thread_time() - start
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
    count = rounds * per_round
    return {name: (a / count * 1e6, b / count * 1e6) for name, (a, b) in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 s per run (CI smoke run)")
    parser.add_argument("--rate", type=float, default=240.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument(
        "--executor", choices=("events", "single"), help="default: events where rclpy has it (dynik-ros run)"
    )
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile tables, top N per node")
    parser.add_argument(
        "--compare-messages", action="store_true", help="also with Python messages; output paths alone"
    )
    parser.add_argument(
        "--sections", action="store_true", help="ik_node alone: thread CPU per section, without a profiler"
    )
    args = parser.parse_args(argv)
    from dynik_ros.cli.run import events_executor_available

    executor = args.executor or ("events" if events_executor_available() else "single")
    duration = 3.0 if args.quick else args.duration
    domain = int(os.environ.get("ROS_DOMAIN_ID", str(50 + os.getpid() % 50)))
    print(
        f"Human66 at {args.rate:.0f} Hz, markers on, {duration:g} s, {executor} executor, "
        f"{os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} (CPU = thread/process time; wall counts other processes too)"
    )
    modes = ("messages", "serialized") if args.compare_messages else ("serialized",)
    results = [run_once(mode, args.rate, duration, domain, executor) for mode in modes]
    alone = ik_alone(args.rate, duration, domain)
    print("Pipeline in one process: per sample each node handled [us]")
    compared = f" {'CPU (messages)':>15s}" if len(modes) == 2 else ""
    print(f"  {'node':14s} {'CPU':>8s} {'wall':>8s}{compared}")
    final = results[-1]
    for name in CALLBACKS:
        extra = f" {results[0]['per_sample_us'][name]:15.0f}" if len(modes) == 2 else ""
        cpu, wall = final["per_sample_us"][name], final["wall_per_sample_us"][name]
        print(f"  {name:14s} {cpu:8.0f} {wall:8.0f}{extra}")
    for r in results:
        print(
            f"  {r['mode']:10s}: {r['samples']} samples, {r['ik_steps']} IK steps, {r['commands']} commands, "
            f"pace {r['pace']:.2f}x real time; process CPU {r['process_per_sample_us']:.0f} us/sample = "
            f"{100 * r['core_share']:.0f} % of one core"
        )
    print(
        f"ik_node alone (fed serialized link states, markers every {round(args.rate / 30)}th sample): "
        f"CPU {alone['cpu_us']:.0f} us/sample, wall {alone['wall_us']:.0f} us/sample (5th percentile "
        f"{alone['wall_p5_us']:.0f}), "
        f"{alone['steps']} steps"
    )
    if args.compare_messages:
        rounds, per_round = (5, 200) if args.quick else (20, 500)
        print(f"Output path alone (thread time per sample, us; {rounds} alternating rounds of {per_round}):")
        print(f"  {'outputs':36s} {'messages':>10s} {'serialized':>11s} {'ratio':>7s}")
        for name, (a, b) in output_paths(rounds, per_round, domain).items():
            print(f"  {name:36s} {a:10.1f} {b:11.1f} {b / a:7.2f}")
    if args.profile:
        profiled = run_once("serialized", args.rate, duration, domain, executor, profile=True)
        for name, profile in profiled["profiles"].items():
            handled = max(profiled["handled"][name], 1)
            print(f"cProfile, {name} in the pipeline ({handled} samples; profiler overhead included):")
            print(profile_table(profile, args.profile, handled), end="")
        solo = ik_alone(args.rate, duration, domain, profile=True)
        print(f"cProfile, ik_node alone ({solo['samples']} samples; profiler overhead included):")
        print(profile_table(solo["profile"], args.profile, solo["samples"]), end="")
    if args.sections:
        from dynik_ros.bench.sections import SectionTimer

        timer = SectionTimer()
        solo = ik_alone(args.rate, duration, domain, sections=timer)
        print(
            f"ik_node alone per section (thread CPU, no profiler; sections nest; the whole callback "
            f"{solo['cpu_us']:.0f} us/sample incl. the timers):"
        )
        print(timer.table(solo["samples"], solo["section_labels"]), end="")
    ik_us, share = final["per_sample_us"]["ik_node"], final["core_share"]
    print(
        f"  targets (CPU time): ik_node <= 1200 us/sample (pipeline {ik_us:.0f}, "
        f"alone {alone['cpu_us']:.0f}: "
        f"{'met' if max(ik_us, alone['cpu_us']) <= 1200 else 'missed'}), pipeline <= 40 % of a core "
        f"({100 * share:.0f} %: {'met' if share <= 0.4 else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
