"""The CDR writers (dynik_ros.nodes.cdr_writer) encode the same messages as rclpy's serialization.

rclpy leaves alignment padding uninitialized and may add trailing bytes, so the check is: rclpy
deserializes our bytes into a message equal to the one built field by field, and our bytes equal rclpy's
at every byte that is not padding (found by serializing the same message twice with different padding).
"""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message

from dynik_ros.nodes import cdr_writer
from dynik_ros.nodes.conversions import float_array, ns_to_stamp


def same(ours: bytes, msg) -> bool:
    """``ours`` decodes to ``msg`` and agrees with rclpy's encoding outside its padding bytes."""
    theirs = bytes(serialize_message(msg))
    if deserialize_message(ours, type(msg)) != msg or len(ours) > len(theirs):
        return False
    return all(a == b or _is_padding(i, ours) for i, (a, b) in enumerate(zip(ours, theirs, strict=False)))


def _is_padding(index: int, data: bytes) -> bool:
    """Our writers put zeros in padding; a differing byte must be one of those zeros."""
    return data[index] == 0


RNG = np.random.default_rng(4)
STAMPS = (0, 1, 1_795_447_518_455_924_014, 2_000_000_000 - 1)


@pytest.mark.parametrize("names", [["a"], ["hip_yaw", "knee", "ankle_ü"], [f"j{i}" for i in range(66)], []])
@pytest.mark.parametrize("frame", ["", "world", "base_link_x"])
def test_joint_state(names, frame):
    from sensor_msgs.msg import JointState

    writer = cdr_writer.JointStateWriter(names, frame)
    for stamp in STAMPS:
        q, v = RNG.normal(size=(2, len(names)))
        msg = JointState(name=names, position=float_array(q), velocity=float_array(v))
        msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp), frame
        assert same(writer.serialize(stamp, q, v), msg)
    no_velocity = cdr_writer.JointStateWriter(names, frame, velocities=False)
    msg = JointState(name=names, position=float_array(q))
    msg.header.stamp, msg.header.frame_id = ns_to_stamp(5), frame
    assert same(no_velocity.serialize(5, q), msg)


@pytest.mark.parametrize("frames", [("world", "pelvis"), ("", ""), ("odom", "torso_link_long_name")])
def test_odometry(frames):
    from nav_msgs.msg import Odometry

    writer = cdr_writer.OdometryWriter(*frames)
    for stamp in STAMPS:
        p, lin, ang = RNG.normal(size=(3, 3))
        quat = RNG.normal(size=4)
        msg = Odometry(child_frame_id=frames[1])
        msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp), frames[0]
        pose, twist = msg.pose.pose, msg.twist.twist
        pose.position.x, pose.position.y, pose.position.z = p.tolist()
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = quat.tolist()
        twist.linear.x, twist.linear.y, twist.linear.z = lin.tolist()
        twist.angular.x, twist.angular.y, twist.angular.z = ang.tolist()
        assert same(writer.serialize(stamp, p, quat, lin, ang), msg)


@pytest.mark.parametrize("count", [0, 1, 23])
@pytest.mark.parametrize("twists", [True, False])
def test_link_states(count, twists):
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.conversions import link_states_from_cdr, link_states_to_msg

    names = [f"Link{i}" for i in range(count)]
    writer = cdr_writer.LinkStatesWriter(names, "world", twists=twists)
    for stamp in STAMPS:
        p, lin, ang = RNG.normal(size=(3, count, 3))
        q = RNG.normal(size=(count, 4))
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        msg = link_states_to_msg(
            stamp, names, p, q, lin if twists else None, ang if twists else None, "world"
        )
        data = writer.serialize(stamp, p, q, lin, ang)
        assert same(data, msg)
        assert isinstance(deserialize_message(data, MultiDOFJointState), MultiDOFJointState)
        if count:
            parsed = link_states_from_cdr(data)
            assert parsed.stamp_ns == stamp and np.allclose(parsed.positions, p)


@pytest.mark.parametrize("count", [0, 7, 29])
def test_float64_array_and_joint_trajectory(count):
    from builtin_interfaces.msg import Duration
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    values = RNG.normal(size=count)
    assert same(
        cdr_writer.Float64ArrayWriter(count).serialize(values), Float64MultiArray(data=float_array(values))
    )
    names = [f"joint_{i}" for i in range(count)]
    for t in (0.0, 0.02, 1.5):
        point = JointTrajectoryPoint(positions=float_array(values))
        point.time_from_start = Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)))
        msg = JointTrajectory(joint_names=names, points=[point])
        assert same(cdr_writer.JointTrajectoryWriter(names, t).serialize(values), msg)


def test_marker_array_template_learned_from_rclpy():
    from geometry_msgs.msg import Point
    from visualization_msgs.msg import Marker, MarkerArray

    markers = []
    for k, count in enumerate((4, 0, 1, 40)):
        m = Marker(ns=f"ns{k}", id=k, type=Marker.LINE_LIST, action=Marker.ADD, text="t" * k)
        m.header.frame_id = "world"
        m.points = [Point() for _ in range(count)]
        markers.append(m)
    array = MarkerArray(markers=markers)
    writer = cdr_writer.MarkerArrayWriter(array)
    for stamp in STAMPS:
        clouds = [RNG.normal(size=(len(m.points), 3)) for m in markers]
        data = writer.serialize(stamp, clouds)
        for marker, cloud in zip(array.markers, clouds, strict=True):
            marker.header.stamp = ns_to_stamp(stamp)
            for point, (x, y, z) in zip(marker.points, cloud.tolist(), strict=True):
                point.x, point.y, point.z = x, y, z
        assert deserialize_message(data, MarkerArray) == array


def test_a_huge_quaternion_is_refused_quietly():
    """A bit flip can make a quaternion component 1e200: finite, so it reaches the norm check, whose square
    overflowed with a RuntimeWarning printed by the node. Refused as a non-rotation, without a warning."""
    import warnings

    from dynik_ros.nodes.conversions import MessageRejected, link_states_from_cdr

    names = ["Pelvis", "T8"]
    writer = cdr_writer.LinkStatesWriter(names, "world", twists=False)
    q = np.array([[0.0, 0.0, 0.0, 1.0], [1e200, 0.0, 0.0, 1.0]])
    data = writer.serialize(STAMPS[0], np.zeros((2, 3)), q, None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(MessageRejected, match="quaternion norms"):
            link_states_from_cdr(data)


@pytest.mark.parametrize("names", [["a"], [f"j{i}" for i in range(66)], []])
def test_joint_state_with_efforts(names):
    """dynamics_node's /human/joint_torques: positions, velocities and efforts."""
    from sensor_msgs.msg import JointState

    writer = cdr_writer.JointStateWriter(names, efforts=True)
    for stamp in STAMPS:
        q, v, tau = RNG.normal(size=(3, len(names)))
        msg = JointState(
            name=names, position=float_array(q), velocity=float_array(v), effort=float_array(tau)
        )
        msg.header.stamp = ns_to_stamp(stamp)
        assert same(writer.serialize(stamp, q, v, tau), msg)


@pytest.mark.parametrize("frame", ["right_foot", "", "a_much_longer_frame_name"])
def test_wrench_stamped(frame):
    """dynamics_node's /human/foot_wrench/<foot>."""
    from geometry_msgs.msg import WrenchStamped

    writer = cdr_writer.WrenchStampedWriter(frame)
    for stamp in STAMPS:
        wrench = RNG.normal(size=6) * 100.0
        msg = WrenchStamped()
        msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp), frame
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = wrench[:3].tolist()
        msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = wrench[3:].tolist()
        assert same(writer.serialize(stamp, wrench), msg)


@pytest.mark.parametrize("frames", [("world", "pelvis"), ("", ""), ("odom", "torso_link_long_name")])
def test_tf_message(frames):
    """ik_node's /tf. tf2_msgs has no PyPI wheel (rclpy cannot build the message here), so the reference is
    rosbags' own CDR serializer of tf2_msgs/msg/TFMessage (the Kilted definitions it ships): our bytes
    decode to the same values and equal its bytes (both write zeros in the padding)."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    Time, Header = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
    Vector3, Quaternion = types["geometry_msgs/msg/Vector3"], types["geometry_msgs/msg/Quaternion"]
    Transform, TransformStamped = (
        types["geometry_msgs/msg/Transform"],
        types["geometry_msgs/msg/TransformStamped"],
    )
    writer = cdr_writer.TFMessageWriter(*frames)
    for stamp in STAMPS:
        p, quat = RNG.normal(size=3), RNG.normal(size=4)
        sec, nanosec = divmod(stamp, 1_000_000_000)
        element = TransformStamped(
            header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=frames[0]),
            child_frame_id=frames[1],
            transform=Transform(translation=Vector3(*p.tolist()), rotation=Quaternion(*quat.tolist())),
        )
        theirs = bytes(
            store.serialize_cdr(
                types["tf2_msgs/msg/TFMessage"](transforms=[element]), "tf2_msgs/msg/TFMessage"
            )
        )
        ours = writer.serialize(stamp, p, quat)
        assert ours == theirs
        decoded = store.deserialize_cdr(ours, "tf2_msgs/msg/TFMessage").transforms
        assert len(decoded) == 1 and decoded[0].child_frame_id == frames[1]
        assert decoded[0].header.frame_id == frames[0] and decoded[0].header.stamp.sec == sec
        t = decoded[0].transform
        assert [t.translation.x, t.translation.y, t.translation.z] == p.tolist()
        assert [t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w] == quat.tolist()
