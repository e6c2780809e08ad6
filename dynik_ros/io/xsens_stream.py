"""Xsens MVN real-time network streaming (UDP): parser, sample assembler, receiver, encoder, simulator.

numpy and the standard library only (no ROS): ``wearable_node source:=xsens`` wraps :class:`XsensReceiver`,
and ``dynik-xsens-sim`` (:func:`main`) streams a synthetic motion in the same format so that a lab can try
the pipeline without a suit.

Wire format
-----------
Source: Xsens, *MVN real-time network streaming Protocol Specification*, document MV0305P, revision N
(September 2018, the revision that added the MVN 2019 header fields),
https://www.xsens.com/hubfs/Downloads/Manuals/MVN_real-time_network_streaming_protocol_specification.pdf
(section numbers below are that document's). Units the specification leaves open or contradicts come from
two Xsens knowledge-base pages: "Network Streamer in MVN"
(https://base.xsens.com/hc/en-us/articles/360017389520-Network-Streamer-in-MVN) and "Output Parameters in
MVN" (https://base.xsens.com/hc/en-us/articles/360017524260-Output-Parameters-in-MVN).

* Transport (2.2, 2.3): UDP (TCP also exists, not used here), default port **9763** ("XME" on a phone
  keypad). All numbers are big-endian, "network byte order" (2.4, 2.5.11); floats are IEEE 32-bit.
* Header, 24 bytes (2.4.1): 6-byte ASCII ID ``"MXTP"`` + 2-digit message type (``"MXTP02"``; the type is
  text, ``0x30 0x32``), uint32 sample counter, uint8 datagram counter, uint8 number of items, uint32 time
  code (ms since the MVN clock started; *relative*, not a wall-clock time), uint8 character (avatar) id,
  uint8 number of body segments, uint8 number of props, uint8 number of finger-tracking segments (these
  three "from MVN 2019", older senders leave them 0), 2 reserved bytes, uint16 payload size (datagram size
  minus the header; lets a receiver skip unknown types).
* Split samples (2.4.1.3): when one sample does not fit a datagram (MTU ~1500 bytes) it is sent as several
  datagrams with the same sample counter; the low 7 bits of the datagram counter are the index from 0, the
  high bit (0x80) flags the last one, so a single-datagram sample has ``0x80`` and a 3-way split ``0, 1,
  0x82``. The sample counter increments by one per sample sent (the sender may skip samples).
* Type 02, pose with quaternions (2.5.3), 32 bytes per item: int32 segment id, position x, y, z,
  quaternion q1..q4 = **w, x, y, z** ("re, i, j, k"). Z-up, right-handed by default (the Network Streamer
  can be switched to Y-up; the specification gives no axis mapping for that mode, so this module expects
  Z-up and its consistency check below catches a Y-up stream when types 21/22 come along).
* Type 21, linear segment kinematics (2.7.2), 40 bytes: id, position, global velocity, global acceleration.
* Type 22, angular segment kinematics (2.7.3), 44 bytes: id, quaternion w, x, y, z, **global** angular
  velocity, global angular acceleration. Types 21 and 22 are always Z-up, right-handed.
* Segment ids (2.5.9, 3.1): id = index + 1, so **1..23** for Pelvis, L5, L3, T12, T8, Neck, Head,
  RightShoulder, RightUpperArm, RightForeArm, RightHand, LeftShoulder, LeftUpperArm, LeftForeArm, LeftHand,
  RightUpperLeg, RightLowerLeg, RightFoot, RightToe, LeftUpperLeg, LeftLowerLeg, LeftFoot, LeftToe (the
  order of :data:`SEGMENT_NAMES`, equal to ``dynik_ros.models.human.XSENS_SEGMENTS``). Items after the 23
  body segments are props and finger segments (2.5.1, table 2); their ids are accepted up to
  :data:`MAX_ITEM_ID` and skipped.
* Each character sends its own datagrams (2.4.1.6); this receiver follows one character id.

Versions and ambiguities, made parameters (:class:`StreamUnits`, default first):

* Position unit: ``"m"`` (default) or ``"cm"``. Section 2.5.6 of the specification still says "The unit is
  cm" (text carried over from MVN Studio), while the same specification's message-type table, the MVN User
  Manual and the "Network Streamer in MVN" page say type 02 positions are in metres, which is what MVN
  Analyze/Animate sends today. ``"cm"`` is for old senders; it also scales type 21 velocities (cm/s).
* Angular velocity unit: ``"rad/s"`` (default) or ``"deg/s"``. The specification gives no unit. The
  Xsens streaming example code converts the received values with ``rad2deg``, i.e. treats them as radians;
  MVN's own displays and exports use deg/s ("Output Parameters in MVN"), hence the switch.
* Angular velocity frame: ``"world"`` (default, "segment global angular velocity" in 2.7.3) or
  ``"segment"`` (the older example code's comment says "around segment x axis"): then it is rotated to
  the world frame with the type-22 orientation, ``omega_world = R(q) omega_segment``.

Everything leaving this module is SI and world-frame (MVN's Z-up frame, its origin and heading as set by
MVN's calibration): positions [m], unit quaternions in ``(x, y, z, w)`` order (pinocchio / ROS), world
linear velocity of the segment origin [m/s] and world angular velocity [rad/s] (pinocchio's
``LOCAL_WORLD_ALIGNED`` twist). Accelerations are parsed but not passed on.

Robustness: :func:`parse_datagram` raises :class:`DatagramError` (a ``ValueError`` with a short ``reason``)
for anything malformed: wrong magic, truncated, payload size or item count mismatch, unknown or repeated
segment id, non-finite number, zero or non-unit quaternion. It never raises anything else on arbitrary
bytes. :class:`SampleAssembler` merges the datagrams of one sample counter and character, and drops, with
counts, what cannot make a complete sample: late (out-of-order) or duplicate datagrams, samples overtaken
by a newer complete one, samples whose datagram types disagree.
"""

from __future__ import annotations

import argparse
import math
import select
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dynik_ros.models.segments import XSENS_SEGMENTS

__all__ = [
    "DEFAULT_PORT",
    "SEGMENT_NAMES",
    "DatagramError",
    "Datagram",
    "StreamUnits",
    "XsensSample",
    "SampleAssembler",
    "XsensReceiver",
    "parse_datagram",
    "encode_datagram",
    "encode_sample",
    "stream_synthetic",
    "main",
]

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


# --------------------------------------------------------------------------- assembling samples
@dataclass
class XsensSample:
    """One complete sample of one character, SI units, world frame (MVN's Z-up frame)."""

    character_id: int
    sample_counter: int
    time_code: int  # ms, MVN's relative clock
    received_ns: int  # receiver clock when the completing datagram arrived
    segment_ids: np.ndarray  # (L,) ascending
    names: list[str]
    positions: np.ndarray  # (L, 3) m
    quaternions: np.ndarray  # (L, 4) unit, xyzw
    linear_velocities: np.ndarray | None  # (L, 3) m/s, world
    angular_velocities: np.ndarray | None  # (L, 3) rad/s, world


ASSEMBLER_COUNTS = (
    "datagrams",
    "samples",
    "ignored_type",
    "other_character",
    "late",
    "duplicate",
    "incomplete",
    "inconsistent",
    "restarts",
)
"""Counters of :class:`SampleAssembler`: datagrams offered, complete samples out, then what was dropped:
a type not used (01, 12, 13, 25, ... or one outside the chosen set), another character, a datagram of a
sample older than the last complete one (out of order), a datagram seen twice, a sample overtaken by a newer
complete one (its datagrams were lost or reordered), a sample whose datagram types disagree (segment sets,
or 02 vs 21/22 pose beyond the tolerance); ``restarts``: the sample counter jumped back (MVN restarted)."""


@dataclass
class _Pending:
    parts: dict[str, dict[int, Datagram]] = field(default_factory=dict)
    last_index: dict[str, int] = field(default_factory=dict)

    def complete(self, required: Sequence[str]) -> bool:
        for kind in required:
            last = self.last_index.get(kind)
            parts = self.parts.get(kind)
            if last is None or parts is None or len(parts) != last + 1 or max(parts) != last:
                return False
        return True


@dataclass
class _Character:
    last: int | None = None  # sample counter of the last complete sample
    pending: dict[int, _Pending] = field(default_factory=dict)
    behind: list[int] = field(default_factory=list)  # consecutive counters seen well behind ``last``


def _newer(a: int, b: int) -> bool:
    """Sample counter ``a`` comes after ``b`` (uint32 serial-number arithmetic, so wrap-around is fine)."""
    d = (a - b) & 0xFFFFFFFF
    return 0 < d < 0x80000000


class SampleAssembler:
    """Merges the datagrams of one sample (same sample counter and character id) into :class:`XsensSample`.

    A sample is complete once every type of ``required`` has all its datagrams (0 .. the one flagged last).
    It is emitted at once; pending older samples are then dropped (``incomplete``), and later datagrams of
    older samples are dropped (``late``): output sample counters strictly increase. ``max_pending`` bounds
    the samples waiting for datagrams. A counter more than ``restart_gap`` behind the last complete one is
    taken as a restart of the sender, not as a late datagram. Closer behind, but more than ``max_pending``
    (further than any late datagram of the live stream can be), it is a restart once ``confirm_restart``
    consecutive counters, each within ``max_pending`` after the previous, confirm a stream there: an MVN
    restart (counter back to 0) or a stray sample from another sender that moved the counter ahead costs
    ``confirm_restart - 1`` samples, not the ``restart_gap`` samples it took before to get past it.

    ``tolerance`` (metres; ``None`` disables): when type 02 comes with 21 / 22, their positions must agree
    within it and their orientations within the same number in radians; otherwise the sample is
    ``inconsistent`` (a Network Streamer set to Y-up for type 02, or mixed units).
    """

    def __init__(
        self,
        required: Sequence[str] = DATAGRAM_SETS["02+21+22"],
        units: StreamUnits | None = None,
        character: int | None = 0,
        max_pending: int = 8,
        restart_gap: int = 1000,
        tolerance: float | None = 0.01,
        confirm_restart: int = 3,
    ):
        required = tuple(dict.fromkeys(required))
        if not required or any(kind not in SUPPORTED_TYPES for kind in required):
            raise ValueError(f"required message types must be among {list(SUPPORTED_TYPES)}, got {required}")
        if POSE not in required and not {LINEAR, ANGULAR} <= set(required):
            raise ValueError("a pose needs type 02, or both 21 (position) and 22 (orientation)")
        self.required = required
        self.units = units or StreamUnits()
        self.character = character
        self.max_pending = max(1, int(max_pending))
        self.restart_gap = int(restart_gap)
        self.confirm_restart = max(1, int(confirm_restart))
        self.tolerance = tolerance
        self.counts = dict.fromkeys(ASSEMBLER_COUNTS, 0)
        self.last_drop = ""
        self._characters: dict[int, _Character] = {}

    def reset(self) -> None:
        """Forget pending samples and the last counter (counts are kept)."""
        self._characters.clear()

    def _restart_confirmed(self, state: _Character, counter: int) -> bool:
        """Record ``counter`` (well behind the last sample); true once ``confirm_restart`` consecutive
        counters (each within ``max_pending`` after the previous) make a stream there."""
        seen = state.behind
        if seen and counter != seen[-1]:
            step = (counter - seen[-1]) & 0xFFFFFFFF
            if not 0 < step <= self.max_pending:
                seen.clear()
        if not seen or counter != seen[-1]:
            seen.append(counter)
        return len(seen) >= self.confirm_restart

    def _drop(self, reason: str, detail: str, n: int = 1) -> None:
        self.counts[reason] += n
        self.last_drop = f"{reason}: {detail}"

    def add(self, datagram: Datagram, received_ns: int = 0) -> list[XsensSample]:
        """Offer one datagram; the samples it completes (zero or one)."""
        self.counts["datagrams"] += 1
        kind = datagram.message_type
        if not datagram.supported or kind not in self.required:
            self.counts["ignored_type"] += 1
            return []
        if self.character is not None and datagram.character_id != self.character:
            self._drop("other_character", f"character {datagram.character_id}, following {self.character}")
            return []
        state = self._characters.setdefault(datagram.character_id, _Character())
        counter = datagram.sample_counter
        if state.last is not None and not _newer(counter, state.last):
            behind = (state.last - counter) & 0xFFFFFFFF
            if behind > self.restart_gap or (
                behind > self.max_pending and self._restart_confirmed(state, counter)
            ):
                self.counts["restarts"] += 1
                if state.pending:
                    self._drop("incomplete", "sender restarted", len(state.pending))
                state.last, state.pending, state.behind = None, {}, []
            else:
                self._drop("late", f"sample {counter} after sample {state.last} was complete")
                return []
        elif state.behind:
            state.behind.clear()
        pending = state.pending.get(counter)
        if pending is None:
            if len(state.pending) >= self.max_pending:
                oldest = next(
                    (c for c in state.pending if not any(_newer(c, o) for o in state.pending)),
                    next(iter(state.pending)),
                )
                del state.pending[oldest]
                self._drop("incomplete", f"sample {oldest} still pending after {self.max_pending} newer ones")
            pending = state.pending[counter] = _Pending()
        parts = pending.parts.setdefault(kind, {})
        index = datagram.datagram_index
        if index in parts or (kind in pending.last_index and index > pending.last_index[kind]):
            self._drop("duplicate", f"type {kind} datagram {index} of sample {counter} seen twice")
            return []
        if datagram.last:
            if index < max(parts, default=-1):
                self._drop("duplicate", f"type {kind} datagram {index} flagged last after a later one")
                return []
            pending.last_index[kind] = index
        parts[index] = datagram
        if not pending.complete(self.required):
            return []
        del state.pending[counter]
        older = [c for c in state.pending if _newer(counter, c)]
        for c in older:
            del state.pending[c]
        if older:
            self._drop("incomplete", f"samples {sorted(older)} overtaken by sample {counter}", len(older))
        state.last = counter
        try:
            sample = self._merge(pending, received_ns)
        except ValueError as exc:
            self._drop("inconsistent", f"sample {counter}: {exc}")
            return []
        self.counts["samples"] += 1
        return [sample]

    def _merge(self, pending: _Pending, received_ns: int) -> XsensSample:
        merged: dict[str, dict[str, np.ndarray]] = {}
        first: Datagram | None = None
        for kind in self.required:
            dgrams = [pending.parts[kind][i] for i in range(pending.last_index[kind] + 1)]
            first = first or dgrams[0]
            names = ("positions", "quaternions", "linear_velocities", "angular_velocities")
            if len(dgrams) == 1:  # the usual case: one datagram per type
                ids = dgrams[0].segment_ids
                arrays = {name: getattr(dgrams[0], name) for name in names}
            else:
                ids = np.concatenate([d.segment_ids for d in dgrams])
                if len(set(ids.tolist())) != len(ids):
                    raise ValueError(f"type {kind}: a segment id appears in two datagrams")
                arrays = {
                    name: None
                    if getattr(dgrams[0], name) is None
                    else np.concatenate([getattr(d, name) for d in dgrams])
                    for name in names
                }
            if np.any(ids[1:] < ids[:-1]):  # MVN sends ascending ids; sort otherwise
                order = np.argsort(ids, kind="stable")
                ids = ids[order]
                arrays = {name: None if a is None else a[order] for name, a in arrays.items()}
            arrays["ids"] = ids
            merged[kind] = arrays
        ids = merged[self.required[0]]["ids"]
        for kind in self.required[1:]:
            if not np.array_equal(merged[kind]["ids"], ids):
                raise ValueError(f"types {self.required[0]} and {kind} carry different segments")
        if len(ids) == 0:
            raise ValueError("no body segment")
        scale = self.units.metres_per_unit
        pose = merged.get(POSE)
        positions = (merged[LINEAR] if pose is None else pose)["positions"] * scale
        quaternions = (merged[ANGULAR] if pose is None else pose)["quaternions"]
        if pose is not None and self.tolerance is not None:
            if LINEAR in merged:
                gap = float(np.max(np.abs(merged[LINEAR]["positions"] * scale - positions)))
                if gap > self.tolerance:
                    raise ValueError(f"type 02 and 21 positions differ by {gap:.3g} m")
            if ANGULAR in merged:
                dots = np.abs(np.einsum("ij,ij->i", merged[ANGULAR]["quaternions"], quaternions))
                angle = float(2.0 * np.arccos(np.clip(dots.min(), 0.0, 1.0)))
                if angle > self.tolerance:
                    raise ValueError(f"type 02 and 22 orientations differ by {angle:.3g} rad")
        linear = angular = None
        if LINEAR in merged and ANGULAR in merged:
            linear = merged[LINEAR]["linear_velocities"] * scale
            angular = merged[ANGULAR]["angular_velocities"] * self.units.radians_per_unit
            if self.units.angular_velocity_frame == "segment":
                angular = np.einsum("lij,lj->li", _rotations(merged[ANGULAR]["quaternions"]), angular)
        assert first is not None
        return XsensSample(
            character_id=first.character_id,
            sample_counter=first.sample_counter,
            time_code=first.time_code,
            received_ns=received_ns,
            segment_ids=ids,
            names=[SEGMENT_NAMES[i - 1] for i in ids.tolist()],
            positions=positions,
            quaternions=quaternions,
            linear_velocities=linear,
            angular_velocities=angular,
        )


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


# --------------------------------------------------------------------------- receiving
class XsensReceiver:
    """Non-blocking UDP receiver: bound at construction, :meth:`poll` returns the samples completed since
    the last call (never blocks); :meth:`wait` blocks until something arrived, for a receive thread.
    ``clock`` stamps each datagram on arrival (``received_ns`` of the samples). Not thread-safe: one thread
    calls ``poll``.

    Raises:
        OSError: the socket cannot be bound (``socket.gaierror`` for a host that does not resolve).
    """

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        assembler: SampleAssembler | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        max_datagrams_per_poll: int = 1000,
        receive_buffer: int = 1 << 20,
    ):
        self.assembler = assembler or SampleAssembler()
        self.clock = clock
        self.max_datagrams_per_poll = max(1, int(max_datagrams_per_poll))
        self.errors = dict.fromkeys(DATAGRAM_ERRORS, 0)
        self.socket_errors = 0
        self.last_error = ""
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE
        )[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            except OSError:
                pass  # keep the system default
            self._sock.bind(address)
            self._sock.setblocking(False)
        except OSError:
            self._sock.close()
            raise
        self.address = self._sock.getsockname()[:2]

    @property
    def port(self) -> int:
        return int(self.address[1])

    @property
    def bad_datagrams(self) -> int:
        return sum(self.errors.values())

    def wait(self, timeout: float) -> bool:
        """Block until a datagram is queued (True) or ``timeout`` seconds passed (False); for a receive
        thread (``poll`` itself never blocks). False at once on a closed socket."""
        try:
            readable, _, _ = select.select([self._sock], [], [], timeout)
        except (OSError, ValueError):  # closed meanwhile
            return False
        return bool(readable)

    def _recv(self) -> bytes | None:
        """One queued datagram, or None when none is queued."""
        while True:
            try:
                return self._sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:  # e.g. ECONNREFUSED left by an ICMP error: count it, read on
                self.socket_errors += 1
                self.last_error = f"socket: {exc}"
                if self.socket_errors % 1000 == 0:
                    return None  # a socket that only fails: give the caller its turn back

    def poll(self) -> list[XsensSample]:
        """Read what has arrived (at most ``max_datagrams_per_poll``) and return the completed samples."""
        samples: list[XsensSample] = []
        for _ in range(self.max_datagrams_per_poll):
            data = self._recv()
            if data is None:
                break
            samples += self.feed(data, self.clock())
        return samples

    def feed(self, data: bytes, received_ns: int) -> list[XsensSample]:
        """Parse and assemble one datagram (what :meth:`poll` does for each; counts malformed ones)."""
        try:
            datagram = parse_datagram(data)
        except DatagramError as exc:
            self.errors[exc.reason] += 1
            self.last_error = str(exc)
            return []
        return self.assembler.add(datagram, received_ns)

    def drain(self) -> int:
        """Discard every queued datagram (e.g. what arrived while the node was inactive); how many."""
        n = 0
        while n < 1_000_000 and self._recv() is not None:
            n += 1
        return n

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> XsensReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


# --------------------------------------------------------------------------- simulator
def stream_synthetic(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    model: str = "human66",
    scenario: str = "walking",
    rate: float = 60.0,
    duration: float = 10.0,
    loop: bool = False,
    count: int | None = None,
    character_id: int = 0,
    types: Sequence[str] = DATAGRAM_SETS["02+21+22"],
    units: StreamUnits | None = None,
    log: Callable[[str], None] | None = print,
) -> int:
    """Stream a synthetic motion of the ``model`` (``dynik_ros.motion.synthetic``, the same as
    ``wearable_node source:=synthetic``) as MVN datagrams to ``host:port`` at ``rate`` Hz, paced in real
    time; ``loop`` restarts the motion (the sample counter keeps increasing), ``count`` stops after that
    many samples. Returns the number of samples sent."""
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.core.robot_model import RobotModel
    from dynik_ros.models.assets import urdf_path
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.motion.synthetic import synthesize

    robot = RobotModel.from_urdf_file(urdf_path(model))
    motion = synthesize(robot, scenario, duration, rate, list(XSENS_SEGMENTS), pelvis_height(Subject()))
    ids = np.array([SEGMENT_NAMES.index(name) + 1 for name in motion.links])
    quaternions = quaternion_from_rotation(motion.rotations)
    address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    sent = 0
    period = 1.0 / rate
    with socket.socket(address[0], socket.SOCK_DGRAM) as sock:
        if log:
            log(
                f"streaming {model} {scenario} at {rate:g} Hz to udp://{host}:{port} (MVN types "
                f"{'+'.join(types)}, character {character_id}); Ctrl-C stops"
            )
        start = time.perf_counter()
        while count is None or sent < count:
            k = sent % len(motion) if loop else sent
            if k >= len(motion):
                break
            due = start + sent * period
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            for datagram in encode_sample(
                sent + 1,
                ids,
                motion.positions[k],
                quaternions[k],
                motion.linear_velocities[k],
                motion.angular_velocities[k],
                types=types,
                time_code=int(round(sent * period * 1000)),
                character_id=character_id,
                units=units,
            ):
                try:
                    sock.sendto(datagram, address[4])
                except OSError as exc:  # nobody listening (ICMP) or a transient error: keep streaming
                    if log and sent == 0:
                        log(f"send: {exc}")
            sent += 1
    return sent


def main(argv: Iterable[str] | None = None) -> int:
    """``dynik-xsens-sim``: a stand-in for MVN Analyze/Animate's Network Streamer."""
    parser = argparse.ArgumentParser(
        prog="dynik-xsens-sim",
        description="Stream a synthetic human motion as Xsens MVN real-time network datagrams (UDP), "
        "for wearable_node source:=xsens without a suit.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="destination address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"UDP port (default {DEFAULT_PORT})")
    parser.add_argument("--model", default="human66", choices=("human66", "human48"))
    parser.add_argument("--scenario", default="walking", choices=("walking", "running", "tpose"))
    parser.add_argument("--rate", type=float, default=60.0, help="samples per second (default 60)")
    parser.add_argument("--duration", type=float, default=10.0, help="motion length [s] (default 10)")
    parser.add_argument("--loop", action="store_true", help="restart the motion when it ends")
    parser.add_argument("--count", type=int, default=None, help="stop after this many samples")
    parser.add_argument("--character", type=int, default=0, help="character (avatar) id (default 0)")
    parser.add_argument("--datagrams", default="02+21+22", choices=tuple(DATAGRAM_SETS))
    parser.add_argument("--position-unit", default="m", choices=("m", "cm"))
    parser.add_argument("--angular-unit", default="rad/s", choices=("rad/s", "deg/s"))
    parser.add_argument("--angular-velocity-frame", default="world", choices=("world", "segment"))
    args = parser.parse_args(None if argv is None else list(argv))
    if not (args.rate > 0 and args.duration > 0) or not 0 <= args.character <= 255:
        parser.error("rate and duration must be positive, character 0..255")
    units = StreamUnits(args.position_unit, args.angular_unit, args.angular_velocity_frame)
    try:
        sent = stream_synthetic(
            args.host,
            args.port,
            model=args.model,
            scenario=args.scenario,
            rate=args.rate,
            duration=args.duration,
            loop=args.loop,
            count=args.count,
            character_id=args.character,
            types=DATAGRAM_SETS[args.datagrams],
            units=units,
        )
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"dynik-xsens-sim: {exc}", file=sys.stderr)
        return 1
    print(f"sent {sent} samples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
