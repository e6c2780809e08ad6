"""Record ROS 2 topics to a rosbag2 bag (mcap by default) from inside an rclpy process, without rosbag2.

:class:`TopicRecorder` subscribes with ``raw=True`` (rclpy hands over the CDR bytes it received) and
writes them through :class:`dynik_ros.io.bags.BagWriter`, whose connections carry the `rosbags` type
store's message definitions. The log time of a message is its receive time on the node's clock, as
``ros2 bag record`` does. The bag is readable (``rosbags``, ``ros2 bag``, any mcap reader) after
:meth:`TopicRecorder.close`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from dynik_ros.io.bags import BagWriter


def ros_type_name(msg_class: type) -> str:
    """``'sensor_msgs/msg/JointState'`` for the rclpy message class ``sensor_msgs.msg.JointState``."""
    package = msg_class.__module__.split(".")[0]
    return f"{package}/msg/{msg_class.__name__}"


def recording_qos(best_effort: bool, depth: int = 1000) -> QoSProfile:
    """Deep keep-last queue; best-effort to match best-effort publishers (it also matches reliable ones)."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


class TopicRecorder:
    """Subscribes to ``topics`` on ``node`` and writes every message to a new bag at ``path``.

    ``topics`` is a list of ``(topic, message class, best_effort)``. Recording reliable topics with a
    reliable subscription loses nothing while the executor keeps up with the queue depth.
    """

    def __init__(
        self,
        node: Node,
        path: str | Path,
        topics: Sequence[tuple[str, type, bool]],
        storage: str = "mcap",
        distro: str | None = None,
    ):
        self.node = node
        self.path = Path(path)
        distro = distro if distro is not None else _ros_distro()
        self._bag = BagWriter(self.path, storage=storage, distro=distro).open()
        self._lock = threading.Lock()
        self._closed = False
        self.counts: dict[str, int] = {}
        self._topic_subscriptions = []
        for topic, msg_class, best_effort in topics:
            msgtype = ros_type_name(msg_class)
            self.counts[topic] = 0
            self._topic_subscriptions.append(
                node.create_subscription(
                    msg_class,
                    topic,
                    lambda data, t=topic, m=msgtype: self._write(t, m, data),
                    recording_qos(best_effort),
                    raw=True,
                )
            )

    def _write(self, topic: str, msgtype: str, data: bytes) -> None:
        stamp = self.node.get_clock().now().nanoseconds
        with self._lock:
            if self._closed:
                return
            self._bag.write_serialized(topic, msgtype, data, stamp)
            self.counts[topic] += 1

    def close(self) -> Path:
        """Stop recording and finish the bag (metadata written); returns its path."""
        with self._lock:
            if self._closed:
                return self.path
            self._closed = True
            self._bag.close()
        for sub in self._topic_subscriptions:
            self.node.destroy_subscription(sub)
        self._topic_subscriptions = []
        return self.path

    def __enter__(self) -> TopicRecorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ros_distro() -> str | None:
    """The sourced ROS 2 distro (``ROS_DISTRO``) when `rosbags` knows it: message definitions then match
    what this rclpy serializes (Humble's Marker differs from later distros). ``None``: the default store."""
    distro = os.environ.get("ROS_DISTRO", "").lower()
    return distro if distro in ("humble", "iron", "jazzy", "kilted") else None
