"""Mutated Xsens MVN network-stream datagrams (``dynik_ros.io.xsens_stream``'s wire format), ROS-free.

:func:`clean_datagrams` encodes a valid sample the way MVN may send it: each message type (02, 21, 22)
split into datagrams of a random size (the specification's split samples, 2.4.1.3, which a 23-segment
sample needs only on a small MTU) and, one time in three, the sample's datagrams in a random order (UDP
does not keep order). :func:`mutate_datagrams` turns the datagrams of a sample into one of
:data:`DATAGRAM_KINDS`; ``counter_jump`` and ``restart`` change the sender's counter instead
(:func:`next_counter`). Same generator state, same bytes.
"""

from __future__ import annotations

import struct

import numpy as np

from dynik_ros.io.xsens_stream import HEADER_SIZE, ITEM_SIZES, encode_sample

MAX_PAYLOADS = (1448, 600, 300, 120)  # one Ethernet MTU (the default), then ever smaller splits
CONTENT_KINDS = (
    "truncated", "bit_flipped", "bad_magic", "unknown_type", "bad_payload_size", "bad_item_count",
    "random_bytes", "empty", "nan_value", "zero_quaternion", "huge_position", "other_character",
)  # fmt: skip
"""Corrupted datagrams of the next sample, sent before its clean ones (they collide with them)."""
STREAM_KINDS = ("duplicate", "stale_sample", "interleaved", "counter_jump", "restart")
"""Disorder of the stream: the last sample again, a long-gone sample, the next sample's datagrams mixed
with the last one's, the counter jumping ahead, MVN restarting (counter back near 0)."""
DATAGRAM_KINDS = CONTENT_KINDS + STREAM_KINDS
# byte offsets in an item of each type (after its int32 id): positions and quaternions (w, x, y, z)
_POSITION = {"02": 4, "21": 4}
_QUATERNION = {"02": 16, "22": 4}
# header (specification 2.4.1): ID 0-5, sample counter 6-9, datagram counter 10, items 11, time code 12-15,
# character id 16, segments 17, props 18, fingers 19, reserved 20-21, payload size 22-23
_COUNTER, _ITEMS, _CHARACTER, _PAYLOAD_SIZE = 6, 11, 16, 22


def clean_datagrams(
    counter: int,
    ids: np.ndarray,
    poses: np.ndarray,
    twists: np.ndarray,
    rng: np.random.Generator,
    time_code: int = 0,
) -> list[bytes]:
    """One valid sample (``poses`` ``(L, 7)`` position + xyzw quaternion, ``twists`` ``(L, 6)``) as MVN
    datagrams of types 02, 21 and 22, split at a payload size drawn from the counter (a sender splits one
    sample one way, however often it is resent), shuffled one time in three."""
    split = MAX_PAYLOADS[((counter & 0xFFFFFFFF) * 2654435761 >> 11) % len(MAX_PAYLOADS)]
    out = encode_sample(
        counter & 0xFFFFFFFF, ids, poses[:, :3], poses[:, 3:], twists[:, :3], twists[:, 3:],
        time_code=time_code, max_payload=split,
    )  # fmt: skip
    if rng.random() < 1 / 3:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


def _floats(datagram: bytearray, item: int, offset: int, values: tuple[float, ...]) -> None:
    kind = datagram[4:6].decode("ascii", "replace")
    start = HEADER_SIZE + item * ITEM_SIZES[kind] + offset
    struct.pack_into(f">{len(values)}f", datagram, start, *values)


def _with_position(datagram: bytes, segment: int, axis: int, value: float) -> bytes:
    """``datagram`` with position ``axis`` of segment id ``segment`` set to ``value`` (types 02, 21)."""
    kind = datagram[4:6].decode("ascii", "replace")
    if kind not in _POSITION:
        return datagram
    out = bytearray(datagram)
    for item in range(_items(datagram)):
        start = HEADER_SIZE + item * ITEM_SIZES[kind]
        if struct.unpack_from(">i", out, start)[0] == segment:
            struct.pack_into(">f", out, start + _POSITION[kind] + 4 * axis, value)
    return bytes(out)


def _items(datagram: bytes) -> int:
    return datagram[_ITEMS] if len(datagram) > _ITEMS else 0


def mutate_datagrams(
    kind: str, upcoming: list[bytes], previous: list[bytes], rng: np.random.Generator
) -> list[bytes]:
    """What a burst of ``kind`` sends: ``upcoming`` are the next sample's clean datagrams (content kinds
    corrupt one of them and send it, with the rest of the sample half of the time), ``previous`` the last
    clean sample's. ``counter_jump`` and ``restart`` send nothing (see :func:`next_counter`)."""
    if kind in ("counter_jump", "restart"):
        return []
    if kind == "duplicate":
        return list(previous)
    if kind == "interleaved":  # the next sample's datagrams mixed with a repeat of the last one's
        mixed = list(upcoming) + list(previous)
        return [mixed[i] for i in rng.permutation(len(mixed))]
    if kind == "random_bytes":
        return [rng.integers(0, 256, int(rng.integers(1, 1500)), dtype=np.uint8).tobytes()]
    if kind == "empty":
        return [b""]
    choices = range(len(upcoming))
    if kind == "zero_quaternion":  # a datagram that carries quaternions (types 02, 22)
        choices = [j for j, u in enumerate(upcoming) if u[4:6].decode("ascii", "replace") in _QUATERNION]
    i = choices[int(rng.integers(len(choices)))]
    d = bytearray(upcoming[i])
    message_type = d[4:6].decode("ascii")
    item = int(rng.integers(max(_items(d), 1)))
    if kind == "stale_sample":  # a sample long gone: its counter 5-900 behind the last one
        counter = (
            struct.unpack_from(">I", previous[0], _COUNTER)[0] - int(rng.integers(5, 900))
        ) & 0xFFFFFFFF
        struct.pack_into(">I", d, _COUNTER, counter)
    elif kind == "truncated":
        d = d[: int(rng.integers(0, len(d)))]
    elif kind == "bit_flipped":
        for j in rng.integers(0, len(d), int(rng.integers(1, 9))):
            d[j] ^= 1 << int(rng.integers(8))
    elif kind == "bad_magic":
        d[0:4] = b"MXTQ"
    elif kind == "unknown_type":
        d[4:6] = b"%02d" % int(rng.choice([1, 3, 12, 13, 20, 25, 99]))
    elif kind == "bad_payload_size":
        size = struct.unpack_from(">H", d, _PAYLOAD_SIZE)[0]
        struct.pack_into(">H", d, _PAYLOAD_SIZE, (size + int(rng.choice([-4, -1, 1, 40]))) & 0xFFFF)
    elif kind == "bad_item_count":
        d[_ITEMS] = (d[_ITEMS] + int(rng.integers(1, 5))) & 0xFF
    elif kind == "other_character":
        d[_CHARACTER] = int(rng.integers(1, 256))
    elif kind == "nan_value":
        _floats(d, item, 4 + 4 * int(rng.integers(3)), (float("nan"),))
    elif kind == "zero_quaternion":
        _floats(d, item, _QUATERNION[message_type], (0.0, 0.0, 0.0, 0.0))
    elif kind == "huge_position":  # finite, consistent in 02 and 21: a complete sample the IK must refuse
        segment, axis = int(rng.integers(1, 24)), int(rng.integers(3))
        out = [_with_position(u, segment, axis, 1e30) for u in upcoming]
        return out if rng.random() < 0.5 else [u for u, c in zip(out, upcoming, strict=True) if u != c]
    else:
        raise ValueError(f"unknown datagram mutation '{kind}'")
    if rng.random() < 0.5:
        return [bytes(d)]
    return [bytes(d) if j == i else u for j, u in enumerate(upcoming)]


def next_counter(kind: str, counter: int, rng: np.random.Generator) -> int:
    """The sender's sample counter after a burst of ``kind`` (uint32): ``counter_jump`` skips 2-500
    samples ahead, ``restart`` starts again at 0-20 (or, when that would not be behind the counter, 1500
    behind: a counter a few samples back is indistinguishable from late datagrams), anything else
    unchanged."""
    if kind == "counter_jump":
        return (counter + int(rng.integers(2, 501))) & 0xFFFFFFFF
    if kind == "restart":
        new = int(rng.integers(0, 21))
        behind = (counter - new) & 0xFFFFFFFF
        return new if 20 < behind < 0x80000000 else (counter - 1500) & 0xFFFFFFFF
    return counter
