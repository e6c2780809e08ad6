"""dynik-retarget on capture files: MVNX and BVH written from Human66 forward kinematics, format found
from the content, the file's T-pose frame used for calibration, input checks on the command line."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dynik_ros.cli import retarget as cli
from dynik_ros.io.bvh import builtin_skeleton_maps, write_bvh
from dynik_ros.io.mvnx import write_mvnx
from dynik_ros.retarget.human import human_tpose, synthetic_human_motion


@pytest.fixture(scope="module")
def walk():
    return synthetic_human_motion("walking", duration=1.0, rate=60.0)


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv] + ["--no-bag", "--no-plots", "--quiet", "--settle", "0.2"])
    out, err = capsys.readouterr()
    return code, out, err


def test_mvnx_take_retargets_to_g1_calibrated_on_its_tpose(tmp_path, capsys, walk):
    path = write_mvnx(walk, tmp_path / "take.xml", calibration={"tpose": human_tpose()})
    code, out, err = _run(capsys, path, "--out", tmp_path / "out")
    assert code == 0, err
    assert "calibrated on the file's tpose frame" in err
    assert "limit violation (tolerance 1e-6 rad)         0.0e+00 rad" in out
    saved = np.load(tmp_path / "out" / "retarget.npz")
    assert len(saved["times"]) == len(walk.times)


def test_bvh_take_and_its_format_given_to_npz(tmp_path, capsys, walk):
    names = {m.name: m.segments for m in builtin_skeleton_maps()}["cmu"]
    path = write_bvh(walk, tmp_path / "take.bvh", names=names)
    code, out, err = _run(capsys, path, "--out", tmp_path / "out")
    assert code == 0, err
    assert "skeleton cmu" in out and "derived from their neighbours" in err
    code, out, err = _run(capsys, "--npz", path, "--out", tmp_path / "out2")
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "take.bvh" in lines[0] and "it is a BVH file" in lines[0]
    assert "allow_pickle" not in err


def test_calibration_frame_that_is_not_a_tpose_is_refused_unless_forced(tmp_path, capsys):
    from scipy.spatial.transform import Rotation

    motion = synthetic_human_motion("tpose", duration=0.5, rate=60.0)
    links = list(motion.links)
    motion.positions, motion.rotations = motion.positions.copy(), motion.rotations.copy()
    for side, sign in (("Right", 1.0), ("Left", -1.0)):  # arms down by 80 deg in every frame
        rot = Rotation.from_rotvec([sign * np.radians(80.0), 0.0, 0.0]).as_matrix()
        pivot = motion.positions[:, links.index(side + "UpperArm")].copy()
        for seg in ("UpperArm", "ForeArm", "Hand"):
            i = links.index(side + seg)
            motion.positions[:, i] = pivot + (motion.positions[:, i] - pivot) @ rot.T
            motion.rotations[:, i] = rot @ motion.rotations[:, i]
    path = write_mvnx(motion, tmp_path / "npose.mvnx")
    code, _, err = _run(capsys, path, "--calibration-frame", 0, "--out", tmp_path / "out")
    assert code == 2
    assert "frame 0: not a T-pose" in err and "--force-calibration" in err
    angle = int(re.search(r"is (\d+) deg off its T-pose direction", err).group(1))
    assert 75 <= angle <= 90  # 80 deg turned arms plus the synthetic T-pose's own arm sway
    forced = ("--calibration-frame", 0, "--force-calibration")
    code, _, err = _run(capsys, path, *forced, "--out", tmp_path / "o2")
    assert code in (0, 1) and "warning:" in err and f"{angle} deg" in err


def test_pelvis_at_zero_is_reported_and_shifted(tmp_path, capsys):
    motion = synthetic_human_motion("tpose", duration=0.5, rate=60.0)
    pelvis = list(motion.links).index("Pelvis")
    motion.positions = motion.positions - np.array([0.0, 0.0, motion.positions[0, pelvis, 2]])
    path = write_mvnx(motion, tmp_path / "low.mvnx")
    code, out, err = _run(capsys, path, "--out", tmp_path / "out")
    assert code == 0, err
    assert "the feet put the floor at z = -0.9" in err and "shifted by +0.9" in err
    assert "position RMSE" in out
    code, out, err = _run(capsys, path, "--floor", "report", "--out", tmp_path / "out2")
    assert "not shifted" in err


REAL_EXCERPT = __import__("pathlib").Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"


def test_real_cmu_walk_excerpt_retargets_to_g1_inside_its_limits(tmp_path, capsys):
    """1.5 s of a real optical-mocap walk (CMU 131_01, test/data/README.md): skeleton, unit and
    up axis detected, rest pose turned onto the T-pose with a notice, L5/T12 derived; G1 stays inside
    its position and velocity limits (exit status 0 checks both on the output's finite differences)."""
    from dynik_ros.io.bvh import read_bvh

    motion = read_bvh(REAL_EXCERPT)
    assert "skeleton cmu_max, cmu, y-up, 120 Hz" in motion.source
    assert len(motion) == 180
    assert 1.5 < float(np.median(motion.positions[:, 0, 2])) + 0.8 < 1.9  # pelvis 0.7-1.1 m above the floor
    speed = np.linalg.norm(motion.linear_velocities[:, 0, :2], axis=-1)
    assert 0.6 < float(np.median(speed)) < 2.0  # a walk
    code, out, err = _run(capsys, REAL_EXCERPT, "--out", tmp_path / "out")
    assert code == 0, out + err
    assert "limit violation (tolerance 1e-6 rad)         0.0e+00 rad" in out
    assert "joint-samples above the velocity limit       0" in out
    assert "rest pose is not a T-pose" in err and "['L5', 'T12']" in err
    # the upper-body and pelvis-and-legs MNTE split the targets of eq. (15)
    summary = np.load(tmp_path / "out" / "retarget.npz")
    frames = [str(f) for f in summary["orientation_frames"]]
    legs = np.array(
        [f == "pelvis" or ("_" in f and f.split("_")[1] in ("hip", "knee", "ankle")) for f in frames]
    )
    per_target = 1.0 - np.cos(summary["orientation_error"])
    line = next(x for x in out.splitlines() if x.startswith("MNTE: trunk, head, arms"))
    upper, lower = (float(x) for x in line.split()[-3::2])
    assert upper == pytest.approx(per_target[:, ~legs].mean(), rel=1e-2)
    assert lower == pytest.approx(per_target[:, legs].mean(), rel=1e-2)
    assert float(summary["mnte"].mean()) == pytest.approx(per_target.mean(), rel=1e-6)


def _replace_line(lines: list[str], k: int, text: str) -> bytes:
    return "\n".join(lines[:k] + [text] + lines[k + 1 :]).encode()


def _hostile_files(tmp_path, walk) -> dict[str, object]:
    names = {m.name: m.segments for m in builtin_skeleton_maps()}["mvn"]
    mvnx = write_mvnx(walk, tmp_path / "good.mvnx").read_bytes()
    bvh = write_bvh(walk, tmp_path / "good.bvh", names=names).read_text().splitlines()
    motion_at = bvh.index("MOTION")
    files = {
        "empty.mvnx": b"",
        "garbage.bvh": bytes(range(256)),
        "truncated.mvnx": mvnx[: len(mvnx) // 3],
        "truncated.bvh": "\n".join(bvh[:-5]).encode(),
        "channels.bvh": _replace_line(bvh, motion_at + 4, bvh[motion_at + 4] + " 1.0"),
        "nan.bvh": _replace_line(bvh, motion_at + 6, " ".join(["nan"] + bvh[motion_at + 6].split()[1:])),
    }
    cm = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    cm.positions = cm.positions * 100.0
    files["centimetres.mvnx"] = write_mvnx(cm, tmp_path / "cm.mvnx").read_bytes()
    return files


def test_hostile_capture_files_give_one_line_and_exit_status_2(tmp_path, capsys, walk):
    for name, content in _hostile_files(tmp_path, walk).items():
        path = tmp_path / name
        path.write_bytes(content)
        code, _, err = _run(capsys, path, "--out", tmp_path / "out")
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2, (name, err)
        assert len(lines) == 1 and lines[0].startswith("dynik-retarget: error:"), (name, err)
        assert name in lines[0] and "Traceback" not in err, (name, lines[0])


def test_npz_motion_files_are_checked_too(tmp_path, capsys, walk):
    """--npz input goes through the capture checks: the floor is reported (not shifted), a NaN is one
    line naming the file and the frame."""
    from dynik_ros.io.human_motion import save_npz_motion

    path = save_npz_motion(walk, tmp_path / "walk.npz")
    code, _, err = _run(capsys, "--npz", path, "--out", tmp_path / "out")
    assert code == 0, err
    assert "walk.npz: the feet put the floor at z = -0.037 m" in err and "not shifted" in err
    bad = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    bad.positions = bad.positions.copy()
    bad.positions[12, 3, 0] = np.inf
    path = save_npz_motion(bad, tmp_path / "bad.npz")
    code, _, err = _run(capsys, "--npz", path, "--out", tmp_path / "out2")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "bad.npz" in lines[0] and "frame 12: position of" in lines[0]
