"""Bag IO with rosbags (dynik_ros.io.bags) and the quaternion helpers it relies on.

Every bag is generated in tmp_path (no committed fixtures). Bags are read back both with our reader and
with rosbags' own AnyReader, which checks each connection's type hash against its definition.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Reader

from dynik_ros.core.quaternion import normalize_quaternion, quaternion_from_rotation, rotation_from_quaternion
from dynik_ros.core.so3 import exp_so3
from dynik_ros.io.bags import (
    LINK_STATES_TOPIC,
    BagWriter,
    bag_topics,
    default_typestore,
    ns_to_seconds,
    read_link_states,
    read_messages,
    seconds_to_ns,
    write_link_states,
    write_motion_bag,
)
from dynik_ros.motion.synthetic import synthesize

STORAGES = ("mcap", "sqlite3")


@pytest.fixture(scope="module")
def walking(human66):
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height

    return synthesize(
        human66,
        "walking",
        duration=2.0,
        rate=60.0,
        links=list(XSENS_SEGMENTS),
        standing_height=pelvis_height(Subject()),
    )


def _stack(samples, links):
    """(stamps (N,), P (N,L,3), R (N,L,3,3), V (N,L,3), W (N,L,3)) from read_link_states samples."""
    stamps = np.array([s[0] for s in samples])
    p = np.array([[s[1][k][0] for k in links] for s in samples])
    r = np.array([[s[1][k][1] for k in links] for s in samples])
    v = np.array([[s[2][k][0] for k in links] for s in samples])
    w = np.array([[s[2][k][1] for k in links] for s in samples])
    return stamps, p, r, v, w


# --- quaternions --------------------------------------------------------------------------------


def test_quaternion_matches_pinocchio_and_round_trips():
    rng = np.random.default_rng(1)
    axes = rng.normal(size=(300, 3))
    angles = np.concatenate((rng.uniform(-np.pi, np.pi, 250), np.full(40, np.pi), np.zeros(10)))
    rotations = exp_so3(axes / np.linalg.norm(axes, axis=1, keepdims=True) * angles[:, None])
    q = quaternion_from_rotation(rotations)
    assert q.shape == (300, 4)
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-15)
    assert np.all(q[:, 3] >= 0.0), "canonical sign: w >= 0"
    for qi, ri in zip(q, rotations, strict=True):
        ref = pin.Quaternion(ri).coeffs()  # pinocchio's coeffs() are (x, y, z, w) too
        assert min(np.abs(qi - ref).max(), np.abs(qi + ref).max()) < 1e-12
    np.testing.assert_allclose(rotation_from_quaternion(q), rotations, atol=1e-14)
    # -q is the same rotation; stacks of any leading shape
    np.testing.assert_allclose(rotation_from_quaternion(-q), rotations, atol=1e-14)
    assert rotation_from_quaternion(q.reshape(10, 30, 4)).shape == (10, 30, 3, 3)
    assert quaternion_from_rotation(np.eye(3)).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_quaternion_known_values_and_errors():
    half = np.sqrt(0.5)
    np.testing.assert_allclose(quaternion_from_rotation(pin.utils.rotate("z", np.pi / 2)), [0, 0, half, half])
    np.testing.assert_allclose(rotation_from_quaternion([0.0, 0.0, 2.0, 0.0]), np.diag([-1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="norm"):
        rotation_from_quaternion([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="non-finite"):
        normalize_quaternion([np.nan, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        quaternion_from_rotation(np.eye(4))


def test_seconds_to_ns_is_exact_at_the_nanosecond():
    assert seconds_to_ns(0.0) == 0
    assert seconds_to_ns(1.0 / 60.0) == 16_666_667
    assert seconds_to_ns(-0.5) == -500_000_000
    # an epoch stamp: the fractional part is rounded on its own, not after scaling the whole to ns
    assert seconds_to_ns(1_700_000_000.25) == 1_700_000_000_250_000_000
    assert ns_to_seconds(1_500_000_001) == pytest.approx(1.500000001, abs=1e-15)
    with pytest.raises(ValueError):
        seconds_to_ns(float("nan"))


# --- link states --------------------------------------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_walking_motion_round_trips_through_the_bag(tmp_path, walking, storage):
    path = write_motion_bag(tmp_path / "walking", walking, storage=storage)
    assert (path / "metadata.yaml").is_file()
    assert bag_topics(path) == {LINK_STATES_TOPIC: "sensor_msgs/msg/MultiDOFJointState"}

    samples = list(read_link_states(path))
    assert len(samples) == len(walking.times) == 120
    assert all(list(s[1]) == walking.links and list(s[2]) == walking.links for s in samples), "link order"
    stamps, p, r, v, w = _stack(samples, walking.links)
    # ROS time is integer ns: stamps are the motion's times rounded to the nanosecond, exactly
    quantized = np.array([seconds_to_ns(t) for t in walking.times]) * 1e-9
    np.testing.assert_allclose(stamps, quantized, rtol=0, atol=1e-12)
    np.testing.assert_allclose(stamps, walking.times, rtol=0, atol=0.5e-9 + 1e-15)
    np.testing.assert_allclose(p, walking.positions, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r, walking.rotations, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, walking.linear_velocities, rtol=0, atol=1e-12)
    np.testing.assert_allclose(w, walking.angular_velocities, rtol=0, atol=1e-12)
    assert np.ptp(p[:, 0, 0]) > 0.5, "the pelvis walks forward: the data is not trivially constant"


@pytest.mark.parametrize("storage", STORAGES)
def test_motion_bag_is_readable_by_rosbags_with_types_and_stamps(tmp_path, walking, storage):
    start = 1_700_000_000.0
    path = write_motion_bag(tmp_path / "walking", walking, storage=storage, start_time=start)
    storage_files = list(path.glob("*.mcap" if storage == "mcap" else "*.db3"))
    assert len(storage_files) == 1, list(path.iterdir())
    with AnyReader([path], default_typestore=default_typestore()) as reader:  # checks type hashes
        (connection,) = reader.connections
        assert connection.topic == LINK_STATES_TOPIC
        assert connection.msgtype == "sensor_msgs/msg/MultiDOFJointState"
        got = [(t, reader.deserialize(raw, connection.msgtype)) for _, t, raw in reader.messages()]
    assert len(got) == len(walking.times)
    for (log_ns, msg), t in zip(got, walking.times, strict=True):
        expected_ns = seconds_to_ns(start) + seconds_to_ns(t)
        assert log_ns == expected_ns, "log time = source stamp"
        assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == expected_ns
        assert msg.header.frame_id == "world"
        assert list(msg.joint_names) == walking.links
        assert len(msg.transforms) == len(msg.twist) == len(walking.links) and len(msg.wrench) == 0


def test_writing_the_same_motion_twice_gives_identical_messages(tmp_path, walking):
    a = write_motion_bag(tmp_path / "a", walking)
    b = write_motion_bag(tmp_path / "b", walking)
    with Reader(a) as ra, Reader(b) as rb:
        ma = [(t, bytes(raw)) for _, t, raw in ra.messages()]
        mb = [(t, bytes(raw)) for _, t, raw in rb.messages()]
    assert ma == mb


@pytest.mark.parametrize("storage", STORAGES)
def test_write_link_states_round_trip_without_twists_and_single_file(tmp_path, storage):
    rng = np.random.default_rng(3)
    links = ["b", "a", "c"]  # order is kept, not sorted
    samples = []
    for k in range(5):
        poses = {n: (rng.normal(size=3), exp_so3(rng.normal(size=3))) for n in links}
        twists = {n: (rng.normal(size=3), rng.normal(size=3)) for n in links} if k % 2 else {}
        samples.append((10.0 + 0.1 * k, poses, twists))
    path = write_link_states(tmp_path / "bag", samples, topic="/suit/links", storage=storage)
    single = next(path.glob("*.mcap" if storage == "mcap" else "*.db3"))
    for source in (path, single):  # a bag directory or its one storage file
        got = list(read_link_states(source, topic="/suit/links"))
        assert len(got) == len(samples)
        for (t, poses, twists), (t0, poses0, twists0) in zip(got, samples, strict=True):
            assert t == pytest.approx(t0, abs=1e-9)
            assert list(poses) == links
            assert set(twists) == set(twists0)
            for n in links:
                np.testing.assert_allclose(poses[n][0], poses0[n][0], rtol=0, atol=1e-12)
                np.testing.assert_allclose(poses[n][1], poses0[n][1], rtol=0, atol=1e-12)
            for n in twists0:
                np.testing.assert_allclose(twists[n][0], twists0[n][0], rtol=0, atol=1e-12)
                np.testing.assert_allclose(twists[n][1], twists0[n][1], rtol=0, atol=1e-12)


def test_non_unit_quaternions_in_a_bag_are_normalized(tmp_path):
    with BagWriter(tmp_path / "bag") as bag:
        types = bag.typestore.types
        transform = types["geometry_msgs/msg/Transform"](
            translation=types["geometry_msgs/msg/Vector3"](x=1.0, y=2.0, z=3.0),
            rotation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=2.0),
        )
        msg = bag.message(
            "sensor_msgs/msg/MultiDOFJointState",
            header=bag.header(1.0),
            joint_names=["x"],
            transforms=[transform],
        )
        bag.write(LINK_STATES_TOPIC, msg)
    ((stamp, poses, twists),) = read_link_states(tmp_path / "bag")
    assert stamp == 1.0 and twists == {}
    ((stamp_ns, _, _),) = read_link_states(tmp_path / "bag", stamp_ns=True)
    assert stamp_ns == 1_000_000_000 and isinstance(stamp_ns, int)
    np.testing.assert_array_equal(poses["x"][0], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(poses["x"][1], np.eye(3), atol=1e-15)


# --- BagWriter: the pipeline's message types --------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_writer_writes_the_pipeline_messages_with_types_and_stamps(tmp_path, storage):
    names = ["hip", "knee"]
    rot = exp_so3(np.array([0.0, 0.0, np.pi / 2]))  # base yawed by 90 degrees
    path = tmp_path / "pipeline"
    with BagWriter(path, storage=storage) as bag:
        for k in range(3):
            t = 5.0 + 0.01 * k
            bag.write("/dynik/joint_states", bag.joint_state(t, names, [0.1 * k, 0.2], [1.0, 2.0]))
            bag.write(
                "/dynik/base_odom",
                bag.odometry(t, [k, 0.0, 1.0], rot, linear_velocity=[1.0, 0.0, 0.0], child_frame_id="pelvis"),
            )
            bag.write("/human/link_states", bag.link_states(t, {"Pelvis": (np.zeros(3), rot)}))
            marker = bag.message(
                "visualization_msgs/msg/Marker", header=bag.header(t, "world"), ns="targets", id=k, type=2
            )
            bag.write("/dynik/markers", bag.marker_array([marker]))
            bag.write("/diagnostics", bag.diagnostics(t, [("dynik: ik", 0, "ok", {"solve_ms": 0.5})]))
        # already-serialized messages (as an rclpy raw subscription delivers them) pass through
        raw = bag.typestore.serialize_cdr(
            bag.joint_state(9.0, names, [0.0, 0.0]), "sensor_msgs/msg/JointState"
        )
        bag.write_serialized("/robot/joint_states", "sensor_msgs/msg/JointState", raw, 9_000_000_000)

    expected_types = {
        "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
        "/dynik/base_odom": "nav_msgs/msg/Odometry",
        "/dynik/joint_states": "sensor_msgs/msg/JointState",
        "/dynik/markers": "visualization_msgs/msg/MarkerArray",
        "/human/link_states": "sensor_msgs/msg/MultiDOFJointState",
        "/robot/joint_states": "sensor_msgs/msg/JointState",
    }
    assert bag_topics(path) == expected_types
    with AnyReader([path]) as reader:  # only the bag's embedded definitions, hashes checked
        counts = {c.topic: c.msgcount for c in reader.connections}
        for connection, log_ns, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            stamped = msg.markers[0] if connection.topic == "/dynik/markers" else msg
            assert stamped.header.stamp.sec * 10**9 + stamped.header.stamp.nanosec == log_ns
    assert counts == {t: (1 if t == "/robot/joint_states" else 3) for t in expected_types}

    by_topic: dict[str, list] = {}
    for item in read_messages(path):
        by_topic.setdefault(item.topic, []).append(item)
    js = by_topic["/dynik/joint_states"][2].msg
    assert (
        list(js.name) == names and js.position.tolist() == [0.2, 0.2] and js.velocity.tolist() == [1.0, 2.0]
    )
    assert len(js.effort) == 0
    assert by_topic["/dynik/joint_states"][2].timestamp_ns == 5_020_000_000
    odom = by_topic["/dynik/base_odom"][1].msg
    assert (odom.header.frame_id, odom.child_frame_id) == ("world", "pelvis")
    assert odom.pose.pose.position.x == 1.0
    q = odom.pose.pose.orientation
    np.testing.assert_allclose(rotation_from_quaternion([q.x, q.y, q.z, q.w]), rot, atol=1e-15)
    # world +x velocity of a base yawed +90 degrees is -y in the base frame (Odometry twist: child frame)
    lin = odom.twist.twist.linear
    np.testing.assert_allclose([lin.x, lin.y, lin.z], [0.0, -1.0, 0.0], atol=1e-15)
    diag = by_topic["/diagnostics"][0].msg.status[0]
    assert (diag.name, diag.level, diag.message) == ("dynik: ik", 0, "ok")
    assert [(kv.key, kv.value) for kv in diag.values] == [("solve_ms", "0.5")]
    marker = by_topic["/dynik/markers"][2].msg.markers[0]
    assert (marker.ns, marker.id, marker.type, marker.header.frame_id) == ("targets", 2, 2, "world")
    assert [m.timestamp_ns for m in by_topic["/robot/joint_states"]] == [9_000_000_000]
    assert len(list(read_messages(path, topics=["/diagnostics"]))) == 3


def test_humble_type_store_embeds_humble_definitions_and_reads_back(tmp_path):
    with BagWriter(tmp_path / "humble", distro="humble") as bag:
        marker = bag.message("visualization_msgs/msg/Marker", header=bag.header(1.0), id=7, type=3)
        assert not hasattr(marker, "ARROW_STRIP"), "Humble's Marker lacks Kilted's ARROW_STRIP constant"
        bag.write("/dynik/markers", bag.marker_array([marker]))
    with Reader(tmp_path / "humble") as reader:
        assert "ARROW_STRIP" not in reader.connections[0].msgdef.data
    # read with the default (Kilted) store: the bag's own (Humble) definition is used
    (item,) = read_messages(tmp_path / "humble")
    assert item.msgtype == "visualization_msgs/msg/MarkerArray"
    assert (item.msg.markers[0].id, item.msg.markers[0].type) == (7, 3)
    assert item.timestamp_ns == 1_000_000_000


# --- errors ---------------------------------------------------------------------------------------


def test_missing_bag_names_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="nope"):
        read_link_states(missing)
    with pytest.raises(FileNotFoundError, match="nope"):
        read_messages(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="metadata.yaml"):
        read_link_states(tmp_path / "empty")


def test_absent_topic_lists_the_topics_present(tmp_path):
    with BagWriter(tmp_path / "bag") as bag:
        bag.write("/dynik/joint_states", bag.joint_state(1.0, ["a"], [0.0]))
    with pytest.raises(ValueError, match=r"'/human/link_states' not in bag.*/dynik/joint_states"):
        read_link_states(tmp_path / "bag")
    with pytest.raises(ValueError, match="/dynik/joint_states"):
        read_messages(tmp_path / "bag", topics=["/other"])


def test_wrong_topic_type_is_named(tmp_path):
    with BagWriter(tmp_path / "bag") as bag:
        bag.write(LINK_STATES_TOPIC, bag.joint_state(1.0, ["a"], [0.0]))
    with pytest.raises(
        ValueError, match="sensor_msgs/msg/JointState, expected sensor_msgs/msg/MultiDOFJointState"
    ):
        read_link_states(tmp_path / "bag")


def test_malformed_message_is_reported_while_reading(tmp_path):
    with BagWriter(tmp_path / "bag") as bag:
        types = bag.typestore.types
        msg = bag.message(
            "sensor_msgs/msg/MultiDOFJointState",
            header=bag.header(1.0),
            joint_names=["a", "b"],
            transforms=[bag.message("geometry_msgs/msg/Transform")] * 2,
            twist=[
                types["geometry_msgs/msg/Twist"](
                    linear=bag._vector3([0, 0, 0]), angular=bag._vector3([0, 0, 0])
                )
            ],
        )
        bag.write(LINK_STATES_TOPIC, msg)
    samples = read_link_states(tmp_path / "bag")
    with pytest.raises(ValueError, match="2 joint_names but 1 twists"):
        next(samples)


def test_writer_refuses_to_overwrite_and_checks_its_input(tmp_path):
    write_link_states(tmp_path / "bag", [])
    with pytest.raises(FileExistsError, match="bag"):
        write_link_states(tmp_path / "bag", [])
    with pytest.raises(ValueError, match="storage"):
        write_link_states(tmp_path / "other", [], storage="rosbag1")
    assert not Path(tmp_path / "other").exists()
    pose = (np.zeros(3), np.eye(3))
    with pytest.raises(ValueError, match="every link or none"):
        write_link_states(tmp_path / "c", [(0.0, {"a": pose, "b": pose}, {"a": (np.zeros(3), np.zeros(3))})])
    with BagWriter(tmp_path / "d") as bag:
        with pytest.raises(ValueError, match="no field"):
            bag.message("sensor_msgs/msg/JointState", positions=[0.0])
        with pytest.raises(ValueError, match="3 values for 2 names"):
            bag.joint_state(0.0, ["a", "b"], [0.0, 0.0], [1.0, 2.0, 3.0])
        bag.write("/x", bag.joint_state(0.0, ["a"], [0.0]))
        with pytest.raises(ValueError, match="already has type"):
            bag.write("/x", bag.diagnostics(0.0, []))
        with pytest.raises(ValueError, match="log_time"):
            bag.write("/m", bag.marker_array([]))
    with pytest.raises(ValueError, match="distro"):
        default_typestore("rolling-ridley")


def test_epoch_stamps_come_back_exact_in_nanoseconds(tmp_path):
    """A stamp of today's epoch with odd nanoseconds: float seconds cannot hold it, ``stamp_ns`` does."""
    stamp = 1_795_000_000_123_456_789
    write_link_states(tmp_path / "bag", [(stamp, {"Pelvis": (np.zeros(3), np.eye(3))}, {})])
    ((exact, _, _),) = read_link_states(tmp_path / "bag", stamp_ns=True)
    ((seconds, _, _),) = read_link_states(tmp_path / "bag")
    assert exact == stamp
    assert round(seconds * 1e9) != stamp  # the float path loses the last digits
