"""Real-time soak of the G1 pipeline: memory slope, CPU, latency, invariants, for as long as you like.

One process, one rclpy context, real DDS: wearable_node (synthetic Human66 walk, 240 Hz, real time,
``loop:=true``) -> ik_node (retargeting to the G1) -> bridge_node (forward_command, node clock) -> a probe.
Every ``--sample-period`` seconds the process's resident memory is read from /proc; after ``--warmup`` the
slope is fitted by least squares and printed in MB/h. Also printed: CPU (process time / wall time),
link state -> command latency p50/p99 (the last 10^5 samples), and the invariants on every command the
probe receives (finite, inside the G1's limits, each step within the bridge's rate limit). The walk loops
every 10 s: the pelvis jumps back, which ik_node refuses as a jump and then re-bases on (counted).

    python benchmarks/soak.py --quick                 # CI smoke run (20 s)
    python benchmarks/soak.py --duration 3600         # the one-hour soak, by hand

Exit status 1 on an invariant breach, a node leaving ``active`` or an exception out of a callback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

_FUZZ = Path(__file__).resolve().parent / "fuzz_inputs.py"


def _wire_checks():
    spec = importlib.util.spec_from_file_location("fuzz_inputs", _FUZZ)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WireChecks


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def soak(duration: float, rate: float, warmup: float, sample_period: float, domain_id: int) -> dict[str, Any]:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.core.rolling import RollingSamples
    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.common import COMMAND_QOS
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.wearable_node import WearableNode

    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)

    def params(**values: Any) -> list[Parameter]:
        return [Parameter(k, value=v) for k, v in values.items()]

    wearable = WearableNode(
        context=context,
        parameter_overrides=params(
            source="synthetic", model="human66", scenario="walking", rate=rate, duration=10.0, loop=True,
            realtime=True,
        ),
    )  # fmt: skip
    ik = IKNode(context=context, parameter_overrides=params(model="", robot="g1", publish_markers=True))
    bridge = BridgeNode(
        context=context,
        parameter_overrides=params(robot="g1", interface="forward_command", controller="soak_controller"),
    )
    probe = rclpy.create_node("soak_probe", context=context)
    published: OrderedDict[int, float] = OrderedDict()  # link-state stamp -> wall time (bounded)
    latencies = RollingSamples()

    def hook(event: str, stamp: int) -> None:
        if event == "link_states":
            published[stamp] = time.perf_counter()
            if len(published) > 10_000:
                published.popitem(last=False)
        elif event == "command":
            sent = published.get(stamp)
            if sent is not None:
                latencies.append(time.perf_counter() - sent)

    nodes = [bridge, ik, wearable]
    for node in nodes:
        node.trace = hook
    executor = SingleThreadedExecutor(context=context)
    for node in [*nodes, probe]:
        executor.add_node(node)
    crashes: list[str] = []
    memory: list[tuple[float, float]] = []
    try:
        for node in nodes:
            node.trigger_configure()
            if node.lifecycle_state != "inactive":
                raise RuntimeError(f"{node.get_name()}: configure failed: {node.last_error}")
        robot = ik.robot
        checks = _wire_checks()(robot.lower, robot.upper, robot.velocity_limit, bridge.params["command_rate"])
        probe.create_subscription(
            Float64MultiArray,
            "/soak_controller/commands",
            lambda m: checks.command(np.array(m.data)),
            COMMAND_QOS,
        )
        for node in nodes:
            node.trigger_activate()
        start = time.perf_counter()
        cpu_start = time.process_time()
        next_sample = start
        while time.perf_counter() - start < duration:
            try:
                executor.spin_once(timeout_sec=0.01)
            except Exception as exc:  # noqa: BLE001 - an exception out of a callback
                crashes.append(f"{type(exc).__name__}: {exc}")
            now = time.perf_counter()
            if now >= next_sample:
                memory.append((now - start, resident_mb()))
                next_sample += sample_period
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        active = all(node.lifecycle_state == "active" for node in nodes)
        for node in nodes:
            node.trigger_deactivate()
    finally:
        for node in [*nodes, probe]:
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
        rclpy.shutdown(context=context)
    t, rss = np.array(memory).T if memory else (np.zeros(0), np.zeros(0))
    steady = t >= warmup
    slope = float(np.polyfit(t[steady], rss[steady], 1)[0] * 3600.0) if steady.sum() >= 3 else float("nan")
    lat = latencies.array() * 1e3
    return {
        "duration_s": wall,
        "samples": wearable.published,
        "ik_steps": ik.steps,
        "commands": checks.commands,
        "cpu_percent": 100.0 * cpu / wall,
        "rss_start_mb": float(rss[steady][0]) if steady.any() else float("nan"),
        "rss_end_mb": float(rss[-1]) if len(rss) else float("nan"),
        "rss_slope_mb_per_h": slope,
        "latency_p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "latency_p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "refused": {k: v for k, v in ik.rejections.counts.items() if v},
        "rebased": ik.rebased,
        "breaches": dict(checks.breaches),
        "crashes": crashes,
        "nodes_active": active,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 s smoke run")
    parser.add_argument("--duration", type=float, default=None, help="seconds (default 3600)")
    parser.add_argument("--rate", type=float, default=240.0)
    args = parser.parse_args(argv)
    duration = args.duration or (20.0 if args.quick else 3600.0)
    warmup = min(60.0, duration / 3)
    domain = int(os.environ.get("ROS_DOMAIN_ID", 20 + os.getpid() % 80))
    r = soak(duration, args.rate, warmup, max(1.0, duration / 600), domain)
    print(
        f"soak: G1 pipeline at {args.rate:g} Hz for {r['duration_s']:.0f} s: {r['samples']} samples, "
        f"{r['ik_steps']} IK steps, {r['commands']} commands"
    )
    print(
        f"  memory: {r['rss_start_mb']:.1f} MB after {warmup:.0f} s -> {r['rss_end_mb']:.1f} MB, slope "
        f"{r['rss_slope_mb_per_h']:+.2f} MB/h (target <= 1 MB/h over 1 h; short runs are noisy)"
    )
    print(
        f"  CPU {r['cpu_percent']:.0f} % of one core; link state -> command "
        f"p50 {r['latency_p50_ms']:.2f} ms, "
        f"p99 {r['latency_p99_ms']:.2f} ms"
    )
    bad = r["breaches"] or r["crashes"] or not r["nodes_active"]
    print(
        f"  refused {r['refused']}, re-based {r['rebased']}; invariants: breaches {r['breaches'] or 0}, "
        f"crashes {len(r['crashes'])}, nodes active {r['nodes_active']}" + (" -> FAILED" if bad else " -> ok")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
