"""Hot-path outputs serialized straight to CDR bytes, published through rclpy's serialized-message path.

Building a ROS message in Python costs a setter call with type checks per field (a 66-name JointState,
an Odometry with two 36-element covariances, 23 transforms and twists), and rclpy then converts the Python
object to C field by field. The layouts of these messages never change between samples (the same names,
the same frames), so each writer lays the message out once — header frame, names, sequence lengths, zero
covariances — and per sample writes only the stamp and the numbers into that template, as numpy views on
one buffer. ``Publisher.publish`` takes the resulting ``bytes`` (rclpy's ``publish_raw``).

Encoding: plain little-endian CDR (XCDR1, encapsulation ``00 01 00 00``), what rclpy's own
``serialize_message`` produces with the ROS 2 RMWs; primitives aligned to their size relative to the
payload after the 4-byte encapsulation header. ``test/test_cdr_writer.py`` checks every writer byte for byte
against ``rclpy.serialization.serialize_message``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

ENCAPSULATION = b"\x00\x01\x00\x00"
_STAMP = struct.Struct("<iI")
NS = 1_000_000_000


class CdrLayout:
    """A message laid out once: append fields in declaration order, remember where the numbers go."""

    def __init__(self) -> None:
        self.buf = bytearray(ENCAPSULATION)

    @property
    def offset(self) -> int:
        return len(self.buf) - 4  # alignment is relative to the payload

    def align(self, size: int) -> None:
        self.buf += b"\x00" * (-self.offset % size)

    def u32(self, value: int) -> int:
        self.align(4)
        at = len(self.buf)
        self.buf += struct.pack("<I", value)
        return at

    def stamp(self) -> int:
        """``builtin_interfaces/Time`` (int32 sec, uint32 nanosec); returns its buffer index."""
        self.align(4)
        at = len(self.buf)
        self.buf += b"\x00" * 8
        return at

    def string(self, text: str) -> None:
        data = text.encode("utf-8") + b"\x00"
        self.u32(len(data))
        self.buf += data

    def strings(self, texts: Sequence[str]) -> None:
        self.u32(len(texts))
        for text in texts:
            self.string(text)

    def f64(self, count: int) -> int:
        """``count`` float64 in a row (aligned to 8); returns the buffer index of the first."""
        if count:
            self.align(8)
        at = len(self.buf)
        self.buf += b"\x00" * (8 * count)
        return at

    def f64_sequence(self, count: int) -> int:
        self.u32(count)
        return self.f64(count)

    def struct_sequence(self, count: int, width: int) -> int:
        """A sequence of ``count`` structs of ``width`` float64 each (Transform: 7, Twist: 6)."""
        self.u32(count)
        return self.f64(count * width)


class TemplateMessage:
    """A laid-out message whose stamp and float blocks are written per sample."""

    def __init__(self, layout: CdrLayout):
        self.buf = layout.buf
        self._floats = np.frombuffer(self.buf, dtype=np.uint8)  # keeps buf's size fixed from here on

    def block(self, at: int, count: int) -> np.ndarray:
        """A writable float64 view of ``count`` values at buffer index ``at``."""
        return self._floats[at : at + 8 * count].view("<f8")

    stamp_ns = 0  # the last stamp written

    def write_stamp(self, at: int, stamp_ns: int) -> None:
        self.stamp_ns = int(stamp_ns)
        sec, nanosec = divmod(int(stamp_ns), NS)
        _STAMP.pack_into(self.buf, at, sec, nanosec)

    def bytes(self) -> bytes:
        return bytes(self.buf)

    def _take(self, stamps_ns: np.ndarray, blocks: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
        """Many samples at once: ``(N, size)`` bytes whose row ``k`` is the template with stamp
        ``stamps_ns[k]`` and each ``(at, values)`` block's row ``k`` written at buffer index ``at`` (a
        whole take's bag in whole-array copies, not a ``serialize`` call per sample)."""
        stamps = np.asarray(stamps_ns, dtype=np.int64)
        n = len(stamps)
        out = np.tile(np.frombuffer(self.buf, dtype=np.uint8), (n, 1))
        sec, nanosec = np.divmod(stamps, NS)
        if n and not (-(2**31) <= sec.min() and sec.max() < 2**31):
            raise struct.error("'i' format requires -2147483648 <= number <= 2147483647")  # as pack_into
        out[:, self._stamp : self._stamp + 4] = sec.astype("<i4").view(np.uint8).reshape(n, 4)
        out[:, self._stamp + 4 : self._stamp + 8] = nanosec.astype("<u4").view(np.uint8).reshape(n, 4)
        for at, values in blocks:
            floats = np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(n, -1), dtype="<f8")
            out[:, at : at + 8 * floats.shape[1]] = floats.view(np.uint8)
        return out


class JointStateWriter(TemplateMessage):
    """``sensor_msgs/JointState``: fixed frame and names; positions, optional velocities and efforts."""

    def __init__(
        self, names: Sequence[str], frame_id: str = "", velocities: bool = True, efforts: bool = False
    ):
        lay = CdrLayout()
        self._stamp = lay.stamp()
        lay.string(frame_id)
        lay.strings(list(names))
        n = len(names)
        self._pos = lay.f64_sequence(n)
        self._vel = lay.f64_sequence(n if velocities else 0)
        self._eff = lay.f64_sequence(n if efforts else 0)
        super().__init__(lay)
        self.positions, self.velocities, self.efforts = (
            self.block(self._pos, n),
            self.block(self._vel, n if velocities else 0),
            self.block(self._eff, n if efforts else 0),
        )

    def serialize(
        self,
        stamp_ns: int,
        positions: np.ndarray,
        velocities: np.ndarray | None = None,
        efforts: np.ndarray | None = None,
    ) -> bytes:
        self.write_stamp(self._stamp, stamp_ns)
        self.positions[:] = positions
        if velocities is not None:
            self.velocities[:] = velocities
        if efforts is not None:
            self.efforts[:] = efforts
        return self.bytes()

    def serialize_take(
        self, stamps_ns: np.ndarray, positions: np.ndarray, velocities: np.ndarray
    ) -> np.ndarray:
        """Row ``k``: ``serialize(stamps_ns[k], positions[k], velocities[k])`` (no efforts), ``(N, size)``."""
        return self._take(stamps_ns, [(self._pos, positions), (self._vel, velocities)])


class WrenchStampedWriter(TemplateMessage):
    """``geometry_msgs/WrenchStamped`` in a fixed frame: force then torque."""

    def __init__(self, frame_id: str):
        lay = CdrLayout()
        self._stamp = lay.stamp()
        lay.string(frame_id)
        self._wrench = lay.f64(6)
        super().__init__(lay)
        self.wrench = self.block(self._wrench, 6)

    def serialize(self, stamp_ns: int, wrench: np.ndarray) -> bytes:
        """``wrench``: force x y z, torque x y z."""
        self.write_stamp(self._stamp, stamp_ns)
        self.wrench[:] = wrench
        return self.bytes()


class OdometryWriter(TemplateMessage):
    """``nav_msgs/Odometry`` with zero covariances: pose (position, quaternion x y z w) and twist."""

    def __init__(self, frame_id: str, child_frame_id: str):
        lay = CdrLayout()
        self._stamp = lay.stamp()
        lay.string(frame_id)
        lay.string(child_frame_id)
        self._pose = lay.f64(7)  # Point, Quaternion
        lay.f64(36)  # pose covariance
        self._twist = lay.f64(6)  # linear, angular
        lay.f64(36)  # twist covariance
        super().__init__(lay)
        self.pose, self.twist = self.block(self._pose, 7), self.block(self._twist, 6)

    def serialize(
        self,
        stamp_ns: int,
        position: np.ndarray,
        quaternion_xyzw: np.ndarray,
        linear: np.ndarray,
        angular: np.ndarray,
    ) -> bytes:
        self.write_stamp(self._stamp, stamp_ns)
        self.pose[:3], self.pose[3:] = position, quaternion_xyzw
        self.twist[:3], self.twist[3:] = linear, angular
        return self.bytes()

    def serialize_take(self, stamps_ns: np.ndarray, pose: np.ndarray, twist: np.ndarray) -> np.ndarray:
        """Row ``k``: ``serialize`` of ``stamps_ns[k]``, ``pose[k]`` (position, quaternion x y z w) and
        ``twist[k]`` (linear, angular), ``(N, size)``."""
        return self._take(stamps_ns, [(self._pose, pose), (self._twist, twist)])


class TFMessageWriter(TemplateMessage):
    """``tf2_msgs/TFMessage`` holding one ``geometry_msgs/TransformStamped`` between fixed frames:
    translation, then rotation (x y z w)."""

    def __init__(self, parent: str, child: str):
        lay = CdrLayout()
        lay.u32(1)  # transforms: one element
        self._stamp = lay.stamp()
        lay.string(parent)
        lay.string(child)
        self._transform = lay.f64(7)  # Vector3 translation, Quaternion rotation
        super().__init__(lay)
        self.transform = self.block(self._transform, 7)

    def serialize(self, stamp_ns: int, position: np.ndarray, quaternion_xyzw: np.ndarray) -> bytes:
        self.write_stamp(self._stamp, stamp_ns)
        self.transform[:3], self.transform[3:] = position, quaternion_xyzw
        return self.bytes()


class LinkStatesWriter(TemplateMessage):
    """``sensor_msgs/MultiDOFJointState`` of fixed link names: transforms (translation, rotation x y z w)
    and, when ``twists``, world twists (linear, angular); no wrenches."""

    def __init__(self, names: Sequence[str], frame_id: str, twists: bool = True):
        lay = CdrLayout()
        self._stamp = lay.stamp()
        lay.string(frame_id)
        lay.strings(list(names))
        n = len(names)
        self._transforms = lay.struct_sequence(n, 7)
        self._twists = lay.struct_sequence(n if twists else 0, 6)
        lay.u32(0)  # wrench
        super().__init__(lay)
        self.names = list(names)
        self.transforms = self.block(self._transforms, 7 * n).reshape(n, 7)
        self.twists = self.block(self._twists, 6 * n if twists else 0).reshape(-1, 6)

    def serialize(
        self,
        stamp_ns: int,
        positions: np.ndarray,
        quaternions_xyzw: np.ndarray,
        linear: np.ndarray | None = None,
        angular: np.ndarray | None = None,
    ) -> bytes:
        self.write_stamp(self._stamp, stamp_ns)
        self.transforms[:, :3], self.transforms[:, 3:] = positions, quaternions_xyzw
        if len(self.twists) and linear is not None and angular is not None:
            self.twists[:, :3], self.twists[:, 3:] = linear, angular
        return self.bytes()


class Float64ArrayWriter(TemplateMessage):
    """``std_msgs/Float64MultiArray`` of a fixed length with an empty layout (forward command controllers)."""

    def __init__(self, count: int):
        lay = CdrLayout()
        lay.u32(0)  # layout.dim
        lay.u32(0)  # layout.data_offset
        self._data = lay.f64_sequence(count)
        super().__init__(lay)
        self.data = self.block(self._data, count)

    def serialize(self, values: np.ndarray) -> bytes:
        self.data[:] = values
        return self.bytes()


class JointTrajectoryWriter(TemplateMessage):
    """``trajectory_msgs/JointTrajectory`` with one point of positions at ``time_from_start`` and a zero
    header stamp (start now), what joint_trajectory_controller takes for streaming."""

    def __init__(self, names: Sequence[str], time_from_start: float, frame_id: str = ""):
        lay = CdrLayout()
        lay.stamp()  # zero: start now
        lay.string(frame_id)
        lay.strings(list(names))
        lay.u32(1)  # one point
        n = len(names)
        self._positions = lay.f64_sequence(n)
        for _ in range(3):  # velocities, accelerations, effort
            lay.f64_sequence(0)
        at = lay.stamp()  # time_from_start: builtin_interfaces/Duration (int32 sec, uint32 nanosec)
        super().__init__(lay)
        sec = int(time_from_start)
        _STAMP.pack_into(self.buf, at, sec, int(round((time_from_start - sec) * NS)))
        self.positions = self.block(self._positions, n)

    def serialize(self, positions: np.ndarray) -> bytes:
        self.positions[:] = positions
        return self.bytes()


def publish_serialized(publisher: Any, data: bytes, message: Callable[[], Any]) -> None:
    """Publish ``data`` (serialized); an rclpy whose ``publish`` refuses bytes (older than Humble's
    ``publish_raw``) gets the message built by ``message()`` instead."""
    try:
        publisher.publish(data)
    except TypeError:
        publisher.publish(message())


class MarkerArrayWriter:
    """A ``visualization_msgs/MarkerArray`` of fixed markers whose stamps and points change.

    Marker's definition differs between distributions (Jazzy added textures and mesh files), so its
    layout is not written by hand: the prepared array is serialized once by rclpy with a unique sentinel
    in every point coordinate and stamp, and the sentinels' byte offsets become the places the numbers go
    (each marker's points are one contiguous float64 block). Per publication: stamps and points only.
    """

    _BASE = 8.0e8  # sentinel coordinates: BASE + a running index (exact in float64, never real data)
    _SEC = 2_000_000_000  # sentinel stamp seconds (2033): plus the marker index

    def __init__(self, array: Any):
        from rclpy.serialization import serialize_message

        counts = [len(m.points) for m in array.markers]
        saved = [
            (m.header.stamp.sec, m.header.stamp.nanosec, [(p.x, p.y, p.z) for p in m.points])
            for m in array.markers
        ]
        firsts = self._BASE + 3.0 * np.concatenate(([0], np.cumsum(counts)[:-1])) if counts else []
        for k, marker in enumerate(array.markers):
            marker.header.stamp.sec, marker.header.stamp.nanosec = self._SEC + k, 999_999_000 + k
            for j, point in enumerate(marker.points):
                base = firsts[k] + 3 * j
                point.x, point.y, point.z = base, base + 1, base + 2
        self.buf = bytearray(serialize_message(array))
        raw = bytes(self.buf)
        self._stamps, self._blocks = [], []
        floats = np.frombuffer(self.buf, dtype=np.uint8)
        for k, count in enumerate(counts):
            at = raw.find(_STAMP.pack(self._SEC + k, 999_999_000 + k))
            if at < 0:
                raise RuntimeError(f"marker {k}: stamp not found in rclpy's serialization")
            self._stamps.append(at)
            if not count:
                self._blocks.append(np.zeros((0, 3)))
                continue
            first = float(firsts[k])
            at = raw.find(struct.pack("<d", first))
            block = floats[at : at + 24 * count].view("<f8").reshape(count, 3) if at >= 0 else None
            expected = first + np.arange(3 * count, dtype=float).reshape(count, 3)
            if block is None or block.shape != expected.shape or not np.array_equal(block, expected):
                raise RuntimeError(f"marker {k}: points are not one float64 block in rclpy's serialization")
            self._blocks.append(block)
        for marker, (sec, nanosec, points) in zip(array.markers, saved, strict=True):  # leave it as it was
            marker.header.stamp.sec, marker.header.stamp.nanosec = sec, nanosec
            for point, (x, y, z) in zip(marker.points, points, strict=True):
                point.x, point.y, point.z = x, y, z

    def serialize(self, stamp_ns: int, clouds: Sequence[np.ndarray]) -> bytes:
        """Bytes of the array with every marker stamped ``stamp_ns`` and marker ``k``'s points
        ``clouds[k]`` (``(count_k, 3)``)."""
        sec, nanosec = divmod(int(stamp_ns), NS)
        for at in self._stamps:
            _STAMP.pack_into(self.buf, at, sec, nanosec)
        for block, cloud in zip(self._blocks, clouds, strict=True):
            block[:] = cloud
        return bytes(self.buf)
