"""``dynik-retarget`` end to end (synthetic walk, a link-state bag, a motion file without velocities, a bad
map) and the benchmark rows' set-up; the retargeting itself is tested in test_retarget.py."""

from __future__ import annotations

import numpy as np
from test_retarget import _broken, write_map

from dynik_ros.cli import retarget as cli
from dynik_ros.retarget import Retargeter, load_robot
from dynik_ros.retarget.bench_setup import robot_bench_setup
from dynik_ros.retarget.human import synthetic_human_motion
from dynik_ros.retarget.smoothness import smoothness


def test_cli_runs_end_to_end_and_writes_readable_bags(tmp_path, capsys):
    from rosbags.highlevel import AnyReader

    out = tmp_path / "run"
    code = cli.main(
        [
            "--robot",
            "g1",
            "--motion",
            "walking",
            "--duration",
            "3",
            "--rate",
            "50",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "MNTE, eq. (15)" in printed and "peak |ds/dt| / velocity limit" in printed and "result" in printed
    for name in (
        "trajectory.csv",
        "retarget.npz",
        "calibration.yaml",
        "summary.txt",
        "joints.png",
        "phase.png",
        "errors.png",
    ):
        assert (out / name).stat().st_size > 0, name
    saved = np.load(out / "retarget.npz")
    times, q = saved["times"], saved["q"]
    assert len(times) == 150
    # the summary's peak speed is that of the written trajectory (finite differences), not of nu
    robot = Retargeter.from_config("g1").robot
    fd = np.abs(np.diff(q[:, 7:], axis=0)) / np.diff(times)[:, None] / robot.velocity_limit
    assert f"peak |ds/dt| / velocity limit (joint)        {fd.max():.2f} " in printed
    assert fd.max() <= 1.0 + 1e-6
    # and its accelerations are the second differences of the written joints (retarget/smoothness.py)
    figures = smoothness(q[:, 7:], times)
    assert f"{figures.worst('p99')[0]:.0f} / {figures.worst('max')[0]:.0f} rad/s^2" in printed
    assert f"{100 * figures.chatter_share:.2f} % of joint-samples" in printed
    with AnyReader([out / "bag"]) as reader:
        assert {c.topic: c.msgtype for c in reader.connections} == {
            "/dynik/joint_states": "sensor_msgs/msg/JointState",
            "/dynik/base_odom": "nav_msgs/msg/Odometry",
        }
        joint_states, odometry = [], []
        for connection, timestamp, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            assert stamp == timestamp
            (joint_states if connection.topic == "/dynik/joint_states" else odometry).append((stamp, msg))
    assert len(joint_states) == len(odometry) == 150
    expected = [round(t * 1e9) for t in times]
    assert [s for s, _ in joint_states] == expected and [s for s, _ in odometry] == expected
    names = load_robot("g1").robot.joint_names
    assert list(joint_states[40][1].name) == names
    np.testing.assert_allclose(joint_states[40][1].position, q[40, 7:])
    pose = odometry[40][1].pose.pose
    np.testing.assert_allclose([pose.position.x, pose.position.y, pose.position.z], q[40, :3])
    np.testing.assert_allclose(
        [pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w], q[40, 3:7]
    )
    rows = (out / "trajectory.csv").read_text().splitlines()
    assert len(rows) == 151 and rows[0].startswith("time,base_x,")


def test_cli_reads_a_link_state_bag_and_keeps_its_stamps(tmp_path):
    from dynik_ros.io.bags import read_messages, write_motion_bag

    motion = synthetic_human_motion("walking", 1.0, 60.0)
    start = 1_700_000_000.25
    write_motion_bag(tmp_path / "human", motion, start_time=start)
    out = tmp_path / "run"
    code = cli.main(
        [
            "--robot",
            "icub",
            "--bag",
            str(tmp_path / "human"),
            "--out",
            str(out),
            "--quiet",
            "--no-plots",
            "--settle",
            "0.5",
        ]
    )
    assert code == 0
    stamps_in = [m.timestamp_ns for m in read_messages(tmp_path / "human")]
    stamps_out = [m.timestamp_ns for m in read_messages(out / "bag", ["/dynik/joint_states"])]
    assert stamps_out == stamps_in


def test_cli_reads_a_motion_file_without_velocities(tmp_path):
    motion = synthetic_human_motion("walking", 1.0, 100.0)
    path = tmp_path / "motion.npz"
    np.savez(
        path,
        times=motion.times,
        links=np.array(motion.links),
        positions=motion.positions,
        rotations=motion.rotations,
    )
    loaded = cli.read_npz_motion(path)
    inner = slice(1, -1)
    np.testing.assert_allclose(loaded.linear_velocities[inner], motion.linear_velocities[inner], atol=0.05)
    np.testing.assert_allclose(loaded.angular_velocities[inner], motion.angular_velocities[inner], atol=0.2)
    assert (
        cli.main(
            [
                "--robot",
                "talos",
                "--npz",
                str(path),
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                "--no-plots",
                "--no-bag",
            ]
        )
        == 0
    )


def test_cli_reports_a_bad_map_and_exits_2(tmp_path, capsys):
    path = write_map(tmp_path, _broken(lambda d: d["targets"][1].update(frame="torso_lnk")))
    assert cli.main(["--robot", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "closest valid names: torso_link" in capsys.readouterr().err


def test_bench_setup_for_the_benchmark_rows():
    robot, targets, measurements, q0, times = robot_bench_setup("icub", "walking", 1.0, 60.0)
    assert len(measurements) == len(times) == 60
    assert q0.shape == (robot.nq,)
    measurements[0].validate(targets)
