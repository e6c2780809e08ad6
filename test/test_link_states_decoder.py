"""LinkStatesDecoder: a stream's link names read and checked once, everything else on every message;
results identical to the one-shot decode, refusals unchanged when the names change under the cache."""

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
