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


def write_bag(
    path: Path, robot: Any, root_frame: str, result: Any, storage: str = "mcap", stamp_origin_ns: int = 0
) -> Path:
    """JointState (``/dynik/joint_states``) and, for a floating base, Odometry (``/dynik/base_odom``) per
    sample, stamped with the input stamps (``stamp_origin_ns`` + sample time); the odometry twist is in
    the base frame, as the message says."""
    from dynik_ros.io.bags import BagWriter

    names = list(robot.joint_names)
    empty = np.zeros(0)
    with BagWriter(path, storage=storage) as bag:
        types = bag.typestore.types
        time_t, header_t = types["builtin_interfaces/msg/Time"], types["std_msgs/msg/Header"]
        joint_state_t = types["sensor_msgs/msg/JointState"]
        vector_t, point_t, quat_t = (
            types["geometry_msgs/msg/Vector3"],
            types["geometry_msgs/msg/Point"],
            types["geometry_msgs/msg/Quaternion"],
        )
        pose_t, twist_t = types["geometry_msgs/msg/Pose"], types["geometry_msgs/msg/Twist"]
        pose_cov_t, twist_cov_t = (
            types["geometry_msgs/msg/PoseWithCovariance"],
            types["geometry_msgs/msg/TwistWithCovariance"],
        )
        odometry_t = types["nav_msgs/msg/Odometry"]
        nb = 7 if robot.floating_base else 0
        nvb = 6 if robot.floating_base else 0
        stamps = stamp_origin_ns + np.round(np.asarray(result.times) * 1e9).astype(np.int64)
        for k, stamp in enumerate(stamps.tolist()):
            sec, nanosec = divmod(stamp, 1_000_000_000)
            q, v = result.q[k], result.v[k]
            bag.write(
                JOINT_STATES_TOPIC,
                joint_state_t(
                    header=header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id=""),
                    name=names,
                    position=np.ascontiguousarray(q[nb:], dtype=np.float64),
                    velocity=np.ascontiguousarray(v[nvb:], dtype=np.float64),
                    effort=empty,
                ),
            )
            if not robot.floating_base:
                continue
            x, y, z, qx, qy, qz, qw = (float(c) for c in q[:7])
            lin, ang = v[:3], v[3:6]  # pinocchio's free-flyer velocity is in the base frame already
            bag.write(
                BASE_ODOM_TOPIC,
                odometry_t(
                    header=header_t(stamp=time_t(sec=sec, nanosec=nanosec), frame_id="world"),
                    child_frame_id=root_frame,
                    pose=pose_cov_t(
                        pose=pose_t(
                            position=point_t(x=x, y=y, z=z), orientation=quat_t(x=qx, y=qy, z=qz, w=qw)
                        ),
                        covariance=np.zeros(36),
                    ),
                    twist=twist_cov_t(
                        twist=twist_t(
                            linear=vector_t(x=float(lin[0]), y=float(lin[1]), z=float(lin[2])),
                            angular=vector_t(x=float(ang[0]), y=float(ang[1]), z=float(ang[2])),
                        ),
                        covariance=np.zeros(36),
                    ),
                ),
            )
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
