"""MVN Network Streamer protocol (specification rev. 2024): datagram layout, :func:`parse_datagram` with
its checks (:class:`DatagramError`), unit conventions (:class:`StreamUnits`) and the encoder used by the
simulator and the tests (:func:`encode_datagram`, :func:`encode_sample`). See :mod:`dynik_ros.io.xsens_stream`
for the overview."""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dynik_ros.models.segments import XSENS_SEGMENTS

DEFAULT_PORT = 9763
"""Default UDP port of the MVN Network Streamer (specification 2.3)."""

MAGIC = b"MXTP"
HEADER = struct.Struct(">6sIBBIBBBBHH")
HEADER_SIZE = HEADER.size  # 24
LAST_DATAGRAM = 0x80

SEGMENT_NAMES: tuple[str, ...] = XSENS_SEGMENTS
"""Body segment names by id - 1 (specification 3.1, table 1: the order of the human models' links)."""

BODY_SEGMENTS = len(SEGMENT_NAMES)
MAX_ITEM_ID = BODY_SEGMENTS + 1 + 4 + 40
"""Largest item id accepted: 23 body segments, up to 4 props (table 1 gives them indices 24-27, i.e. ids
25-28, leaving 24 unexplained: both are accepted) and 40 finger segments (2.4.1.8-9, table 2). Items
other than the body segments are skipped."""

POSE, LINEAR, ANGULAR = "02", "21", "22"
SUPPORTED_TYPES = (POSE, LINEAR, ANGULAR)
DATAGRAM_SETS: dict[str, tuple[str, ...]] = {
    "02+21+22": (POSE, LINEAR, ANGULAR),
    "21+22": (LINEAR, ANGULAR),
    "02": (POSE,),
}
"""Which message types make a complete sample (the Network Streamer's ticked datagrams). Pose comes from
type 02 when present, else from 21 (position) and 22 (orientation); twists need 21 and 22."""

_ITEM_DTYPES = {
    POSE: np.dtype([("id", ">i4"), ("p", ">f4", (3,)), ("q", ">f4", (4,))]),
    LINEAR: np.dtype([("id", ">i4"), ("p", ">f4", (3,)), ("v", ">f4", (3,)), ("a", ">f4", (3,))]),
    ANGULAR: np.dtype([("id", ">i4"), ("q", ">f4", (4,)), ("w", ">f4", (3,)), ("dw", ">f4", (3,))]),
}
ITEM_SIZES = {kind: dtype.itemsize for kind, dtype in _ITEM_DTYPES.items()}  # 32, 40, 44
# float columns (after the id) of each field, and the field of each column
_COLUMNS: dict[str, dict[str, slice]] = {}
_FIELD_OF_COLUMN: dict[str, list[str]] = {}
for _kind, _dtype in _ITEM_DTYPES.items():
    _start, _COLUMNS[_kind], _FIELD_OF_COLUMN[_kind] = 0, {}, []
    for _name in _dtype.names[1:]:
        _size = _dtype[_name].shape[0]
        _COLUMNS[_kind][_name] = slice(_start, _start + _size)
        _FIELD_OF_COLUMN[_kind] += [_name] * _size
        _start += _size
_WXYZ_TO_XYZW = [1, 2, 3, 0]
_XYZW_TO_WXYZ = [3, 0, 1, 2]

DATAGRAM_ERRORS = (
    "truncated",
    "bad_magic",
    "bad_size",
    "bad_item_count",
    "unknown_segment",
    "duplicate_segment",
    "non_finite",
    "zero_quaternion",
    "not_unit_quaternion",
)
"""Reasons of :class:`DatagramError`, one counter each in the receiver."""

UNIT_QUATERNION_TOLERANCE = 0.05
"""MVN sends normalized quaternions (2.5.8); a norm off by more than this is not one."""


class DatagramError(ValueError):
    """A malformed datagram; ``reason`` is one of :data:`DATAGRAM_ERRORS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class StreamUnits:
    """Units and frames of the sender (see the module docstring for why each is a choice)."""

    position: str = "m"  # "m" or "cm"
    angular_velocity: str = "rad/s"  # "rad/s" or "deg/s"
    angular_velocity_frame: str = "world"  # "world" or "segment"

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("position", self.position, ("m", "cm")),
            ("angular_velocity", self.angular_velocity, ("rad/s", "deg/s")),
            ("angular_velocity_frame", self.angular_velocity_frame, ("world", "segment")),
        ):
            if value not in choices:
                raise ValueError(f"StreamUnits.{name} must be one of {list(choices)}, got {value!r}")

    @property
    def metres_per_unit(self) -> float:
        return 0.01 if self.position == "cm" else 1.0

    @property
    def radians_per_unit(self) -> float:
        return math.pi / 180.0 if self.angular_velocity == "deg/s" else 1.0


@dataclass(frozen=True)
class Datagram:
    """One parsed datagram. Arrays hold the body segments only (ids 1..23, in the datagram's order), in the
    sender's units; quaternions are unit, ``(x, y, z, w)``. A type this module does not use (``supported``
    False) has empty arrays. ``None``: the type does not carry that quantity."""

    message_type: str
    sample_counter: int
    datagram_index: int
    last: bool
    item_count: int
    time_code: int
    character_id: int
    body_segment_count: int
    prop_count: int
    finger_segment_count: int
    supported: bool
    segment_ids: np.ndarray  # (n,) int
    positions: np.ndarray | None = None  # (n, 3) types 02, 21
    quaternions: np.ndarray | None = None  # (n, 4) xyzw, types 02, 22
    linear_velocities: np.ndarray | None = None  # (n, 3) type 21
    linear_accelerations: np.ndarray | None = None  # (n, 3) type 21
    angular_velocities: np.ndarray | None = None  # (n, 3) type 22
    angular_accelerations: np.ndarray | None = None  # (n, 3) type 22
    extra_items: int = 0  # props and finger segments, skipped


def parse_datagram(data: bytes | bytearray | memoryview) -> Datagram:
    """Parse one UDP datagram.

    Raises:
        DatagramError: anything malformed (see :data:`DATAGRAM_ERRORS`); a well-formed datagram of a type
            other than 02, 21, 22 is returned with ``supported=False`` instead.
    """
    data = bytes(data)
    if len(data) < HEADER_SIZE:
        raise DatagramError("truncated", f"{len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    (ident, counter, dcounter, items, time_code, character, nbody, nprops, nfingers, _, payload_size) = (
        HEADER.unpack_from(data)
    )
    if ident[:4] != MAGIC or not (48 <= ident[4] <= 57 and 48 <= ident[5] <= 57):
        raise DatagramError("bad_magic", f"ID string {ident!r} is not 'MXTP' + two digits")
    kind = ident[4:].decode("ascii")
    actual = len(data) - HEADER_SIZE
    if actual < payload_size:
        raise DatagramError("truncated", f"payload of {actual} bytes, the header announces {payload_size}")
    if actual > payload_size:
        raise DatagramError("bad_size", f"payload of {actual} bytes, the header announces {payload_size}")
    dtype = _ITEM_DTYPES.get(kind)
    if dtype is None:  # a type not used here (01, 03, 05, 12, 13, 20, 23, 24, 25, future ones): skipped
        return Datagram(
            kind, counter, dcounter & 0x7F, bool(dcounter & LAST_DATAGRAM), items, time_code, character,
            nbody, nprops, nfingers, False, np.zeros(0, dtype=np.int64),
        )  # fmt: skip
    if payload_size % dtype.itemsize:
        raise DatagramError(
            "bad_size", f"type {kind}: payload of {payload_size} bytes is not a multiple of {dtype.itemsize}"
        )
    if payload_size // dtype.itemsize != items:
        raise DatagramError(
            "bad_item_count",
            f"type {kind}: {payload_size // dtype.itemsize} items in the payload, the header says {items}",
        )
    # one copy: the payload as big-endian words, column 0 the ids, the rest float32 -> float64
    words = np.frombuffer(data, dtype=">u4", offset=HEADER_SIZE).reshape(items, dtype.itemsize // 4)
    id_list = words[:, 0].view(">i4").tolist()
    if items and (min(id_list) < 1 or max(id_list) > MAX_ITEM_ID):
        bad = next(i for i in id_list if not 1 <= i <= MAX_ITEM_ID)
        raise DatagramError("unknown_segment", f"type {kind}: segment id {bad} is not 1..23")
    values = words[:, 1:].view(">f4").astype(np.float64)
    body_ids = [i for i in id_list if i <= BODY_SEGMENTS]
    if len(body_ids) != items:
        values = values[np.asarray(id_list) <= BODY_SEGMENTS]
    if len(set(body_ids)) != len(body_ids):
        raise DatagramError("duplicate_segment", f"type {kind}: a segment id appears twice")
    if not np.isfinite(values).all():
        column = int(np.nonzero(~np.isfinite(values))[1][0])
        field_name = _FIELD_OF_COLUMN[kind][column]
        raise DatagramError("non_finite", f"type {kind}: non-finite value in '{field_name}'")
    fields = {name: values[:, cols] for name, cols in _COLUMNS[kind].items()}
    if "q" in fields:
        q = fields["q"]
        norm = np.sqrt((q * q).sum(axis=1))
        if len(norm) and norm.min() < 1e-6:
            raise DatagramError("zero_quaternion", f"type {kind}: quaternion of norm 0")
        off = np.abs(norm - 1.0)
        if len(off) and off.max() > UNIT_QUATERNION_TOLERANCE:
            worst = float(norm[np.argmax(off)])
            raise DatagramError("not_unit_quaternion", f"type {kind}: quaternion of norm {worst:.4g}")
        fields["q"] = q[:, _WXYZ_TO_XYZW] / norm[:, None]
    return Datagram(
        kind,
        counter,
        dcounter & 0x7F,
        bool(dcounter & LAST_DATAGRAM),
        items,
        time_code,
        character,
        nbody,
        nprops,
        nfingers,
        True,
        np.array(body_ids, dtype=np.int64),
        fields.get("p"),
        fields.get("q"),
        fields.get("v"),
        fields.get("a"),
        fields.get("w"),
        fields.get("dw"),
        items - len(body_ids),
    )


# --------------------------------------------------------------------------- encoding
def encode_datagram(
    message_type: str,
    sample_counter: int,
    payload: bytes,
    item_count: int,
    *,
    datagram_index: int = 0,
    last: bool = True,
    time_code: int = 0,
    character_id: int = 0,
    body_segment_count: int = BODY_SEGMENTS,
    prop_count: int = 0,
    finger_segment_count: int = 0,
    payload_size: int | None = None,
) -> bytes:
    """Header + ``payload`` (``payload_size`` overrides the announced size, for tests of broken senders)."""
    if len(message_type) != 2 or not message_type.isdigit():
        raise ValueError(f"message type must be two digits, got {message_type!r}")
    if not 0 <= datagram_index < 0x80:
        raise ValueError(f"datagram index must be 0..127, got {datagram_index}")
    header = HEADER.pack(
        MAGIC + message_type.encode("ascii"),
        sample_counter & 0xFFFFFFFF,
        datagram_index | (LAST_DATAGRAM if last else 0),
        item_count & 0xFF,
        time_code & 0xFFFFFFFF,
        character_id & 0xFF,
        body_segment_count & 0xFF,
        prop_count & 0xFF,
        finger_segment_count & 0xFF,
        0,
        (len(payload) if payload_size is None else payload_size) & 0xFFFF,
    )
    return header + payload


def encode_sample(
    sample_counter: int,
    segment_ids: Sequence[int] | np.ndarray,
    positions: np.ndarray,
    quaternions: np.ndarray,
    linear_velocities: np.ndarray | None = None,
    angular_velocities: np.ndarray | None = None,
    *,
    types: Sequence[str] = DATAGRAM_SETS["02+21+22"],
    time_code: int = 0,
    character_id: int = 0,
    units: StreamUnits | None = None,
    max_payload: int = 1500 - 20 - 8 - HEADER_SIZE,
    linear_accelerations: np.ndarray | None = None,
    angular_accelerations: np.ndarray | None = None,
) -> list[bytes]:
    """The datagrams MVN would send for one sample: SI world-frame inputs (quaternions ``x, y, z, w``)
    converted to ``units``; each type split into several datagrams when its payload exceeds
    ``max_payload`` (default: one 1500-byte Ethernet MTU minus IP, UDP and MVN headers). Accelerations
    default to zero."""
    units = units or StreamUnits()
    ids = np.asarray(segment_ids, dtype=np.int64).reshape(-1)
    n = len(ids)
    p = np.asarray(positions, dtype=float).reshape(n, 3) / units.metres_per_unit
    q = np.asarray(quaternions, dtype=float).reshape(n, 4)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    zeros = np.zeros((n, 3))
    v = zeros if linear_velocities is None else np.asarray(linear_velocities, dtype=float).reshape(n, 3)
    w = zeros if angular_velocities is None else np.asarray(angular_velocities, dtype=float).reshape(n, 3)
    if units.angular_velocity_frame == "segment":
        w = np.einsum("lji,lj->li", _rotations(q), w)  # R^T omega
    v = v / units.metres_per_unit
    w = w / units.radians_per_unit
    a = zeros if linear_accelerations is None else np.asarray(linear_accelerations, float).reshape(n, 3)
    dw = zeros if angular_accelerations is None else np.asarray(angular_accelerations, float).reshape(n, 3)
    out = []
    for kind in types:
        dtype = _ITEM_DTYPES.get(kind)
        if dtype is None:
            raise ValueError(f"cannot encode message type {kind!r}, only {list(SUPPORTED_TYPES)}")
        rec = np.zeros(n, dtype=dtype)
        rec["id"] = ids
        if kind == POSE:
            rec["p"], rec["q"] = p, q[:, _XYZW_TO_WXYZ]
        elif kind == LINEAR:
            rec["p"], rec["v"], rec["a"] = p, v, a / units.metres_per_unit
        else:
            rec["q"], rec["w"], rec["dw"] = q[:, _XYZW_TO_WXYZ], w, dw / units.radians_per_unit
        per = max(1, max_payload // dtype.itemsize)
        chunks = [rec[i : i + per] for i in range(0, n, per)] or [rec]
        if len(chunks) > 0x80:
            raise ValueError(f"type {kind}: {len(chunks)} datagrams, more than the protocol's 128")
        for index, chunk in enumerate(chunks):
            out.append(
                encode_datagram(
                    kind,
                    sample_counter,
                    chunk.tobytes(),
                    len(chunk),
                    datagram_index=index,
                    last=index == len(chunks) - 1,
                    time_code=time_code,
                    character_id=character_id,
                )
            )
    return out


def _rotations(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of unit ``(x, y, z, w)`` quaternions ``(n, 4)``."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    r = np.empty((len(q), 3, 3))
    r[:, 0, 0] = 1 - 2 * (y * y + z * z)
    r[:, 0, 1] = 2 * (x * y - z * w)
    r[:, 0, 2] = 2 * (x * z + y * w)
    r[:, 1, 0] = 2 * (x * y + z * w)
    r[:, 1, 1] = 1 - 2 * (x * x + z * z)
    r[:, 1, 2] = 2 * (y * z - x * w)
    r[:, 2, 0] = 2 * (x * z - y * w)
    r[:, 2, 1] = 2 * (y * z + x * w)
    r[:, 2, 2] = 1 - 2 * (x * x + y * y)
    return r
