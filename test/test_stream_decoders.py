"""LinkStatesDecoder and JointStateDecoder: a stream's names read and checked once, everything else on
every message; results identical to the one-shot decode (rclpy's deserialization for joint states),
refusals unchanged when the names change under the cache."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.nodes.cdr_writer import LinkStatesWriter
from dynik_ros.nodes.conversions import (
    DUPLICATE_NAMES,
    MISSING_LINKS,
    NAN,
    UNDECODABLE,
    UNKNOWN_LINKS,
    WRONG_LENGTHS,
    JointStateDecoder,
    LinkStatesDecoder,
    MessageRejected,
    link_states_from_cdr,
)

RNG = np.random.default_rng(7)
NAMES = [f"Link{i}" for i in range(23)]


def _message(names, stamp, frame="world", nan=False):
    n = len(names)
    p, lin, ang = RNG.normal(size=(3, n, 3))
    q = RNG.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    if nan:
        p[n // 2, 1] = np.nan
    return bytes(LinkStatesWriter(names, frame).serialize(stamp, p, q, lin, ang))


def _same(a, b):
    assert a.stamp_ns == b.stamp_ns and a.names == b.names
    for field in ("positions", "rotations", "linear_velocities", "angular_velocities"):
        assert np.array_equal(getattr(a, field), getattr(b, field))


def test_a_stream_decodes_as_each_message_alone_and_reads_the_names_once():
    decoder = LinkStatesDecoder(frozenset(NAMES), NAMES)
    first = None
    for k, frame in enumerate(["world", "w", "world_frame_x", "world"]):  # other alignments after frame_id
        data = _message(NAMES, 10**9 + k * 4_166_667, frame)
        links = decoder.decode(data)
        _same(links, link_states_from_cdr(data, frozenset(NAMES), NAMES))
        first = first or links.names
        assert links.names is first  # the cached names: not decoded again


@pytest.mark.parametrize(
    "names, reason",
    [
        ([*NAMES[:-1], "Link99"], UNKNOWN_LINKS),  # same count and byte length as the cached names
        ([*NAMES[:-1], NAMES[0]], DUPLICATE_NAMES),
        (NAMES[:-1], MISSING_LINKS),
        ([*NAMES, "Link23"], UNKNOWN_LINKS),  # the cached strings and one more (the count differs)
    ],
)
def test_other_names_after_the_cache_are_read_and_checked_again(names, reason):
    decoder = LinkStatesDecoder(frozenset(NAMES), NAMES)
    decoder.decode(_message(NAMES, 1))
    with pytest.raises(MessageRejected) as refused:
        decoder.decode(_message(names, 2))
    assert refused.value.reason == reason
    _same(decoder.decode(data := _message(NAMES, 3)), link_states_from_cdr(data))


def test_values_are_checked_on_every_message_of_a_known_stream():
    decoder = LinkStatesDecoder(frozenset(NAMES), NAMES)
    decoder.decode(_message(NAMES, 1))
    with pytest.raises(MessageRejected) as refused:
        decoder.decode(_message(NAMES, 2, nan=True))
    assert refused.value.reason == NAN and "Link11" in refused.value.detail
    truncated = _message(NAMES, 3)[:-40]
    with pytest.raises(MessageRejected):
        decoder.decode(truncated)
    with pytest.raises(MessageRejected) as refused:
        decoder(b"\x01\x02\x03")  # not CDR of a MultiDOFJointState: one 'undecodable' refusal
    assert refused.value.reason == UNDECODABLE


def _joint_state(names, stamp, velocities=True, effort=False, nan=False, positions=None):
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from dynik_ros.nodes.conversions import float_array, ns_to_stamp

    msg = JointState()
    msg.header.stamp = ns_to_stamp(stamp)
    msg.header.frame_id = "base" * (stamp % 3)  # other alignments after frame_id
    msg.name = list(names)
    values = RNG.normal(size=len(names) if positions is None else positions)
    if nan:
        values[-1] = np.inf
    msg.position = float_array(values)
    if velocities:
        msg.velocity = float_array(RNG.normal(size=len(names)))
    if effort:
        msg.effort = float_array(RNG.normal(size=len(names)))
    return msg, serialize_message(msg)


def test_joint_states_decode_as_rclpy_deserializes_them():
    from dynik_ros.nodes.conversions import joint_state_from_msg

    joints = [f"joint_{i}" for i in range(66)]
    decoder = JointStateDecoder()
    first = None
    for k in range(6):
        msg, data = _joint_state(joints, 10**9 + k, velocities=k % 2 == 0, effort=k % 3 == 0)
        stamp, names, positions, velocities = decoder(data)
        expected = joint_state_from_msg(msg)
        assert stamp == expected[0] and names == expected[1]
        assert np.array_equal(positions, expected[2])
        assert (velocities is None) == (expected[3] is None)
        assert velocities is None or np.array_equal(velocities, expected[3])
        first = first or names
        assert names is first  # names decoded once


@pytest.mark.parametrize(
    "kind, reason",
    [("duplicate", DUPLICATE_NAMES), ("nan", NAN), ("lengths", WRONG_LENGTHS), ("truncated", WRONG_LENGTHS)],
)
def test_bad_joint_states_are_refused_before_and_after_the_cache(kind, reason):
    joints = [f"joint_{i}" for i in range(12)]
    for cached in (False, True):
        decoder = JointStateDecoder()
        if cached:
            decoder(_joint_state(joints, 1)[1])
        names = [*joints[:-1], joints[0]] if kind == "duplicate" else joints
        _, data = _joint_state(
            names, 2, nan=kind == "nan", positions=len(joints) - 1 if kind == "lengths" else None
        )
        with pytest.raises(MessageRejected) as refused:
            decoder(data[:-30] if kind == "truncated" else data)
        assert refused.value.reason == reason


def test_a_message_without_links_is_refused_also_as_the_first_one():
    decoder = LinkStatesDecoder(frozenset(NAMES), NAMES)
    with pytest.raises(MessageRejected) as refused:
        decoder.decode(_message([], 1))
    assert refused.value.reason == MISSING_LINKS


def test_the_header_stamp_is_read_without_deserializing():
    from dynik_ros.nodes.conversions import header_stamp_ns

    for stamp in (0, 1, 10**9 - 1, 1_700_000_000_123_456_789):
        _, data = _joint_state([f"joint_{i}" for i in range(66)], stamp)
        assert header_stamp_ns(data) == stamp
