"""ROS messages <-> numpy for the dynik_ros nodes; no tf2 needed.

Stamps travel as integer nanoseconds (exact differences for ``dt``). Quaternions are ``(x, y, z, w)`` like
``geometry_msgs/Quaternion`` (conversions in :mod:`dynik_ros.core.quaternion`). Parsing functions validate
and raise :class:`MessageRejected` with a short machine-readable ``reason`` (counted in diagnostics) and a
human-readable detail; they never return NaN.
"""

from __future__ import annotations

import array
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import (
    Point,
    Pose,
    PoseStamped,
    Quaternion,
    Transform,
    TransformStamped,
    Twist,
    Vector3,
)
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState, MultiDOFJointState

from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion

# Reasons a message is refused (keys of the rejection counters in diagnostics).
NAN = "nan"
NON_ROTATION = "non_rotation"
UNKNOWN_LINKS = "unknown_links"
MISSING_LINKS = "missing_links"
DUPLICATE_NAMES = "duplicate_names"
WRONG_LENGTHS = "wrong_lengths"
OUT_OF_ORDER = "out_of_order"
STALE = "stale"
UNHANDLED = "unhandled"  # an exception the callback did not expect: counted, logged, never fatal
UNDECODABLE = "undecodable"  # bytes that are no MultiDOFJointState (rclpy could not deserialize them)
REJECTION_REASONS = (
    NAN,
    NON_ROTATION,
    UNKNOWN_LINKS,
    MISSING_LINKS,
    DUPLICATE_NAMES,
    WRONG_LENGTHS,
    OUT_OF_ORDER,
    STALE,
)

QUATERNION_NORM_TOLERANCE = 1e-3
"""``| |q| - 1 |`` above this is not a rotation (float32 round-off is ~1e-7)."""


class MessageRejected(ValueError):
    """A message refused by a parser; ``reason`` is one of :data:`REJECTION_REASONS`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------- stamps
def stamp_to_ns(stamp: Time) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    """Integer nanoseconds -> ``builtin_interfaces/Time`` (``nanosec`` in ``[0, 1e9)``)."""
    sec, nanosec = divmod(int(ns), 1_000_000_000)
    return Time(sec=sec, nanosec=nanosec)


def stamp_to_seconds(stamp: Time) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_stamp(seconds: float) -> Time:
    return ns_to_stamp(round(seconds * 1e9))


def float_array(values: np.ndarray | Sequence[float]) -> array.array:
    """A ``float64[]`` message field value from a numpy vector (faster than per-element assignment)."""
    out = array.array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=float).reshape(-1).tobytes())
    return out


# --------------------------------------------------------------------------- link states
@dataclass
class LinkStates:
    """One sample of world link poses and twists: ``(L, 3)``, ``(L, 3, 3)`` and optional ``(L, 3)``."""

    stamp_ns: int
    names: list[str]
    positions: np.ndarray
    rotations: np.ndarray
    linear_velocities: np.ndarray | None = None
    angular_velocities: np.ndarray | None = None

    def poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {n: (self.positions[i], self.rotations[i]) for i, n in enumerate(self.names)}

    def twists(self) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        if self.linear_velocities is None or self.angular_velocities is None:
            return None
        return {n: (self.linear_velocities[i], self.angular_velocities[i]) for i, n in enumerate(self.names)}


def link_states_to_msg(
    stamp_ns: int,
    names: Sequence[str],
    positions: np.ndarray,
    quaternions: np.ndarray,
    linear_velocities: np.ndarray | None = None,
    angular_velocities: np.ndarray | None = None,
    frame_id: str = "world",
) -> MultiDOFJointState:
    """``sensor_msgs/MultiDOFJointState``: ``joint_names`` = link names, ``transforms`` = world poses,
    ``twist`` = world-frame twists (omitted when not given)."""
    msg = MultiDOFJointState()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.joint_names = list(names)
    p = np.asarray(positions, dtype=float).tolist()
    q = np.asarray(quaternions, dtype=float).tolist()
    msg.transforms = [
        Transform(
            translation=Vector3(x=pi[0], y=pi[1], z=pi[2]),
            rotation=Quaternion(x=qi[0], y=qi[1], z=qi[2], w=qi[3]),
        )
        for pi, qi in zip(p, q, strict=True)
    ]
    if linear_velocities is not None and angular_velocities is not None:
        lin = np.asarray(linear_velocities, dtype=float).tolist()
        ang = np.asarray(angular_velocities, dtype=float).tolist()
        msg.twist = [
            Twist(linear=Vector3(x=a[0], y=a[1], z=a[2]), angular=Vector3(x=b[0], y=b[1], z=b[2]))
            for a, b in zip(lin, ang, strict=True)
        ]
    return msg


def fill_link_states_msg(
    msg: MultiDOFJointState,
    stamp_ns: int,
    positions: np.ndarray,
    quaternions: np.ndarray,
    linear_velocities: np.ndarray | None = None,
    angular_velocities: np.ndarray | None = None,
) -> MultiDOFJointState:
    """Overwrite the stamp, poses and twists of a message made by :func:`link_states_to_msg` for the same
    links (about ten times faster than building a new message)."""
    msg.header.stamp = ns_to_stamp(stamp_ns)
    for t, p, q in zip(
        msg.transforms,
        np.asarray(positions, float).tolist(),
        np.asarray(quaternions, float).tolist(),
        strict=True,
    ):
        tr, rot = t.translation, t.rotation
        tr.x, tr.y, tr.z = p
        rot.x, rot.y, rot.z, rot.w = q
    if msg.twist and linear_velocities is not None and angular_velocities is not None:
        lin, ang = (
            np.asarray(linear_velocities, float).tolist(),
            np.asarray(angular_velocities, float).tolist(),
        )
        for w, a, b in zip(msg.twist, lin, ang, strict=True):
            lv, av = w.linear, w.angular
            lv.x, lv.y, lv.z = a
            av.x, av.y, av.z = b
    return msg


def link_states_from_msg(
    msg: MultiDOFJointState,
    known_links: Iterable[str] | None = None,
    required_links: Iterable[str] | None = None,
) -> LinkStates:
    """Parse and validate a link-state message.

    Raises :class:`MessageRejected`: ``wrong_lengths`` (``transforms``/``twist`` not one per name),
    ``duplicate_names``, ``unknown_links`` (names outside ``known_links``), ``missing_links`` (some of
    ``required_links`` absent), ``nan`` (non-finite values), ``non_rotation`` (quaternion norm not 1).
    Quaternions within tolerance are normalized.
    """
    poses = np.array(
        [
            (
                t.translation.x,
                t.translation.y,
                t.translation.z,
                t.rotation.x,
                t.rotation.y,
                t.rotation.z,
                t.rotation.w,
            )
            for t in msg.transforms
        ],
        dtype=float,
    ).reshape(-1, 7)
    twists = np.array(
        [(w.linear.x, w.linear.y, w.linear.z, w.angular.x, w.angular.y, w.angular.z) for w in msg.twist],
        dtype=float,
    ).reshape(-1, 6)
    return _link_states(
        stamp_to_ns(msg.header.stamp), list(msg.joint_names), poses, twists, known_links, required_links
    )


_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")


def link_states_from_cdr(
    data: bytes,
    known_links: Iterable[str] | None = None,
    required_links: Iterable[str] | None = None,
) -> LinkStates:
    """:func:`link_states_from_msg` for a serialized ``MultiDOFJointState`` (an rclpy ``raw=True``
    subscription), read straight into numpy: about 30 times faster than rclpy's deserialization, which
    builds seven Python objects per link. Handles little-endian plain CDR (XCDR1, what the ROS 2 RMWs
    send); anything else is deserialized by rclpy. Malformed data is refused as ``wrong_lengths``.
    A stream is cheaper through one :class:`LinkStatesDecoder`, which reads and checks the names once."""
    return LinkStatesDecoder(known_links, required_links).decode(data)


def header_stamp_ns(data: bytes) -> int:
    """``header.stamp`` (ns) of a serialized message that starts with a ``std_msgs/Header`` (JointState,
    Odometry, ...), without deserializing the rest; rclpy's deserialization for other encodings."""
    if len(data) >= 12 and data[:2] == b"\x00\x01":
        sec, nanosec = _STAMP.unpack_from(data, 4)
        return int(sec) * 1_000_000_000 + int(nanosec)
    from rclpy.serialization import deserialize_message

    return stamp_to_ns(deserialize_message(data, JointState).header.stamp)


def _header_and_names(
    buf: memoryview, block: bytes, cached: list[str] | None
) -> tuple[int, int, list[str], bool, int, int]:
    """``(sec, nanosec, names, known, start, end)`` of a plain-CDR message whose header is followed by a
    string sequence (the decoders' names block at ``buf[start:end]``). ``known``: the block equals the
    last accepted one, ``block``, or decodes to the same names ``cached`` (rclpy leaves padding bytes
    uninitialised): then ``names`` is ``cached`` itself, checked already."""
    sec, nanosec = _STAMP.unpack_from(buf, 0)
    start = 12 + _U32.unpack_from(buf, 8)[0]  # skip header.frame_id
    start += -start % 4
    if block and buf[start : start + len(block)] == block:
        return sec, nanosec, cached, True, start, start + len(block)  # type: ignore[return-value]
    count = _U32.unpack_from(buf, start)[0]
    offset = start + 4
    names = []
    for _ in range(count):
        offset += -offset % 4
        length = _U32.unpack_from(buf, offset)[0]
        names.append(str(buf[offset + 4 : offset + 3 + length], "utf-8"))
        offset += 4 + length
    if names == cached:
        return sec, nanosec, cached, True, start, offset
    return sec, nanosec, names, False, start, offset


class LinkStatesDecoder:
    """:func:`link_states_from_cdr` for one stream: the link names of a stream do not change between
    samples, so the names block of the last accepted message is kept as bytes; a message starting with the
    same bytes has the same names (CDR strings carry their lengths), which are then not decoded, and names
    equal to the last accepted ones (other padding bytes) are not checked again (duplicates,
    ``known_links``, ``required_links``). The returned ``names`` list is then the same object as before:
    treat it as read-only. Everything else is read and checked on every message."""

    def __init__(self, known_links: Iterable[str] | None = None, required_links: Iterable[str] | None = None):
        self.known_links = known_links
        self.required_links = required_links
        self._block = b""  # the names block (count and strings) of the last accepted message
        self._names: list[str] | None = None  # none accepted yet

    def decode(self, data: bytes) -> LinkStates:
        """The link states of ``data``; :class:`MessageRejected` as :func:`link_states_from_msg`."""
        if len(data) < 4 or data[:2] != b"\x00\x01":
            from rclpy.serialization import deserialize_message

            return link_states_from_msg(
                deserialize_message(data, MultiDOFJointState), self.known_links, self.required_links
            )
        buf = memoryview(data)[4:]
        try:
            sec, nanosec, names, known, start, offset = _header_and_names(buf, self._block, self._names)
            end_of_names = offset
            arrays = []
            for width in (7, 6):  # transforms (translation, rotation), then twists (linear, angular)
                offset += -offset % 4
                n = _U32.unpack_from(buf, offset)[0]
                offset += 4
                if n:
                    offset += -offset % 8
                arrays.append(np.frombuffer(buf, "<f8", n * width, offset).reshape(n, width))
                offset += 8 * n * width
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise MessageRejected(WRONG_LENGTHS, f"malformed MultiDOFJointState data ({exc})") from None
        stamp_ns = int(sec) * 1_000_000_000 + int(nanosec)
        if known:
            links = _link_states(stamp_ns, names, arrays[0], arrays[1], None, None, check_names=False)
        else:
            links = _link_states(stamp_ns, names, arrays[0], arrays[1], self.known_links, self.required_links)
        if names is not self._names or len(self._block) != end_of_names - start:
            self._block, self._names = bytes(buf[start:end_of_names]), names
        return links

    def __call__(self, data: bytes) -> LinkStates:
        """Decode-or-reject as :func:`decode_link_states`."""
        try:
            return self.decode(data)
        except MessageRejected:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the deserializer raises on foreign bytes
            raise MessageRejected(UNDECODABLE, f"{len(data)} bytes: {type(exc).__name__}: {exc}") from None


def decode_link_states(
    data: bytes,
    known_links: Iterable[str] | None = None,
    required_links: Iterable[str] | None = None,
) -> LinkStates:
    """Decode-or-reject for a raw link-state subscription: :func:`link_states_from_cdr`, with anything
    else it raises (rclpy's ``RMWError`` on bytes that are no ``MultiDOFJointState``…) turned into a
    :class:`MessageRejected` with reason :data:`UNDECODABLE`, so a node's callback has one refusal path."""
    try:
        return link_states_from_cdr(data, known_links, required_links)
    except MessageRejected:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the deserializer raises on foreign bytes
        raise MessageRejected(UNDECODABLE, f"{len(data)} bytes: {type(exc).__name__}: {exc}") from None


def _link_states(
    stamp_ns: int,
    names: list[str],
    poses: np.ndarray,
    twists: np.ndarray,
    known_links: Iterable[str] | None,
    required_links: Iterable[str] | None,
    check_names: bool = True,
) -> LinkStates:
    n = len(names)
    if len(poses) != n:
        raise MessageRejected(WRONG_LENGTHS, f"{n} joint_names but {len(poses)} transforms")
    if len(twists) not in (0, n):
        raise MessageRejected(WRONG_LENGTHS, f"{n} joint_names but {len(twists)} twists")
    if check_names and len(set(names)) != n:
        dup = sorted({x for x in names if names.count(x) > 1})
        raise MessageRejected(DUPLICATE_NAMES, f"repeated link names {dup}")
    if known_links is not None:
        known = known_links if isinstance(known_links, (set, frozenset)) else set(known_links)
        unknown = [x for x in names if x not in known]
        if unknown:
            raise MessageRejected(UNKNOWN_LINKS, f"unknown link names {unknown[:5]}")
    if required_links is not None:
        present = set(names)
        missing = [x for x in required_links if x not in present]
        if missing:
            raise MessageRejected(MISSING_LINKS, f"links {missing[:5]} missing")
    if not (np.isfinite(poses).all() and np.isfinite(twists).all()):
        finite = np.isfinite(poses).all(axis=1)
        if len(twists):
            finite &= np.isfinite(twists).all(axis=1)
        raise MessageRejected(
            NAN, f"non-finite values for links {[names[i] for i in np.flatnonzero(~finite)][:5]}"
        )
    quats = poses[:, 3:]
    with np.errstate(over="ignore"):  # a finite 1e200 component squares to inf: refused below, no warning
        norms = np.sqrt(np.einsum("ij,ij->i", quats, quats))
    bad = np.flatnonzero(np.abs(norms - 1.0) > QUATERNION_NORM_TOLERANCE)
    if bad.size:
        raise MessageRejected(
            NON_ROTATION,
            f"quaternion norms {norms[bad][:3].round(4).tolist()} for links {[names[i] for i in bad][:5]}",
        )
    return LinkStates(
        stamp_ns,
        names,
        poses[:, :3].copy(),
        rotation_from_quaternion(quats),
        twists[:, :3].copy() if len(twists) else None,
        twists[:, 3:].copy() if len(twists) else None,
    )


# --------------------------------------------------------------------------- joint states
def joint_state_msg(
    stamp_ns: int, names: Sequence[str], positions: np.ndarray, velocities: np.ndarray | None = None
) -> JointState:
    msg = JointState()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.name = list(names)
    msg.position = float_array(positions)
    if velocities is not None:
        msg.velocity = float_array(velocities)
    return msg


def joint_state_from_msg(msg: JointState) -> tuple[int, list[str], np.ndarray, np.ndarray | None]:
    """``(stamp_ns, names, positions, velocities or None)``; :class:`MessageRejected` on bad lengths/NaN."""
    names = list(msg.name)
    positions = np.asarray(msg.position, dtype=float)
    if positions.size != len(names):
        raise MessageRejected(WRONG_LENGTHS, f"{len(names)} names but {positions.size} positions")
    velocities = None
    if len(msg.velocity):
        velocities = np.asarray(msg.velocity, dtype=float)
        if velocities.size != len(names):
            raise MessageRejected(WRONG_LENGTHS, f"{len(names)} names but {velocities.size} velocities")
        if not np.all(np.isfinite(velocities)):
            raise MessageRejected(NAN, "non-finite velocities")
    if not np.all(np.isfinite(positions)):
        bad = [names[i] for i in np.flatnonzero(~np.isfinite(positions))]
        raise MessageRejected(NAN, f"non-finite positions for {bad[:5]}")
    if len(set(names)) != len(names):
        raise MessageRejected(DUPLICATE_NAMES, "repeated joint names")
    return stamp_to_ns(msg.header.stamp), names, positions, velocities


class JointStateDecoder:
    """:func:`joint_state_from_msg` for a raw (serialized) ``sensor_msgs/JointState`` subscription, read
    straight into numpy (little-endian plain CDR; anything else goes through rclpy's deserialization).
    As :class:`LinkStatesDecoder`, the names block of the last accepted message is kept: the same bytes
    are the same names, neither decoded nor checked for duplicates again (the list is then the same
    object: read-only). Returns ``(stamp_ns, names, positions, velocities or None)``; malformed data is
    refused as ``wrong_lengths``."""

    def __init__(self) -> None:
        self._block = b""
        self._names: list[str] | None = None  # none accepted yet

    def __call__(self, data: bytes) -> tuple[int, list[str], np.ndarray, np.ndarray | None]:
        if len(data) < 4 or data[:2] != b"\x00\x01":
            from rclpy.serialization import deserialize_message

            try:
                msg = deserialize_message(data, JointState)
            except Exception as exc:  # noqa: BLE001 - whatever the deserializer raises on foreign bytes
                raise MessageRejected(WRONG_LENGTHS, f"{len(data)} bytes: {type(exc).__name__}") from None
            return joint_state_from_msg(msg)
        buf = memoryview(data)[4:]
        try:
            sec, nanosec, names, known, start, offset = _header_and_names(buf, self._block, self._names)
            end_of_names = offset
            arrays = []
            for _ in range(2):  # position, velocity (effort is not read)
                offset += -offset % 4
                n = _U32.unpack_from(buf, offset)[0]
                offset += 4
                if n:
                    offset += -offset % 8
                arrays.append(np.frombuffer(buf, "<f8", n, offset))
                offset += 8 * n
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise MessageRejected(WRONG_LENGTHS, f"malformed JointState data ({exc})") from None
        positions, velocities = arrays
        if positions.size != len(names):
            raise MessageRejected(WRONG_LENGTHS, f"{len(names)} names but {positions.size} positions")
        if velocities.size:
            if velocities.size != len(names):
                raise MessageRejected(WRONG_LENGTHS, f"{len(names)} names but {velocities.size} velocities")
            if not np.isfinite(velocities).all():
                raise MessageRejected(NAN, "non-finite velocities")
        if not np.isfinite(positions).all():
            bad = [names[i] for i in np.flatnonzero(~np.isfinite(positions))]
            raise MessageRejected(NAN, f"non-finite positions for {bad[:5]}")
        if not known and len(set(names)) != len(names):
            raise MessageRejected(DUPLICATE_NAMES, "repeated joint names")
        if names is not self._names or len(self._block) != end_of_names - start:
            self._block, self._names = bytes(buf[start:end_of_names]), names
        stamp_ns = int(sec) * 1_000_000_000 + int(nanosec)
        return stamp_ns, names, positions.copy(), velocities.copy() if velocities.size else None


# --------------------------------------------------------------------------- poses, odometry, tf
def pose_msg(position: np.ndarray, quaternion: np.ndarray) -> Pose:
    p, q = np.asarray(position, dtype=float).tolist(), np.asarray(quaternion, dtype=float).tolist()
    return Pose(
        position=Point(x=p[0], y=p[1], z=p[2]), orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])
    )


def pose_from_msg(msg: PoseStamped) -> tuple[int, np.ndarray, np.ndarray]:
    """``(stamp_ns, position, rotation)`` of a ``PoseStamped``; rejects NaN and non-unit quaternions."""
    p, o = msg.pose.position, msg.pose.orientation
    position = np.array((p.x, p.y, p.z), dtype=float)
    quat = np.array((o.x, o.y, o.z, o.w), dtype=float)
    if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quat))):
        raise MessageRejected(NAN, "non-finite pose")
    with np.errstate(over="ignore"):  # 1e200 squares to inf: refused below, no warning
        norm = float(np.linalg.norm(quat))
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        raise MessageRejected(NON_ROTATION, f"quaternion norm {norm:.4f}")
    return stamp_to_ns(msg.header.stamp), position, rotation_from_quaternion(quat)


def odometry_msg(
    stamp_ns: int,
    frame_id: str,
    child_frame_id: str,
    position: np.ndarray,
    rotation: np.ndarray,
    linear_velocity_body: np.ndarray,
    angular_velocity_body: np.ndarray,
) -> Odometry:
    """``nav_msgs/Odometry``: pose of ``child_frame_id`` in ``frame_id``, twist in ``child_frame_id``
    (REP 105), which is pinocchio's free-flyer velocity convention."""
    msg = Odometry()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    msg.pose.pose = pose_msg(position, quaternion_from_rotation(rotation))
    v, w = np.asarray(linear_velocity_body, float).tolist(), np.asarray(angular_velocity_body, float).tolist()
    msg.twist.twist = Twist(linear=Vector3(x=v[0], y=v[1], z=v[2]), angular=Vector3(x=w[0], y=w[1], z=w[2]))
    return msg


def odometry_from_msg(msg: Odometry) -> tuple[int, np.ndarray, np.ndarray]:
    """``(stamp_ns, position, rotation matrix)`` of an ``Odometry``; rejects NaN and non-unit quaternions."""
    fake = PoseStamped()
    fake.header = msg.header
    fake.pose = msg.pose.pose
    return pose_from_msg(fake)


def transform_stamped(
    stamp_ns: int, parent: str, child: str, position: np.ndarray, rotation: np.ndarray
) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = parent
    msg.child_frame_id = child
    p = np.asarray(position, dtype=float).tolist()
    q = quaternion_from_rotation(rotation).tolist()
    msg.transform = Transform(
        translation=Vector3(x=p[0], y=p[1], z=p[2]), rotation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3])
    )
    return msg
