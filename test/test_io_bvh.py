"""BVH parser, forward kinematics and skeleton maps: synthetic files written from Human66 forward
kinematics (ground truth known), unit and up-axis handling, derived segments, hostile files."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from take_tools import xsens_ordered

from dynik_ros.io.bvh import (
    BvhError,
    SkeletonMapError,
    builtin_skeleton_maps,
    forward_kinematics,
    parse_bvh,
    read_bvh,
    segment_rotations,
    smoothed_twists,
    write_bvh,
)
from dynik_ros.io.capture_checks import CaptureError
from dynik_ros.io.human_motion import finite_difference_twists
from dynik_ros.models.segments import XSENS_SEGMENTS
from dynik_ros.retarget.human import human_tpose, synthetic_human_motion

MAPS = {m.name: m.segments for m in builtin_skeleton_maps()}


@pytest.fixture(scope="module")
def walk():
    return xsens_ordered(synthetic_human_motion("walking", duration=1.5, rate=60.0))


def _angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    rel = np.swapaxes(a, -1, -2) @ b
    return np.degrees(Rotation.from_matrix(rel.reshape(-1, 3, 3)).magnitude().reshape(rel.shape[:-2]))


def test_full_skeleton_round_trip_is_exact(tmp_path, walk):
    """All 23 segments under MVN's BVH names: the read poses equal Human66 forward kinematics."""
    path = write_bvh(walk, tmp_path / "walk.bvh", names=MAPS["mvn"])
    motion = read_bvh(path, check=False)
    assert "skeleton mvn, cm, y-up" in motion.source
    assert motion.notices == []
    np.testing.assert_allclose(motion.times, walk.times - walk.times[0], atol=1e-9)
    np.testing.assert_allclose(motion.positions, walk.positions, atol=2e-6)
    assert _angle_deg(motion.rotations, walk.rotations).max() < 1e-3
    # velocities: smoothed derivatives against the analytic ones of the synthetic motion
    inner = slice(3, -3)
    assert np.abs(motion.linear_velocities[inner] - walk.linear_velocities[inner]).max() < 0.05
    assert np.abs(motion.angular_velocities[inner] - walk.angular_velocities[inner]).max() < 0.3


@pytest.mark.parametrize("unit", ["m", "inch", "mm"])
def test_units_are_detected_from_the_stature(tmp_path, walk, unit):
    path = write_bvh(walk, tmp_path / "walk.bvh", names=MAPS["mvn"], unit=unit)
    motion = read_bvh(path, check=False)
    assert f", {unit}, " in motion.source
    np.testing.assert_allclose(motion.positions, walk.positions, atol=1e-3 if unit == "m" else 1e-5)


def test_cmu_skeleton_derives_missing_segments(tmp_path, walk):
    """A CMU-named skeleton without L5 and T12: mapped segments keep the true orientations, the derived
    ones come within a few cm / degrees, and one notice lists them."""
    path = write_bvh(walk, tmp_path / "cmu.bvh", names=MAPS["cmu"])
    motion = read_bvh(path, check=False)
    assert "skeleton cmu" in motion.source
    derived = [n for n in motion.notices if "derived" in n]
    assert len(derived) == 1 and "['L5', 'T12']" in derived[0]
    index = {s: i for i, s in enumerate(XSENS_SEGMENTS)}
    mapped = [index[s] for s in MAPS["cmu"]]
    assert _angle_deg(motion.rotations[:, mapped], walk.rotations[:, mapped]).max() < 1e-3
    for s in ("L5", "T12"):
        i = index[s]
        assert np.linalg.norm(motion.positions[:, i] - walk.positions[:, i], axis=-1).max() < 0.03
        assert _angle_deg(motion.rotations[:, i], walk.rotations[:, i]).max() < 5.0


def test_mixamo_prefix_and_toes_from_the_foot(tmp_path, walk):
    names = {s: j for s, j in MAPS["mixamo"].items() if not s.endswith("Toe")}
    path = write_bvh(walk, tmp_path / "mixamo.bvh", names=names)
    motion = read_bvh(path, check=False)
    assert "skeleton mixamo" in motion.source
    assert any("RightToe" in n and "derived" in n for n in motion.notices)
    i, f = XSENS_SEGMENTS.index("RightToe"), XSENS_SEGMENTS.index("RightFoot")
    # the toe sits at the Human66 offset along the foot's axes: exact while the toe joint is straight
    forward = np.einsum("nij,j->ni", motion.rotations[:, f], [1.0, 0.0, 0.0])
    toe = motion.positions[:, i] - motion.positions[:, f]
    assert np.all(np.einsum("ni,ni->n", toe, forward) > 0.1)  # ahead of the ankle along the foot
    assert np.linalg.norm(motion.positions[:, i] - walk.positions[:, i], axis=-1).max() < 0.03


def test_rest_pose_not_a_tpose_is_turned_onto_it(tmp_path, walk):
    """A skeleton whose rest pose has the arms 70 deg down: the segment frames are corrected by the
    shortest rotation onto the T-pose directions (exact for a swing about the forward axis), with a notice;
    given the T-pose frame instead, the frames are exact too."""
    from scipy.spatial.transform import Rotation as R

    reference = dict(human_tpose())
    for side, sign in (("Right", 1.0), ("Left", -1.0)):
        pivot = reference[side + "UpperArm"][0]
        rot = R.from_rotvec([sign * math.radians(70.0), 0.0, 0.0]).as_matrix()
        for seg in ("UpperArm", "ForeArm", "Hand"):
            p, r = reference[side + seg]
            reference[side + seg] = (pivot + rot @ (p - pivot), rot @ r)
    path = write_bvh(walk, tmp_path / "rest.bvh", names=MAPS["mvn"], reference=reference)
    motion = read_bvh(path, check=False)
    assert any("rest pose is not a T-pose" in n and "RightUpperArm 70 deg" in n for n in motion.notices)
    np.testing.assert_allclose(motion.positions, walk.positions, atol=2e-6)
    assert _angle_deg(motion.rotations, walk.rotations).max() < 1e-3


def test_velocities_do_not_amplify_noise(walk):
    rng = np.random.default_rng(3)
    noisy = walk.positions + rng.normal(scale=0.002, size=walk.positions.shape)
    smooth, _ = smoothed_twists(walk.times, noisy, walk.rotations)
    raw, _ = finite_difference_twists(walk.times, noisy, walk.rotations)
    inner = slice(5, -5)
    err_smooth = np.sqrt(np.mean((smooth[inner] - walk.linear_velocities[inner]) ** 2))
    err_raw = np.sqrt(np.mean((raw[inner] - walk.linear_velocities[inner]) ** 2))
    assert err_smooth < 0.5 * err_raw


def test_channel_orders_and_six_channel_joints(tmp_path):
    """Forward kinematics honours the listed channel order and 6-channel joints (position channels are the
    joint's translation)."""
    text = """HIERARCHY
ROOT A
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Yrotation Xrotation Zrotation
  JOINT B
  {
    OFFSET 0 10 0
    CHANNELS 6 Xposition Yposition Zposition Xrotation Zrotation Yrotation
    End Site
    {
      OFFSET 0 5 0
    }
  }
}
MOTION
Frames: 1
Frame Time: 0.01
1 2 3 30 40 50 0 20 0 10 20 30
"""
    path = tmp_path / "tiny.bvh"
    path.write_text(text)
    data = parse_bvh(path)
    pos, rot = forward_kinematics(data)
    ra = Rotation.from_euler("YXZ", [30, 40, 50], degrees=True).as_matrix()
    rb = Rotation.from_euler("XZY", [10, 20, 30], degrees=True).as_matrix()
    np.testing.assert_allclose(pos[0, 0], [1, 2, 3], atol=1e-12)
    np.testing.assert_allclose(rot[0, 0], ra, atol=1e-12)
    np.testing.assert_allclose(pos[0, 1], np.array([1, 2, 3]) + ra @ [0, 20, 0], atol=1e-12)
    np.testing.assert_allclose(rot[0, 1], ra @ rb, atol=1e-12)


def test_hostile_files_give_one_clear_error(tmp_path, walk):
    good = write_bvh(walk, tmp_path / "good.bvh", names=MAPS["mvn"]).read_text().splitlines()
    motion_at = good.index("MOTION")

    bad = tmp_path / "truncated.bvh"
    bad.write_text("\n".join(good[:-10]) + "\n")
    with pytest.raises(BvhError, match=r"truncated\.bvh: 'Frames: 90' but 80 frame lines \(truncated\?\)"):
        read_bvh(bad)
    bad.write_text("\n".join(good[: motion_at + 5] + [good[motion_at + 5][:200]]) + "\n")
    with pytest.raises(BvhError, match=r"line \d+: frame 2: \d+ values, the hierarchy has 72 channels"):
        read_bvh(bad)
    bad.write_text("\n".join(good[:20]) + "\n")
    with pytest.raises(BvhError, match="unexpected end of file in the HIERARCHY section"):
        read_bvh(bad)

    lines = list(good)
    values = lines[motion_at + 8].split()
    values[10] = "nan"
    lines[motion_at + 8] = " ".join(values)
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(CaptureError, match=r"truncated\.bvh: frame 5: channel value is not finite"):
        read_bvh(bad)

    wrong = tmp_path / "take.bvh"
    wrong.write_text('<?xml version="1.0"?>\n<mvnx version="4"></mvnx>\n')
    with pytest.raises(BvhError, match=r"not a BVH file: starts with '<\?xml'"):
        read_bvh(wrong)

    with pytest.raises(SkeletonMapError, match="no skeleton map fits joints"):
        other = {s: f"bone{i}" for i, s in enumerate(XSENS_SEGMENTS)}
        read_bvh(write_bvh(walk, tmp_path / "odd.bvh", names=other))


def test_units_that_fit_no_human_are_refused(tmp_path, walk):
    giant = synthetic_human_motion("walking", duration=0.5, rate=60.0)
    giant.positions = giant.positions * 5.0  # an 8.75 m subject in metres
    reference = {s: (5.0 * p, r) for s, (p, r) in human_tpose().items()}
    path = write_bvh(giant, tmp_path / "giant.bvh", names=MAPS["mvn"], unit="m", reference=reference)
    with pytest.raises(BvhError, match=r"no unit \(m, cmu, cm, inch, mm\) makes it a human"):
        read_bvh(path)


def test_pelvis_at_zero_is_put_on_the_floor(tmp_path):
    stand = synthetic_human_motion("tpose", duration=0.5, rate=60.0)
    low = synthetic_human_motion("tpose", duration=0.5, rate=60.0)
    pelvis = list(low.links).index("Pelvis")
    low.positions = low.positions - np.array([0.0, 0.0, low.positions[0, pelvis, 2]])
    motion = read_bvh(write_bvh(low, tmp_path / "low.bvh", names=MAPS["mvn"]))
    assert any("floor" in n and "shifted" in n for n in motion.notices)
    pick = [list(stand.links).index(s) for s in XSENS_SEGMENTS]
    np.testing.assert_allclose(motion.positions, stand.positions[:, pick], atol=0.01)


def test_tpose_frame_is_the_reference_when_the_rest_pose_is_not_a_tpose(tmp_path):
    """Rest pose with the arms 70 deg down and the subject in T-pose at frame 0: the segment frames come
    from frame 0 (exact up to how far frame 0 itself is from the ideal T-pose), frame 0 becomes the
    calibration frame and leaves the take."""
    from scipy.spatial.transform import Rotation as R

    stand = synthetic_human_motion("tpose", duration=0.5, rate=60.0)
    pick = [list(stand.links).index(s) for s in XSENS_SEGMENTS]
    truth_p, truth_r = stand.positions[:, pick], stand.rotations[:, pick]
    stand.positions, stand.rotations, stand.links = truth_p, truth_r, list(XSENS_SEGMENTS)
    reference = dict(human_tpose())
    for side, sign in (("Right", 1.0), ("Left", -1.0)):
        pivot = reference[side + "UpperArm"][0]
        rot = R.from_rotvec([sign * math.radians(70.0), 0.0, 0.0]).as_matrix()
        for seg in ("UpperArm", "ForeArm", "Hand"):
            p, r = reference[side + seg]
            reference[side + seg] = (pivot + rot @ (p - pivot), rot @ r)
    path = write_bvh(stand, tmp_path / "t.bvh", names=MAPS["mvn"], reference=reference)
    motion = read_bvh(path, tpose_frame=0, check=False)
    assert len(motion) == len(truth_p) - 1 and "tpose" in motion.calibration
    assert not any("not a T-pose" in n for n in motion.notices)
    frame0_off = _angle_deg(truth_r[0], np.broadcast_to(np.eye(3), truth_r[0].shape))  # per segment
    err = _angle_deg(motion.rotations, truth_r[1:])
    assert np.all(err <= frame0_off[None] + 1e-3)
    np.testing.assert_allclose(motion.positions, truth_p[1:], atol=2e-6)


def test_a_users_skeleton_map_yaml(tmp_path, walk):
    """Joint names no built-in map knows, mapped by the user's YAML (and a bad map named on one line)."""
    names = {s: f"bone_{i:02d}" for i, s in enumerate(XSENS_SEGMENTS)}
    path = write_bvh(walk, tmp_path / "odd.bvh", names=names)
    mapping = tmp_path / "odd.yaml"
    mapping.write_text("name: odd\nsegments:\n" + "".join(f"  {s}: {j}\n" for s, j in names.items()))
    motion = read_bvh(path, skeleton=mapping, check=False)
    assert "skeleton odd" in motion.source
    np.testing.assert_allclose(motion.positions, walk.positions, atol=2e-6)
    mapping.write_text("name: odd\nsegments:\n  Pelvis: bone_00\n  LeftElbow: bone_13\n")
    with pytest.raises(SkeletonMapError, match=r"odd\.yaml: segments: \['LeftElbow'\] are not Xsens"):
        read_bvh(path, skeleton=mapping)


def test_a_rest_pose_lying_down_takes_the_first_frame_as_reference(tmp_path):
    """LAFAN1's rest pose lies (its root rotation stands the body up; the legs fold along the spine): its
    per-bone shortest rotations onto the T-pose gave legs turned half round (on a real LAFAN1 walk G1's legs
    MNTE 1.02, a hip 177 deg off). A file written with such a rest pose (the T-pose turned 90 deg about x,
    the legs then folded 180 deg about the hip axis) of a synthetic walk: the first frame, where the subject
    stands, is the reference, and the leg and trunk segments come back within 10 deg (the legs 180 deg off
    before)."""
    from scipy.spatial.transform import Rotation as R

    walk = synthetic_human_motion("walking", duration=2.0, rate=60.0)
    pick = [list(walk.links).index(s) for s in XSENS_SEGMENTS]
    truth_p, truth_r = walk.positions[:, pick], walk.rotations[:, pick]
    walk.positions, walk.rotations, walk.links = truth_p, truth_r, list(XSENS_SEGMENTS)
    tpose = dict(human_tpose())
    pelvis = tpose["Pelvis"][0]
    lie = R.from_rotvec([math.radians(90.0), 0.0, 0.0]).as_matrix()
    reference = {s: (pelvis + lie @ (p - pelvis), lie @ r) for s, (p, r) in tpose.items()}
    fold = R.from_rotvec(lie @ [0.0, math.pi, 0.0]).as_matrix()  # about the lying body's hip axis
    for side in ("Left", "Right"):
        hip = reference[side + "UpperLeg"][0]
        for seg in ("UpperLeg", "LowerLeg", "Foot", "Toe"):
            p, r = reference[side + seg]
            reference[side + seg] = (hip + fold @ (p - hip), fold @ r)
    path = write_bvh(walk, tmp_path / "lying.bvh", names=MAPS["lafan1"], reference=reference)
    motion = read_bvh(path, check=False)
    assert "skeleton lafan1" in motion.source
    assert any("the rest pose lies" in n for n in motion.notices), motion.notices
    mapped = [XSENS_SEGMENTS.index(s) for s in MAPS["lafan1"]]  # positions of the joints in the file: exact
    np.testing.assert_allclose(motion.positions[:, mapped], truth_p[:, mapped], atol=2e-6)
    legs = [
        XSENS_SEGMENTS.index(f"{side}{seg}")
        for side in ("Left", "Right")
        for seg in ("UpperLeg", "LowerLeg", "Foot")
    ]
    trunk = [XSENS_SEGMENTS.index(s) for s in ("Pelvis", "T8")]
    err = _angle_deg(motion.rotations[:, legs + trunk], truth_r[:, legs + trunk])
    assert err.max() <= 10.0, err.max(axis=0)


@pytest.mark.parametrize("frames", [1, 7, 3001])
def test_the_segment_frames_are_einsums_products_bit_for_bit(frames):
    """``segment_rotations`` (read_bvh's ``W(t) W(ref)^T A`` of every segment at every frame, issue 9's speed
    target) gives ``np.einsum("nlij,lkj,lkm->nlim")``'s values bit for bit: rotations, arbitrary matrices of
    every scale, exact zeros of both signs (a sum of -0 terms is +0 in einsum)."""
    rng = np.random.default_rng(frames)
    n_links = 23
    world = Rotation.random(frames * n_links, random_state=frames).as_matrix().reshape(frames, n_links, 3, 3)
    world[:, :3] = rng.normal(size=(frames, 3, 3, 3)) * rng.choice([1e-8, 1.0, 1e8], size=(frames, 3, 1, 1))
    world[:, 3, :, 0] = -0.0
    world[:, 4] = np.where(rng.random((frames, 3, 3)) < 0.5, -0.0, 0.0)
    reference = Rotation.random(n_links, random_state=1).as_matrix()
    align = Rotation.random(n_links, random_state=2).as_matrix()
    reference[5], align[6] = np.eye(3), -np.eye(3)
    reference[4, 1, :] = -0.0
    expected = np.einsum("nlij,lkj,lkm->nlim", world, reference, align)
    got = segment_rotations(world, reference, align)
    assert got.shape == expected.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("frames", [1, 7, 301])
def test_identity_references_skip_the_products_bit_for_bit(frames):
    """With every reference and alignment an identity (signed zeros off the diagonal), ``segment_rotations``
    skips the products: still einsum's values and signs bit for bit (``-0`` in ``W`` gives ``+0``); an
    infinite entry (``0 * inf`` is NaN in the sums) or a ``-1`` on a diagonal takes the products."""
    rng = np.random.default_rng(frames)
    n_links = 23
    world = Rotation.random(frames * n_links, random_state=frames).as_matrix().reshape(frames, n_links, 3, 3)
    scales = rng.choice([1e-300, 1.0, 1e300], size=(frames, 3, 1, 1))
    world[:, :3] = rng.normal(size=(frames, 3, 3, 3)) * scales
    world[:, 3, :, 0] = -0.0
    world[:, 4] = np.where(rng.random((frames, 3, 3)) < 0.5, -0.0, 0.0)
    signed = np.where(np.eye(3, dtype=bool), 1.0, np.where(rng.random((2, n_links, 3, 3)) < 0.5, -0.0, 0.0))
    reference, align = signed
    cases = [(world, reference, align)]
    flipped = align.copy()
    flipped[2, 1, 1] = -1.0
    infinite = world.copy()
    infinite[0, 5, 1, 2] = np.inf
    cases += [(world, reference, flipped), (infinite, reference, align)]
    for w, r, a in cases:
        expected = np.einsum("nlij,lkj,lkm->nlim", w, r, a)
        got = segment_rotations(w, r, a)
        assert got.shape == expected.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
        assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("deriv", [0, 1])
def test_the_savitzky_golay_filter_in_chunks_is_the_whole_take_product_bit_for_bit(deriv):
    """``savgol`` filters ``SAVGOL_CHUNK`` windows at a time (a scaled copy of the whole take's windows cost
    most of the filter): the interior samples are ``(scale * windows) @ fit[deriv]`` of the whole take at
    once, bit for bit, across chunk boundaries and a last partial chunk."""
    import math

    from dynik_ros.io.human_motion import SAVGOL_CHUNK, savgol

    rng = np.random.default_rng(deriv)
    length, n = 25, 3 * SAVGOL_CHUNK + 57
    values = rng.normal(size=(n, 23, 3)) * rng.choice([1e-3, 1.0, 1e3], size=(1, 23, 1))
    delta = 1.0 / 120.0
    fit = np.linalg.pinv(np.vander(np.arange(length) - length // 2, 4, increasing=True))
    windows = np.lib.stride_tricks.sliding_window_view(values.reshape(n, -1), length, axis=0)
    expected = math.factorial(deriv) / delta**deriv * windows @ fit[deriv]
    got = savgol(values, length, 3, deriv=deriv, delta=delta).reshape(n, -1)
    np.testing.assert_array_equal(got[length // 2 : n - length // 2], expected)


@pytest.mark.parametrize("frames", [2, 3, 50])
def test_the_angular_differences_on_views_are_the_gathered_products_bit_for_bit(frames):
    """``_angular_difference`` multiplies the middle rows on views of the take, not on the gathered copies
    ``R[after] @ R[before]^T``: the same values bit for bit, for a C-ordered take and one that is not."""
    from dynik_ros.io.human_motion import _angular_difference
    from dynik_ros.io.rotation_vectors import rotation_vectors

    rotations = Rotation.random(frames * 23, random_state=frames).as_matrix().reshape(frames, 23, 3, 3)
    times = np.cumsum(np.r_[0.0, np.full(frames - 1, 1.0 / 120.0)])
    after, before = np.r_[np.arange(1, frames), frames - 1], np.r_[0, np.arange(0, frames - 1)]
    for take in (rotations, np.asfortranarray(rotations), rotations.transpose(0, 1, 3, 2)):
        relative = take[after] @ np.swapaxes(take[before], -1, -2)
        dt = (times[after] - times[before])[:, None, None]
        expected = rotation_vectors(relative.reshape(-1, 3, 3)).reshape(frames, 23, 3) / dt
        got = _angular_difference(times, np.zeros((frames, 23, 3)), take)
        assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))


def test_frame_lines_read_at_once_are_the_floats_of_one_array_per_line(tmp_path):
    """``parse_bvh`` reads the frame lines with ``loadtxt`` at once (issue 9's speed target): the same floats
    as ``np.array(line.split(), dtype=float)`` per line, bit for bit, on numbers of every spelling and
    length (shortest repr of random doubles, 17 digits, exponents, signed zeros, subnormals, halfway
    cases); a spelling only the per-line reader takes (``1_0``, tabs and blank lines aside) still reads."""
    rng = np.random.default_rng(7)
    n_frames, n_channels = 40, 9
    raw = rng.standard_normal((n_frames, n_channels)) * 10.0 ** rng.integers(-8, 8, (n_frames, n_channels))
    tokens = [[repr(float(x)) for x in row] for row in raw]
    tokens[0][:6] = ["-0", "0.0", "-0.0e-3", "4.9e-324", "2.2250738585072011e-308", "9007199254740993"]
    tokens[1][:5] = ["0.1000000000000000055511151231257827", "1e22", "+3.5", ".5", "7."]
    tokens[2] = [f"{x:.17g}" for x in raw[2]]
    tokens[3] = [f"{x:.3f}" for x in raw[3]]
    head = ["HIERARCHY", "ROOT Hips", "{", " OFFSET 0 0 0", " CHANNELS 6 Xposition Yposition Zposition "
            "Zrotation Xrotation Yrotation", " JOINT Spine", " {", "  OFFSET 0 1 0",
            "  CHANNELS 3 Zrotation Xrotation Yrotation", "  End Site", "  {", "   OFFSET 0 1 0", "  }", " }",
            "}", "MOTION", f"Frames: {n_frames}", "Frame Time: 0.01"]  # fmt: skip
    body = ["\t".join(t) if k % 5 == 0 else " ".join(t) for k, t in enumerate(tokens)]
    path = tmp_path / "numbers.bvh"
    path.write_text("\n".join(head + body[:20] + ["   "] + body[20:]) + "\n")
    plain = np.array([np.array(line.split(), dtype=float) for line in body])
    values = parse_bvh(path).values
    assert values.dtype == plain.dtype and values.shape == plain.shape
    assert values.tobytes() == plain.tobytes()
    assert values[0, 0] == 0.0 and math.copysign(1.0, values[0, 0]) == -1.0  # (-0 kept)

    body[4] = body[4].replace(tokens[4][0], "1_0", 1)  # numpy's str cast takes it, loadtxt does not
    path.write_text("\n".join(head + body) + "\n")
    assert parse_bvh(path).values[4, 0] == 10.0
