"""CPU per sample of each node on the hot path, with outputs built as messages or serialized from templates.

One process, one rclpy context, real DDS (a private domain): wearable_node (synthetic Human66 walk, real
time) -> ik_node (Human66, markers on) -> bridge_node (forward commands, all 66 joints), a probe taking the
commands. Every callback of the three nodes is wrapped with ``time.thread_time()`` (the CPU of the thread
running it, whatever else the machine does), summed per node and divided by the samples published; the
process's CPU over wall time is the share of one core the whole pipeline used (DDS threads included).

Two runs in one invocation, for a ratio measured on the same machine at the same moment:

* ``messages``: every output built as a Python message and converted by rclpy (the code before
  ``nodes/cdr_writer.py``; the template is still filled, a few microseconds, so this slightly overstates it);
* ``serialized``: the template bytes published through rclpy's serialized path (what the nodes do).

Then the output path alone, which a loaded machine cannot blur: each node's per-sample outputs built and
published (a publisher with no subscriber) as messages and as serialized templates, alternating in rounds
so that both see the same load; thread time per sample and the ratio.

    python benchmarks/node_cpu.py [--quick] [--rate 240] [--duration 10]

Targets (issue 10): ik_node <= 1.2 ms CPU per sample at 240 Hz with markers on; the pipeline <= 40 % of
one core. Each node's CPU is divided by the samples it handled (published, received, commanded): on a
loaded machine ik_node takes fewer than were published. Timing on a shared machine is a report, not a
pass/fail criterion.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from typing import Any

CALLBACKS = {
    "wearable_node": ("_on_timer", "_on_ack", "_publish_diagnostics"),
    "ik_node": ("_on_link_states", "_on_marker_timer", "publish_diagnostics"),
    "bridge_node": ("_on_input", "_on_timer", "_on_robot_state", "publish_diagnostics"),
}


def _timed(cpu: dict[str, float], node: str, function: Any) -> Any:
    def wrapper(*args: Any) -> Any:
        start = time.thread_time()
        try:
            return function(*args)
        finally:
            cpu[node] += time.thread_time() - start

    return wrapper


def _message_path() -> None:
    """Make the nodes build messages instead of publishing their serialized templates."""
    from dynik_ros.nodes import bridge_node, ik_node, wearable_node

    def as_message(publisher: Any, data: bytes, message: Any) -> None:
        publisher.publish(message())

    for module in (bridge_node, ik_node, wearable_node):
        module.publish_serialized = as_message


def run_once(mode: str, rate: float, duration: float, domain_id: int) -> dict[str, Any]:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.cli.run import spin_until
    from dynik_ros.nodes import bridge_node, ik_node, wearable_node
    from dynik_ros.nodes.common import COMMAND_QOS

    saved = {m: m.publish_serialized for m in (bridge_node, ik_node, wearable_node)}
    if mode == "messages":
        _message_path()
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)

    def params(**values: Any) -> list[Parameter]:
        return [Parameter(k, value=v) for k, v in values.items()]

    wearable = wearable_node.WearableNode(
        context=context,
        parameter_overrides=params(
            source="synthetic", model="human66", scenario="walking", rate=rate, duration=duration,
            realtime=True, start_delay=0.5,
        ),
    )  # fmt: skip
    ik = ik_node.IKNode(context=context, parameter_overrides=params(model="human66", publish_markers=True))
    bridge = bridge_node.BridgeNode(
        context=context,
        parameter_overrides=params(model="human66", interface="forward_command", controller="cpu_bench"),
    )
    probe = rclpy.create_node("cpu_probe", context=context)
    commands = [0]
    probe.create_subscription(
        Float64MultiArray,
        "/cpu_bench/commands",
        lambda _m: commands.__setitem__(0, commands[0] + 1),
        COMMAND_QOS,
    )
    cpu: dict[str, float] = defaultdict(float)
    nodes = [bridge, ik, wearable]
    for node in nodes:  # before configure: the subscriptions and timers take these bound callbacks
        for name in CALLBACKS[node.get_name()]:
            setattr(node, name, _timed(cpu, node.get_name(), getattr(node, name)))
    executor = SingleThreadedExecutor(context=context)
    for node in [*nodes, probe]:
        executor.add_node(node)
    try:
        for node in nodes:
            node.trigger_configure()
        for node in nodes:
            if node.lifecycle_state != "inactive":
                raise RuntimeError(f"{node.get_name()}: configure failed: {node.last_error}")
        end = time.perf_counter() + 2.0  # discovery
        spin_until(executor, probe, lambda: time.perf_counter() > end, 3.0)
        for node in nodes:
            node.trigger_activate()
        cpu.clear()
        wall0, process0 = time.perf_counter(), time.process_time()
        spin_until(executor, probe, lambda: wearable.finished, duration + 30.0)
        wall, process = time.perf_counter() - wall0, time.process_time() - process0
        for node in reversed(nodes):
            node.trigger_deactivate()
    finally:
        for node in [*nodes, probe]:
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
        rclpy.shutdown(context=context)
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
        "per_sample_us": {name: cpu[name] / max(handled[name], 1) * 1e6 for name in CALLBACKS},
        "core_share": process / wall,
        "process_per_sample_us": process / max(wearable.published, 1) * 1e6,
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
    parser.add_argument("--quick", action="store_true", help="3 s per mode (CI smoke run)")
    parser.add_argument("--rate", type=float, default=240.0)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args(argv)
    duration = 3.0 if args.quick else args.duration
    domain = int(os.environ.get("ROS_DOMAIN_ID", str(50 + os.getpid() % 50)))
    results = [run_once(mode, args.rate, duration, domain) for mode in ("messages", "serialized")]
    print(f"CPU per sample handled by each node (thread time, us), Human66 at {args.rate:.0f} Hz, markers on")
    print(f"  {'node':14s} {'messages':>10s} {'serialized':>11s} {'ratio':>7s}")
    for name in CALLBACKS:
        a, b = (r["per_sample_us"][name] for r in results)
        print(f"  {name:14s} {a:10.0f} {b:11.0f} {b / a if a else float('nan'):7.2f}")
    for r in results:
        print(
            f"  {r['mode']:10s}: {r['samples']} samples, {r['ik_steps']} IK steps, {r['commands']} commands; "
            f"process {r['process_per_sample_us']:.0f} us/sample, {100 * r['core_share']:.0f} % of one core"
        )
    rounds, per_round = (5, 200) if args.quick else (20, 500)
    print(f"Output path alone (thread time per sample, us; {rounds} alternating rounds of {per_round}):")
    print(f"  {'outputs':36s} {'messages':>10s} {'serialized':>11s} {'ratio':>7s}")
    for name, (a, b) in output_paths(rounds, per_round, domain).items():
        print(f"  {name:36s} {a:10.1f} {b:11.1f} {b / a:7.2f}")
    ik_us = results[1]["per_sample_us"]["ik_node"]
    print(
        f"  targets: ik_node <= 1200 us/sample ({ik_us:.0f}: {'met' if ik_us <= 1200 else 'missed'}), "
        f"pipeline <= 40 % of a core ({100 * results[1]['core_share']:.0f} %: "
        f"{'met' if results[1]['core_share'] <= 0.4 else 'missed'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
