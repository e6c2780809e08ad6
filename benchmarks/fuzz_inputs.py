"""Fuzzing the real nodes with hostile input; invariants checked on what goes out on the wire.

Link states (``--link-states N``: N mutated messages, plus the clean ones between them): a synthetic
120 Hz walk of the Human66 links, published raw (serialized CDR) over real DDS to ``ik_node`` (Human66)
-> ``bridge_node`` (forward commands, ``clock:=message``), one message at a time (the harness waits until
ik_node took it: nothing is lost to best-effort delivery and message time is independent of the
machine's load). Bursts of 1-10 mutated messages of one kind (``dynik_ros.testing.link_fuzz``: NaN/inf,
1e30 twists, 1e20 m positions, zero and scaled quaternions, wrong lengths, unknown/missing/duplicate names,
empty messages, stamps in the future/past/zero/negative/repeated/backwards, 100 m teleports, half-turn
flips, garbage, empty, truncated and bit-flipped bytes; and persistent changes: the world origin moved
100 m, the world turned half a turn, the sender's clock 15 s ahead or back: the first 1-5 messages of the
new regime count as the mutated ones) alternate with clean stretches of 1-6 samples, one in 40 of 145-170
samples (over a second: whether tracking recovered within 1 s is judged there).

MVN datagrams (``--datagrams N``: N mutated datagrams, see ``benchmarks/fuzz_datagrams.py``): valid
samples split into datagrams of random sizes and orders, sent over UDP to ``wearable_node source:=xsens``
-> ``ik_node`` -> ``bridge_node`` on a simulated clock, with bursts of corrupted, foreign, repeated and
reordered datagrams, counter jumps and sender restarts.

Invariants, on every message the probe receives (``fuzz_rig.Probe``):

* IK outputs (``/dynik/joint_states``): finite, inside the position limits;
* commands: finite, inside the limits, every joint's ``|Δq| / Δt`` within its velocity limit (``Δt`` in
  message time: the stamps the bridge commanded them for);
* recovery: after each burst, the link-orientation error of the IK output (forward kinematics of what
  arrived on ``/dynik/joint_states`` and ``/dynik/base_odom``, against the clean ground truth) back within
  the clean baseline within 1 s of message time of the last bad input;
* no freeze: never a second of clean input without output (after one, the nodes are reconfigured so the
  run goes on, and it counts); no node leaves ``active``; no exception escapes a callback.

Printed: inputs per mutation kind, refusals by reason (from ``/diagnostics``), recovery p50/max per kind,
breaches. Exit status 1 on any breach. Seeds are fixed: the same command sends the same bytes.

    python benchmarks/fuzz_inputs.py --quick                  # CI smoke run (a few thousand of each)
    python benchmarks/fuzz_inputs.py --link-states 1000000 --datagrams 1000000   # the full run, by hand
    python benchmarks/fuzz_inputs.py --link-states 30000 --datagrams 0 --robot g1   # the retargeting path

``--robot`` (a registry name or a map's path) makes ik_node retarget the links to that robot (contact rules,
toe-off noise estimate, the map's anchor and reach options) instead of tracking Human66: the wire
invariants are the robot's limits; recovery is judged only as outputs coming back, not as tracking error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from fuzz_rig import Probe, Rig, rejected

from dynik_ros.testing.invariants import NS, RecoveryTracker
from dynik_ros.testing.link_fuzz import LINK_KINDS, PERSISTENT_KINDS, CleanStream, walk

RATE = 120.0
PERIOD_NS = int(round(NS / RATE))
WARMUP = 360  # clean samples before the first burst (3 s); the baseline is their last 1.5 s
BASELINE_FACTOR = 2.0  # recovered = error within this factor of the clean baseline (plus 1e-6 rad)


def clean_stretch(rng: np.random.Generator) -> int:
    """Length of the clean stretch after a burst: 1-6 samples, one in 40 145-170 (over a second, so that
    recovery within 1 s is judged after every kind of burst)."""
    return int(rng.integers(145, 171)) if rng.random() < 1 / 40 else int(rng.integers(1, 7))


def baseline_threshold(errors: list[float]) -> tuple[float, float]:
    """``(baseline, threshold)`` from the warm-up's errors: the largest, and the recovery threshold."""
    baseline = float(np.max(errors)) if errors else float("nan")
    return baseline, BASELINE_FACTOR * baseline + 1e-6


def warm_up_threshold(
    rig: Rig, probe: Probe, warm: list[tuple[int, int]], outputs: set[int], time_of: int
) -> tuple[float, float]:
    """``(baseline, threshold)`` of :func:`baseline_threshold` over the warm-up's clean samples ``warm``
    (stamp sent first), once their IK outputs settled, leaving out the first 1.5 s (entry ``time_of`` of
    each tuple is its message time)."""
    errors = probe.settle(rig, [w[0] for w in warm], outputs)
    start = warm[0][time_of]
    return baseline_threshold(
        [e for w, e in zip(warm, errors, strict=True) if e is not None and w[time_of] - start >= 1.5 * NS]
    )


# ----------------------------------------------------------------------------- link states
def fuzz_link_states(
    mutated: int,
    seed: int,
    domain_id: int | None,
    kinds: tuple[str, ...] = LINK_KINDS,
    progress: bool = True,
    tamper: Callable[[Any, Any], None] | None = None,
    robot: str = "",
) -> dict[str, Any]:
    """Run the link-state fuzz until ``mutated`` mutated messages were sent; the results as a dict.
    ``tamper(ik, bridge)`` is called after the warm-up (the harness's own tests plant faults with it).
    ``robot`` (a registry name or a map's path): ik_node retargets to it instead of tracking Human66; the
    wire invariants, freezes and exceptions are judged as for Human66, recovery only as outputs coming back
    (the robot's tracking error against the person is not judged)."""
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.testing.link_fuzz import mutate

    rng = np.random.default_rng(seed)
    names, poses, twists = walk(20.0, RATE)
    # every stamp stays behind the node clock (ik_node refuses stamps from its future): start far enough back
    span_ns = int((mutated * 4 + 10_000) * PERIOD_NS) + 24 * 3600 * NS
    stream = CleanStream(names, poses, twists, PERIOD_NS, time.time_ns() - span_ns)
    rig = Rig(domain_id)
    ik, bridge, outputs = rig.add_ik_and_bridge("fuzz_ctrl", robot=robot)
    try:
        rig.bring_up(bridge, ik)
        probe = Probe(rig, ik.robot, names, bridge, "/fuzz_ctrl/commands", track=not robot)
        pub = probe.node.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
        rig.spin_until(
            lambda: pub.get_subscription_count() >= 1 and probe.node.count_publishers("/fuzz_ctrl/commands"),
            30.0,
        )
        sent: Counter = Counter()
        lost = [0]

        def deliver(data: bytes) -> None:
            before = ik.received
            pub.publish(data)
            if not rig.spin_until(lambda: ik.received > before, 10.0):
                lost[0] += 1  # best effort: DDS dropped it (not a breach; counted)

        def clean_run(count: int) -> list[tuple[int, int]]:
            """``count`` clean samples delivered; per sample (stamp sent, stream time). Stream time is the
            stamp without the clock jumps: message time that never goes back, for the tracker."""
            stamps = []
            for _ in range(count):
                sample = stream.next()
                probe.expect(sample.stamp_ns, sample.rotations())
                deliver(sample.encode())
                stamps.append((sample.stamp_ns, stream.stamp_ns))
            return stamps

        started = time.perf_counter()
        warm = clean_run(WARMUP)
        baseline, threshold = warm_up_threshold(rig, probe, warm, outputs, time_of=1)
        tracker = RecoveryTracker(threshold)
        if tamper is not None:
            tamper(ik, bridge)
        resets, total_mutated, clean_sent, next_report = 0, 0, WARMUP, 0
        refused_before: Counter = Counter()
        while total_mutated < mutated:
            kind = kinds[int(rng.integers(len(kinds)))]
            if kind in PERSISTENT_KINDS:
                stream.apply(kind)
                n_bad = int(rng.integers(1, 6))
                bad_ns = clean_run(n_bad)[-1][1]  # the first messages of the new regime are the bad ones
                outputs.clear()
            else:
                n_bad = int(rng.integers(1, 11))
                last = stream.last_stamp_ns
                content = stream.sample(stream.k, last)
                for j in range(n_bad):
                    stamp = last + (j + 1) * PERIOD_NS // (n_bad + 1)
                    deliver(mutate(kind, content, stamp, last, rng))
                bad_ns = stream.stamp_ns + n_bad * PERIOD_NS // (n_bad + 1)
            sent[kind] += n_bad
            total_mutated += n_bad
            tracker.bad(bad_ns, kind)
            stamps = clean_run(clean_stretch(rng))
            clean_sent += len(stamps)
            for (_, time_ns), error in zip(
                stamps, probe.settle(rig, [s for s, _ in stamps], outputs), strict=True
            ):
                if error is None or np.isfinite(error):  # inf: a non-finite output (a wire breach)
                    tracker.clean(time_ns, error)
            if tracker.frozen:  # a second of clean input without output: restart the nodes and go on
                resets += 1
                refused_before.update(ik.rejections.counts)  # configure clears them
                refused_before.update(rebased=ik.rebased, held=ik.held_steps)
                probe.restart(rig)
                rig.restart(bridge, ik)
            if progress and total_mutated >= next_report:
                next_report += max(mutated // 20, 1000)
                rate = (total_mutated + clean_sent) / (time.perf_counter() - started)
                print(f"  link states: {total_mutated}/{mutated} mutated ({rate:.0f} msg/s)", file=sys.stderr)
        rig.spin_until(lambda: probe.diagnostic_values("ik_node").get("received") == str(ik.received), 5.0)
        return {
            "mutated": total_mutated,
            "clean": clean_sent,
            "sent": dict(sent),
            "refused": dict(
                Counter(rejected(probe.diagnostic_values("ik_node")))
                + Counter({k: v for k, v in refused_before.items() if k not in ("rebased", "held")})
            ),
            "bridge_refused": rejected(probe.diagnostic_values("bridge_node")),
            "diagnostics_seen": bool(probe.diagnostic_values("ik_node")),
            "notes": ["(refusals before a restart read from the node: /diagnostics restarts from 0)"]
            if resets
            else [],
            "lost_on_the_way": lost[0],
            "rebased": ik.rebased + refused_before["rebased"],
            "held_steps": ik.held_steps + refused_before["held"],
            "resets": resets,
            "tracker": tracker,
            "baseline": baseline,
            "threshold": threshold,
            "checks": probe.checks,
            "announced_not_received": probe.announced_not_received,
            "unpaired_commands": probe.unpaired_commands,
            "missed_commands": probe.missed_commands,
            "crashes": rig.crashes,
            "crash_count": rig.crash_count,
            "nodes_active": ik.lifecycle_state == "active" and bridge.lifecycle_state == "active",
            "seconds": time.perf_counter() - started,
            "domain": rig.domain_id,
        }
    finally:
        rig.close()


# ----------------------------------------------------------------------------- report
def _ms(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.0f}"


def print_report(title: str, r: dict[str, Any], unit: str) -> bool:
    """The table of one fuzzer's results; True when no invariant was breached."""
    tracker: RecoveryTracker = r["tracker"]
    checks = r["checks"]
    print(
        f"{title} (ROS domain {r['domain']}): {r['mutated']} mutated {unit} and {r['clean']} clean "
        f"samples in {r['seconds']:.0f} s; clean tracking error baseline {r['baseline']:.2e} rad, "
        f"recovered at <= {r['threshold']:.2e} rad"
    )
    extra = r.get("extra_columns", {})
    columns = ("sent", "bursts", "recovery p50/max [ms]", "not in 1 s", "freezes", *extra)
    widths = (9, 7, 22, 10, 8, *(10 for _ in extra))
    print("  " + f"{'kind':22s}" + "".join(f" {c:>{w}s}" for c, w in zip(columns, widths, strict=True)))

    def row(label: str, sent: int, hist: Any, kind: str | None) -> None:
        pick = (lambda c: c.get(kind, 0)) if kind else (lambda c: sum(c.values()))
        recovery = f"{_ms(hist.percentile(50))} / {_ms(hist.max_ms)}" if hist else "- / -"
        values = (sent, pick(tracker.bursts), recovery, pick(tracker.unrecovered), pick(tracker.freezes))
        values += tuple(pick(c) for c in extra.values())
        print("  " + f"{label:22s}" + "".join(f" {v!s:>{w}s}" for v, w in zip(values, widths, strict=True)))

    for kind in sorted(set(r["sent"]) | set(tracker.kinds())):
        row(kind, r["sent"].get(kind, 0), tracker.times.get(kind), kind)
    row("all", r["mutated"], tracker.all_times, None)
    refused = ", ".join(f"{k} {v}" for k, v in sorted(r["refused"].items())) or "none"
    print(f"  refused by ik_node (/diagnostics): {refused}")
    if not r["diagnostics_seen"]:
        print("  (no ik_node /diagnostics received)")
    if r.get("bridge_refused"):
        print(f"  refused by bridge_node (/diagnostics): {r['bridge_refused']}")
    for line in r.get("notes", []):
        print(f"  {line}")
    print(
        f"  wire: {checks.joint_states} IK outputs, {checks.commands} commands (fastest joint at "
        f"{checks.max_speed_ratio:.3f} x its velocity limit); re-based {r['rebased']}, held steps "
        f"{r['held_steps']}, nodes restarted after a freeze {r['resets']}, "
        f"lost on the way {r['lost_on_the_way']}, IK outputs announced but not received "
        f"{r['announced_not_received']}"
    )
    breaches = dict(checks.breaches)
    unrecovered, freezes = sum(tracker.unrecovered.values()), sum(tracker.freezes.values())
    ok = not (breaches or r["crash_count"] or unrecovered or freezes or not r["nodes_active"])
    ok &= not r.get("extra_breaches")
    print(
        f"  invariants: wire breaches {breaches or 0}, exceptions out of callbacks {r['crash_count']}, "
        f"not recovered within 1 s {unrecovered}, freezes {freezes}, nodes active {r['nodes_active']}"
        + (f", {r['extra_breaches']}" if r.get("extra_breaches") else "")
        + f" -> {'ok' if ok else 'FAILED'}"
    )
    if breaches:
        print(f"  first of each wire breach: {checks.examples}")
    for failure in getattr(tracker, "failures", [])[:10]:
        print(f"  not recovered: {failure}")
    if r["crashes"]:
        print(f"  exceptions: {r['crashes'][:5]}")
    return ok


def _write_json(path: str | None, r: dict[str, Any], seed: int, fuzzer: str) -> None:
    if path:
        import json

        from fuzz_record import to_record

        with open(path, "w") as f:
            json.dump(to_record(r, seed, fuzzer), f)


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="CI smoke sizes (2000 mutated of each)")
    parser.add_argument("--link-states", type=int, default=None, help="mutated link-state messages to send")
    parser.add_argument("--datagrams", type=int, default=None, help="mutated MVN datagrams to send")
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument(
        "--robot",
        default="",
        help="link states: ik_node retargets to this robot (name or map path) instead of tracking Human66; "
        "recovery then means outputs back, not the tracking error",
    )
    parser.add_argument("--kinds", help="comma-separated mutation kinds (default: all)")
    parser.add_argument("--skip-kinds", default="", help="comma-separated mutation kinds not to send")
    parser.add_argument(
        "--json", metavar="PATH", help="also write the results as JSON (one fuzzer per run; fuzz_campaign.py)"
    )
    args = parser.parse_args(argv)
    skip = set(args.skip_kinds.split(",")) - {""}
    if skip:
        print(f"not sending {sorted(skip)} (--skip-kinds)")
    n_links = args.link_states if args.link_states is not None else (2000 if args.quick else 100_000)
    n_datagrams = args.datagrams if args.datagrams is not None else (2000 if args.quick else 100_000)
    if args.json and n_links and n_datagrams:
        parser.error("--json takes one fuzzer per run: give --link-states 0 or --datagrams 0")
    domain = int(os.environ["ROS_DOMAIN_ID"]) if os.environ.get("ROS_DOMAIN_ID") else None
    ok = True
    if n_links:
        kinds = tuple(k for k in (args.kinds.split(",") if args.kinds else LINK_KINDS) if k not in skip)
        kinds = tuple(k for k in kinds if k in LINK_KINDS)
        if kinds:
            r = fuzz_link_states(n_links, args.seed, domain, kinds, progress=not args.quick, robot=args.robot)
            title = f"link states -> {args.robot} (recovery: outputs back)" if args.robot else "link states"
            ok &= print_report(title, r, "messages")
            _write_json(args.json, r, args.seed, "link_states")
    if n_datagrams:
        from fuzz_datagrams import DATAGRAM_KINDS, fuzz_datagrams

        kinds = tuple(k for k in (args.kinds.split(",") if args.kinds else DATAGRAM_KINDS) if k not in skip)
        kinds = tuple(k for k in kinds if k in DATAGRAM_KINDS)
        if kinds:
            r = fuzz_datagrams(n_datagrams, args.seed, domain, kinds, progress=not args.quick)
            ok &= print_report("MVN datagrams", r, "datagrams")
            _write_json(args.json, r, args.seed, "datagrams")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
