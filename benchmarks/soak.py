"""Real-time soak of the G1 pipeline: memory slope, CPU, latency and the wire invariants, for as long as
you like.

One process, one rclpy context, real DDS (a private domain, ``fuzz_rig.Rig``): wearable_node (synthetic
Human66 walk, 240 Hz, real time, ``loop:=true``) -> ik_node (retargeting to the G1, markers and TF on) ->
bridge_node (forward commands, node clock) -> the probe. Printed:

* resident memory of this process (the one hosting the nodes), sampled every ``duration / 600`` s (at
  least 1 s) from /proc; the slope fitted by least squares after the warm-up (a tenth of the run, at most
  5 min), in MB/h, and the growth over that window;
* CPU: process time over wall time (100 % = one core);
* link state -> command latency p50/p99 (wall time between wearable_node handing a sample to DDS and
  bridge_node commanding it; the last 10^5 samples);
* invariants on every message the probe receives (``dynik_ros.testing.invariants.WireChecks``): IK
  outputs finite and inside the G1's limits; commands finite, inside the limits and no joint faster than
  its velocity limit over the bridge's own time between two commands; no freeze: never a second of
  message time in which samples were published but ik_node answered none; no node leaving ``active``; no
  exception out of a callback.

The walk loops every 10 s: the pelvis jumps back, which ik_node refuses as a jump and then re-bases on
(counted). Everything the harness keeps is bounded (rings, histograms, counters).

    python benchmarks/soak.py --quick                 # CI smoke run (20 s)
    python benchmarks/soak.py --duration 3600         # the one-hour soak, by hand

Exit status 1 on an invariant breach.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import OrderedDict
from typing import Any

import numpy as np
from fuzz_rig import Probe, Rig

from dynik_ros.testing.invariants import RecoveryTracker


def resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_slope(samples: np.ndarray, warmup: float) -> tuple[float, float]:
    """``(slope MB/h, growth MB)`` of ``(t [s], rss [MB])`` rows after ``warmup`` seconds (NaN if < 3)."""
    steady = samples[samples[:, 0] >= warmup] if len(samples) else samples
    if len(steady) < 3:
        return float("nan"), float("nan")
    slope = float(np.polyfit(steady[:, 0], steady[:, 1], 1)[0] * 3600.0)
    return slope, float(steady[-1, 1] - steady[0, 1])


class OutputWatch:
    """Which published link states got an IK output, judged in stamp order (message time): feeds a
    :class:`RecoveryTracker` whose freezes are a second of published samples without any output."""

    def __init__(self) -> None:
        self.tracker = RecoveryTracker(threshold=float("inf"))
        self.pending: OrderedDict[int, None] = OrderedDict()
        self.published = self.answered = self.dropped = 0

    def published_sample(self, stamp: int) -> None:
        self.published += 1
        self.pending[stamp] = None
        while len(self.pending) > 5000:  # nobody answers: judge the oldest as unanswered
            self.tracker.clean(self.pending.popitem(last=False)[0], None)
            self.dropped += 1

    def output(self, stamp: int) -> None:
        self.answered += 1
        while self.pending:
            oldest = next(iter(self.pending))
            if oldest > stamp:
                break
            del self.pending[oldest]
            if oldest == stamp:
                self.tracker.clean(stamp, 0.0)
            else:  # an older sample that never got an answer (best effort dropped it, or refused)
                self.tracker.clean(oldest, None)
                self.dropped += 1


def soak(duration: float, rate: float, domain_id: int | None) -> dict[str, Any]:
    from rclpy.parameter import Parameter

    from dynik_ros.core.rolling import RollingSamples
    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.wearable_node import WearableNode

    def params(**values: Any) -> list[Parameter]:
        return [Parameter(k, value=v) for k, v in values.items()]

    rig = Rig(domain_id)
    wearable = rig.add(
        WearableNode(
            context=rig.context,
            parameter_overrides=params(
                source="synthetic", model="human66", scenario="walking", rate=rate, duration=10.0, loop=True,
                realtime=True,
            ),
        )
    )  # fmt: skip
    ik = rig.add(IKNode(context=rig.context, parameter_overrides=params(model="", robot="g1")))
    bridge = rig.add(
        BridgeNode(
            context=rig.context,
            parameter_overrides=params(robot="g1", interface="forward_command", controller="soak_controller"),
        )
    )
    sent_at: OrderedDict[int, float] = OrderedDict()  # link-state stamp -> wall time (bounded)
    latencies = RollingSamples()
    watch = OutputWatch()

    def hook(event: str, stamp: int) -> None:
        if event == "link_states":
            sent_at[stamp] = time.perf_counter()
            if len(sent_at) > 10_000:
                sent_at.popitem(last=False)
            watch.published_sample(stamp)
        elif event == "ik_output":
            watch.output(stamp)
        elif event == "command":
            sent = sent_at.get(stamp)
            if sent is not None:
                latencies.append(time.perf_counter() - sent)

    for node in (wearable, ik, bridge):
        node.trace = hook
    memory = RollingSamples(capacity=2000, width=2)
    warmup = min(300.0, duration / 10)
    try:
        rig.configure(bridge, ik, wearable)
        probe = Probe(rig, ik.robot, [], bridge, "/soak_controller/commands")
        rig.spin_until(lambda: probe.node.count_publishers("/soak_controller/commands") >= 1, 30.0)
        rig.activate(bridge, ik, wearable)
        start = time.perf_counter()
        cpu_start = time.process_time()
        period = max(1.0, duration / 600)
        next_sample = start
        while (now := time.perf_counter()) - start < duration:
            if now >= next_sample:
                memory.append((now - start, resident_mb()))
                next_sample += period
            rig.spin_until(lambda due=next_sample: time.perf_counter() >= due, max(0.0, next_sample - now))
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        active = all(node.lifecycle_state == "active" for node in (wearable, ik, bridge))
        for node in (wearable, ik, bridge):
            node.trigger_deactivate()
        slope, growth = rss_slope(memory.array(), warmup)
        rss = memory.array()
        lat = latencies.array() * 1e3
        return {
            "duration_s": wall,
            "warmup_s": warmup,
            "samples": wearable.published,
            "ik_steps": ik.steps,
            "checks": probe.checks,
            "unpaired_commands": probe.unpaired_commands,
            "missed_commands": probe.missed_commands,
            "cpu_percent": 100.0 * cpu / wall,
            "rss_start_mb": float(rss[rss[:, 0] >= warmup][0, 1])
            if np.any(rss[:, 0] >= warmup)
            else float("nan"),
            "rss_end_mb": float(rss[-1, 1]) if len(rss) else float("nan"),
            "rss_slope_mb_per_h": slope,
            "rss_growth_mb": growth,
            "latency_p50_ms": float(np.percentile(lat, 50)) if lat.size else float("nan"),
            "latency_p99_ms": float(np.percentile(lat, 99)) if lat.size else float("nan"),
            "refused": {k: v for k, v in ik.rejections.counts.items() if v},
            "rebased": ik.rebased,
            "unanswered": watch.dropped,
            "freezes": sum(watch.tracker.freezes.values()),
            "crash_count": rig.crash_count,
            "crashes": rig.crashes,
            "nodes_active": active,
            "domain": rig.domain_id,
        }
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 s smoke run")
    parser.add_argument("--duration", type=float, default=None, help="seconds (default 3600)")
    parser.add_argument("--rate", type=float, default=240.0)
    args = parser.parse_args(argv)
    duration = args.duration or (20.0 if args.quick else 3600.0)
    domain = int(os.environ["ROS_DOMAIN_ID"]) if os.environ.get("ROS_DOMAIN_ID") else None
    r = soak(duration, args.rate, domain)
    checks = r["checks"]
    print(
        f"soak (ROS domain {r['domain']}): G1 pipeline at {args.rate:g} Hz for {r['duration_s']:.0f} s: "
        f"{r['samples']} samples, {r['ik_steps']} IK steps, {checks.commands} commands"
    )
    print(
        f"  memory: {r['rss_start_mb']:.1f} MB after {r['warmup_s']:.0f} s -> {r['rss_end_mb']:.1f} MB, "
        f"slope {r['rss_slope_mb_per_h']:+.2f} MB/h (growth {r['rss_growth_mb']:+.2f} MB; target <= 1 MB/h "
        "over 1 h, short runs are noisy)"
    )
    print(
        f"  CPU {r['cpu_percent']:.0f} % of one core; link state -> command "
        f"p50 {r['latency_p50_ms']:.2f} ms, p99 {r['latency_p99_ms']:.2f} ms"
    )
    breaches = dict(checks.breaches)
    bad = breaches or r["crash_count"] or r["freezes"] or not r["nodes_active"]
    print(
        f"  refused {r['refused']}, re-based {r['rebased']}, samples without IK output {r['unanswered']}; "
        f"fastest command at {checks.max_speed_ratio:.3f} x the velocity limit; commands the probe missed "
        f"{r['missed_commands']} (checked over the longer interval), unpaired {r['unpaired_commands']}"
    )
    print(
        f"  invariants: wire breaches {breaches or 0} ({checks.joint_states} IK outputs, {checks.commands} "
        f"commands checked), freezes {r['freezes']}, exceptions out of callbacks {r['crash_count']}, nodes "
        f"active {r['nodes_active']}" + (" -> FAILED" if bad else " -> ok")
    )
    if breaches:
        print(f"  first of each wire breach: {checks.examples}")
    if r["crashes"]:
        print(f"  exceptions: {r['crashes'][:5]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
