"""A robot outside the registry, mapped as README *Adding a robot (no code)* says: Romeo (example-robot-data),
whose shoulders cannot reach the T-pose the calibration asks for (``LShoulderYaw`` stops at 65 deg)."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.retarget.config import RetargetConfigError
from dynik_ros.retarget.human import human_tpose
from dynik_ros.retarget.retargeter import Retargeter

# The T-pose: each upper arm along +-y, level (solved on the URDF: the shoulder joints' frames are tilted),
# 92 deg of shoulder yaw where the joint stops at 65.3.
ROMEO = """
robot: {name: romeo, urdf: "example-robot-data:romeo_description/urdf/romeo.urdf"}
root: {link: Pelvis, frame: body}
calibration:
  base_rpy_deg: [0, 0, 0]
  joints_deg: {LShoulderPitch: 22.905, LShoulderYaw: 91.832, RShoulderPitch: 22.905, RShoulderYaw: -91.832}
  BEYOND
initial: {joints_deg: {}}
targets:
  - {link: Pelvis, frame: body, position: true, position_weight: 2.0}
  - {link: T8, frame: torso}
  - {link: LeftUpperArm, frame: LElbowRollLink}
  - {link: LeftForeArm, frame: LWristRollLink}
  - {link: RightUpperArm, frame: RElbowRollLink}
  - {link: RightForeArm, frame: RWristRollLink}
  - {link: LeftUpperLeg, frame: LHipPitchLink}
  - {link: LeftLowerLeg, frame: LKneePitchLink}
  - {link: LeftFoot, frame: l_sole, position: true, position_weight: 20.0,
     anchor: {link: LeftUpperLeg, frame: LHipRollLink}}
  - {link: RightUpperLeg, frame: RHipPitchLink}
  - {link: RightLowerLeg, frame: RKneePitchLink}
  - {link: RightFoot, frame: r_sole, position: true, position_weight: 20.0,
     anchor: {link: RightUpperLeg, frame: RHipRollLink}}
feet:
  left: {link: LeftFoot, toe: LeftToe, frame: l_sole, sole: [[-0.06, 0, 0], [0.15, 0, 0]]}
  right: {link: RightFoot, toe: RightToe, frame: r_sole, sole: [[-0.06, 0, 0], [0.15, 0, 0]]}
"""


def _romeo(tmp_path, beyond: str) -> str:
    path = tmp_path / "romeo.yaml"
    path.write_text(ROMEO.replace("BEYOND", beyond))
    return str(path)


def _upper_arm(rt: Retargeter, q: np.ndarray) -> np.ndarray:
    """World direction shoulder -> elbow of Romeo's left arm at ``q``."""
    d = rt.robot.frame_pose(q, "LElbowRollLink")[0] - rt.robot.frame_pose(q, "LShoulderYawLink")[0]
    return d / np.linalg.norm(d)


def test_a_t_pose_beyond_the_limits_is_refused_with_the_way_out(tmp_path):
    refused = r"LShoulderYaw: 91.83 deg is outside .*beyond_limits: true"
    with pytest.raises(RetargetConfigError, match=refused):
        Retargeter.from_config(_romeo(tmp_path, ""))


def test_a_t_pose_beyond_the_limits_gives_the_offsets_and_the_arms_follow_the_person(tmp_path):
    """Ground truth by forward kinematics: the calibration T-pose puts the upper arm along +y; the person's
    left arm swung 90 deg forward (about the shoulder, world z) must put Romeo's upper arm along +x, which
    its joints reach. Calibrated on the nearest pose inside the limits (65 deg, what a user had to write
    before), it points 26.5 deg off."""
    rt = Retargeter.from_config(_romeo(tmp_path, "beyond_limits: true"))
    np.testing.assert_allclose(_upper_arm(rt, rt.spec.calibration_configuration()), [0, 1, 0], atol=1e-4)
    poses = human_tpose()
    shoulder = np.asarray(poses["LeftUpperArm"][0])
    turn = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # R_z(-90 deg)
    for link in ("LeftUpperArm", "LeftForeArm", "LeftHand"):
        p, r = poses[link]
        poses[link] = (shoulder + turn @ (np.asarray(p) - shoulder), turn @ np.asarray(r))
    ik = rt.make_ik()
    start = rt.initial_configuration()
    assert np.all((rt.robot.lower <= start[7:]) & (start[7:] <= rt.robot.upper))  # the IK starts inside
    rt.reset()
    rt.settle(ik, rt.measurements({k: poses[k] for k in rt.links}, time=0.0), 3.0)
    arm = _upper_arm(rt, ik.q)
    assert np.degrees(np.arccos(np.clip(arm @ [1.0, 0.0, 0.0], -1.0, 1.0))) < 0.5, arm
    s = ik.q[7:]
    assert np.all((rt.robot.lower - 1e-9 <= s) & (s <= rt.robot.upper + 1e-9))


def test_the_flag_is_saved_and_read_back(tmp_path):
    from dynik_ros.retarget.config import config_from_dict

    rt = Retargeter.from_config(_romeo(tmp_path, "beyond_limits: true"))
    data = rt.config.to_dict()
    assert data["calibration"]["beyond_limits"] is True
    assert config_from_dict(data, "again.yaml").calibration_beyond_limits


def test_the_summary_margins_leave_out_the_joints_that_never_move(tmp_path, capsys):
    """Romeo's URDF locks its hands (velocity limit 0) and 20 finger joints mimic them, resting on a limit:
    dynik-retarget's summary said 'smallest joint-limit margin 0.00 deg (LFinger21)' and 44 % of the samples
    within 1 deg of a limit on any motion. Ground truth from the written trajectory, moving joints only."""
    import re

    from dynik_ros.cli.retarget import main

    out = tmp_path / "out"
    common = [
        "--motion",
        "walking",
        "--duration",
        "2",
        "--no-bag",
        "--no-plots",
        "--quiet",
        "--settle",
        "0.2",
    ]
    assert main(["--robot", _romeo(tmp_path, "beyond_limits: true"), *common, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rt = Retargeter.from_config(_romeo(tmp_path, "beyond_limits: true"))
    robot = rt.robot
    s = np.load(out / "retarget.npz")["q"][:, 7:]
    moving = np.array(
        [
            not robot.locked[i] and robot.mimic.get(j, ("",))[0] not in ("LHand", "RHand")
            for i, j in enumerate(robot.joint_names)
        ]
    )
    assert moving.sum() == robot.n_joints - 24 and robot.locked.sum() == 2
    near = np.minimum(s - robot.lower, robot.upper - s)[:, moving]
    margin = near.min(axis=0)
    line = re.search(r"smallest joint-limit margin \(joint\)\s+([\d.]+) deg \((\w+)", text)
    assert line is not None and line.group(2) == np.array(robot.joint_names)[moving][margin.argmin()]
    assert float(line.group(1)) == pytest.approx(np.degrees(margin.min()), abs=0.006)
    share = re.search(r"samples within 1 deg of a limit\s+([\d.]+) %", text)
    assert share is not None
    assert float(share.group(1)) == pytest.approx(100 * np.mean(near < np.radians(1.0)), abs=0.06)


def test_a_urdf_without_real_limits_is_named_when_the_map_is_loaded(tmp_path):
    """A URDF written with placeholder limits (a knee of +-1e30 rad, an ankle at 1e30 rad/s: URDF cannot say
    'none') loaded silently, and the IK then kept no human range or motor speed on those joints. The load
    now warns naming each; limits set in the map silence it."""
    import re
    import warnings

    from dynik_ros.retarget.registry import resolve_urdf

    urdf = resolve_urdf("example-robot-data:romeo_description/urdf/romeo.urdf").read_text()

    def edit(text: str, joint: str, pattern: str, value: str) -> str:
        start = text.index(f'<joint name="{joint}"')
        end = text.index("</joint>", start)
        return text[:start] + re.sub(pattern, value, text[start:end]) + text[end:]

    urdf = edit(urdf, "RKneePitch", r'lower="[^"]*" upper="[^"]*"', 'lower="-1e30" upper="1e30"')
    urdf = edit(urdf, "LAnklePitch", r'velocity="[^"]*"', 'velocity="1e30"')
    (tmp_path / "romeo_placeholder.urdf").write_text(urdf)
    text = ROMEO.replace("BEYOND", "beyond_limits: true").replace(
        "example-robot-data:romeo_description/urdf/romeo.urdf", "romeo_placeholder.urdf"
    )
    path = tmp_path / "romeo.yaml"
    path.write_text(text)
    named = r"do not limit LAnklePitch \(speed 1e\+30 rad/s\), RKneePitch \(range"
    with pytest.warns(UserWarning, match=named):
        Retargeter.from_config(str(path))
    path.write_text(text + "limits: {position_deg: {RKneePitch: [0, 115]}, velocity: {LAnklePitch: 2.1}}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt = Retargeter.from_config(str(path))
    assert rt.robot.velocity_limit[rt.robot.joint_index("LAnklePitch")] == pytest.approx(2.1)
