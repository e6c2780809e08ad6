"""dynik-dynamics: torques from a bag of the suit's link states and the shoes' WrenchStamped topics."""

from __future__ import annotations

import numpy as np

from dynik_ros.cli.dynamics import main
from dynik_ros.estimation.dynamics_pipeline import ShoeBuffer
from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
from dynik_ros.io.bags import BagWriter, write_motion_bag
from dynik_ros.retarget.human import synthetic_human_motion

START = 1_700_000_000.0


def _bag_with_shoes(tmp_path, frame: str = "RightFoot"):
    _, truth = human_dynamics_truth("walking", 1.1, 60.0)
    motion = synthetic_human_motion("walking", 1.1, 60.0)
    path = write_motion_bag(tmp_path / "links", motion, start_time=START)
    shoes = tmp_path / "shoes"
    with BagWriter(shoes) as bag:
        for k, t in enumerate(truth.times):
            for f, (topic, link) in enumerate(
                (("/human/shoes/right", frame), ("/human/shoes/left", "LeftFoot"))
            ):
                w = truth.wrenches[k, f]
                force, torque = (
                    bag.message(
                        "geometry_msgs/msg/Vector3", **dict(zip("xyz", map(float, part), strict=True))
                    )
                    for part in (w[:3], w[3:])
                )
                wrench = bag.message("geometry_msgs/msg/Wrench", force=force, torque=torque)
                stamp = int(round(START * 1e9)) + int(round(t * 1e9))
                bag.write(
                    topic,
                    bag.message(
                        "geometry_msgs/msg/WrenchStamped", header=bag.header(stamp, link), wrench=wrench
                    ),
                )
    return truth, path, shoes


def test_shoe_buffer_picks_the_nearest_reading_within_the_age():
    buffer = ShoeBuffer(0.01)
    assert buffer.add(0, 1_000_000_000, np.ones(6)) and buffer.add(0, 1_020_000_000, 2 * np.ones(6))
    assert not buffer.add(0, 1_010_000_000, np.zeros(6))  # older than the newest: refused
    np.testing.assert_array_equal(buffer.at(1_012_000_000)[0], 2 * np.ones(6))
    assert np.isnan(buffer.at(1_050_000_000)[0]).all() and np.isnan(buffer.at(1_000_000_000)[1]).all()


def test_dynamics_cli_from_a_bag_matches_the_truth(tmp_path, capsys):
    truth, links, shoes = _bag_with_shoes(tmp_path)
    # one bag with both: the shoes' messages copied next to the link states
    from dynik_ros.io.bags import read_messages

    merged = tmp_path / "merged"
    with BagWriter(merged) as bag:
        for item in list(read_messages(links)) + list(read_messages(shoes)):
            bag.write(item.topic, item.msg)
    out, png = tmp_path / "est.npz", tmp_path / "fig.png"
    assert main(["--bag", str(merged), "--out", str(out), "--plot", str(png)]) == 0
    data = np.load(out)
    index = np.round((data["times"] - START) * 60.0).astype(int)
    assert len(index) == len(truth.times) - 2 and data["from_shoes"].all()
    assert np.sqrt(np.mean((data["tau"] - truth.tau[index]) ** 2)) <= 0.001 * np.abs(truth.tau).max()
    assert png.stat().st_size > 10_000
    assert "peak |tau| knee" in capsys.readouterr().out
    # without the shoes: estimates from the kinematic contact, none from shoes
    assert main(["--bag", str(merged), "--no-shoes", "--out", str(out)]) == 0
    assert not np.load(out)["from_shoes"].any()


def test_dynamics_cli_refuses_bad_input_in_one_line(tmp_path, capsys):
    truth, links, shoes = _bag_with_shoes(tmp_path, frame="LeftFoot")
    assert main(["--bag", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err
    assert main(["--bag", str(links)]) == 2  # no shoe topics in this bag
    assert "/human/shoes/right" in capsys.readouterr().err
    assert main(["--bag", str(shoes), "--topic", "/human/shoes/right"]) == 2  # wrong type
    assert "MultiDOFJointState" in capsys.readouterr().err
    assert main(["--synthetic", "walking", "--out", str(tmp_path / "x.csv")]) == 2
    assert ".npz" in capsys.readouterr().err


def test_dynamics_cli_synthetic_reports_the_error_against_the_truth(capsys):
    assert main(["--synthetic", "walking", "--duration", "1.1"]) == 0
    out = capsys.readouterr().out
    assert "against the ground truth: torque RMSE" in out
    error = float(out.split("torque RMSE ")[1].split()[0])
    assert error < 0.05
