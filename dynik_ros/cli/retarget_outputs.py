"""``dynik-retarget``'s output files: the rosbag2 (JointState on ``/dynik/joint_states``, Odometry on
``/dynik/base_odom``), ``trajectory.csv`` and ``retarget.npz``, all stamped with the input stamps."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.retarget.foot_figures import toe_flags

JOINT_STATES_TOPIC = "/dynik/joint_states"
BASE_ODOM_TOPIC = "/dynik/base_odom"
JOINT_STATE, ODOMETRY = "sensor_msgs/msg/JointState", "nav_msgs/msg/Odometry"


def write_bag(
    path: Path, robot: Any, root_frame: str, result: Any, storage: str = "mcap", stamp_origin_ns: int = 0
) -> Path:
    """JointState (``/dynik/joint_states``) and, for a floating base, Odometry (``/dynik/base_odom``) per
    sample, stamped with the input stamps (``stamp_origin_ns`` + sample time); the odometry twist is in
    the base frame, as the message says (pinocchio's free-flyer velocity is in the base frame already).

    The messages are laid out once and only their stamps and numbers written per sample
    (:mod:`dynik_ros.nodes.cdr_writer`, the bytes rosbags' and rclpy's serializers make): building rosbags
    message objects and serializing them cost ~80 us a message, 0.7 s of a 60 s take at 120 Hz. An mcap bag
    is then written by :func:`dynik_ros.io.mcap_take.write_take_bag` (the file rosbags' writer makes, without
    importing rosbags and its type store and without its Python per message: ~0.25 s CPU on that take)."""
    from dynik_ros.io.mcap_take import plain_bag_name, write_take_bag
    from dynik_ros.nodes.cdr_writer import JointStateWriter, OdometryWriter

    joint_state = JointStateWriter(list(robot.joint_names), frame_id="", velocities=True)
    odometry = OdometryWriter("world", root_frame) if robot.floating_base else None
    nb, nvb = (7, 6) if robot.floating_base else (0, 0)
    q, v = np.asarray(result.q, dtype=np.float64), np.asarray(result.v, dtype=np.float64)
    stamps = stamp_origin_ns + np.round(np.asarray(result.times) * 1e9).astype(np.int64)
    if storage == "mcap" and len(stamps) and stamps.min() >= 0 and plain_bag_name(Path(path)):
        joints = joint_state.serialize_take(stamps, q[:, nb:], v[:, nvb:])
        topics = [(JOINT_STATES_TOPIC, JOINT_STATE, joints)]
        if odometry is not None:
            topics.append((BASE_ODOM_TOPIC, ODOMETRY, odometry.serialize_take(stamps, q[:, :7], v[:, :6])))
        return write_take_bag(path, topics, stamps)
    from dynik_ros.io.bags import BagWriter

    with BagWriter(path, storage=storage) as bag:
        for k, stamp in enumerate(stamps.tolist()):
            data = joint_state.serialize(stamp, q[k, nb:], v[k, nvb:])
            bag.write_serialized(JOINT_STATES_TOPIC, JOINT_STATE, data, stamp)
            if odometry is not None:
                data = odometry.serialize(stamp, q[k, :3], q[k, 3:7], v[k, :3], v[k, 3:6])
                bag.write_serialized(BASE_ODOM_TOPIC, ODOMETRY, data, stamp)
    return path


def write_csv(path: Path, robot: Any, result: Any, stamp_origin_ns: int = 0) -> Path:
    """One row per sample: time (input stamp, s, exact to the ns), base pose (if floating), joint
    positions, then joint velocities."""
    nvb = 6 if robot.floating_base else 0
    header = ["time"]
    if robot.floating_base:
        header += ["base_x", "base_y", "base_z", "base_qx", "base_qy", "base_qz", "base_qw"]
    header += list(robot.joint_names) + [f"{j}_velocity" for j in robot.joint_names]
    stamps = stamp_origin_ns + np.round(np.asarray(result.times) * 1e9).astype(np.int64)
    values = np.concatenate((result.q, result.v[:, nvb:]), axis=1).tolist()
    row_format = "%d.%09d" + ",%.9g" * (len(header) - 1) + "\r\n"  # csv's dialect: '\r\n' rows
    with open(path, "w", newline="", encoding="utf-8") as stream:
        csv.writer(stream).writerow(header)
        stream.writelines(
            row_format % (*divmod(stamp, 1_000_000_000), *row)
            for stamp, row in zip(stamps.tolist(), values, strict=True)
        )
    return path


def write_npz(path: Path, retargeter: Any, result: Any, stamp_origin_ns: int = 0) -> Path:
    """Trajectory and diagnostics; ``times`` count from ``stamp_origin_ns`` (int64 ns of the input).
    Stored uncompressed: deflate shrank a 60 s, 120 Hz take's file 11 % (8.2 to 7.3 MB on G1) and cost
    0.4 s of CPU, a twentieth of issue 9's 10 s budget (``np.load`` reads either)."""
    robot = retargeter.robot
    np.savez(
        path,
        times=result.times,
        stamp_origin_ns=np.int64(stamp_origin_ns),
        joint_names=np.array(robot.joint_names),
        q=result.q,
        v=result.v,
        nu=result.nu,
        lower=robot.lower,
        upper=robot.upper,
        velocity_limit=robot.velocity_limit,
        mnte=result.mnte,
        angular_velocity_rmse=result.angular_velocity_rmse,
        position_rmse=result.position_rmse,
        position_targets=result.position_targets,
        position_frames=np.array([t.frame for t in retargeter.targets.position_targets]),
        orientation_error=result.orientation_error,
        orientation_frames=np.array([t.frame for t in retargeter.targets.orientation_targets]),
        solve_time=result.solve_time,
        solved=result.solved,
        contacts=result.contacts,
        on_toes=toe_flags(retargeter, result),
        contact_points=result.contact_points,
        feet=np.array([f.frame for f in retargeter.config.feet]),
    )
    return path
