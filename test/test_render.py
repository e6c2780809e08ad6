"""dynik-retarget --video: the human and the robot side by side, headless (issue 9, "look at it")."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.cli.retarget import main


@pytest.fixture(scope="module")
def take(tmp_path_factory):
    """A 1.5 s G1 walk retargeted with a PNG strip of 3 frames and a GIF."""
    out = tmp_path_factory.mktemp("render")
    args = ["--robot", "g1", "--duration", "1.5", "--rate", "60", "--out", str(out), "--no-bag", "--no-plots"]
    assert main([*args, "--quiet", "--video", str(out / "strip.png"), "--frames", "3"]) == 0
    assert main([*args, "--quiet", "--video", str(out / "walk.gif")]) == 0
    return out


def test_png_strip_has_one_row_of_two_drawn_panels_per_frame(take):
    import matplotlib.image as mpimg

    image = mpimg.imread(take / "strip.png")[..., :3]
    height, width = image.shape[:2]
    assert height / width == pytest.approx(3 * 3.2 / 7.0, abs=0.02)  # three 7 x 3.2 rows of two panels
    for row in np.array_split(image, 3, axis=0):
        for panel in np.array_split(row, 2, axis=1):
            coloured = np.abs(panel - panel.mean(axis=2, keepdims=True)).max(axis=2) > 0.15  # not grey/white
            assert coloured.mean() > 0.002, "a panel without its skeleton"
    rows = np.array_split(image, 3, axis=0)
    assert np.abs(rows[0][: rows[2].shape[0]] - rows[2][: rows[0].shape[0]]).mean() > 1e-3  # the motion moves


def test_gif_has_a_frame_per_twentieth_of_a_second_and_they_change(take):
    from PIL import Image

    with Image.open(take / "walk.gif") as gif:
        frames = []
        for i in range(gif.n_frames):
            gif.seek(i)
            frames.append(np.asarray(gif.convert("RGB"), dtype=float))
    assert 25 <= len(frames) <= 31  # 1.5 s at 20 frames per second
    assert np.abs(frames[0] - frames[-1]).mean() > 0.5


def test_robot_skeleton_starts_at_the_base_and_bad_formats_are_one_line(tmp_path, capsys):
    from dynik_ros.retarget import Retargeter
    from dynik_ros.retarget.render import robot_skeleton

    rt = Retargeter.from_config("g1")
    q = rt.initial_configuration()[None]
    joints, bones = robot_skeleton(rt.robot, q)
    assert np.allclose(joints[0, 1], q[0, :3])  # joint 1: the free flyer, at the base position
    assert all(parent < child for child, parent in bones)
    code = main(["--robot", "g1", "--out", str(tmp_path), "--quiet", "--video", str(tmp_path / "x.avi")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and ".png (strip), .gif or .mp4" in err[0]
    assert not (tmp_path / "trajectory.csv").exists()  # refused before any work
