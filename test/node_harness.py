"""Shared helpers of the node tests: nodes on one executor with a probe node, spin-until helpers, node
factories with parameter overrides, and link-state messages of the synthetic walk. The fixtures ``h`` (a
fresh :class:`Harness` per test) and ``samples`` (2 s of walking at 120 Hz) are in ``conftest.py``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


class Harness:
    """Nodes on one executor, a plain probe node for test publishers/subscribers, spin helpers."""

    def __init__(self, rclpy: Any):
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.executor = SingleThreadedExecutor()
        self.nodes: list[Any] = []
        self.probe = self.add(rclpy.create_node(f"test_probe_{os.getpid()}_{time.monotonic_ns()}"))

    def add(self, node: Any) -> Any:
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.005)

    def spin_until(self, condition: Callable[[], bool], timeout: float = 20.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if condition():
                return True
            self.executor.spin_once(timeout_sec=0.005)
        return condition()

    def collect(self, msg_type: type, topic: str, qos: Any = None) -> list:
        from dynik_ros.nodes.common import RELIABLE_QOS

        got: list = []
        self.probe.create_subscription(msg_type, topic, got.append, qos or RELIABLE_QOS)
        return got

    def wait_matched(self, publisher: Any, count: int = 1) -> None:
        assert self.spin_until(lambda: publisher.get_subscription_count() >= count), publisher.topic_name

    def close(self) -> None:
        for node in self.nodes:
            self.executor.remove_node(node)
            node.destroy_node()
        self.executor.shutdown()


def params(**values: Any) -> dict:
    from rclpy.parameter import Parameter

    return {"parameter_overrides": [Parameter(k, value=v) for k, v in values.items()]}


def wearable(**values: Any):
    from dynik_ros.nodes.wearable_node import WearableNode

    return WearableNode(**params(**{"rate": 60.0, "duration": 1.0, **values}))


def ik(**values: Any):
    from dynik_ros.nodes.ik_node import IKNode

    return IKNode(**params(**{"diagnostics_period": 0.1, **values}))


def bridge(**values: Any):
    from dynik_ros.nodes.bridge_node import BridgeNode

    return BridgeNode(**params(**{"controller": "test_ctrl", "interface": "forward_command", **values}))


def mocap(**values: Any):
    from dynik_ros.nodes.mocap_node import MocapNode

    return MocapNode(**params(**values))


def ok(result: Any) -> bool:
    from rclpy.lifecycle import TransitionCallbackReturn

    return result == TransitionCallbackReturn.SUCCESS


def walking_samples() -> list:
    """Serialized-ready human link states: 2 s of synthetic walking at 120 Hz (Human66)."""
    from dynik_ros.nodes.wearable_node import SyntheticSource

    return list(SyntheticSource("human66", "walking", 2.0, 120.0, 0.0, 1).samples())


def link_msg(sample: Any, stamp_ns: int):
    from dynik_ros.nodes.conversions import link_states_to_msg

    return link_states_to_msg(
        stamp_ns,
        sample.names,
        sample.positions,
        sample.quaternions,
        sample.linear_velocities,
        sample.angular_velocities,
    )


def motion_link_msg(motion: Any, k: int, stamp_ns: int):
    """Sample ``k`` of a synthetic :class:`~dynik_ros.motion.synthetic.Motion` as link states."""
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.nodes.conversions import link_states_to_msg

    return link_states_to_msg(
        stamp_ns,
        motion.links,
        motion.positions[k],
        quaternion_from_rotation(motion.rotations[k]),
        motion.linear_velocities[k],
        motion.angular_velocities[k],
    )


def published_configurations(
    h: Any,
    solver: Any,
    messages: Callable[[int], Any],
    stamps: list[int],
    before_each: Callable[[int], None] | None = None,
    first: int = 0,
):
    """Configure and activate the ik_node ``solver``, publish ``messages(k)`` for each of ``stamps`` on a
    reliable ``/human/link_states`` (each one waited for), and return the published configuration per
    stamp from ``stamps[first]`` on (nothing may be published for the ones before: ``calibrate_after``),
    ``(len(stamps) - first, nq)``: the base pose of ``/dynik/base_odom`` then ``/dynik/joint_states``."""
    import numpy as np
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import RELIABLE_QOS

    joints = h.collect(JointState, "/dynik/joint_states")
    odom = h.collect(Odometry, "/dynik/base_odom")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", RELIABLE_QOS)
    assert ok(solver.trigger_configure()), solver.last_error
    assert ok(solver.trigger_activate())
    h.wait_matched(pub)
    for k in range(len(stamps)):
        if before_each is not None:
            before_each(k)
        pub.publish(messages(k))
        assert h.spin_until(lambda k=k: solver.received > k, timeout=30.0)
    count = len(stamps) - first
    assert h.spin_until(lambda: len(joints) >= count and len(odom) >= count, timeout=30.0)
    assert solver.rejections.total == 0 and solver.held_steps == 0
    by_stamp: dict[int, list] = {}
    for j in joints:
        by_stamp.setdefault(j.header.stamp.sec * 10**9 + j.header.stamp.nanosec, [None, None])[0] = j
    for o in odom:
        by_stamp.setdefault(o.header.stamp.sec * 10**9 + o.header.stamp.nanosec, [None, None])[1] = o
    assert not [s for s in by_stamp if s < stamps[first]], "published before stamps[first]"
    q = []
    for stamp in stamps[first:]:
        j, o = by_stamp[stamp]
        p, r = o.pose.pose.position, o.pose.pose.orientation
        q.append(np.concatenate(([p.x, p.y, p.z, r.x, r.y, r.z, r.w], j.position)))
    return np.array(q)
