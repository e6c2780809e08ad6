"""Writing rosbag2 bags with `rosbags` (pure Python): :class:`BagWriter` for any of the pipeline's
messages built from numpy or passed through CDR-serialized, :func:`write_link_states` and
:func:`write_motion_bag` for the wearable stream. Reading, the type store and the stamp conventions are in
:mod:`dynik_ros.io.bags` (which re-exports these names)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.io.bags import (
    DIAGNOSTIC_ARRAY,
    JOINT_STATE,
    LINK_STATES_TOPIC,
    MARKER_ARRAY,
    MULTI_DOF_JOINT_STATE,
    ODOMETRY,
    STORAGES,
    LinkStateSample,
    Pose,
    Twist,
    _split_ns,
    _stamp_ns,
    default_typestore,
    seconds_to_ns,
)

# --- writing ------------------------------------------------------------------------------------

_NUMPY_DTYPES = {
    "bool": np.bool_,
    "byte": np.uint8,
    "char": np.uint8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


def _storage_plugin(storage: str) -> StoragePlugin:
    try:
        return STORAGES[storage]
    except KeyError:
        raise ValueError(f"unknown bag storage '{storage}', expected one of {list(STORAGES)}") from None


class BagWriter:
    """Writes a new rosbag2 bag (a directory) with `rosbags`; use as a context manager.

    >>> with BagWriter("out/run1") as bag:                                      # doctest: +SKIP
    ...     bag.write("/dynik/joint_states", bag.joint_state(t, names, q, v))

    Connections (topic, type) are added on first use. Message types come from the type store of
    :func:`default_typestore` (Kilted here; see there why, and ``distro`` for Humble bags), and each
    connection records the full message definition, so ``ros2 bag info``/``play`` and `rosbags`, foxglove
    or any mcap reader see the right types. No offered QoS is recorded: ``ros2 bag play`` then publishes
    reliable, which best-effort and reliable subscribers both accept.

    Args:
        path: the bag directory to create; it must not exist.
        storage: ``'mcap'`` (default, what ``ros2 bag record`` uses since Iron) or ``'sqlite3'``.
        distro: type store for the message definitions (``None``: :func:`default_typestore`).
        version: rosbag2 metadata version: 9 (Jazzy and newer write it) or 8; try 8 if an older rosbag2
            refuses a bag's metadata.yaml.
    """

    def __init__(
        self, path: str | Path, storage: str = "mcap", distro: str | None = None, version: int = 9
    ) -> None:
        self.path = Path(path)
        self.storage = storage
        self.typestore = default_typestore(distro)
        if self.path.exists():
            raise FileExistsError(f"bag '{self.path}' exists already; rosbag2 bags are never overwritten")
        try:
            self._writer = Writer(self.path, version=version, storage_plugin=_storage_plugin(storage))
        except WriterError as exc:
            raise ValueError(str(exc)) from None
        self._connections: dict[str, Any] = {}
        self._open = False

    # context management
    def open(self) -> BagWriter:
        """Create the bag directory and storage file."""
        self._writer.open()
        self._open = True
        return self

    def close(self) -> None:
        """Write the metadata and close the storage; the bag is readable only after this."""
        if self._open:
            self._open = False
            self._writer.close()

    def __enter__(self) -> BagWriter:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Close on errors too: what was written stays readable.
        self.close()

    # messages
    def message(self, msgtype: str, **fields: Any) -> Any:
        """A message of ``msgtype`` (e.g. ``'visualization_msgs/msg/Marker'``) with ``fields`` set and every
        other field at its ROS default (zero, empty string or sequence, nested defaults)."""
        try:
            _, fielddefs = self.typestore.fielddefs[msgtype]
        except KeyError:
            raise ValueError(f"unknown message type '{msgtype}' in the rosbags type store") from None
        names = [name for name, _ in fielddefs]
        unknown = sorted(set(fields) - set(names))
        if unknown:
            raise ValueError(f"{msgtype} has no field(s) {unknown}; its fields are {names}")
        values = {name: fields[name] if name in fields else self._default(desc) for name, desc in fielddefs}
        return self.typestore.types[msgtype](**values)

    def _default(self, desc: tuple) -> Any:
        kind, arg = desc
        kind = getattr(kind, "name", kind)
        if kind == "BASE":
            base = arg[0]
            if base == "string":
                return ""
            if base == "bool":
                return False
            return 0.0 if base.startswith("float") else 0
        if kind == "NAME":
            return self.message(arg)
        (element, length) = arg
        element_kind = getattr(element[0], "name", element[0])
        if element_kind == "BASE" and element[1][0] in _NUMPY_DTYPES:
            dtype = _NUMPY_DTYPES[element[1][0]]
            return np.zeros(length if kind == "ARRAY" else 0, dtype=dtype)
        return [self._default(element) for _ in range(length)] if kind == "ARRAY" else []

    def header(self, stamp: float | int, frame_id: str = "") -> Any:
        """``std_msgs/Header``; ``stamp`` in float seconds (an ``int`` is taken as nanoseconds)."""
        ns = stamp if isinstance(stamp, (int, np.integer)) else seconds_to_ns(stamp)
        sec, nanosec = _split_ns(ns)
        time = self.typestore.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)
        return self.typestore.types["std_msgs/msg/Header"](stamp=time, frame_id=frame_id)

    def _vector3(self, v: Sequence[float]) -> Any:
        x, y, z = (float(c) for c in v)
        return self.typestore.types["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)

    def _quaternion(self, r: np.ndarray) -> Any:
        x, y, z, w = (float(c) for c in quaternion_from_rotation(r))
        return self.typestore.types["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w)

    def joint_state(
        self,
        stamp: float | int,
        names: Sequence[str],
        position: Sequence[float],
        velocity: Sequence[float] | None = None,
        effort: Sequence[float] | None = None,
        frame_id: str = "",
    ) -> Any:
        """``sensor_msgs/JointState``; ``velocity`` and ``effort`` may be omitted (empty arrays)."""
        arrays = {"position": position, "velocity": velocity, "effort": effort}
        values = {
            k: np.asarray(v if v is not None else (), dtype=np.float64).reshape(-1) for k, v in arrays.items()
        }
        for key, value in values.items():
            if len(value) not in ((0, len(names)) if key != "position" else (len(names),)):
                raise ValueError(f"JointState {key} has {len(value)} values for {len(names)} names")
        return self.message(JOINT_STATE, header=self.header(stamp, frame_id), name=list(names), **values)

    def odometry(
        self,
        stamp: float | int,
        position: Sequence[float],
        rotation: np.ndarray,
        linear_velocity: Sequence[float] = (0.0, 0.0, 0.0),
        angular_velocity: Sequence[float] = (0.0, 0.0, 0.0),
        frame_id: str = "world",
        child_frame_id: str = "base_link",
    ) -> Any:
        """``nav_msgs/Odometry`` of a base with world pose ``(position, rotation)`` and world-frame
        velocities. As the message definition requires, the twist is stored in ``child_frame_id``
        (the base's own axes): ``R^T v`` and ``R^T w``. Covariances are zero (unknown)."""
        r = np.asarray(rotation, dtype=float)
        types = self.typestore.types
        point = types["geometry_msgs/msg/Point"](
            **dict(zip("xyz", (float(c) for c in position), strict=True))
        )
        pose = types["geometry_msgs/msg/Pose"](position=point, orientation=self._quaternion(r))
        twist = types["geometry_msgs/msg/Twist"](
            linear=self._vector3(r.T @ np.asarray(linear_velocity, dtype=float)),
            angular=self._vector3(r.T @ np.asarray(angular_velocity, dtype=float)),
        )
        return self.message(
            ODOMETRY,
            header=self.header(stamp, frame_id),
            child_frame_id=child_frame_id,
            pose=self.message("geometry_msgs/msg/PoseWithCovariance", pose=pose),
            twist=self.message("geometry_msgs/msg/TwistWithCovariance", twist=twist),
        )

    def link_states(
        self,
        stamp: float | int,
        poses: Mapping[str, Pose],
        twists: Mapping[str, Twist] | None = None,
        frame_id: str = "world",
    ) -> Any:
        """``sensor_msgs/MultiDOFJointState`` of the link-state convention: link names, world poses and
        (all or none) world-frame twists, in the order of ``poses``."""
        twists = twists or {}
        names = list(poses)
        if twists and set(twists) != set(names):
            raise ValueError(
                "twists must be given for every link or none; "
                f"missing {sorted(set(names) - set(twists))}, extra {sorted(set(twists) - set(names))}"
            )
        types = self.typestore.types
        arrays = [tuple(np.asarray(a, dtype=float) for a in poses[name]) for name in names]
        for name, (p, r) in zip(names, arrays, strict=True):
            if p.shape != (3,) or r.shape != (3, 3):
                raise ValueError(f"pose of '{name}' must be (p (3,), R (3, 3)), got {p.shape}, {r.shape}")
        quaternions = quaternion_from_rotation(np.array([r for _, r in arrays]).reshape(-1, 3, 3)).tolist()
        transforms = [
            types["geometry_msgs/msg/Transform"](
                translation=self._vector3(p),
                rotation=types["geometry_msgs/msg/Quaternion"](x=qx, y=qy, z=qz, w=qw),
            )
            for (p, _), (qx, qy, qz, qw) in zip(arrays, quaternions, strict=True)
        ]
        twist_msgs = [
            types["geometry_msgs/msg/Twist"](
                linear=self._vector3(twists[n][0]), angular=self._vector3(twists[n][1])
            )
            for n in (names if twists else ())
        ]
        return self.message(
            MULTI_DOF_JOINT_STATE,
            header=self.header(stamp, frame_id),
            joint_names=names,
            transforms=transforms,
            twist=twist_msgs,
        )

    def diagnostics(
        self, stamp: float | int, statuses: Iterable[tuple[str, int, str, Mapping[str, Any]]]
    ) -> Any:
        """``diagnostic_msgs/DiagnosticArray`` of ``(name, level, message, {key: value})`` statuses
        (level 0 OK, 1 WARN, 2 ERROR, 3 STALE; values are written as strings)."""
        status_msgs = []
        for name, level, text, values in statuses:
            if int(level) not in (0, 1, 2, 3):
                raise ValueError(f"diagnostic level of '{name}' must be 0..3, got {level}")
            keyvalues = [
                self.message("diagnostic_msgs/msg/KeyValue", key=str(k), value=str(v))
                for k, v in values.items()
            ]
            status_msgs.append(
                self.message(
                    "diagnostic_msgs/msg/DiagnosticStatus",
                    level=int(level),
                    name=name,
                    message=text,
                    values=keyvalues,
                )
            )
        return self.message(DIAGNOSTIC_ARRAY, header=self.header(stamp), status=status_msgs)

    def marker_array(self, markers: Sequence[Any]) -> Any:
        """``visualization_msgs/MarkerArray`` of markers made with ``message('visualization_msgs/msg/Marker',
        ...)`` (fields not given keep their defaults)."""
        return self.message(MARKER_ARRAY, markers=list(markers))

    # writing
    def _connection(self, topic: str, msgtype: str) -> Any:
        if not self._open:
            raise RuntimeError(f"bag '{self.path}' is not open: use 'with BagWriter(...) as bag'")
        connection = self._connections.get(topic)
        if connection is None:
            if msgtype not in self.typestore.fielddefs:
                raise ValueError(f"unknown message type '{msgtype}' in the rosbags type store")
            connection = self._writer.add_connection(topic, msgtype, typestore=self.typestore)
            self._connections[topic] = connection
        elif connection.msgtype != msgtype:
            raise ValueError(f"topic '{topic}' already has type {connection.msgtype}, cannot write {msgtype}")
        return connection

    def write(self, topic: str, msg: Any, log_time: float | int | None = None) -> None:
        """Write a `rosbags` message (from the builders above or :meth:`message`).

        ``log_time`` (float seconds, or int nanoseconds) defaults to the message's ``header.stamp``; a
        message without header (e.g. ``MarkerArray``) takes its first element's stamp, else needs it.
        """
        msgtype = msg.__msgtype__
        if log_time is None:
            stamp = _message_stamp(msg)
            if stamp is None:
                raise ValueError(f"{msgtype} on '{topic}' has no header stamp: pass log_time")
            ns = stamp
        else:
            ns = log_time if isinstance(log_time, (int, np.integer)) else seconds_to_ns(log_time)
        connection = self._connection(topic, msgtype)
        self._writer.write(connection, int(ns), self.typestore.serialize_cdr(msg, msgtype))

    def write_serialized(self, topic: str, msgtype: str, data: bytes, log_time_ns: int) -> None:
        """Write an already CDR-serialized message (e.g. ``rclpy.serialization.serialize_message`` or an
        rclpy subscription with ``raw=True``) of ``msgtype`` (``'sensor_msgs/msg/JointState'``)."""
        connection = self._connection(topic, msgtype)
        self._writer.write(connection, int(log_time_ns), data)


def _message_stamp(msg: Any) -> int | None:
    header = getattr(msg, "header", None)
    if header is not None:
        return _stamp_ns(header.stamp)
    for field in ("markers", "status", "transforms"):
        items = getattr(msg, field, None)
        if items and getattr(items[0], "header", None) is not None:
            return _stamp_ns(items[0].header.stamp)
    return None


def write_link_states(
    path: str | Path,
    samples: Iterable[LinkStateSample],
    topic: str = LINK_STATES_TOPIC,
    storage: str = "mcap",
    frame_id: str = "world",
    distro: str | None = None,
) -> Path:
    """Write ``(stamp_s, {link: (p, R)}, {link: (v, w)})`` samples as ``MultiDOFJointState`` messages
    (stamp = header stamp = log time) to a new bag directory ``path``; returns ``path``.

    Raises:
        FileExistsError: ``path`` exists. ValueError: unknown storage, or a malformed sample.
    """
    _storage_plugin(storage)
    with BagWriter(path, storage=storage, distro=distro) as bag:
        for stamp, poses, twists in samples:
            bag.write(topic, bag.link_states(stamp, poses, twists, frame_id))
    return Path(path)


def write_motion_bag(
    path: str | Path,
    motion: Any,
    topic: str = LINK_STATES_TOPIC,
    storage: str = "mcap",
    start_time: float = 0.0,
    frame_id: str = "world",
    distro: str | None = None,
) -> Path:
    """Write a :class:`dynik_ros.motion.synthetic.Motion` (``times``, ``links``, ``positions`` (N, L, 3),
    ``rotations`` (N, L, 3, 3), world ``linear_velocities`` and ``angular_velocities`` (N, L, 3)) as the
    link-state stream of a wearable suit; sample ``k`` is stamped ``start_time + times[k]`` (each term
    rounded to the nanosecond separately, so epoch start times do not cost precision). Returns ``path``."""
    times = np.asarray(motion.times, dtype=float)
    n, n_links = len(times), len(motion.links)
    for name in ("positions", "rotations", "linear_velocities", "angular_velocities"):
        shape = np.shape(getattr(motion, name))
        expected = (n, n_links, 3, 3) if name == "rotations" else (n, n_links, 3)
        if shape != expected:
            raise ValueError(f"motion.{name} has shape {shape}, expected {expected}")
    start_ns = seconds_to_ns(start_time)
    _storage_plugin(storage)
    with BagWriter(path, storage=storage, distro=distro) as bag:
        for k in range(n):
            poses = {
                name: (motion.positions[k, i], motion.rotations[k, i]) for i, name in enumerate(motion.links)
            }
            twists = {
                name: (motion.linear_velocities[k, i], motion.angular_velocities[k, i])
                for i, name in enumerate(motion.links)
            }
            bag.write(topic, bag.link_states(start_ns + seconds_to_ns(times[k]), poses, twists, frame_id))
    return Path(path)
