"""rosbag2 reading and writing with `rosbags` (pure Python: no rclpy, no rosbag2 install needed).

* :func:`read_link_states` / :func:`write_link_states`: the wearable stream ``/human/link_states``
  (``sensor_msgs/msg/MultiDOFJointState``: ``joint_names`` = link names, ``transforms`` = world poses,
  ``twist`` = world-frame linear and angular velocities, ``header.stamp`` = source stamp) as
  ``(stamp_s, {link: (p, R)}, {link: (v, w)})`` samples, from mcap or sqlite3 bags.
* :func:`write_motion_bag`: a :class:`dynik_ros.motion.synthetic.Motion` as such a bag.
* :class:`BagWriter`: any of the pipeline's messages (``JointState``, ``Odometry``,
  ``MultiDOFJointState``, ``MarkerArray``, ``DiagnosticArray``, ...) with their ROS 2 type names, built
  from numpy (:meth:`BagWriter.joint_state`, :meth:`BagWriter.odometry`, ...) or passed through already
  CDR-serialized (:meth:`BagWriter.write_serialized`, e.g. from an rclpy ``raw=True`` subscription).
* :func:`read_messages` / :func:`bag_topics`: every message of a bag, deserialized, for checks and tools.

Stamps: ROS time is integer nanoseconds. Functions here take and return float seconds, converted
exactly at the nanosecond (``sec`` and ``nanosec`` are split before rounding), so values that are whole
nanoseconds survive a round trip; note that a float64 near the Unix epoch (~1.7e9 s) resolves only about
0.24 us. Where a stamp may be given either way (:meth:`BagWriter.header`, ``log_time``), a Python or numpy
``int`` is nanoseconds (the `rosbags` convention) and a ``float`` is seconds. The bag's log time of a
message is its ``header.stamp`` unless told otherwise.

Rotations travel as quaternions in ``(x, y, z, w)`` order (:mod:`dynik_ros.core.quaternion`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer, WriterError
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion

__all__ = [
    "LINK_STATES_TOPIC",
    "MULTI_DOF_JOINT_STATE",
    "STORAGES",
    "BagMessage",
    "BagWriter",
    "bag_topics",
    "default_typestore",
    "ns_to_seconds",
    "read_link_states",
    "read_messages",
    "seconds_to_ns",
    "write_link_states",
    "write_motion_bag",
]

LINK_STATES_TOPIC = "/human/link_states"
MULTI_DOF_JOINT_STATE = "sensor_msgs/msg/MultiDOFJointState"
JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"
MARKER_ARRAY = "visualization_msgs/msg/MarkerArray"
DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"

STORAGES: dict[str, StoragePlugin] = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
"""Storage names as ``ros2 bag record -s`` spells them."""

_DISTROS = {"humble": "ROS2_HUMBLE", "iron": "ROS2_IRON", "jazzy": "ROS2_JAZZY", "kilted": "ROS2_KILTED"}
_NS = 1_000_000_000

Pose = tuple[np.ndarray, np.ndarray]
"""``(p (3,), R (3, 3))``: a link's world position and orientation."""
Twist = tuple[np.ndarray, np.ndarray]
"""``(v (3,), w (3,))``: a link's world-frame linear and angular velocity."""
LinkStateSample = tuple[float | int, dict[str, Pose], dict[str, Twist]]
"""``(stamp, poses, twists)``; ``stamp`` in float seconds, or int nanoseconds with ``stamp_ns=True``;
``twists`` is empty when the message carried none."""


# --- type store and time ------------------------------------------------------------------------


def default_typestore(distro: str | None = None) -> Typestore:
    """The `rosbags` type store used to build, serialize and (for types a bag does not define) read messages.

    Default: ``Stores.ROS2_KILTED`` when the installed `rosbags` has it (0.11.9 here has), because the
    ROS 2 wheels of this project's environment are Kilted and a bag then carries exactly the definitions
    (and type hashes) that Kilted's ``ros2 bag`` expects; with an older `rosbags` that lacks Kilted, the
    fallback is ``Stores.ROS2_HUMBLE``, the oldest distro our users run. The definitions of the messages the
    pipeline writes (JointState, Odometry, MultiDOFJointState, DiagnosticArray, JointTrajectory, ...) are
    the same in Humble, Jazzy and Kilted; ``visualization_msgs/Marker`` differs only by a constant Kilted
    added (``ARROW_STRIP``), so the serialized bytes are the same and Humble's ``ros2 bag play`` replays a
    Kilted-store bag. ``distro='humble'`` embeds Humble's own definitions, for tools that compare them.

    Args:
        distro: ``'humble'``, ``'iron'``, ``'jazzy'`` or ``'kilted'``; ``None`` for the default above.
    """
    if distro is None:
        store = getattr(Stores, "ROS2_KILTED", None) or Stores.ROS2_HUMBLE
    else:
        name = _DISTROS.get(distro.lower())
        store = getattr(Stores, name, None) if name else None
        if store is None:
            known = [d for d, n in _DISTROS.items() if hasattr(Stores, n)]
            raise ValueError(
                f"unknown ROS 2 distro '{distro}' for rosbags type stores, expected one of {known}"
            )
    return get_typestore(store)


def seconds_to_ns(t: float) -> int:
    """Float seconds -> integer nanoseconds, rounded to the nearest nanosecond without losing the
    fractional part of large (epoch) times to float64's 53-bit mantissa."""
    t = float(t)
    if not math.isfinite(t):
        raise ValueError(f"stamp must be finite, got {t}")
    whole = math.floor(t)
    return int(whole) * _NS + round((t - whole) * _NS)


def ns_to_seconds(ns: int) -> float:
    """Integer nanoseconds -> float seconds."""
    sec, nanosec = divmod(int(ns), _NS)
    return sec + nanosec * 1e-9


def _split_ns(ns: int) -> tuple[int, int]:
    sec, nanosec = divmod(int(ns), _NS)
    if not -(2**31) <= sec < 2**31:
        raise ValueError(f"stamp {ns} ns does not fit builtin_interfaces/Time (int32 seconds)")
    return sec, nanosec


def _stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` -> nanoseconds."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BagMessage:
    """One deserialized message of a bag: ``timestamp_ns`` is the bag's log (receive) time."""

    topic: str
    msgtype: str
    timestamp_ns: int
    msg: Any


def _check_bag_path(path: str | Path) -> Path:
    """The bag path, or FileNotFoundError naming it (a rosbag2 directory, or one .mcap / .db3 file)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"rosbag2 bag not found: '{path}'")
    if path.is_dir() and not (path / "metadata.yaml").is_file():
        files = sorted(p.name for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
        hint = (
            f"; it holds {files}: run 'ros2 bag reindex {path}' or pass one of those files directly"
            if files
            else ""
        )
        raise FileNotFoundError(f"'{path}' is not a rosbag2 directory: no metadata.yaml{hint}")
    return path


def _same_definition(store: Typestore, connection: Any) -> bool:
    """Whether ``store`` defines the connection's type as the bag does (type hash, else definition text)."""
    msgtype = connection.msgtype
    if msgtype not in store.fielddefs:
        return False
    try:
        if connection.digest:
            return store.hash_rihs01(msgtype) == connection.digest
        return store.generate_msgdef(msgtype, ros_version=2)[0] == connection.msgdef.data
    except Exception:  # a type the hash / generator cannot handle: treat as different
        return False


def _bag_typestore(reader: Reader, fallback: Typestore) -> Typestore:
    """``fallback``, or when the bag embeds a different definition of one of its types (a Humble
    MarkerArray read here), a store with the bag's own definitions on top of ``fallback``'s."""
    different = [c for c in reader.connections if c.msgdef.data and not _same_definition(fallback, c)]
    if not different:
        return fallback
    types = dict(fallback.fielddefs)
    for connection in different:
        definition = connection.msgdef
        try:
            if definition.format.name == "MSG":
                types.update(get_types_from_msg(definition.data, connection.msgtype))
            elif definition.format.name == "IDL":
                types.update(get_types_from_idl(definition.data))
        except Exception:  # an unparsable embedded definition: keep the store's own
            continue
    store = get_typestore(Stores.EMPTY)
    store.register(types)
    return store


def bag_topics(path: str | Path) -> dict[str, str]:
    """``{topic: message type}`` of a bag (directory or single .mcap / .db3 file)."""
    path = _check_bag_path(path)
    with Reader(path) as reader:
        return {topic: info.msgtype for topic, info in sorted(reader.topics.items())}


def _describe_topics(topics: Mapping[str, str]) -> str:
    return ", ".join(f"{t} [{m}]" for t, m in topics.items()) or "none"


def read_messages(
    path: str | Path, topics: Sequence[str] | None = None, typestore: Typestore | None = None
) -> Iterator[BagMessage]:
    """Every message of ``topics`` (default: all) in log-time order, deserialized.

    Raises (before the first message is yielded):
        FileNotFoundError: no bag at ``path``.
        ValueError: a requested topic is not in the bag (the message lists the topics present).
    """
    path = _check_bag_path(path)
    with Reader(path) as reader:
        present = {t: info.msgtype for t, info in sorted(reader.topics.items())}
    missing = [t for t in topics or () if t not in present]
    if missing:
        raise ValueError(f"topic(s) {missing} not in bag '{path}'; it has: {_describe_topics(present)}")
    return _iter_messages(path, topics, typestore or default_typestore())


def _iter_messages(path: Path, topics: Sequence[str] | None, fallback: Typestore) -> Iterator[BagMessage]:
    with Reader(path) as reader:
        store = _bag_typestore(reader, fallback)
        connections = [c for c in reader.connections if topics is None or c.topic in topics]
        for connection, timestamp, raw in reader.messages(connections=connections):
            msg = store.deserialize_cdr(raw, connection.msgtype)
            yield BagMessage(connection.topic, connection.msgtype, timestamp, msg)


def read_link_states(
    path: str | Path, topic: str = LINK_STATES_TOPIC, stamp_ns: bool = False
) -> Iterator[LinkStateSample]:
    """Samples ``(stamp, {link: (p, R)}, {link: (v, w)})`` of a ``MultiDOFJointState`` topic.

    ``stamp`` is the message's ``header.stamp`` (the source stamp) in float seconds, or exactly, as int
    nanoseconds, with ``stamp_ns=True`` (a float second near today's epoch resolves ~0.2 us); ``p``
    ``(3,)`` and ``R`` ``(3, 3)`` the world pose (quaternions are normalized), ``v``, ``w`` ``(3,)`` the
    world-frame velocities; the
    twist dict is empty for messages without twists. Dicts keep the message's link order. Messages come
    in the bag's log-time order. ``path`` is a rosbag2 directory (mcap or sqlite3) or one .mcap / .db3 file.

    Raises (before the first sample is yielded, except malformed messages):
        FileNotFoundError: no bag at ``path`` (the message names it).
        ValueError: ``topic`` is not in the bag (the message lists the topics present), has another type
            than ``sensor_msgs/msg/MultiDOFJointState`` (named), or a message is malformed (array lengths,
            duplicate names, zero quaternion).
    """
    path = _check_bag_path(path)
    with Reader(path) as reader:
        present = {t: info.msgtype for t, info in sorted(reader.topics.items())}
    if topic not in present:
        raise ValueError(f"topic '{topic}' not in bag '{path}'; it has: {_describe_topics(present)}")
    if present[topic] != MULTI_DOF_JOINT_STATE:
        raise ValueError(
            f"topic '{topic}' in bag '{path}' has type {present[topic]}, expected {MULTI_DOF_JOINT_STATE}"
        )
    return _iter_link_states(path, topic, stamp_ns)


def _iter_link_states(path: Path, topic: str, stamp_ns: bool) -> Iterator[LinkStateSample]:
    for index, item in enumerate(_iter_messages(path, [topic], default_typestore())):
        yield _link_state_sample(item.msg, f"message {index} of '{topic}' in '{path}'", stamp_ns)


def _link_state_sample(msg: Any, where: str, stamp_ns: bool = False) -> LinkStateSample:
    names = list(msg.joint_names)
    n = len(names)
    if len(set(names)) != n:
        raise ValueError(f"{where}: duplicate link names in joint_names")
    if len(msg.transforms) != n:
        raise ValueError(f"{where}: {n} joint_names but {len(msg.transforms)} transforms")
    if len(msg.twist) not in (0, n):
        raise ValueError(f"{where}: {n} joint_names but {len(msg.twist)} twists (expected 0 or {n})")
    stamp = _stamp_ns(msg.header.stamp) if stamp_ns else ns_to_seconds(_stamp_ns(msg.header.stamp))
    if n == 0:
        return stamp, {}, {}
    positions = np.array([[t.translation.x, t.translation.y, t.translation.z] for t in msg.transforms])
    quaternions = np.array([[t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w] for t in msg.transforms])
    try:
        rotations = rotation_from_quaternion(quaternions)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    poses = {name: (positions[i], rotations[i]) for i, name in enumerate(names)}
    twists = {
        name: (
            np.array([tw.linear.x, tw.linear.y, tw.linear.z]),
            np.array([tw.angular.x, tw.angular.y, tw.angular.z]),
        )
        for name, tw in zip(names, msg.twist, strict=False)
    }
    return stamp, poses, twists


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
