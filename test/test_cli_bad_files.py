"""``dynik-retarget`` on files a user may hand it by mistake: one line naming the file, exit status 2,
never a traceback (a corrupted mcap used to end with a 21-line rosbags traceback and exit 1, the status
documented for "NaN or limit violation")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dynik_ros.io.bags import write_motion_bag
from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
from dynik_ros.motion.synthetic import synthesize


@pytest.fixture(scope="module")
def good_bag(tmp_path_factory, human66) -> Path:
    motion = synthesize(
        human66, "walking", duration=1.0, rate=60.0, links=list(XSENS_SEGMENTS),
        standing_height=pelvis_height(Subject()),
    )  # fmt: skip
    bag = write_motion_bag(tmp_path_factory.mktemp("bags") / "walk", motion)
    return next(bag.glob("*.mcap"))


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.retarget", *args, "--quiet", "--no-plots", "--out", "out"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _corrupted(good: Path, where: Path) -> dict[str, tuple[str, Path]]:
    data = good.read_bytes()
    files: dict[str, tuple[str, Path]] = {}

    def put(name: str, content: bytes, flag: str = "--bag") -> None:
        path = where / name
        path.write_bytes(content)
        files[name] = (flag, path)

    put("empty.mcap", b"")
    put("one_byte.mcap", b"\x01")
    put("text.mcap", b"this is not a bag\n")
    put("truncated_half.mcap", data[: len(data) // 2])
    put("truncated_tail.mcap", data[:-20])
    flipped = bytearray(data)
    rng = np.random.default_rng(1)
    for i in rng.integers(8, len(flipped) - 8, 64):
        flipped[i] ^= 0xFF
    put("bit_flipped.mcap", bytes(flipped))
    put("text.npz", b"times,positions\n", "--npz")
    put("mcap_as.npz", data, "--npz")
    (where / "no_metadata").mkdir()
    files["no_metadata"] = ("--bag", where / "no_metadata")
    return files


def test_bad_input_files_give_one_line_and_exit_status_2(good_bag, tmp_path):
    for name, (flag, path) in _corrupted(good_bag, tmp_path).items():
        result = _run(flag, str(path), cwd=tmp_path)
        assert result.returncode == 2, (name, result.returncode, result.stderr[-2000:])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("dynik-retarget: error:"), (name, result.stderr)
        assert str(path.name) in lines[0] and "Traceback" not in result.stderr, name


def test_the_uncorrupted_bag_still_retargets(good_bag, tmp_path):
    result = _run("--bag", str(good_bag), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
