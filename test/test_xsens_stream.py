"""Xsens MVN network streaming: the wire format (against hand-packed bytes), encoder -> parser round trips,
the sample assembler (merging 02 + 21 + 22, split samples, out-of-order and duplicate datagrams), malformed
datagrams, the UDP receiver, the simulator, and wearable_node source:=xsens with real rclpy and DDS.
"""

from __future__ import annotations

import math
import os
import socket
import struct
import time
from typing import Any

import numpy as np
import pytest

from dynik_ros.io.xsens_stream import (
    DATAGRAM_ERRORS,
    DATAGRAM_SETS,
    DEFAULT_PORT,
    HEADER_SIZE,
    SEGMENT_NAMES,
    DatagramError,
    SampleAssembler,
    StreamUnits,
    XsensReceiver,
    encode_datagram,
    encode_sample,
    parse_datagram,
)

IDS = np.arange(1, 24)


@pytest.fixture(scope="module")
def walk():
    """0.5 s of synthetic Human66 walking at 60 Hz (the synthetic source of wearable_node)."""
    from dynik_ros.nodes.wearable_node import SyntheticSource

    source = SyntheticSource("human66", "walking", 0.5, 60.0, 0.0, 1)
    return list(source.samples())


def encode(s: Any, counter: int, **kwargs: Any) -> list[bytes]:
    return encode_sample(
        counter, IDS, s.positions, s.quaternions, s.linear_velocities, s.angular_velocities, **kwargs
    )


def assemble(datagrams: list[bytes], assembler: SampleAssembler | None = None) -> list:
    assembler = assembler or SampleAssembler()
    out = []
    for data in datagrams:
        out += assembler.add(parse_datagram(data), 7)
    return out


def f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def same_rotation(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    sign = np.sign(np.einsum("ij,ij->i", a, b))[:, None]
    np.testing.assert_allclose(a, b * sign, atol=atol)


# --------------------------------------------------------------------------- wire format
def test_constants_follow_the_specification():
    # segment ids of the specification's table 1 (3.1), 1-based
    spec_ids = {
        "Pelvis": 1,
        "Head": 7,
        "RightShoulder": 8,
        "LeftHand": 15,
        "RightUpperLeg": 16,
        "LeftToe": 23,
    }
    assert {name: SEGMENT_NAMES.index(name) + 1 for name in spec_ids} == spec_ids
    assert len(SEGMENT_NAMES) == 23
    assert HEADER_SIZE == 24 and DEFAULT_PORT == 9763
    assert set(DATAGRAM_SETS["02+21+22"]) == {"02", "21", "22"}


def test_header_and_items_byte_by_byte():
    """A datagram packed by hand with struct, as the specification lays it out, parses to what it says."""
    items = struct.pack(">i7f", 1, 0.1, 0.2, 0.9, 0.5, 0.5, -0.5, 0.5)  # id, x y z, q w x y z
    items += struct.pack(">i7f", 7, -1.0, 2.0, 1.5, 1.0, 0.0, 0.0, 0.0)
    header = b"MXTP02" + struct.pack(">IBBIBBBBHH", 0xFFFFFFFE, 0x80, 2, 123456, 3, 23, 0, 0, 0, len(items))
    d = parse_datagram(header + items)
    assert (d.message_type, d.sample_counter, d.datagram_index, d.last) == ("02", 0xFFFFFFFE, 0, True)
    assert (d.item_count, d.time_code, d.character_id, d.body_segment_count) == (2, 123456, 3, 23)
    assert d.segment_ids.tolist() == [1, 7]
    np.testing.assert_allclose(d.positions, f32([[0.1, 0.2, 0.9], [-1.0, 2.0, 1.5]]))
    np.testing.assert_allclose(d.quaternions, [[0.5, -0.5, 0.5, 0.5], [0.0, 0.0, 0.0, 1.0]])  # xyzw

    ours = encode_datagram("02", 0xFFFFFFFE, items, 2, time_code=123456, character_id=3)
    assert ours == header + items
    split = encode_datagram("21", 5, b"", 0, datagram_index=2, last=True)
    assert split[:6] == b"MXTP21" and split[10] == 0x82 and len(split) == HEADER_SIZE
    assert encode_datagram("22", 5, b"", 0, datagram_index=1, last=False)[10] == 0x01

    lin = struct.pack(">i9f", 4, 1, 2, 3, 4, 5, 6, 7, 8, 9)
    d = parse_datagram(encode_datagram("21", 1, lin, 1))
    assert d.positions.tolist() == [[1, 2, 3]] and d.linear_velocities.tolist() == [[4, 5, 6]]
    assert d.linear_accelerations.tolist() == [[7, 8, 9]] and d.quaternions is None
    ang = struct.pack(">i10f", 4, 0.0, 0.0, 0.0, 1.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    d = parse_datagram(encode_datagram("22", 1, ang, 1))
    np.testing.assert_allclose(d.quaternions, [[0, 0, 1, 0]])
    np.testing.assert_allclose(d.angular_velocities, f32([[0.1, 0.2, 0.3]]))


def test_other_message_types_are_skipped_not_refused():
    for kind in ("01", "12", "13", "25", "99"):
        d = parse_datagram(encode_datagram(kind, 1, b"name:alice\n", 0))
        assert not d.supported and d.message_type == kind and len(d.segment_ids) == 0
    assembler = SampleAssembler()
    assert assembler.add(parse_datagram(encode_datagram("13", 1, b"", 0))) == []
    assert assembler.counts["ignored_type"] == 1


def test_props_and_fingers_after_the_body_are_skipped(walk):
    s = walk[0]
    ids = np.concatenate([IDS, [24, 25]])
    pos = np.vstack([s.positions, np.ones((2, 3))])
    quat = np.vstack([s.quaternions, [[0, 0, 0, 1]] * 2])
    (data,) = encode_sample(1, ids, pos, quat, types=("02",))
    d = parse_datagram(data)
    assert d.item_count == 25 and d.extra_items == 2 and d.segment_ids.tolist() == IDS.tolist()


# --------------------------------------------------------------------------- round trips
def test_encoder_parser_round_trip_to_float32_precision(walk):
    for k in (0, 11, 29):
        s = walk[k]
        datagrams = encode(s, 100 + k, time_code=5 * k, character_id=0)
        assert [d[:6] for d in datagrams] == [b"MXTP02", b"MXTP21", b"MXTP22"]
        assert [len(d) for d in datagrams] == [24 + 23 * 32, 24 + 23 * 40, 24 + 23 * 44]
        (out,) = assemble(datagrams)
        assert out.names == list(s.names) and out.sample_counter == 100 + k and out.time_code == 5 * k
        np.testing.assert_array_equal(out.positions, f32(s.positions))
        np.testing.assert_array_equal(out.linear_velocities, f32(s.linear_velocities))
        np.testing.assert_array_equal(out.angular_velocities, f32(s.angular_velocities))
        same_rotation(out.quaternions, s.quaternions, atol=2e-7)
        np.testing.assert_allclose(np.linalg.norm(out.quaternions, axis=1), 1.0, atol=1e-15)


@pytest.mark.parametrize(
    "units",
    [
        StreamUnits("cm", "deg/s", "world"),
        StreamUnits("m", "rad/s", "segment"),
        StreamUnits("cm", "deg/s", "segment"),
    ],
    ids=str,
)
def test_units_and_frames_convert_back_to_si_world(walk, units):
    s = walk[17]
    datagrams = encode(s, 1, units=units)
    raw = {d.message_type: d for d in map(parse_datagram, datagrams)}
    if units.position == "cm":
        np.testing.assert_allclose(raw["02"].positions, s.positions * 100, rtol=1e-6)
    if units.angular_velocity_frame == "segment":  # on the wire: omega in the segment frame
        assert not np.allclose(raw["22"].angular_velocities, s.angular_velocities, atol=1e-3)
    (out,) = assemble(datagrams, SampleAssembler(units=units))
    np.testing.assert_allclose(out.positions, s.positions, atol=1e-6)
    np.testing.assert_allclose(out.linear_velocities, s.linear_velocities, atol=1e-6)
    np.testing.assert_allclose(out.angular_velocities, s.angular_velocities, atol=1e-5)


# --------------------------------------------------------------------------- assembler
def test_assembler_merges_02_21_22_in_any_order(walk):
    s = walk[3]
    pose, linear, angular = encode(s, 42)
    assembler = SampleAssembler()
    assert assemble([angular, pose], assembler) == []  # waits for the third type
    (out,) = assemble([linear], assembler)
    assert out.sample_counter == 42 and out.received_ns == 7
    np.testing.assert_allclose(out.positions, s.positions, atol=1e-6)
    np.testing.assert_allclose(out.angular_velocities, s.angular_velocities, atol=1e-5)
    assert assembler.counts["samples"] == 1 and assembler.counts["datagrams"] == 3

    # pose from 21 + 22 alone; 02 alone gives no twists; datagrams of other types are ignored
    (out,) = assemble([pose, linear, angular], SampleAssembler(DATAGRAM_SETS["21+22"]))
    np.testing.assert_allclose(out.positions, s.positions, atol=1e-6)
    same_rotation(out.quaternions, s.quaternions, atol=1e-6)
    only_pose = SampleAssembler(DATAGRAM_SETS["02"])
    (out,) = assemble([linear, pose, angular], only_pose)
    assert out.linear_velocities is None and out.angular_velocities is None
    assert only_pose.counts["ignored_type"] == 2


def test_split_samples_are_merged_whatever_the_arrival_order(walk):
    s = walk[8]
    whole = assemble(encode(s, 9))[0]
    parts = encode(s, 9, max_payload=300)  # 9, 7 and 6 items per datagram
    assert len(parts) == 3 + 4 + 4
    counters = [p[10] for p in parts]
    assert counters[:3] == [0, 1, 0x82]
    (out,) = assemble(parts[::-1])
    np.testing.assert_array_equal(out.positions, whole.positions)
    np.testing.assert_array_equal(out.angular_velocities, whole.angular_velocities)
    np.testing.assert_array_equal(out.quaternions, whole.quaternions)

    assembler = SampleAssembler()
    assert assemble([p for i, p in enumerate(encode(s, 10, max_payload=300)) if i != 5], assembler) == []
    assert len(assemble(encode(walk[9], 11, max_payload=300), assembler)) == 1
    assert assembler.counts["incomplete"] == 1  # sample 10 lost a datagram: dropped, counted


def test_out_of_order_duplicate_and_foreign_datagrams_are_dropped_and_counted(walk):
    assembler = SampleAssembler()
    assert len(assemble(encode(walk[0], 1), assembler)) == 1
    assert len(assemble(encode(walk[2], 3), assembler)) == 1
    assert assemble(encode(walk[1], 2), assembler) == []  # older than sample 3: late
    assert assembler.counts["late"] == 3
    assert assemble(encode(walk[2], 3), assembler) == []  # sample 3 again
    assert assembler.counts["late"] == 6
    four = encode(walk[3], 4)
    assert assemble([four[0], four[0]], assembler) == []
    assert assembler.counts["duplicate"] == 1
    assert len(assemble(four[1:], assembler)) == 1
    assert assemble(encode(walk[4], 5, character_id=1), assembler) == []
    assert assembler.counts["other_character"] == 3
    # sample 6 overtaken by a complete sample 7: incomplete; its last datagram is then late
    six, seven = encode(walk[5], 6), encode(walk[6], 7)
    assert assemble(six[:2] + seven, assembler)[0].sample_counter == 7
    assert assemble(six[2:], assembler) == []
    assert assembler.counts["incomplete"] == 1 and assembler.counts["late"] == 7
    assert assembler.counts["samples"] == 4

    # uint32 wrap-around is in order; a big jump back is a restart of MVN, not a late sample
    wrap = SampleAssembler()
    counters = [0xFFFFFFFE, 0xFFFFFFFF, 0, 1]
    got = [o.sample_counter for k, c in enumerate(counters) for o in assemble(encode(walk[k], c), wrap)]
    assert got == counters and wrap.counts["late"] == 0
    assert len(assemble(encode(walk[9], 5000), wrap)) == 1
    assert len(assemble(encode(walk[10], 3), wrap)) == 1 and wrap.counts["restarts"] == 1


def test_inconsistent_types_refuse_the_sample(walk):
    s = walk[5]
    pose, linear, angular = encode(s, 1)
    y_up = s.positions[:, [0, 2, 1]] * [1, -1, 1]  # a Network Streamer set to Y-up for type 02
    (pose_y,) = encode_sample(1, IDS, y_up, s.quaternions, types=("02",))
    assembler = SampleAssembler()
    assert assemble([pose_y, linear, angular], assembler) == []
    assert assembler.counts["inconsistent"] == 1 and "02 and 21 positions" in assembler.last_drop
    (fewer,) = encode_sample(2, IDS[:-1], s.positions[:-1], s.quaternions[:-1], types=("02",))
    _, linear2, angular2 = encode(s, 2)
    assert assemble([fewer, linear2, angular2], assembler) == []
    assert assembler.counts["inconsistent"] == 2 and "different segments" in assembler.last_drop
    assert len(assemble(encode(s, 3), assembler)) == 1


# --------------------------------------------------------------------------- malformed datagrams
def _valid(walk: list) -> bytes:
    return encode(walk[4], 77)[0]  # type 02, 23 items


def _with_item(data: bytes, item: int, fmt: str, values: tuple) -> bytes:
    offset = HEADER_SIZE + 32 * item
    return data[:offset] + struct.pack(fmt, *values) + data[offset + struct.calcsize(fmt) :]


MALFORMED = {
    "empty": (lambda d: b"", "truncated"),
    "short header": (lambda d: d[:20], "truncated"),
    "cut payload": (lambda d: d[:-5], "truncated"),
    "header only": (lambda d: d[:HEADER_SIZE], "truncated"),
    "wrong magic": (lambda d: b"MXTQ" + d[4:], "bad_magic"),
    "letters as type": (lambda d: b"MXTPab" + d[6:], "bad_magic"),
    "other protocol": (lambda d: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad_magic"),
    "extra bytes": (lambda d: d + b"\x00", "bad_size"),
    "size not a multiple": (lambda d: d[:22] + struct.pack(">H", len(d) - 27) + d[24:-3], "bad_size"),
    "item count": (lambda d: d[:11] + bytes([22]) + d[12:], "bad_item_count"),
    "segment id 0": (lambda d: _with_item(d, 3, ">i", (0,)), "unknown_segment"),
    "segment id 99": (lambda d: _with_item(d, 3, ">i", (99,)), "unknown_segment"),
    "segment id -1": (lambda d: _with_item(d, 0, ">i", (-1,)), "unknown_segment"),
    "repeated id": (lambda d: _with_item(d, 5, ">i", (1,)), "duplicate_segment"),
    "NaN position": (lambda d: _with_item(d, 2, ">if", (3, math.nan)), "non_finite"),
    "inf quaternion": (lambda d: _with_item(d, 2, ">i7f", (3, 0, 0, 1, 1.0, math.inf, 0, 0)), "non_finite"),
    "zero quaternion": (lambda d: _with_item(d, 6, ">i7f", (7, 0, 0, 1, 0, 0, 0, 0)), "zero_quaternion"),
    "scaled quaternion": (
        lambda d: _with_item(d, 6, ">i7f", (7, 0, 0, 1, 0.5, 0, 0, 0)),
        "not_unit_quaternion",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_datagrams_raise_a_clear_value_error(walk, case):
    mutate, reason = MALFORMED[case]
    with pytest.raises(ValueError) as err:
        parse_datagram(mutate(_valid(walk)))
    assert isinstance(err.value, DatagramError) and err.value.reason == reason
    assert reason in str(err.value) and len(str(err.value)) > len(reason) + 10  # says what is wrong
    assert reason in DATAGRAM_ERRORS


def test_nan_in_twists_is_refused(walk):
    s = walk[4]
    lin = np.array(s.linear_velocities)
    lin[4, 1] = math.nan
    with pytest.raises(DatagramError, match="non-finite value in 'v'"):
        parse_datagram(encode_sample(1, IDS, s.positions, s.quaternions, lin, s.angular_velocities)[1])


def test_random_garbage_never_raises_anything_but_datagram_error(walk):
    rng = np.random.default_rng(3)
    valid = encode(walk[4], 77)
    for trial in range(1500):
        base = bytearray(valid[trial % 3])
        if trial % 5 == 0:
            data = rng.bytes(int(rng.integers(0, 200)))
        else:
            for _ in range(int(rng.integers(1, 6))):
                base[int(rng.integers(0, len(base)))] = int(rng.integers(0, 256))
            data = bytes(base[: int(rng.integers(0, len(base) + 1))] if trial % 7 == 0 else base)
        try:
            parse_datagram(data)
        except DatagramError:
            pass


# --------------------------------------------------------------------------- receiver and simulator
def test_receiver_polls_without_blocking_and_counts_garbage(walk):
    with XsensReceiver("127.0.0.1", 0) as receiver:
        t0 = time.perf_counter()
        assert receiver.poll() == [] and time.perf_counter() - t0 < 0.05
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            for k in range(5):
                for data in encode(walk[k], k + 1):
                    tx.sendto(data, ("127.0.0.1", receiver.port))
                tx.sendto(b"MXTP02 garbage", ("127.0.0.1", receiver.port))
            tx.sendto(b"", ("127.0.0.1", receiver.port))
        got: list = []
        deadline = time.monotonic() + 2.0
        while len(got) < 5 and time.monotonic() < deadline:
            got += receiver.poll()
        time.sleep(0.02)
        got += receiver.poll()
        assert [s.sample_counter for s in got] == [1, 2, 3, 4, 5]
        assert receiver.errors["truncated"] == 6 and receiver.bad_datagrams == 6
        assert all(s.received_ns > 0 for s in got)


def test_receiver_bind_errors_are_os_errors():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        with pytest.raises(OSError):
            XsensReceiver("127.0.0.1", taken.getsockname()[1])
    with pytest.raises(OSError):
        XsensReceiver("192.0.2.1", 0)  # TEST-NET-1: not an address of this machine


def test_simulator_streams_the_synthetic_motion():
    from dynik_ros.io.xsens_stream import main

    with XsensReceiver("127.0.0.1", 0) as receiver:
        argv = ["--port", str(receiver.port), "--rate", "200", "--duration", "0.1", "--count", "8"]
        assert main(argv + ["--position-unit", "cm"]) == 0
        got: list = []
        deadline = time.monotonic() + 2.0
        while len(got) < 8 and time.monotonic() < deadline:
            got += receiver.poll()
    assert [s.sample_counter for s in got] == list(range(1, 9))
    assert got[0].names == list(SEGMENT_NAMES)
    assert 10 < got[0].positions[6, 2] < 200  # the head, in cm read as m: the unit is a parameter


# --------------------------------------------------------------------------- wearable_node source:=xsens


@pytest.fixture
def node_env(ros):
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    nodes: list = []

    def add(node: Any) -> Any:
        nodes.append(node)
        executor.add_node(node)
        return node

    def spin_until(condition: Any, timeout: float = 15.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if condition():
                return True
            executor.spin_once(timeout_sec=0.002)
        return condition()

    probe = add(ros.create_node(f"xsens_probe_{os.getpid()}_{time.monotonic_ns()}"))
    yield add, spin_until, probe
    for node in nodes:
        executor.remove_node(node)
        node.destroy_node()
    executor.shutdown()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def xsens_node(**values: Any):
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.wearable_node import WearableNode

    values = {"source": "xsens", "xsens_host": "127.0.0.1", "diagnostics_period": 0.1, **values}
    return WearableNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def ok(result: Any) -> bool:
    from rclpy.lifecycle import TransitionCallbackReturn

    return result == TransitionCallbackReturn.SUCCESS


def test_wearable_node_publishes_the_live_stream(node_env, walk):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import RELIABLE_QOS, SENSOR_QOS
    from dynik_ros.nodes.conversions import stamp_to_ns

    add, spin_until, probe = node_env
    port = free_udp_port()
    src = add(xsens_node(xsens_port=port))
    got: list = []
    diagnostics: list = []
    probe.create_subscription(MultiDOFJointState, "/human/link_states", got.append, SENSOR_QOS)
    probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, RELIABLE_QOS)
    assert ok(src.trigger_configure()), src.last_error
    assert spin_until(lambda: src._pub.get_subscription_count() >= 1)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    target = ("127.0.0.1", port)
    for data in encode(walk[0], 1):  # sent while inactive: discarded at activation, never published
        tx.sendto(data, target)
    time.sleep(0.05)
    assert ok(src.trigger_activate())
    garbage = [b"", b"hello", b"MXTQ02" + bytes(18), encode(walk[0], 1)[0][:-4]]
    nan = bytearray(encode(walk[0], 1)[1])
    nan[HEADER_SIZE + 4 : HEADER_SIZE + 8] = struct.pack(">f", math.nan)
    garbage.append(bytes(nan))
    for k, s in enumerate(walk):
        before = src.published
        for data in encode(s, 1000 + k):
            tx.sendto(data, target)
        tx.sendto(garbage[k % len(garbage)], target)  # between samples: counted, never fatal
        assert spin_until(lambda before=before: src.published > before, timeout=10.0), k
    # /human/link_states is best-effort (a sensor stream): on a loaded machine DDS may drop some. What the
    # node published is counted exactly (src.published); what arrived is checked for content below.
    spin_until(lambda: len(got) >= len(walk), timeout=2.0)
    assert got, "no link state arrived"

    # a sample without the head: refused and counted, then the stream goes on
    few = encode_sample(
        2000,
        IDS[:-1],
        walk[0].positions[:-1],
        walk[0].quaternions[:-1],
        walk[0].linear_velocities[:-1],
        walk[0].angular_velocities[:-1],
    )
    for data in [*few, *encode(walk[1], 2001)]:
        tx.sendto(data, target)
    tx.close()
    assert spin_until(lambda: src.published == len(walk) + 1)
    spin_until(lambda: len(got) == len(walk) + 1, timeout=2.0)
    assert src.xsens_refused_segments == 1

    stamps = [stamp_to_ns(m.header.stamp) for m in got]
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    for msg in got:
        assert list(msg.joint_names) == list(SEGMENT_NAMES) and msg.header.frame_id == "world"
        p = np.array([[t.translation.x, t.translation.y, t.translation.z] for t in msg.transforms])
        sent = [s for s in walk if np.allclose(p, s.positions, atol=1e-5)]
        assert sent, "a received link state matches no sample that was sent"
        s = sent[0]
        q = np.array([[t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w] for t in msg.transforms])
        v = np.array([[w.linear.x, w.linear.y, w.linear.z] for w in msg.twist])
        w = np.array([[w.angular.x, w.angular.y, w.angular.z] for w in msg.twist])
        np.testing.assert_allclose(p, s.positions, atol=1e-5)
        same_rotation(q, s.quaternions, atol=1e-5)
        np.testing.assert_allclose(v, s.linear_velocities, atol=1e-5)
        np.testing.assert_allclose(w, s.angular_velocities, atol=1e-5)

    counts = src.xsens_counts()
    assert counts["bad_truncated"] == 18 and counts["bad_bad_magic"] == 6 and counts["bad_non_finite"] == 6
    assert counts["bad_datagrams"] == 30 and counts["samples"] == len(walk) + 2
    assert counts["internal_errors"] == 0 and src.active

    def status() -> dict[str, str]:
        for msg in reversed(diagnostics):
            for st in msg.status:
                if st.name.startswith(src.get_name()):
                    return {kv.key: kv.value for kv in st.values}
        return {}

    assert spin_until(lambda: status().get("published") == str(len(walk) + 1), timeout=10.0)
    values = status()
    assert values["source"] == "xsens" and values["xsens_port"] == str(port)
    assert values["bad_datagrams"] == "30" and values["refused_segments"] == "1"
    assert ok(src.trigger_deactivate()) and ok(src.trigger_cleanup())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as again:
        again.bind(("127.0.0.1", port))  # cleanup released the port


@pytest.mark.parametrize(
    "values, parameter",
    [
        ({"realtime": False}, "realtime"),
        ({"xsens_port": "taken"}, "xsens_port"),
        ({"xsens_host": "192.0.2.1"}, "xsens_host"),
        ({"xsens_datagrams": "02+23"}, "xsens_datagrams"),
        ({"xsens_position_unit": "mm"}, "xsens_position_unit"),
    ],
    ids=["realtime", "port_in_use", "foreign_host", "datagrams", "unit"],
)
def test_wearable_node_configure_names_the_bad_xsens_parameter(node_env, values, parameter):
    add = node_env[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        values = {"xsens_port": free_udp_port(), **values}
        if values["xsens_port"] == "taken":
            values["xsens_port"] = taken.getsockname()[1]
        node = add(xsens_node(**values))
        assert not ok(node.trigger_configure())
    assert node.lifecycle_state == "unconfigured"
    assert f"parameter '{parameter}'" in node.last_error, node.last_error


def test_a_sender_restart_or_a_stray_sample_costs_a_few_samples_not_a_thousand(walk):
    """MVN restarted (counter back to 0 after 500 samples) and one stray complete sample from another
    sender with a counter 600 ahead: the receiver used to drop every sample until the live counter passed
    the old one again (up to ``restart_gap`` = 1000 samples, ~17 s at 60 Hz)."""
    restart = SampleAssembler()
    before = sum(len(assemble(encode(walk[k % len(walk)], k), restart)) for k in range(500))
    after = sum(len(assemble(encode(walk[k % len(walk)], k), restart)) for k in range(100))
    assert before == 500 and after >= 98 and restart.counts["restarts"] == 1

    stray = SampleAssembler()
    assert sum(len(assemble(encode(walk[k % len(walk)], k), stray)) for k in range(100)) == 100
    assert len(assemble(encode(walk[0], 700), stray)) == 1  # a whole sample from elsewhere, far ahead
    resumed = sum(len(assemble(encode(walk[k % len(walk)], k), stray)) for k in range(100, 200))
    assert resumed >= 98

    # late datagrams of the live stream (a few samples behind) are still dropped as late, never a restart
    live = SampleAssembler()
    for k in range(50):
        assemble(encode(walk[k % len(walk)], k), live)
    for k in (47, 48, 49):
        assert assemble(encode(walk[0], k), live) == []
    assert live.counts["restarts"] == 0 and live.counts["late"] > 0
