"""Deployment choices measured: the pipeline in one process, one process per node, or source + IK together
with the bridge apart (issue 10).

Each layout runs wearable_node (synthetic Human66 walk, real time) -> ik_node (Human66, markers on) ->
bridge_node (forward commands, 66 joints) as real processes over real DDS on a private domain; a probe in
this process subscribes to ``/dynik/joint_states`` and the commands. Printed per layout:

* link state -> IK output latency: the probe's reception time of each joint state minus its stamp (the
  link-state stamp, taken from the node clock when wearable_node published it; one machine, one clock),
  p50 / p99 / max, and how many of the samples published reached the probe;
* CPU of each process (user + system from /proc over the streaming window) as a share of one core, and
  the total.

A process hosting several nodes spins them on one executor (events executor where available); every node
configures and activates itself (``--autostart``), the source after a start delay so that the others are up.

    python benchmarks/deployments.py [--quick] [--rate 240] [--duration 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

NODE_PARAMS = {
    "wearable_node": ["source:=synthetic", "model:=human66", "scenario:=walking", "realtime:=true"],
    "ik_node": ["model:=human66", "publish_markers:=true"],
    "bridge_node": ["model:=human66", "interface:=forward_command", "controller:=deploy_bench"],
}
LAYOUTS = {
    "one process": [["wearable_node", "ik_node", "bridge_node"]],
    "per node": [["wearable_node"], ["ik_node"], ["bridge_node"]],
    "source+IK | bridge": [["wearable_node", "ik_node"], ["bridge_node"]],
}
START_DELAY = 4.0  # [s] the source waits after activation for the other processes to come up


def host(nodes: list[str], rate: float, duration: float) -> int:
    """Child process: the given nodes on one executor, configured and activated, until the source ends."""
    import rclpy
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.wearable_node import WearableNode

    classes = {"wearable_node": WearableNode, "ik_node": IKNode, "bridge_node": BridgeNode}
    extra = {"wearable_node": {"rate": rate, "duration": duration, "start_delay": START_DELAY}}

    def parameters(name: str) -> list[Parameter]:
        values: dict[str, Any] = {}
        for item in NODE_PARAMS[name]:
            key, value = item.split(":=")
            values[key] = {"true": True, "false": False}.get(value, value)
        values.update(extra.get(name, {}))
        return [Parameter(k, value=v) for k, v in values.items()]

    rclpy.init()
    try:
        from rclpy.experimental import EventsExecutor

        executor = EventsExecutor()
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor()
    instances = [classes[n](parameter_overrides=parameters(n)) for n in nodes]
    for node in instances:
        executor.add_node(node)
        node.trigger_configure()
        node.trigger_activate()
    end = time.monotonic() + START_DELAY + duration + 3.0
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    for node in instances:
        node.trigger_deactivate()
        executor.remove_node(node)
        node.destroy_node()
    rclpy.shutdown()
    return 0


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(layout: list[list[str]], rate: float, duration: float, domain: int) -> dict[str, Any]:
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import COMMAND_QOS, RELIABLE_QOS

    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--host",
                ",".join(group),
                "--rate",
                str(rate),
                "--duration",
                str(duration),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for group in layout
    ]
    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain)
    probe = rclpy.create_node("deploy_probe", context=context)
    latencies: list[float] = []
    commands = [0]

    def on_joint_state(msg: JointState) -> None:
        now = probe.get_clock().now().nanoseconds
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        latencies.append((now - stamp) * 1e-6)

    probe.create_subscription(JointState, "/dynik/joint_states", on_joint_state, RELIABLE_QOS)
    probe.create_subscription(
        Float64MultiArray,
        "/deploy_bench/commands",
        lambda _m: commands.__setitem__(0, commands[0] + 1),
        COMMAND_QOS,
    )
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    start_cpu: list[float] | None = None
    cpu = [float("nan")] * len(procs)
    t0 = t_start = time.monotonic()
    try:
        while any(p.poll() is None for p in procs):
            executor.spin_once(timeout_sec=0.05)
            if start_cpu is None and latencies:  # the stream has started: the CPU window opens
                start_cpu, t_start = [_cpu_seconds(p.pid) for p in procs], time.monotonic()
            elif start_cpu is not None and np.isnan(cpu[0]) and time.monotonic() - t_start >= duration - 1.0:
                span = time.monotonic() - t_start
                cpu = [(_cpu_seconds(p.pid) - c) / span for p, c in zip(procs, start_cpu, strict=True)]
            if time.monotonic() - t0 > START_DELAY + duration + 60.0:
                raise RuntimeError("the layout did not finish in time")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        executor.shutdown()
        probe.destroy_node()
        rclpy.shutdown(context=context)
    lat = np.array(latencies)
    return {
        "received": len(lat),
        "expected": int(round(rate * duration)),
        "commands": commands[0],
        "p50": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "p99": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "max": float(lat.max()) if lat.size else float("nan"),
        "cpu": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s per layout")
    parser.add_argument("--rate", type=float, default=240.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    duration = 5.0 if args.quick else args.duration
    if args.host:
        return host(args.host.split(","), args.rate, duration)
    domain = 150 + os.getpid() % 80
    print(
        f"Deployments, Human66 at {args.rate:.0f} Hz for {duration:.0f} s, markers on, {os.cpu_count()} CPUs"
    )
    header = f"  {'layout':20s} {'received':>12s} {'p50 ms':>7s} {'p99 ms':>7s} {'max ms':>7s}"
    print(header + "  CPU per process (% of a core)")
    for name, layout in LAYOUTS.items():
        r = measure(layout, args.rate, duration, domain)
        shares = " + ".join(f"{100 * c:.0f}" for c in r["cpu"]) + f" = {100 * sum(r['cpu']):.0f}"
        latency = f"{r['p50']:7.2f} {r['p99']:7.2f} {r['max']:7.1f}"
        print(f"  {name:20s} {r['received']:5d}/{r['expected']:<6d} {latency}  {shares}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
