"""wearable_node source:=file (real rclpy, real DDS): an MVNX / BVH file written from Human66 forward
kinematics replayed on /human/link_states, with playback-rate scaling and looping; bad files fail
configure naming file_path. Received messages are checked one by one against the file's samples (no
test counts best-effort deliveries beyond a lower bound)."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.io.bvh import builtin_skeleton_maps, write_bvh
from dynik_ros.io.motion_files import detect_format, read_motion_file
from dynik_ros.io.mvnx import write_mvnx
from dynik_ros.retarget.human import synthetic_human_motion

NS = 1_000_000_000


@pytest.fixture
def executor(ros):
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor()
    nodes = []
    yield ex, nodes
    for node in nodes:
        ex.remove_node(node)
        node.destroy_node()
    ex.shutdown()


def _spin_until(ex, condition, timeout: float = 30.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end and not condition():
        ex.spin_once(timeout_sec=0.01)
    return condition()


def _node(ros, ex, nodes, **values):
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.wearable_node import WearableNode

    node = WearableNode(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    ex.add_node(node)
    nodes.append(node)
    return node


def _listen(ros, ex, nodes):
    import os

    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    probe = ros.create_node(f"file_probe_{os.getpid()}")
    ex.add_node(probe)
    nodes.append(probe)
    got: list = []
    probe.create_subscription(MultiDOFJointState, "/human/link_states", got.append, SENSOR_QOS)
    return got


def _arrays(msg):
    p = np.array([[t.translation.x, t.translation.y, t.translation.z] for t in msg.transforms])
    w = np.array([[v.angular.x, v.angular.y, v.angular.z] for v in msg.twist])
    return p, w


@pytest.mark.parametrize("kind", ["mvnx", "bvh"])
def test_file_source_replays_the_take_with_rate_scaling_and_loop(ros, executor, tmp_path, kind):
    ex, nodes = executor
    walk = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    if kind == "mvnx":
        path = write_mvnx(walk, tmp_path / "take.dat")  # no extension: the content decides
    else:
        names = {m.name: m.segments for m in builtin_skeleton_maps()}["mvn"]
        path = write_bvh(walk, tmp_path / "take.dat", names=names)
    assert detect_format(path) == kind
    expected = read_motion_file(path)  # what the node should send: checked, floor-shifted
    n = len(expected)
    node = _node(ros, ex, nodes, source="file", file_path=str(path), file_rate=2.0, loop=True)
    got = _listen(ros, ex, nodes)
    node.trigger_configure()
    assert node.lifecycle_state == "inactive", node.last_error
    node.trigger_activate()
    assert _spin_until(ex, lambda: node.loops >= 1 and len(got) >= 10), (node.published, len(got))
    stamps = np.array([m.header.stamp.sec * NS + m.header.stamp.nanosec for m in got])
    assert np.all(np.diff(stamps) > 0)
    period = node._source.period_ns
    assert period == pytest.approx(NS / 60.0 / 2.0, abs=1)  # file_rate 2: twice as fast
    origin = node._offset_ns  # output stamp of the file's first sample (restamped on the node clock)
    for msg, stamp in zip(got, stamps, strict=True):
        assert list(msg.joint_names) == expected.links
        k = int(round((stamp - origin) / period)) % n  # a loop continues one period after the last sample
        p, w = _arrays(msg)
        np.testing.assert_allclose(p, expected.positions[k], atol=1e-9)
        np.testing.assert_allclose(w, 2.0 * expected.angular_velocities[k], atol=1e-9)


def test_bad_file_fails_configure_naming_file_path(ros, executor, tmp_path):
    ex, nodes = executor
    bad = tmp_path / "take.bvh"
    bad.write_text("HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n")
    node = _node(ros, ex, nodes, source="file", file_path=str(bad))
    node.trigger_configure()
    assert node.lifecycle_state == "unconfigured"
    assert "parameter 'file_path'" in node.last_error and "truncated" in node.last_error.replace(
        "end of file", "truncated"
    )
    empty = _node(ros, ex, nodes, source="file")
    empty.trigger_configure()
    assert empty.lifecycle_state == "unconfigured" and "file_path" in empty.last_error


def test_a_file_longer_than_ten_seconds_is_replayed_whole_by_default(ros, executor, tmp_path):
    """``duration``'s default is 0: a file (or a bag) is replayed to its end, not cut at 10 s as when the
    default was the synthetic motion's length; the synthetic source's 0 is still 10 s."""
    ex, nodes = executor
    take = synthetic_human_motion("walking", duration=12.5, rate=20.0)
    path = write_mvnx(take, tmp_path / "long.mvnx")
    node = _node(ros, ex, nodes, source="file", file_path=str(path))
    node.trigger_configure()
    assert node.lifecycle_state == "inactive", node.last_error
    assert len(node._source) == len(take.times) == 250  # 12.5 s at 20 Hz, every sample kept
    cut = _node(ros, ex, nodes, source="file", file_path=str(path), duration=4.0)
    cut.trigger_configure()
    assert len(cut._source) == 81  # 4 s at 20 Hz (both ends): the cut still applies when asked
    synthetic = _node(ros, ex, nodes, source="synthetic", rate=20.0)
    synthetic.trigger_configure()
    assert synthetic.lifecycle_state == "inactive", synthetic.last_error
    assert len(synthetic._source) == 200  # 0 = the synthetic motion's 10 s (its end excluded)
