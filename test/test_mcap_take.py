"""``io.mcap_take`` writes a whole take's bag in whole-array copies: the files must be byte for byte what
`rosbags`' own writer makes of the same messages written one by one (several chunks, one and two
topics, signed zeros, epoch stamps), the definitions the type store's, and ``serialize_take`` row by row
what ``serialize`` gives."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from dynik_ros.io import mcap_take
from dynik_ros.io.bags import BagWriter, default_typestore
from dynik_ros.io.mcap_take import DEFINITIONS, plain_bag_name, write_take_bag
from dynik_ros.nodes.cdr_writer import JointStateWriter, OdometryWriter

JOINTS, ODOM = "/dynik/joint_states", "/dynik/base_odom"
JOINT_STATE, ODOMETRY = "sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry"


def test_definitions_are_the_type_stores() -> None:
    store = default_typestore()
    for msgtype, (definition, digest) in DEFINITIONS.items():
        assert definition == store.generate_msgdef(msgtype, ros_version=2)[0]
        assert digest == store.hash_rihs01(msgtype)


def _take(samples: int, joints: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    q, v = rng.normal(size=(samples, 7 + joints)), rng.normal(size=(samples, 6 + joints))
    if samples > 7:
        q[2], v[5, -1], q[7, -1] = -0.0, 1e308, 5e-324  # signed zeros and extremes
    stamps = 1_700_000_000_000_000_000 + np.round((0.01 * np.arange(samples) + 0.123456789) * 1e9)
    return [f"joint_{i}" for i in range(joints)], q, v, stamps.astype(np.int64)


def test_serialize_take_rows_are_serialize() -> None:
    names, q, v, stamps = _take(50, 7)
    js, odom = JointStateWriter(names), OdometryWriter("world", "pelvis")
    rows = js.serialize_take(stamps, q[:, 7:], v[:, 6:])
    assert [r.tobytes() for r in rows] == [js.serialize(s, q[k, 7:], v[k, 6:]) for k, s in enumerate(stamps)]
    rows = odom.serialize_take(stamps, q[:, :7], v[:, :6])
    expected = [odom.serialize(s, q[k, :3], q[k, 3:7], v[k, :3], v[k, 3:6]) for k, s in enumerate(stamps)]
    assert [r.tobytes() for r in rows] == expected


@pytest.mark.parametrize("floating_base,joints", [(True, 30), (False, 30), (True, 7), (False, 66)])
def test_take_bag_is_rosbags_file(tmp_path: Path, floating_base: bool, joints: int) -> None:
    names, q, v, stamps = _take(2500, joints)  # 1.5 to 5.3 MB: two to six chunks
    js, odom = JointStateWriter(names), OdometryWriter("world", "pelvis")
    old, new = tmp_path / "old" / "bag", tmp_path / "new" / "bag"
    with BagWriter(old) as bag:
        for k, stamp in enumerate(stamps.tolist()):
            bag.write_serialized(JOINTS, JOINT_STATE, js.serialize(stamp, q[k, 7:], v[k, 6:]), stamp)
            if floating_base:
                data = odom.serialize(stamp, q[k, :3], q[k, 3:7], v[k, :3], v[k, 3:6])
                bag.write_serialized(ODOM, ODOMETRY, data, stamp)
    topics = [(JOINTS, JOINT_STATE, js.serialize_take(stamps, q[:, 7:], v[:, 6:]))]
    if floating_base:
        topics.append((ODOM, ODOMETRY, odom.serialize_take(stamps, q[:, :7], v[:, :6])))
    write_take_bag(new, topics, stamps, library=f"rosbags-{version('rosbags')}")
    assert (new / "metadata.yaml").read_text() == (old / "metadata.yaml").read_text()
    data = (new / "bag.mcap").read_bytes()
    assert len(data) > 1.4 * mcap_take.CHUNK_SIZE
    assert data == (old / "bag.mcap").read_bytes()


def test_a_single_sample_and_an_existing_bag(tmp_path: Path) -> None:
    names, q, v, stamps = _take(1, 3)
    js = JointStateWriter(names)
    old, new = tmp_path / "old" / "take_1", tmp_path / "new" / "take_1"
    with BagWriter(old) as bag:
        stamp = int(stamps[0])
        bag.write_serialized(JOINTS, JOINT_STATE, js.serialize(stamp, q[0, 7:], v[0, 6:]), stamp)
    rows = js.serialize_take(stamps, q[:, 7:], v[:, 6:])
    write_take_bag(new, [(JOINTS, JOINT_STATE, rows)], stamps, library=f"rosbags-{version('rosbags')}")
    assert (new / "take_1.mcap").read_bytes() == (old / "take_1.mcap").read_bytes()
    assert (new / "metadata.yaml").read_text() == (old / "metadata.yaml").read_text()
    with pytest.raises(FileExistsError, match="never overwritten"):
        write_take_bag(new, [(JOINTS, JOINT_STATE, rows)], stamps)


def test_names_yaml_would_quote_are_not_taken() -> None:
    assert plain_bag_name(Path("out/bag")) and plain_bag_name(Path("run_2-b"))
    for name in ("2024", "a b", "yes", "null", "bag.v2", "x" * 70, "é"):
        assert not plain_bag_name(Path(name)), name
