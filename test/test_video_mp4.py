"""MP4 output of both renderers through dynik_ros.io.ffmpeg (ffmpeg on PATH, else the imageio-ffmpeg
wheel's binary): the files are read back with ffmpeg and their frame count, size and colours checked."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.io.ffmpeg import ffmpeg_program


def _read(path) -> tuple[tuple[int, int], list[np.ndarray]]:
    """Size (width, height) and RGB frames of a video, decoded by ffmpeg (imageio-ffmpeg's reader)."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(f, dtype=np.uint8).reshape(height, width, 3) for f in reader]
    return (width, height), frames


def test_an_installed_package_has_an_ffmpeg():
    """imageio-ffmpeg is a requirement: a fresh bootstrap can write MP4 with no system ffmpeg."""
    program = ffmpeg_program()
    assert program is not None


def test_sim_mp4_has_every_frame_at_its_size_and_colour(tmp_path):
    from PIL import Image

    from dynik_ros.sim.render import write_mp4

    colours = [(40 * k % 256, 255 - 25 * k, 128) for k in range(10)]
    images = [Image.new("RGB", (64, 48), c) for c in colours]
    out = write_mp4(images, tmp_path / "run.mp4", fps=20.0)
    size, frames = _read(out)
    assert size == (64, 48) and len(frames) == 10
    for frame, colour in zip(frames, colours, strict=True):  # lossy (H.264, yuv420p): close, not equal
        assert np.abs(frame.reshape(-1, 3).mean(axis=0) - colour).max() < 12.0, (frame[0, 0], colour)


def test_retarget_mp4_has_a_frame_per_twentieth_of_a_second(tmp_path):
    from dynik_ros.cli.retarget import main

    out = tmp_path / "walk.mp4"
    args = ["--robot", "g1", "--duration", "1.0", "--rate", "60", "--out", str(tmp_path), "--no-bag"]
    assert main([*args, "--no-plots", "--quiet", "--video", str(out)]) == 0
    size, frames = _read(out)
    assert size == (560, 280)  # 7 x 3.5 in at 80 dpi
    assert abs(len(frames) - 20) <= 1  # 1 s of take at 20 frames per second
    assert np.abs(frames[0].astype(float) - frames[-1]).mean() > 0.5  # the figures move


def test_mp4_without_any_ffmpeg_is_refused_in_one_line(monkeypatch, tmp_path, capsys):
    from dynik_ros.cli.retarget import main
    from dynik_ros.io import ffmpeg

    monkeypatch.setattr(ffmpeg, "ffmpeg_program", lambda: None)
    code = main(["--robot", "g1", "--out", str(tmp_path), "--quiet", "--video", str(tmp_path / "x.mp4")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "MP4 needs the ffmpeg program" in err[0]
