"""MVNX reader/writer and the capture checks: round trips of Human66 forward kinematics (ground truth),
the angular-velocity frame convention, hostile files."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from dynik_ros.io.capture_checks import CaptureError, check_calibration_pose, pose_angles
from dynik_ros.io.human_motion import finite_difference_twists
from dynik_ros.io.mvnx import MvnxError, calibration_frame, read_mvnx, write_mvnx
from dynik_ros.models.segments import XSENS_SEGMENTS
from dynik_ros.retarget.human import human_tpose, synthetic_human_motion


@pytest.fixture(scope="module")
def walk():
    return synthetic_human_motion("walking", duration=1.0, rate=60.0)


def _write(tmp_path: Path, motion, name: str = "take.mvnx", **kw) -> Path:
    return write_mvnx(motion, tmp_path / name, **kw)


def test_round_trip_equals_forward_kinematics(tmp_path, walk):
    tpose = human_tpose()
    path = _write(tmp_path, walk, calibration={"identity": tpose, "tpose": tpose}, stamp_origin_ms=1_700_000)
    motion = read_mvnx(path, check=False)  # the checks' floor shift is tested below
    assert motion.links == list(XSENS_SEGMENTS)
    pick = [list(walk.links).index(s) for s in XSENS_SEGMENTS]
    np.testing.assert_allclose(motion.times, walk.times - walk.times[0], atol=1e-12)
    np.testing.assert_allclose(motion.positions, walk.positions[:, pick], atol=1e-8)
    np.testing.assert_allclose(motion.rotations, walk.rotations[:, pick], atol=1e-8)
    np.testing.assert_allclose(motion.linear_velocities, walk.linear_velocities[:, pick], atol=1e-8)
    np.testing.assert_allclose(motion.angular_velocities, walk.angular_velocities[:, pick], atol=1e-8)
    assert motion.stamp_origin_ns == 1_700_000 * 1_000_000
    kind, poses = calibration_frame(motion)
    assert kind == "tpose"
    for s in XSENS_SEGMENTS:
        np.testing.assert_allclose(poses[s][0], tpose[s][0], atol=1e-8)
        np.testing.assert_allclose(poses[s][1], tpose[s][1], atol=1e-8)


def test_angular_velocity_is_world_frame(tmp_path, walk):
    """The file's angularVelocity agrees with the world-frame finite difference of the orientations,
    not with its body-frame reading ``R^T w``."""
    motion = read_mvnx(_write(tmp_path, walk))
    _, fd = finite_difference_twists(motion.times, motion.positions, motion.rotations)
    body = np.einsum("nlji,nlj->nli", motion.rotations, motion.angular_velocities)
    inner = slice(1, -1)
    world_err = np.sqrt(np.mean((motion.angular_velocities[inner] - fd[inner]) ** 2))
    body_err = np.sqrt(np.mean((body[inner] - fd[inner]) ** 2))
    assert world_err < 0.05 * np.sqrt(np.mean(fd[inner] ** 2))
    assert body_err > 10 * world_err


def test_missing_velocities_are_differentiated(tmp_path, walk):
    path = _write(tmp_path, walk)
    text = path.read_text()
    import re

    text = re.sub(r"<velocity>[^<]*</velocity>\n|<angularVelocity>[^<]*</angularVelocity>\n", "", text)
    path.write_text(text)
    motion = read_mvnx(path)
    assert any("smoothed derivatives" in n for n in motion.notices)
    pick = [list(walk.links).index(s) for s in XSENS_SEGMENTS]
    err = np.abs(motion.angular_velocities[2:-2] - walk.angular_velocities[2:-2, pick]).max()
    assert err < 0.1  # rad/s, central differences at 60 Hz of a 4 km/h walk


def test_pelvis_at_zero_is_shifted_onto_the_floor(tmp_path, walk):
    """An MVNX export with the pelvis at z = 0 (feet 0.9 m under the floor, as in MVN's upper-body mode)
    is shifted up by the floor the feet give, with a notice; report-only leaves it."""
    stand = synthetic_human_motion("tpose", duration=1.0, rate=60.0)
    pelvis = list(stand.links).index("Pelvis")
    lowered = synthetic_human_motion("tpose", duration=1.0, rate=60.0)
    lowered.positions = lowered.positions - np.array([0.0, 0.0, stand.positions[0, pelvis, 2]])
    motion = read_mvnx(_write(tmp_path, lowered))
    assert len(motion.notices) == 1 and "floor" in motion.notices[0] and "shifted" in motion.notices[0]
    assert str(tmp_path / "take.mvnx") in motion.notices[0]
    pick = [list(stand.links).index(s) for s in XSENS_SEGMENTS]
    np.testing.assert_allclose(motion.positions, stand.positions[:, pick], atol=0.01)

    # shift-equivariant: the lowered walk lands where the walk itself does
    low_walk = synthetic_human_motion("walking", duration=1.0, rate=60.0)
    low_walk.positions = low_walk.positions - np.array([0.0, 0.0, 0.9])
    a = read_mvnx(_write(tmp_path, low_walk, "low.mvnx")).positions
    b = read_mvnx(_write(tmp_path, walk, "walk.mvnx")).positions
    np.testing.assert_allclose(a, b, atol=1e-6)

    from dynik_ros.io.capture_checks import check_motion

    raw = read_mvnx(tmp_path / "take.mvnx", check=False)
    check_motion(raw, "take", floor="report")
    assert "not shifted" in raw.notices[0]
    assert raw.positions[0, 0, 2] == pytest.approx(0.0, abs=1e-9)


def test_truncated_file_is_one_clear_error(tmp_path, walk):
    path = _write(tmp_path, walk)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(MvnxError, match=r"take\.mvnx: malformed or truncated XML at line \d+ after \d+"):
        read_mvnx(path)


def test_nan_names_the_frame_and_segment(tmp_path, walk):
    bad = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    bad.positions = bad.positions.copy()
    bad.positions[7, list(bad.links).index("LeftHand"), 1] = np.nan
    with pytest.raises(CaptureError, match=r"frame 7: position of LeftHand is not finite"):
        read_mvnx(_write(tmp_path, bad))


def test_wrong_value_count_and_zero_quaternion(tmp_path, walk):
    path = _write(tmp_path, walk)
    text = path.read_text()
    start = text.index("<position>", text.index('index="3"')) + len("<position>")
    path.write_text(text[:start] + "0.5 " + text[start:])
    with pytest.raises(MvnxError, match=r"frame 3: <position> has 70 values, expected 69"):
        read_mvnx(path)
    start = text.index("<orientation>", text.index('index="4"')) + len("<orientation>")
    end = text.index("</orientation>", start)
    values = text[start:end].split()
    values[8:12] = ["0", "0", "0", "0"]  # the third segment, L3
    path.write_text(text[:start] + " ".join(values) + text[end:])
    with pytest.raises(CaptureError, match=r"frame 4: orientation of L3 is not a rotation"):
        read_mvnx(path)


def test_other_formats_and_missing_segments(tmp_path, walk):
    bvh = tmp_path / "walk.mvnx"
    bvh.write_text("HIERARCHY\nROOT Hips\n{\n}\n")
    with pytest.raises(MvnxError, match="malformed"):
        read_mvnx(bvh)
    xml = tmp_path / "other.mvnx"
    xml.write_text('<?xml version="1.0"?><robot name="x"/>')
    with pytest.raises(MvnxError, match=r"not an MVNX file \(root element <robot>"):
        read_mvnx(xml)
    path = _write(tmp_path, walk)
    path.write_text(path.read_text().replace('label="LeftToe"', 'label="LeftToe2"'))
    with pytest.raises(MvnxError, match=r"segments \['LeftToe'\] missing"):
        read_mvnx(path)


def test_timestamps_must_increase_and_teleports_warn(tmp_path, walk):
    path = _write(tmp_path, walk)
    text = path.read_text().replace('index="5"', 'index="3"')
    path.write_text(text)
    with pytest.raises(CaptureError, match=r"frame 5: timestamp .* does not increase"):
        read_mvnx(path)
    jumped = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    jumped.positions = jumped.positions.copy()
    jumped.positions[10:, :, 0] += 2.0  # the whole body 2 m forward in one frame: 120 m/s
    motion = read_mvnx(_write(tmp_path, jumped, "jump.mvnx"))
    assert any("frame 10:" in n and "jumps" in n for n in motion.notices)


def _rotate_arms_down(poses, angle_deg: float):
    """T-pose with both whole arms turned down by ``angle_deg`` about the shoulder (x axis)."""
    from scipy.spatial.transform import Rotation

    out = dict(poses)
    for side, sign in (("Right", 1.0), ("Left", -1.0)):
        pivot = poses[side + "UpperArm"][0]
        rot = Rotation.from_rotvec([sign * math.radians(angle_deg), 0.0, 0.0]).as_matrix()
        for seg in ("UpperArm", "ForeArm", "Hand"):
            p, r = poses[side + seg]
            out[side + seg] = (pivot + rot @ (p - pivot), rot @ r)
    return out


def test_calibration_pose_check_measures_the_arm_angle():
    tpose = human_tpose()
    assert max(pose_angles(tpose).values()) < 1e-6
    assert check_calibration_pose(tpose, "tpose") is None
    warned = check_calibration_pose(_rotate_arms_down(tpose, 25.0), "frame 0")
    assert warned is not None and "RightUpperArm is 25 deg" in warned
    npose = _rotate_arms_down(tpose, 85.0)
    with pytest.raises(CaptureError, match=r"frame 0: not a T-pose: .* 85 deg .*N-pose.*refused above 35"):
        check_calibration_pose(npose, "frame 0")
    assert "85 deg" in check_calibration_pose(npose, "frame 0", force=True)


def test_positions_in_centimetres_are_refused_naming_the_unit(tmp_path):
    cm = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    cm.positions = cm.positions * 100.0
    with pytest.raises(CaptureError, match=r"cm\.mvnx: the legs give a stature of 175 .*centimetres"):
        read_mvnx(write_mvnx(cm, tmp_path / "cm.mvnx"))


def test_upper_body_configuration_is_noticed(tmp_path, walk):
    motion = read_mvnx(write_mvnx(walk, tmp_path / "upper.mvnx", configuration="UpperBody"), check=False)
    assert any("'UpperBody': the legs are not measured" in n for n in motion.notices)
    assert "UpperBody" in motion.source


def test_the_rotation_check_refuses_what_lapacks_determinant_refuses():
    """``require_rotations`` takes ``det`` as the columns' triple product: on takes of clean rotations with
    one matrix scaled inside or outside the tolerance, reflected, or a reflection scaled, it refuses the same
    matrix with the same message as the check with LAPACK's ``np.linalg.det`` and ``@``'s ``R^T R`` (which
    ``require_rotations`` computes only where its whole-array screen finds half the tolerance or more)."""
    from dynik_ros.core.so3 import exp_so3
    from dynik_ros.io.capture_checks import require_rotations

    def plain(r: np.ndarray, links: list[str], tolerance: float = 1e-3) -> str:
        err = np.abs(np.swapaxes(r, -1, -2) @ r - np.eye(3)).max(axis=(-1, -2))
        bad = (err > tolerance) | (np.linalg.det(r) <= 0)
        if not bad.any():
            return "ok"
        k, i = (int(x) for x in np.argwhere(bad)[0][:2])
        return (
            f"take: frame {k}: orientation of {links[i]} is not a rotation "
            f"(|R^T R - I| = {err[k, i]:.2g}, det {np.linalg.det(r[k, i]):.3g})"
        )

    rng = np.random.default_rng(12)
    links = [f"L{i}" for i in range(5)]
    verdicts = {"ok": 0, "refused": 0}
    for trial in range(600):
        r = exp_so3(rng.normal(size=(8, 5, 3)) * 2.0)
        k, i = int(rng.integers(8)), int(rng.integers(5))
        kind = trial % 5
        if kind == 1:
            r[k, i] *= 1.0 + rng.uniform(-1e-3, 1e-3)  # |R^T R - I| up to 2e-3: either side
        elif kind == 2:
            r[k, i, :, int(rng.integers(3))] *= -1.0  # a reflection
        elif kind == 3:
            r[k, i] *= -(1.0 + rng.uniform(-4e-4, 4e-4))  # a reflection within the tolerance
        elif kind == 4:
            r[k, i] = np.diag(rng.choice([-1.0, 1.0], size=3))
        expected = plain(r, links)
        try:
            require_rotations("take", r, links)
            got = "ok"
        except CaptureError as exc:
            got = str(exc)
        assert got == expected, (trial, got, expected)
        verdicts["ok" if expected == "ok" else "refused"] += 1
    assert min(verdicts.values()) > 100, verdicts


def test_a_frames_numbers_parsed_at_once_are_its_vectors_bit_for_bit(tmp_path, walk):
    """``read_mvnx`` parses a normal frame's four vectors with one ``np.array`` (``_frame_vectors``): the
    arrays are the vectors parsed one by one, bit for bit (segments shuffled in the file, optional vectors
    absent); a frame with a fault still gets the one-by-one message of its first faulty vector."""
    import xml.etree.ElementTree as ET

    from dynik_ros.io.mvnx import _VECTORS, _frame_vectors

    path = _write(tmp_path, walk)
    text = path.read_text()
    # segment ids shuffled: the reader sorts the labels and their vectors by id, then gathers by label
    ids = np.random.default_rng(3).permutation(23) + 1
    for i, s in enumerate(XSENS_SEGMENTS):
        text = text.replace(f'<segment label="{s}" id="{i + 1}"/>', f'<segment label="{s}" id="{ids[i]}"/>')
    path.write_text(text)
    motion = read_mvnx(path, check=False)
    frames = [f for f in ET.parse(path).getroot().iter() if f.tag.endswith("}frame")]
    plain = {
        name: np.array([np.array(f.find(f"{{*}}{name}").text.split(), dtype=float) for f in frames])
        for name in _VECTORS
    }
    for name, got in (("position", motion.positions), ("velocity", motion.linear_velocities)):
        expected = plain[name].reshape(len(frames), 23, 3)
        assert np.array_equal(got.view(np.uint64), expected.view(np.uint64)), name
    count = 23
    children = {name: frames[5].find(f"{{*}}{name}").text for name in _VECTORS}
    got = _frame_vectors(children, count)
    for name, values in zip(_VECTORS, got, strict=True):
        assert np.array_equal(values.view(np.uint64), plain[name][5].view(np.uint64)), name
    del children["velocity"]
    assert _frame_vectors(children, count)[2] is None
    # faults: the first in the order orientation, position, velocity, angular velocity, numbers before sizes
    start = text.index("<orientation>", text.index('index="2"')) + len("<orientation>")
    bad_orientation = text[:start] + "x" + text[start + 1 :]
    position = text[text.index("<position>", start) : text.index("</position>", start) + 11]
    velocity = text[text.index("<velocity>", start) : text.index("</velocity>", start) + 11]
    cases = [
        ("frame 2: <orientation> has a value that is not a number", bad_orientation),
        ("frame 2: <orientation> has a value that is not a number", bad_orientation.replace(position, "", 1)),
        ("frame 2 has no <position>", text.replace(position, "", 1)),
        ("frame 2: <velocity> has 0 values, expected 69", text.replace(velocity, "<velocity/>", 1)),
        (
            "frame 2: <position> has 70 values, expected 69",
            text.replace(position, position[:10] + "1 " + position[10:], 1),
        ),
    ]
    for message, variant in cases:
        path.write_text(variant)
        with pytest.raises(MvnxError, match=re.escape(message)):
            read_mvnx(path)
