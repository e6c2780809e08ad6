"""``dynik-retarget``'s bag (``cli.retarget_outputs.write_bag``) is written from laid-out CDR templates:
every message must be the bytes rosbags' own serializer makes of the message built field by field (the
oracle below is the builder the templates replaced), stamps and log times equal, for a floating-base robot
and a fixed-base one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dynik_ros.cli.retarget_outputs import BASE_ODOM_TOPIC, JOINT_STATES_TOPIC, write_bag
from dynik_ros.io.bags import default_typestore


def _oracle_messages(robot, root_frame, result, stamps):
    """(topic, log time, bytes) of each message as rosbags builds and serializes it."""
    store = default_typestore()
    types = store.types
    time_t, header_t = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
    vec, point, quat = (types[f"geometry_msgs/msg/{n}"] for n in ("Vector3", "Point", "Quaternion"))
    pose_t, twist_t = types["geometry_msgs/msg/Pose"], types["geometry_msgs/msg/Twist"]
    pose_cov, twist_cov = (types[f"geometry_msgs/msg/{n}WithCovariance"] for n in ("Pose", "Twist"))
    nb, nvb = (7, 6) if robot.floating_base else (0, 0)
    out = []
    for k, stamp in enumerate(stamps):
        sec, nanosec = divmod(stamp, 1_000_000_000)
        q, v = result.q[k], result.v[k]
        header = header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id="")
        msg = types["sensor_msgs/msg/JointState"](
            header=header,
            name=list(robot.joint_names),
            position=np.array(q[nb:]),
            velocity=np.array(v[nvb:]),
            effort=np.zeros(0),
        )
        out.append((JOINT_STATES_TOPIC, stamp, store.serialize_cdr(msg, "sensor_msgs/msg/JointState")))
        if not robot.floating_base:
            continue
        x, y, z, qx, qy, qz, qw = (float(c) for c in q[:7])
        msg = types["nav_msgs/msg/Odometry"](
            header=header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id="world"),
            child_frame_id=root_frame,
            pose=pose_cov(
                pose=pose_t(position=point(x=x, y=y, z=z), orientation=quat(x=qx, y=qy, z=qz, w=qw)),
                covariance=np.zeros(36),
            ),
            twist=twist_cov(
                twist=twist_t(
                    linear=vec(x=float(v[0]), y=float(v[1]), z=float(v[2])),
                    angular=vec(x=float(v[3]), y=float(v[4]), z=float(v[5])),
                ),
                covariance=np.zeros(36),
            ),
        )
        out.append((BASE_ODOM_TOPIC, stamp, store.serialize_cdr(msg, "nav_msgs/msg/Odometry")))
    return out


@pytest.mark.parametrize("floating_base", [True, False])
def test_bag_messages_are_rosbags_own_bytes(tmp_path: Path, floating_base: bool) -> None:
    from rosbags.highlevel import AnyReader

    rng = np.random.default_rng(7)
    n_joints, samples = 5, 40
    nq, nv = (7 + n_joints, 6 + n_joints) if floating_base else (n_joints, n_joints)
    q = rng.normal(size=(samples, nq))
    if floating_base:
        q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    q[3] = -0.0  # signed zeros and extremes survive byte for byte
    q[4, -1], q[5, -1] = 1e308, 5e-324
    result = SimpleNamespace(
        times=0.01 * np.arange(samples) + 0.123456789, q=q, v=rng.normal(size=(samples, nv))
    )
    robot = SimpleNamespace(joint_names=[f"joint_{i}" for i in range(n_joints)], floating_base=floating_base)
    origin = 1_700_000_000_000_000_000
    write_bag(tmp_path / "bag", robot, "pelvis", result, stamp_origin_ns=origin)
    stamps = (origin + np.round(result.times * 1e9).astype(np.int64)).tolist()
    expected = _oracle_messages(robot, "pelvis", result, stamps)
    with AnyReader([tmp_path / "bag"]) as reader:
        written = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]
        types = {c.topic: c.msgtype for c in reader.connections}
    assert sorted(written) == sorted(expected)
    assert types == (
        {JOINT_STATES_TOPIC: "sensor_msgs/msg/JointState", BASE_ODOM_TOPIC: "nav_msgs/msg/Odometry"}
        if floating_base
        else {JOINT_STATES_TOPIC: "sensor_msgs/msg/JointState"}
    )
