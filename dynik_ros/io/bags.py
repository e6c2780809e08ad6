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

The writing half (:class:`BagWriter`, :func:`write_link_states`, :func:`write_motion_bag`) is in
:mod:`dynik_ros.io.bag_writer`; its names are importable from here too.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from dynik_ros.core.quaternion import rotation_from_quaternion

__all__ = [
    "LINK_STATES_TOPIC",
    "MULTI_DOF_JOINT_STATE",
    "STORAGES",
    "BagMessage",
    "BagWriter",  # noqa: F822 - from io/bag_writer.py, see __getattr__
    "bag_topics",
    "default_typestore",
    "ns_to_seconds",
    "read_link_states",
    "read_messages",
    "seconds_to_ns",
    "write_link_states",  # noqa: F822 - from io/bag_writer.py, see __getattr__
    "write_motion_bag",  # noqa: F822 - from io/bag_writer.py, see __getattr__
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


_WRITER_NAMES = ("BagWriter", "write_link_states", "write_motion_bag")


def __getattr__(name: str) -> Any:
    """The writer lives in :mod:`dynik_ros.io.bag_writer`; its names stay importable from here."""
    if name in _WRITER_NAMES:
        from dynik_ros.io import bag_writer

        return getattr(bag_writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
