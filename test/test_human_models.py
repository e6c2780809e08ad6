"""The Human66/Human48 generator (Rapetti et al. 2020, sec. 4.2) and its anthropometric tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from urdf_parser_py import urdf

from dynik_ros.models import anthropometry
from dynik_ros.models.human import (
    HUMAN_KINDS,
    XSENS_JOINTS,
    XSENS_PARENT,
    XSENS_SEGMENTS,
    Subject,
    human_urdf,
    main,
    pelvis_height,
    write_human_urdf,
)

URDF_DIR = Path(__file__).resolve().parents[1] / "urdf"
DEFAULT = Subject()
SMALL = Subject(height=1.5, mass=50.0, name="small")
TALL = Subject(height=1.9, mass=95.0, name="tall")
# Expected Human48 DoFs per Xsens joint (sides merged): 18 spine + 4 + 6 + 4 + 4 + 6 + 2 + 4 = 48.
HUMAN48_DOFS = {
    "jL5S1": 3, "jL4L3": 3, "jL1T12": 3, "jT9T8": 3, "jT1C7": 3, "jC1Head": 3,
    "T4Shoulder": 2, "Shoulder": 3, "Elbow": 2, "Wrist": 2, "Hip": 3, "Knee": 1, "Ankle": 2, "BallFoot": 0,
}  # fmt: skip


def _model(kind: str, subject: Subject = DEFAULT) -> pin.Model:
    return pin.buildModelFromXML(human_urdf(kind, subject), pin.JointModelFreeFlyer())


def _revolute(model: pin.Model) -> dict[str, tuple[float, float, float]]:
    """Joint name -> (lower, upper, velocity limit) of every revolute joint."""
    out = {}
    for j in range(2, model.njoints):  # 0: universe, 1: free-flyer base
        q, v = model.idx_qs[j], model.idx_vs[j]
        out[model.names[j]] = (
            model.lowerPositionLimit[q],
            model.upperPositionLimit[q],
            model.velocityLimit[v],
        )
    return out


def _placements(model: pin.Model, q: np.ndarray) -> dict[str, pin.SE3]:
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    return {f.name: data.oMf[i].copy() for i, f in enumerate(model.frames) if f.type == pin.FrameType.BODY}


def _z_extent(geometry: object, rotation: np.ndarray) -> float:
    """Half height of a URDF shape rotated by `rotation`."""
    if isinstance(geometry, urdf.Sphere):
        return geometry.radius
    if isinstance(geometry, urdf.Box):
        return float(np.abs(rotation[2]) @ (np.asarray(geometry.size) / 2))
    axis_z = abs(rotation[2, 2])  # cylinder axis = local z
    return axis_z * geometry.length / 2 + math.sqrt(1 - axis_z**2) * geometry.radius


def test_xsens_tree_has_23_links_and_22_named_joints() -> None:
    assert len(XSENS_SEGMENTS) == len(set(XSENS_SEGMENTS)) == 23
    assert XSENS_SEGMENTS[0] == "Pelvis"
    assert set(XSENS_PARENT) == set(XSENS_SEGMENTS[1:]) == set(XSENS_JOINTS)
    for child, parent in XSENS_PARENT.items():
        assert XSENS_SEGMENTS.index(parent) < XSENS_SEGMENTS.index(child)
    assert XSENS_PARENT["Neck"] == "T8" and XSENS_PARENT["LeftShoulder"] == "T8"
    assert XSENS_PARENT["RightUpperLeg"] == "Pelvis" and XSENS_PARENT["LeftToe"] == "LeftFoot"
    expected = {"jL5S1", "jL4L3", "jL1T12", "jT9T8", "jT1C7", "jC1Head"} | {
        f"j{side}{joint}"
        for side in ("Right", "Left")
        for joint in ("T4Shoulder", "Shoulder", "Elbow", "Wrist", "Hip", "Knee", "Ankle", "BallFoot")
    }
    assert set(XSENS_JOINTS.values()) == expected and len(expected) == 22


@pytest.mark.parametrize(("kind", "nv", "n_dummies"), [("human66", 72, 44), ("human48", 54, 28)])
def test_model_sizes_links_and_joint_names(kind: str, nv: int, n_dummies: int) -> None:
    model = _model(kind)
    assert (model.nq, model.nv) == (nv + 1, nv)
    bodies = [f.name for f in model.frames if f.type == pin.FrameType.BODY]
    assert set(XSENS_SEGMENTS) <= set(bodies)
    dummies = set(bodies) - set(XSENS_SEGMENTS)
    assert len(dummies) == n_dummies
    assert all(d.rsplit("_", 1)[0] in XSENS_SEGMENTS and d.rsplit("_", 1)[1] in ("f1", "f2") for d in dummies)
    robot = urdf.URDF.from_xml_string(human_urdf(kind))
    assert robot.name == kind
    for link in robot.links:
        if link.name in dummies:
            assert link.inertial is None and not link.visuals and not link.collisions
    for joint in robot.joints:
        if joint.type == "revolute":
            xsens_joint, axis = joint.name.rsplit("_rot", 1)
            assert xsens_joint in XSENS_JOINTS.values() and axis in "xyz"
            assert joint.axis == [float(a == axis) for a in "xyz"]
            if joint.parent in dummies:  # dummy links have zero size
                assert joint.origin is None or joint.origin.xyz == [0, 0, 0]


def test_human66_joints_are_spherical_rotx_roty_rotz_chains() -> None:
    model = _model("human66")
    for child, joint in XSENS_JOINTS.items():
        ids = [model.getJointId(f"{joint}_rot{axis}") for axis in "xyz"]
        assert ids[0] < model.njoints and model.parents[ids[1]] == ids[0] and model.parents[ids[2]] == ids[1]
        assert model.frames[model.getFrameId(child, pin.BODY)].parentJoint == ids[2]
        assert model.frames[model.getFrameId(f"{child}_f1", pin.BODY)].parentJoint == ids[0]
        assert model.frames[model.getFrameId(f"{child}_f2", pin.BODY)].parentJoint == ids[1]


def test_human66_limits_are_generous_but_finite() -> None:
    limits = _revolute(_model("human66"))
    assert len(limits) == 66
    for lower, upper, velocity in limits.values():
        assert (lower, upper) == pytest.approx((-math.pi, math.pi)) and velocity == pytest.approx(10.0)


def test_human48_dofs_and_anatomical_limits() -> None:
    limits = _revolute(_model("human48"))
    counts = dict.fromkeys(XSENS_JOINTS.values(), 0)
    for name in limits:
        counts[name.rsplit("_rot", 1)[0]] += 1
    for joint, n in counts.items():
        assert HUMAN48_DOFS[joint.removeprefix("jRight").removeprefix("jLeft")] == n, joint
    for name, (lower, upper, velocity) in limits.items():
        assert np.isfinite([lower, upper]).all() and lower < upper, name
        assert lower <= 0.0 <= upper, f"{name}: the zero (T-pose) configuration must be feasible"
        assert -math.pi <= lower and upper <= math.pi and velocity > 0.0, name
    for side in ("Right", "Left"):
        knee_lower, knee_upper, _ = limits[f"j{side}Knee_roty"]
        assert knee_upper - knee_lower >= 2.0 and knee_upper > 2.0  # flexion is positive about y
        assert knee_lower >= math.radians(-15)  # little hyperextension
        elbow_lower, elbow_upper, _ = limits[f"j{side}Elbow_rotz"]
        assert elbow_upper - elbow_lower >= 2.0
        hip_lower, hip_upper, _ = limits[f"j{side}Hip_roty"]  # flexion is negative about y
        assert hip_lower <= math.radians(-100) and hip_upper <= math.radians(45)
    for name in limits:  # no single spinal level moves more than 45 deg
        if name.startswith(("jL5S1", "jL4L3", "jL1T12", "jT9T8", "jT1C7", "jC1Head")):
            assert limits[name][1] - limits[name][0] <= math.radians(90), name
    thoracolumbar_flexion = sum(limits[f"{j}_roty"][1] for j in ("jL5S1", "jL4L3", "jL1T12", "jT9T8"))
    assert math.degrees(thoracolumbar_flexion) == pytest.approx(80.0)  # AAOS total
    # Right limits are the mirror image of the Left ones (y -> -y flips rotations about x and z).
    for name, (lower, upper, _) in limits.items():
        if name.startswith("jRight"):
            left_lower, left_upper, _ = limits["jLeft" + name.removeprefix("jRight")]
            mirrored = (left_lower, left_upper) if name.endswith("_roty") else (-left_upper, -left_lower)
            assert (lower, upper) == pytest.approx(mirrored), name


def test_anthropometric_fractions() -> None:
    masses = [anthropometry.segment(name).mass for name in XSENS_SEGMENTS]
    assert sum(masses) == pytest.approx(1.0, abs=1e-12)
    assert anthropometry.segment("LeftUpperArm") is anthropometry.segment("UpperArm")
    with pytest.raises(ValueError, match="unknown Xsens segment 'LeftTail'"):
        anthropometry.segment("LeftTail")
    # the vertical chain sole-ankle-knee-hip-C7-vertex is exactly the stature
    chain = ("UpperLeg", "LowerLeg", "Pelvis", "L5", "L3", "T12", "T8", "Neck", "Head")
    stature = (
        sum(anthropometry.segment(s).length for s in chain) + anthropometry.BODY_DIMENSIONS["ankle_height"]
    )
    assert stature == pytest.approx(1.0, abs=1e-12)
    for seg in anthropometry.SEGMENTS.values():
        assert 0.0 < seg.com < 1.0 and all(s > 0.0 for s in seg.spread())


@pytest.mark.parametrize("kind", HUMAN_KINDS)
@pytest.mark.parametrize("subject", [DEFAULT, SMALL, TALL], ids=lambda s: s.name)
def test_total_mass_equals_subject_mass(kind: str, subject: Subject) -> None:
    assert pin.computeTotalMass(_model(kind, subject)) == pytest.approx(subject.mass, abs=1e-6)


@pytest.mark.parametrize("kind", HUMAN_KINDS)
def test_inertias_are_physically_consistent(kind: str) -> None:
    model = _model(kind)
    for inertia in model.inertias[1:]:
        if inertia.mass > 0.0:
            moments = np.linalg.eigvalsh(inertia.inertia)  # about the COM
            assert moments[0] > 0.0 and moments[0] + moments[1] >= moments[2]


@pytest.mark.parametrize("kind", HUMAN_KINDS)
def test_zero_configuration_is_a_tpose_with_every_frame_aligned_to_the_pelvis(kind: str) -> None:
    model = _model(kind)
    q = pin.neutral(model)
    q[:7] = pin.SE3ToXYZQUAT(pin.SE3(pin.exp3(np.array([0.3, -0.7, 1.1])), np.array([1.0, 2.0, 0.9])))
    frames = _placements(model, q)
    pelvis = frames["Pelvis"]
    local = {name: pelvis.actInv(frames[name]) for name in XSENS_SEGMENTS}
    for name in XSENS_SEGMENTS:
        np.testing.assert_allclose(local[name].rotation, np.eye(3), atol=1e-12, err_msg=name)
    mirror = np.diag([1.0, -1.0, 1.0])
    for name in XSENS_SEGMENTS:
        if name.startswith("Left"):
            right = local["Right" + name.removeprefix("Left")].translation
            np.testing.assert_allclose(local[name].translation, mirror @ right, atol=1e-12)
    p = {name: local[name].translation for name in XSENS_SEGMENTS}
    np.testing.assert_allclose(p["Pelvis"], 0.0)
    assert p["Head"][2] > p["Neck"][2] > p["T8"][2] > p["T12"][2] > p["L3"][2] > p["L5"][2] > 0.0
    assert p["LeftHand"][1] > p["LeftForeArm"][1] > p["LeftUpperArm"][1] > p["LeftShoulder"][1] > 0.0
    assert p["LeftHand"][2] == pytest.approx(p["LeftUpperArm"][2])  # arms horizontal
    assert p["LeftFoot"][2] < p["LeftLowerLeg"][2] < p["LeftUpperLeg"][2] == pytest.approx(0.0)
    assert p["LeftToe"][0] > p["LeftFoot"][0]  # toes forward
    np.testing.assert_allclose(p["LeftUpperLeg"] + p["RightUpperLeg"], 0.0, atol=1e-12)  # hips midpoint


@pytest.mark.parametrize("kind", HUMAN_KINDS)
@pytest.mark.parametrize("subject", [DEFAULT, TALL], ids=lambda s: s.name)
def test_soles_at_minus_pelvis_height_and_vertex_at_stature(kind: str, subject: Subject) -> None:
    frames = _placements(_model(kind, subject), pin.neutral(_model(kind, subject)))
    lowest, highest = {}, {}
    for link in urdf.URDF.from_xml_string(human_urdf(kind, subject)).links:
        if link.collision is None:
            continue
        frame, origin = frames[link.name], link.collision.origin
        centre = frame.act(np.array(origin.xyz))
        half = _z_extent(link.collision.geometry, frame.rotation @ pin.rpy.rpyToMatrix(*origin.rpy))
        lowest[link.name], highest[link.name] = centre[2] - half, centre[2] + half
    standing = pelvis_height(subject)
    for foot in ("RightFoot", "RightToe", "LeftFoot", "LeftToe"):
        assert lowest[foot] == pytest.approx(-standing, abs=1e-8), foot
    assert min(lowest.values()) == pytest.approx(-standing, abs=1e-8)
    assert max(highest.values()) == pytest.approx(subject.height - standing, abs=1e-8)
    assert highest["Head"] == max(highest.values())
    assert 0.48 < standing / subject.height < 0.56


def test_lengths_scale_linearly_with_height_and_masses_with_mass() -> None:
    small, tall = _model("human48", SMALL), _model("human48", TALL)
    k_length, k_mass = TALL.height / SMALL.height, TALL.mass / SMALL.mass
    frames_small, frames_tall = _placements(small, pin.neutral(small)), _placements(tall, pin.neutral(tall))
    for name in frames_small:
        np.testing.assert_allclose(
            frames_tall[name].translation, k_length * frames_small[name].translation, atol=1e-8, err_msg=name
        )
    for a, b in zip(small.inertias[1:], tall.inertias[1:], strict=True):
        assert b.mass == pytest.approx(k_mass * a.mass, abs=1e-8)
        np.testing.assert_allclose(b.lever, k_length * a.lever, atol=1e-8)
        np.testing.assert_allclose(b.inertia, k_mass * k_length**2 * a.inertia, atol=1e-8)
    heavier = _model(
        "human48", Subject(height=SMALL.height, mass=TALL.mass)
    )  # kinematics depend on height only
    for a, b in zip(small.jointPlacements, heavier.jointPlacements, strict=True):
        np.testing.assert_allclose(a.translation, b.translation, atol=1e-12)


def test_default_subject_proportions_are_plausible() -> None:
    """Loose checks against common adult anthropometry (1.75 m, 75 kg)."""
    local = _placements(_model("human66"), pin.neutral(_model("human66")))
    p = {name: local[name].translation for name in XSENS_SEGMENTS}
    assert 0.14 < 2 * p["LeftUpperLeg"][1] < 0.20  # hip-joint centre separation
    assert 0.30 < 2 * p["LeftUpperArm"][1] < 0.42  # shoulder-joint centre separation
    assert 0.39 < p["LeftUpperLeg"][2] - p["LeftLowerLeg"][2] < 0.45  # thigh
    assert 0.26 < p["LeftForeArm"][1] - p["LeftUpperArm"][1] < 0.32  # upper arm
    arm_span = 2 * (p["LeftHand"][1] + anthropometry.segment("Hand").length * 1.75)
    assert 0.95 < arm_span / 1.75 < 1.08
    masses = {name: anthropometry.segment(name).mass * 75.0 for name in XSENS_SEGMENTS}
    assert 3.5 < masses["Head"] < 5.5 and 9.0 < masses["LeftUpperLeg"] < 12.0 and masses["LeftHand"] < 0.6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"height": 0.3}, "height must be a number within 0.5-2.5 m"),
        ({"height": 3.0}, "height"),
        ({"height": float("nan")}, "height"),
        ({"height": "tall"}, "height"),
        ({"mass": 2.0}, "mass must be a number within 5-300 kg"),
        ({"mass": -75.0}, "mass"),
        ({"name": "john doe"}, "name must be letters, digits"),
        ({"name": ""}, "name"),
    ],
)
def test_invalid_subject_raises_a_clear_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Subject(**kwargs)


def test_unknown_kind_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown human model kind 'human99'; valid kinds: human66, human48"):
        human_urdf("human99")
    with pytest.raises(ValueError, match="valid kinds"):
        write_human_urdf("Human66", Subject(), tmp_path / "x.urdf")
    assert not (tmp_path / "x.urdf").exists()


@pytest.mark.parametrize("kind", HUMAN_KINDS)
def test_shipped_urdf_matches_the_generator(kind: str) -> None:
    shipped = (URDF_DIR / f"{kind}.urdf").read_text(encoding="utf-8")
    assert shipped == human_urdf(kind), f"urdf/{kind}.urdf is stale: run `dynik-human-urdf --out urdf`"


def test_write_creates_directories(tmp_path: Path) -> None:
    path = write_human_urdf("human48", TALL, tmp_path / "a" / "b" / "tall.urdf")
    assert path == tmp_path / "a" / "b" / "tall.urdf"
    assert path.read_text(encoding="utf-8") == human_urdf("human48", TALL)


def test_cli_writes_the_requested_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for kind in HUMAN_KINDS:
        assert (tmp_path / f"{kind}.urdf").read_text(encoding="utf-8") == human_urdf(kind)
        assert f"wrote {tmp_path / kind}.urdf" in printed
    out = tmp_path / "named"
    argv = ["--kind", "human66", "--height", "1.6", "--mass", "55", "--name", "alice", "--out", str(out)]
    assert main(argv) == 0
    assert "human66_alice.urdf" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["human66_alice.urdf"]
    expected = human_urdf("human66", Subject(height=1.6, mass=55.0, name="alice"))
    assert (out / "human66_alice.urdf").read_text(encoding="utf-8") == expected
    with pytest.raises(SystemExit) as exit_info:
        main(["--height", "9", "--out", str(tmp_path / "bad")])
    assert exit_info.value.code == 2
    assert "height must be a number within 0.5-2.5 m" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
