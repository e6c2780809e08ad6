"""The fuzz and soak harness's own logic: mutation generators that do what they say, deterministically,
and checkers that fail on planted faults (a checker that cannot fail is worthless)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dynik_ros.io.xsens_stream import DatagramError, SampleAssembler, parse_datagram
from dynik_ros.models.segments import XSENS_SEGMENTS
from dynik_ros.nodes.conversions import MessageRejected, link_states_from_cdr, link_states_to_msg
from dynik_ros.testing.invariants import NS, DurationHistogram, RecoveryTracker, WireChecks, orientation_error
from dynik_ros.testing.link_fuzz import (
    PERSISTENT_KINDS,
    SINGLE_KINDS,
    TELEPORT_M,
    CleanStream,
    mutate,
    walk,
)
from dynik_ros.testing.mvn_fuzz import (
    DATAGRAM_KINDS,
    MAX_PAYLOADS,
    clean_datagrams,
    mutate_datagrams,
    next_counter,
)

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
PERIOD = 8_333_333


@pytest.fixture(scope="module")
def motion():
    return walk(1.0, 120.0)


@pytest.fixture()
def stream(motion):
    return CleanStream(*motion, PERIOD, 10**18)


# ----------------------------------------------------------------------------- link states
def test_encoder_writes_what_rclpy_reads(stream):
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import MultiDOFJointState

    s = stream.next()
    expected = link_states_to_msg(
        s.stamp_ns, s.names, s.poses[:, :3], s.poses[:, 3:], s.twists[:, :3], s.twists[:, 3:]
    )
    assert repr(deserialize_message(s.encode(), MultiDOFJointState)) == repr(expected)
    parsed = link_states_from_cdr(s.encode(), set(s.names), s.names)
    assert parsed.stamp_ns == s.stamp_ns and parsed.names == s.names
    np.testing.assert_array_equal(parsed.positions, s.poses[:, :3])
    np.testing.assert_array_equal(parsed.angular_velocities, s.twists[:, 3:])


# expected outcome of ik_node's parser (refusal reason) for the content kinds
PARSER_VERDICT = {
    "nan": "nan", "inf": "nan", "zero_quaternion": "non_rotation", "scaled_quaternion": "non_rotation",
    "short_twists": "wrong_lengths", "short_transforms": "wrong_lengths", "unknown_name": "unknown_links",
    "missing_link": "missing_links", "duplicate_name": "duplicate_names", "empty": "missing_links",
    "truncated": "wrong_lengths",
}  # fmt: skip


@pytest.mark.parametrize("kind", SINGLE_KINDS)
def test_link_state_mutations_are_deterministic_and_what_they_say(kind, stream):
    clean = stream.next()
    last = clean.stamp_ns
    stamp = last + PERIOD // 2
    first, second = (mutate(kind, clean, stamp, last, np.random.default_rng(5)) for _ in range(2))
    assert first == second  # same seed, same bytes
    assert (first == clean.encode()) == (kind == "repeated_stamp")  # that one is the message again
    if kind in ("garbage_bytes", "empty_bytes", "bit_flipped"):
        return  # anything goes (the flips may leave a parseable message)
    try:
        parsed = link_states_from_cdr(first, set(clean.names), clean.names)
    except MessageRejected as exc:
        assert exc.reason == PARSER_VERDICT[kind]
        return
    except Exception:  # noqa: BLE001 - undecodable: only acceptable for byte-level kinds
        pytest.fail(f"{kind} is not decodable")
    assert kind not in PARSER_VERDICT, f"{kind} parsed cleanly"
    positions = parsed.positions
    if kind == "future_stamp":
        assert parsed.stamp_ns > last + 300 * 24 * 3600 * NS
    elif kind == "near_future_stamp":
        assert 1.5 * NS <= parsed.stamp_ns - last <= 9 * NS
    elif kind == "past_stamp":
        assert parsed.stamp_ns < last - 300 * 24 * 3600 * NS
    elif kind == "zero_stamp":
        assert parsed.stamp_ns == 0
    elif kind == "negative_stamp":
        assert parsed.stamp_ns < 0
    elif kind == "repeated_stamp":
        assert parsed.stamp_ns == last
    elif kind == "backwards_stamp":
        assert parsed.stamp_ns < last
    else:
        assert parsed.stamp_ns == stamp
    if kind == "teleport":
        np.testing.assert_allclose(positions - clean.poses[:, :3], [[TELEPORT_M, 0, 0]] * len(positions))
    elif kind == "half_turn":  # every link turned by pi about z
        turned = np.einsum("ij,ljk->lik", np.diag([-1.0, -1.0, 1.0]), clean.rotations())
        np.testing.assert_allclose(parsed.rotations, turned, atol=1e-12)
    elif kind == "huge_position":
        assert np.abs(positions).max() == 1e20
    elif kind in ("huge_twist", "huge_angular"):
        assert np.abs(np.concatenate((parsed.linear_velocities, parsed.angular_velocities))).max() == 1e30


@pytest.mark.parametrize("seconds", [1.0, 20.0])
def test_clean_stream_laps_join_as_smoothly_as_the_walk_itself(seconds):
    """Every link, not only the pelvis: a lap that ends mid-cycle jumps the feet at each seam (a 20 s lap
    of the 1.1 s walk moved a foot 0.26 m in one sample), which the campaign read as slow recovery."""
    stream = CleanStream(*walk(seconds, 120.0), PERIOD, 0)
    n = len(stream.poses)
    positions = np.array([stream.next().poses[:, :3] for _ in range(n + 2)])  # k = 1 .. n + 2
    steps = np.linalg.norm(np.diff(positions, axis=0), axis=2).max(axis=1)  # largest link step
    seam = steps[n - 2]  # from sample n - 1 (last of lap 0) to sample n (first of lap 1)
    inside = np.delete(steps, n - 2).max()
    assert seam <= 1.5 * inside, f"seam step {seam:.3f} m vs {inside:.3f} m inside a lap"


def test_clean_stream_has_no_teleport_at_its_seams_and_persistent_changes_stay(motion):
    stream = CleanStream(*motion, PERIOD, 0)
    pelvis = stream.names.index("Pelvis")
    laps = 3 * len(stream.poses)
    positions = np.array([stream.next().poses[pelvis, :3] for _ in range(laps)])
    steps = np.linalg.norm(np.diff(positions, axis=0), axis=1)
    assert steps.max() < 5 * np.median(steps) + 1e-3
    before = stream.sample(stream.k, 0)
    stream.apply("teleport_persistent")
    moved = stream.sample(stream.k, 0)
    np.testing.assert_allclose(moved.poses[:, 0] - before.poses[:, 0], TELEPORT_M)
    stream.apply("teleport_persistent")  # toggles back
    stream.apply("half_turn_persistent")
    turned = stream.sample(stream.k, 0)
    flip = np.diag([-1.0, -1.0, 1.0])
    np.testing.assert_allclose(turned.poses[:, :3], before.poses[:, :3] @ flip, atol=1e-12)
    np.testing.assert_allclose(turned.rotations(), flip @ before.rotations(), atol=1e-12)
    np.testing.assert_allclose(turned.twists[:, 3:], before.twists[:, 3:] @ flip, atol=1e-12)
    t0 = stream.next().stamp_ns
    stream.apply("clock_back")
    assert stream.next().stamp_ns == t0 + PERIOD - 15 * NS
    assert set(PERSISTENT_KINDS) == {
        "teleport_persistent",
        "half_turn_persistent",
        "clock_forward",
        "clock_back",
    }


# ----------------------------------------------------------------------------- MVN datagrams
@pytest.fixture(scope="module")
def mvn(motion):
    names, poses, twists = motion
    order = [names.index(n) for n in XSENS_SEGMENTS]
    return np.arange(1, 24), poses[:, order], twists[:, order]


def _assemble(assembler: SampleAssembler, datagrams: list[bytes]) -> tuple[list, list[str]]:
    samples, errors = [], []
    for d in datagrams:
        try:
            samples += assembler.add(parse_datagram(d))
        except DatagramError as exc:
            errors.append(exc.reason)
    return samples, errors


def test_clean_datagrams_are_split_and_reordered_yet_valid(mvn):
    ids, poses, twists = mvn
    rng = np.random.default_rng(1)
    sizes = set()
    for counter in range(2**32 - 20, 2**32 + 20):  # across the uint32 wrap
        datagrams = clean_datagrams(counter, ids, poses[3], twists[3], rng)
        sizes.add(len(datagrams))
        again = (
            clean_datagrams(counter, ids, poses[3], twists[3], np.random.default_rng(7)) for _ in range(2)
        )
        assert next(again) == next(again)
        samples, errors = _assemble(SampleAssembler(), datagrams)
        assert not errors and len(samples) == 1
        np.testing.assert_allclose(samples[0].positions, poses[3, :, :3], atol=1e-5)
        np.testing.assert_allclose(samples[0].angular_velocities, twists[3, :, 3:], atol=1e-4)
    assert len(sizes) == len(MAX_PAYLOADS)  # every split size occurs (3 to 27 datagrams a sample)


# what the receiver makes of the burst alone (starting after one clean sample)
DATAGRAM_VERDICT = {
    "truncated": "truncated", "bad_magic": "bad_magic", "unknown_type": "ignored_type",
    "bad_item_count": "bad_item_count", "random_bytes": "bad_magic", "empty": "truncated",
    "nan_value": "non_finite", "zero_quaternion": "zero_quaternion", "other_character": "other_character",
    "duplicate": "late", "stale_sample": "late",
}  # fmt: skip


@pytest.mark.parametrize("kind", DATAGRAM_KINDS)
def test_datagram_mutations_are_deterministic_and_what_they_say(kind, mvn):
    ids, poses, twists = mvn
    previous = clean_datagrams(500, ids, poses[0], twists[0], np.random.default_rng(0))
    upcoming = clean_datagrams(501, ids, poses[1], twists[1], np.random.default_rng(0))
    first, second = (mutate_datagrams(kind, upcoming, previous, np.random.default_rng(9)) for _ in range(2))
    assert first == second
    assembler = SampleAssembler()
    _assemble(assembler, previous)
    samples, errors = _assemble(assembler, first)
    counts = {k: v for k, v in assembler.counts.items() if v and k not in ("datagrams", "samples")}
    if kind in DATAGRAM_VERDICT:
        assert not samples
        assert DATAGRAM_VERDICT[kind] in set(errors) | set(counts)
    elif kind == "bad_payload_size":
        assert not samples and set(errors) <= {"truncated", "bad_size"} and errors
    elif kind == "huge_position":  # finite and consistent: parses; sent with the rest of its sample, a
        # complete sample with a link 1e30 m away (alone, the sample waits for the clean datagrams)
        assert not errors
        for seed in range(20):
            burst = mutate_datagrams(kind, upcoming, previous, np.random.default_rng(seed))
            assembler = SampleAssembler()
            _assemble(assembler, previous)
            samples, _ = _assemble(assembler, burst)
            assert len(samples) == (len(burst) == len(upcoming))
            if samples:
                assert np.abs(samples[0].positions).max() == pytest.approx(1e30, rel=1e-6)
    elif kind == "interleaved":  # the next sample completes (early), the last one's datagrams are late
        assert len(samples) == 1 and samples[0].sample_counter == 501 and counts == {"late": len(previous)}
    elif kind in ("counter_jump", "restart"):
        assert first == []
    if kind != "bit_flipped":  # bit flips may or may not break a datagram
        assert first != upcoming


def test_datagram_mutations_never_fail_whatever_the_split(mvn):
    """Every kind on every split size and order, many draws: the generator itself must never raise."""
    ids, poses, twists = mvn
    rng = np.random.default_rng(11)
    for counter in range(1000, 1400):
        previous = clean_datagrams(counter, ids, poses[0], twists[0], rng)
        upcoming = clean_datagrams(counter + 1, ids, poses[1], twists[1], rng)
        for kind in DATAGRAM_KINDS:
            for data in mutate_datagrams(kind, upcoming, previous, rng):
                assert isinstance(data, bytes)


def test_link_state_mutations_never_fail(stream):
    rng = np.random.default_rng(12)
    for _ in range(30):
        clean = stream.next()
        for kind in SINGLE_KINDS:
            assert isinstance(mutate(kind, clean, clean.stamp_ns + 1000, clean.stamp_ns, rng), bytes)


def test_counter_changes():
    rng = np.random.default_rng(0)
    for counter in (5, 100, 2**32 - 3):
        jumped = next_counter("counter_jump", counter, rng)
        assert 2 <= (jumped - counter) % 2**32 <= 500
        restarted = next_counter("restart", counter, rng)
        behind = (counter - restarted) % 2**32
        assert 20 < behind < 2**31  # far enough behind to be a restart, not late datagrams
        assert next_counter("truncated", counter, rng) == counter


# ----------------------------------------------------------------------------- checkers
def test_wire_checks_catch_planted_bad_outputs():
    lower, upper, vmax = np.array([-1.0, -1.0]), np.array([1.0, 1.0]), np.array([2.0, 4.0])
    checks = WireChecks(lower, upper, vmax)
    ms = 1_000_000
    checks.command(np.array([0.0, 0.0]), 0)
    checks.command(np.array([0.02, -0.04]), 10 * ms)  # exactly at both limits over 10 ms
    checks.joint_state(1, np.array([0.5, 0.5]), np.zeros(2))
    assert not checks.breaches and checks.max_speed_ratio == pytest.approx(1.0)
    checks.command(np.array([0.0401, -0.04]), 20 * ms)  # joint 0 at 2.01 rad/s
    checks.command(np.array([0.0401, -0.04]), 20 * ms)  # no motion, no time: fine
    checks.command(np.array([0.0402, -0.04]), 20 * ms)  # motion in zero time
    checks.command(np.array([0.2, 1.5]), 1000 * ms)  # outside a limit (slow enough)
    checks.command(np.array([np.nan, 0.0]), 1010 * ms)
    checks.command(np.array([0.0, 0.0, 0.0]), 1020 * ms)
    checks.joint_state(2, np.array([0.0, np.inf]), np.zeros(2))
    checks.joint_state(3, np.array([0.0, -1.2]), np.zeros(2))
    checks.joint_state(4, np.array([0.0, 0.0]), np.array([np.nan, 0.0]))
    assert checks.breaches == {
        "command_too_fast": 2,
        "command_outside_limits": 1,
        "command_not_finite": 1,
        "command_wrong_size": 1,
        "ik_output_not_finite": 2,
        "ik_output_outside_limits": 1,
    }
    checks.restart()  # a new stream: no speed check across the gap
    checks.command(np.array([0.9, 0.9]), 1030 * ms)
    assert checks.breaches["command_too_fast"] == 2


def test_recovery_tracker_times_failures_and_freezes():
    ms = 1_000_000
    tracker = RecoveryTracker(threshold=1e-3)
    for t in range(10):  # warm-up: no burst yet, nothing judged
        tracker.clean(t * 10 * ms, 1e-4)
    tracker.bad(100 * ms, "nan")
    tracker.clean(105 * ms, 1e-4)  # at once
    tracker.bad(200 * ms, "teleport")
    for t in range(1, 30):  # recovers 250 ms after the last bad input
        tracker.clean(200 * ms + t * 10 * ms, 1e-2 if t < 25 else 1e-4)
    tracker.bad(600 * ms, "half_turn")
    tracker.bad(620 * ms, "zero_stamp")  # a harmless burst during the recovery: not to blame
    for t in range(1, 130):  # never back within 1 s of the last bad input
        tracker.clean(620 * ms + t * 10 * ms, 5e-3)
    assert tracker.times["nan"].max_ms == 5 and tracker.times["teleport"].max_ms == 250
    assert tracker.unrecovered == {"half_turn": 1}
    assert tracker.failures == [
        "half_turn at message time 1.620 s: error 5.00e-03 rad 1000 ms after the last bad input; "
        "bursts since the baseline: half_turn > zero_stamp"
    ]
    tracker.clean(2000 * ms, 1e-4)  # late recovery: time recorded, no second failure counted
    assert tracker.times["half_turn"].max_ms == 1380 and tracker.unrecovered == {"half_turn": 1}
    tracker.bad(2100 * ms, "nan")
    tracker.clean(2105 * ms, 5e-3)  # not recovered yet
    tracker.bad(2150 * ms, "clock_back")
    for t in range(1, 150):  # no output at all for 1.49 s: one freeze, blamed on the burst before it
        tracker.clean(2150 * ms + t * 10 * ms, None)
    assert tracker.freezes == {"clock_back": 1} and tracker.frozen
    assert tracker.unrecovered == {"half_turn": 1, "nan": 1}  # the failed recovery: the chain's first
    tracker.clean(3700 * ms, 1e-4)
    assert not tracker.frozen and tracker.bursts["nan"] == 2 and tracker.times["nan"].max_ms == 1550
    assert tracker.all_times.count == 4 and tracker.all_times.percentile(50) == 251  # 1 ms bins, upper edge


def test_duration_histogram_and_orientation_error():
    hist = DurationHistogram(span_ms=100)
    for ms in (1.2, 3.7, 3.9, 50.0, 250.0):
        hist.add(ms)
    assert hist.percentile(50) == 4 and hist.max_ms == 250.0 and hist.percentile(100) == 101
    angle = 1e-6
    rz = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    assert orientation_error(np.stack([rz, np.eye(3)]), np.stack([np.eye(3)] * 2)) == pytest.approx(
        angle / 2, rel=1e-6
    )


def _fake_run(seed: int, recoveries: dict, breach: bool) -> dict:
    """A fuzz run's results dict (the shape fuzz_link_states returns) with known recoveries."""
    tracker = RecoveryTracker(2e-5)
    t = 0
    for kind, times_ms in recoveries.items():
        for ms in times_ms:
            tracker.bad(t, kind)
            tracker.clean(t + int(ms * 1e6), 1e-5)  # recovered after ms
            t += 10 * NS
    checks = WireChecks(np.full(2, -1.0), np.full(2, 1.0), np.full(2, 1.0))
    checks.joint_state(0, np.zeros(2))
    if breach:
        checks.joint_state(1, np.array([np.nan, 0.0]))
    return {
        "mutated": 100, "clean": 300, "sent": {k: len(v) for k, v in recoveries.items()},
        "refused": {"nan": 3}, "crash_count": 0, "nodes_active": True, "crashes": [], "seconds": 2.0,
        "baseline": 1e-5, "threshold": 2e-5, "tracker": tracker, "checks": checks, "resets": 0,
        "lost_on_the_way": 0, "rebased": 1, "held_steps": 0,
    }  # fmt: skip


def test_a_campaign_merges_its_chunks_without_losing_a_breach(monkeypatch):
    """fuzz_campaign's merge: counts add up, recovery histograms merge exactly (p50/max of all chunks),
    and one chunk's breach fails the merged report."""
    import json

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from fuzz_inputs import print_report
    from fuzz_record import merge, to_record

    a = json.loads(json.dumps(to_record(_fake_run(1, {"nan": [5, 7], "teleport": [900]}, False), 1, "x")))
    b = json.loads(json.dumps(to_record(_fake_run(2, {"nan": [3], "teleport": [1200]}, False), 2, "x")))
    merged = merge([a, b])
    assert merged["mutated"] == 200 and merged["clean"] == 600 and merged["refused"] == {"nan": 6}
    tracker = merged["tracker"]
    assert tracker.bursts == {"nan": 3, "teleport": 2}
    assert tracker.times["nan"].percentile(50) == 6 and tracker.times["teleport"].max_ms == 1200
    assert tracker.unrecovered == {"teleport": 1}  # the 1.2 s recovery of chunk 2
    assert len(tracker.failures) == 1 and tracker.failures[0].startswith("seed 2: teleport at")
    assert not print_report("merged", merged, "messages")
    healthy = merge([a, a])
    assert print_report("healthy", healthy, "messages")
    broken = merge([a, to_record(_fake_run(3, {"nan": [4]}, True), 3, "x")])
    assert broken["checks"].breaches and not print_report("broken", broken, "messages")


# ----------------------------------------------------------------------------- end to end (real nodes)
@pytest.fixture()
def fuzz(private_domain, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import fuzz_inputs

    return fuzz_inputs


def _too_fast_bridge(ik, bridge) -> None:
    """Planted fault: the bridge's velocity limits tripled after the warm-up and the IK output jumped by
    0.5 rad once (every later output shifted), which the bridge passes on faster than the model allows."""
    bridge.velocity_limit = bridge.velocity_limit * 3.0
    publish, n = ik._publish_state, ik.robot.n_joints

    def shifted(stamp, q, v):
        q = np.array(q, dtype=float)
        q[-n:] += 0.5
        publish(stamp, q, v)

    ik._publish_state = shifted


def test_the_link_state_fuzzer_catches_a_bridge_that_commands_too_fast(fuzz):
    """Planted fault: the bridge's velocity limits tripled after the warm-up, and the IK output jumps by
    0.5 rad once (the bridge must rate-limit it: ik_node itself no longer jumps, since a re-base keeps the
    posture). The probe must see commands faster than the model's limits (pairing each command with the
    stamp it was commanded for)."""

    r = fuzz.fuzz_link_states(60, 3, None, ("nan", "teleport"), progress=False, tamper=_too_fast_bridge)
    assert r["checks"].breaches.get("command_too_fast", 0) > 0, r["checks"].breaches
    assert r["checks"].max_speed_ratio > 1.5


def test_the_link_state_fuzzer_catches_a_frozen_ik(fuzz):
    """Planted fault: ik_node stops publishing after the warm-up (as a held QP would): freezes counted and
    the nodes restarted, the harness goes on."""

    def tamper(ik, bridge):
        ik._publish_state = lambda *args: None

    r = fuzz.fuzz_link_states(300, 4, None, ("nan",), progress=False, tamper=tamper)
    assert sum(r["tracker"].freezes.values()) >= 1 and r["resets"] >= 1
    assert not r["checks"].breaches and r["crash_count"] == 0


def test_the_link_state_fuzzer_passes_healthy_nodes(fuzz):
    r = fuzz.fuzz_link_states(60, 5, None, ("nan", "truncated", "future_stamp"), progress=False)
    assert not r["checks"].breaches and r["crash_count"] == 0 and r["nodes_active"]
    assert sum(r["tracker"].freezes.values()) == 0 and r["checks"].commands > 300
    assert r["refused"].get("nan", 0) + r["refused"].get("wrong_lengths", 0) > 0


def test_commands_are_paired_with_their_times_by_content_not_position(monkeypatch):
    """A command the probe never received (dropped by its queue under load) must not shift the pairing
    of every later one: the speed check would compare commands with the wrong times (the soak's false
    command_too_fast breaches on a saturated machine). Content pairing skips the lost one and checks the
    next over the longer interval, which stays within the limit."""
    from collections import deque

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from fuzz_rig import pair_command

    ms = 1_000_000
    emitted = [(k * 10 * ms, np.array([0.01 * k, -0.01 * k])) for k in range(6)]  # 1 rad/s, 10 ms apart
    pending = deque(emitted)
    checks = WireChecks(np.full(2, -1.0), np.full(2, 1.0), np.full(2, 1.0))
    for k in (0, 1, 3, 4, 5):  # command 2 never arrives
        time_ns, missed = pair_command(pending, emitted[k][1].copy())
        assert time_ns == emitted[k][0] and missed == (1 if k == 3 else 0)
        checks.command(emitted[k][1], time_ns)
    assert not checks.breaches and checks.max_speed_ratio == pytest.approx(1.0)
    assert not pending
    assert pair_command(deque(emitted[:2]), np.array([9.0, 9.0])) == (None, 0)  # unknown: nothing dropped
    # the old positional pairing, for contrast: after the lost command every pair is one period off
    shifted = WireChecks(np.full(2, -1.0), np.full(2, 1.0), np.full(2, 1.0))
    for (time_ns, _), k in zip(emitted, (0, 1, 3, 4, 5), strict=False):
        shifted.command(emitted[k][1], time_ns)
    assert shifted.breaches  # 0.02 rad in 10 ms: 2x the limit


# ----------------------------------------------------------------------------- bounded teardown
@pytest.fixture()
def rig_module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import fuzz_rig

    return fuzz_rig


def test_a_blocked_teardown_call_costs_a_bounded_wait(rig_module, capsys):
    release = threading.Event()
    try:
        assert not rig_module.bounded(release.wait, 0.2, "a call that blocks")
        assert "a call that blocks still blocked after 0.2 s" in capsys.readouterr().err
    finally:
        release.set()
    assert rig_module.bounded(lambda: None, 60.0, "a call that returns")
    with pytest.raises(KeyError):  # an error of the call reaches the caller
        rig_module.bounded(lambda: {}["x"], 60.0, "a call that raises")


def test_the_rig_leaves_a_context_whose_node_teardown_blocks(rig_module, private_domain, monkeypatch):
    """The hang seen once in a full suite: ``destroy_node()`` of the domain check never returned. The rig
    now gives up on it after a bounded wait and builds its executor on a fresh context of the same
    domain, which works (a node there is seen by a second context)."""
    import rclpy

    blocked = threading.Event()

    def block() -> None:  # a teardown that does not return (bounded here, so a regression fails, not hangs)
        if not blocked.wait(60.0):
            raise RuntimeError("destroy_node blocked")

    real_create = rclpy.create_node
    created = []

    def create_node(name, **kwargs):
        node = real_create(name, **kwargs)
        if name.startswith("fuzz_domain_check_") and not created:
            created.append(node)
            monkeypatch.setattr(node, "destroy_node", block)
        return node

    monkeypatch.setattr(rclpy, "create_node", create_node)
    monkeypatch.setattr(rig_module, "TEARDOWN_TIMEOUT", 0.5)
    try:
        rig = rig_module.Rig()
        stuck = created[0].context
        assert rig.context is not stuck and rig.domain_id == int(os.environ["ROS_DOMAIN_ID"])
        rig.add(real_create("rig_probe", context=rig.context))
        seen = real_create("rig_probe_observer", context=stuck)
        try:
            deadline = time.monotonic() + 60.0  # only bounds a failure (discovery under load)
            names = []
            while "rig_probe" not in names and time.monotonic() < deadline:
                time.sleep(0.1)
                names = [n for n, _ in seen.get_node_names_and_namespaces()]
            assert "rig_probe" in names
        finally:
            seen.destroy_node()
        rig.close()
        assert not rig.context.ok()  # closed to the end
    finally:
        blocked.set()
        if created:
            stuck = created[0].context
            type(created[0]).destroy_node(created[0])
            rclpy.shutdown(context=stuck)


def test_the_link_state_fuzzer_drives_a_retargeting_ik_node(fuzz, tmp_path):
    """``--robot``: the fuzz goes through ik_node retargeting to G1 (contact rules, toe-off noise estimate,
    with ``anchor: robot``, ``reach`` on and hard stance rows, the maps' defaults; Human66 has no
    retargeter), judged on G1's limits: healthy nodes pass; a bridge commanding 3x too fast is caught."""
    import yaml

    from dynik_ros.retarget.registry import find_robot_yaml

    data = yaml.safe_load(find_robot_yaml("g1").read_text())
    data["robot"]["name"] = "g1_fuzz"
    path = tmp_path / "g1_fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    kinds = ("nan", "teleport_persistent", "half_turn")
    r = fuzz.fuzz_link_states(60, 6, None, kinds, progress=False, robot=str(path))
    assert not r["checks"].breaches and r["crash_count"] == 0 and r["nodes_active"]
    assert sum(r["tracker"].freezes.values()) == 0 and r["checks"].commands > 300
    assert r["refused"].get("nan", 0) > 0 and r["rebased"] > 0

    def tamper(ik, bridge):
        assert ik.retargeter is not None and ik.retargeter.config.contact.anchor == "robot"
        _too_fast_bridge(ik, bridge)

    r = fuzz.fuzz_link_states(60, 3, None, ("nan",), progress=False, tamper=tamper, robot=str(path))
    assert r["checks"].breaches.get("command_too_fast", 0) > 0, r["checks"].breaches
