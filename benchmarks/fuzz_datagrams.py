"""MVN datagram fuzzing for ``benchmarks/fuzz_inputs.py``: the real UDP receiver of ``wearable_node
source:=xsens`` -> ``ik_node`` (Human66) -> ``bridge_node`` (``clock:=message``), one process, real DDS.

The nodes run on a simulated clock (``use_sim_time``, ``/clock`` published by the harness): wearable_node
stamps each sample with its clock when the sample's last datagram arrives, so the harness sets the clock
to the sample's time before sending it, and message time is a clean 120 Hz whatever the machine's load.
Per clean sample: its datagrams (split at random sizes, sometimes out of order: all valid) are sent, the
harness waits until the receiver has read them and ik_node has the published sample. Bursts of one
mutation kind (``dynik_ros.testing.mvn_fuzz``) go out half a period after a clean sample, mostly made from
the next sample's datagrams so that they collide with them.

Judged, besides the wire invariants and recovery of ``fuzz_inputs.py``: how many clean samples were not
published after each burst kind, and no run of more than ``MAX_LOST_RUN`` clean samples lost in a row
(a receiver that stops following the sender, as after a counter jump or an MVN restart before issue 8).
"""

from __future__ import annotations

import socket
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
from fuzz_inputs import PERIOD_NS, RATE, WARMUP, clean_stretch, warm_up_threshold
from fuzz_rig import Probe, Rig, rejected

from dynik_ros.testing.invariants import NS, RecoveryTracker
from dynik_ros.testing.link_fuzz import walk
from dynik_ros.testing.mvn_fuzz import DATAGRAM_KINDS, clean_datagrams, mutate_datagrams, next_counter

MAX_LOST_RUN = 3  # an MVN restart costs 2 samples (confirmation), a collided sample 1
START_COUNTER = 2**32 - 300  # the uint32 sample counter wraps early in the run
SIM_START_NS = 1000 * NS


def fuzz_datagrams(
    mutated: int,
    seed: int,
    domain_id: int | None,
    kinds: tuple[str, ...] = DATAGRAM_KINDS,
    progress: bool = True,
) -> dict[str, Any]:
    """Run until ``mutated`` mutated datagrams were sent; the results as a dict (see ``print_report``)."""
    from rclpy.parameter import Parameter
    from rosgraph_msgs.msg import Clock

    from dynik_ros.models.segments import XSENS_SEGMENTS
    from dynik_ros.nodes.conversions import ns_to_stamp
    from dynik_ros.nodes.wearable_node import WearableNode
    from dynik_ros.testing.link_fuzz import CleanStream

    rng = np.random.default_rng(seed + 1)
    names, poses, twists = walk(20.0, RATE)
    order = [names.index(name) for name in XSENS_SEGMENTS]
    ids = np.arange(1, len(XSENS_SEGMENTS) + 1)
    stream = CleanStream(list(XSENS_SEGMENTS), poses[:, order], twists[:, order], PERIOD_NS, SIM_START_NS)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    sim = Parameter("use_sim_time", value=True)
    rig = Rig(domain_id)
    wearable = rig.add(
        WearableNode(
            context=rig.context,
            parameter_overrides=[
                Parameter("source", value="xsens"),
                Parameter("xsens_host", value="127.0.0.1"),
                Parameter("xsens_port", value=port),
                sim,
            ],
        )
    )
    ik, bridge, outputs = rig.add_ik_and_bridge("fuzz_mvn", sim)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rig.configure(bridge, ik, wearable)
        probe = Probe(rig, ik.robot, list(XSENS_SEGMENTS), bridge, "/fuzz_mvn/commands")
        clock_pub = probe.node.create_publisher(Clock, "/clock", 10)
        rig.spin_until(lambda: clock_pub.get_subscription_count() >= 2, 30.0)

        def set_clock(t: int) -> None:
            for _ in range(20):
                clock_pub.publish(Clock(clock=ns_to_stamp(t)))
                if rig.spin_until(lambda: wearable.get_clock().now().nanoseconds == t, 0.5):
                    return
            raise RuntimeError("the nodes do not follow /clock")

        set_clock(SIM_START_NS)
        rig.activate(bridge, ik, wearable)
        rig.spin_until(lambda: probe.node.count_publishers("/fuzz_mvn/commands") >= 1, 30.0)
        receiver = wearable._source.receiver
        handled = [0]  # datagrams sent so far (the receiver must have read as many)

        def send(datagrams: list[bytes]) -> None:
            for data in datagrams:
                tx.sendto(data, ("127.0.0.1", port))
            handled[0] += len(datagrams)
            read = lambda: receiver.bad_datagrams + receiver.assembler.counts["datagrams"]  # noqa: E731
            settled = lambda: (  # noqa: E731
                wearable.published + wearable.xsens_refused_segments + wearable.xsens_internal_errors
            )
            rig.spin_until(lambda: read() >= handled[0], 10.0)
            # the receive thread counts an assembled sample before it publishes it: wait until every
            # assembled sample went through the node (published or refused), or "lost" races the thread
            rig.spin_until(lambda: settled() >= receiver.assembler.counts["samples"], 10.0)
            if not rig.spin_until(lambda: ik.received + ik_lag[0] >= wearable.published, 10.0):
                ik_lag[0] = wearable.published - ik.received  # best effort: DDS dropped some (counted)

        clean_sent = [0]  # clean datagrams
        ik_lag = [0]  # link states wearable_node published that DDS never delivered to ik_node (best effort)
        counter = [START_COUNTER]
        previous: list[bytes] = []

        def clean_run(count: int) -> list[tuple[int, bool]]:
            """``count`` clean samples; per sample its stamp and whether wearable_node published it."""
            nonlocal previous
            run = []
            for _ in range(count):
                sample = stream.next()
                counter[0] = (counter[0] + 1) & 0xFFFFFFFF
                set_clock(sample.stamp_ns)
                probe.expect(sample.stamp_ns, sample.rotations())
                before = wearable.published
                previous = clean_datagrams(counter[0], ids, sample.poses, sample.twists, rng)
                send(previous)
                clean_sent[0] += len(previous)
                run.append((sample.stamp_ns, wearable.published > before))
            return run

        started = time.perf_counter()
        warm = clean_run(WARMUP)
        baseline, threshold = warm_up_threshold(rig, probe, warm, outputs, time_of=0)
        tracker = RecoveryTracker(threshold)
        sent: Counter = Counter()
        lost: Counter = Counter()
        long_losses: Counter = Counter()
        total_mutated, clean_samples, next_report = 0, WARMUP, 0
        refused_before: Counter = Counter()
        while total_mutated < mutated:
            kind = kinds[int(rng.integers(len(kinds)))]
            bad_ns = stream.stamp_ns + PERIOD_NS // 2
            set_clock(bad_ns)
            upcoming_sample = stream.sample(stream.k + 1, 0)
            for _ in range(int(rng.integers(1, 7))):
                upcoming = clean_datagrams(
                    (counter[0] + 1) & 0xFFFFFFFF, ids, upcoming_sample.poses, upcoming_sample.twists, rng
                )
                burst = mutate_datagrams(kind, upcoming, previous, rng)
                counter[0] = next_counter(kind, counter[0], rng)
                send(burst)
                sent[kind] += len(burst) if burst else 1  # a counter change counts as one mutated input
                total_mutated += len(burst) if burst else 1
            tracker.bad(bad_ns, kind)
            run = clean_run(clean_stretch(rng))
            clean_samples += len(run)
            streak = 0
            for published in (p for _, p in run):
                streak = 0 if published else streak + 1
                lost[kind] += not published
                if streak == MAX_LOST_RUN + 1:
                    long_losses[kind] += 1
            for (stamp, _), error in zip(run, probe.settle(rig, [s for s, _ in run], outputs), strict=True):
                if error is None or np.isfinite(error):  # inf: a non-finite output (a wire breach)
                    tracker.clean(stamp, error)
            if tracker.frozen:
                refused_before.update(ik.rejections.counts)  # configure clears them
                refused_before.update(rebased=ik.rebased, held=ik.held_steps)
                probe.restart(rig)
                rig.restart(bridge, ik, wearable)
            if progress and total_mutated >= next_report:
                next_report += max(mutated // 20, 1000)
                rate = (total_mutated + clean_sent[0]) / (time.perf_counter() - started)
                print(f"  datagrams: {total_mutated}/{mutated} mutated ({rate:.0f}/s)", file=sys.stderr)
        rig.spin_until(lambda: probe.diagnostic_values("ik_node").get("received") == str(ik.received), 5.0)
        counts = wearable.xsens_counts()
        receiver_line = ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "datagrams")
        return {
            "mutated": total_mutated,
            "clean": clean_samples,
            "sent": dict(sent),
            "refused": dict(
                Counter(rejected(probe.diagnostic_values("ik_node")))
                + Counter({k: v for k, v in refused_before.items() if k not in ("rebased", "held")})
            ),
            "bridge_refused": rejected(probe.diagnostic_values("bridge_node")),
            "diagnostics_seen": bool(probe.diagnostic_values("ik_node")),
            "notes": [
                f"clean datagrams {clean_sent[0]}; wearable_node: {wearable.published} samples published; "
                f"receiver counts: {receiver_line}",
                f"wearable_node /diagnostics: {_wearable_diag(probe.diagnostic_values('wearable_node'))}",
            ],
            "extra_columns": {"lost": dict(lost), f"lost>{MAX_LOST_RUN}": dict(long_losses)},
            "extra_breaches": (
                {f"runs of more than {MAX_LOST_RUN} clean samples lost": dict(long_losses)}
                if long_losses
                else {}
            ),
            "lost_on_the_way": ik_lag[0],
            "rebased": ik.rebased + refused_before["rebased"],
            "held_steps": ik.held_steps + refused_before["held"],
            "resets": sum(tracker.freezes.values()),
            "tracker": tracker,
            "baseline": baseline,
            "threshold": threshold,
            "checks": probe.checks,
            "announced_not_received": probe.announced_not_received,
            "crashes": rig.crashes,
            "crash_count": rig.crash_count,
            "nodes_active": all(n.lifecycle_state == "active" for n in (wearable, ik, bridge)),
            "seconds": time.perf_counter() - started,
            "domain": rig.domain_id,
        }
    finally:
        tx.close()
        rig.close()


def _wearable_diag(values: dict[str, str]) -> str:
    keys = ("published", "bad_datagrams", "late", "duplicate", "incomplete", "restarts", "other_character")
    return ", ".join(f"{k} {values[k]}" for k in keys if k in values) or "none received"
