"""Hinge alignment (retarget/hinge_alignment.py): ground truth from the robot's own forward kinematics."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.so3 import exp_so3
from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.hinge_alignment import HingeAlignment, find_hinge
from dynik_ros.retarget.retargeter import Retargeter


def _arm_rotations(retargeter, side: str, rng: np.random.Generator, count: int):
    """FK of ``count`` random arm postures (elbow bent 35-100 deg from straight): the targets' rotations."""
    robot = retargeter.robot
    q0 = retargeter.spec.calibration_configuration()
    frames = [t.frame for t in retargeter.targets.orientation_targets]
    out = np.repeat(np.eye(3)[None, None], count, axis=0).repeat(len(frames), axis=1)
    data = robot.model.createData()
    elbow = retargeter.hinges.hinges[0 if side == "left" else 1].joint
    for k in range(count):
        q = q0.copy()
        for name in robot.joint_names:
            if side in name and ("shoulder" in name or "wrist" in name):
                i = 7 + robot.joint_names.index(name)
                q[i] = rng.uniform(max(robot.lower[i - 7], -1.2), min(robot.upper[i - 7], 1.2))
        i = 7 + robot.joint_names.index(elbow)
        q[i] -= np.radians(rng.uniform(35.0, 100.0))  # G1 flexes towards lower values from straight (+90)
        pin.framesForwardKinematics(robot.model, data, q)
        for j, f in enumerate(frames):
            out[k, j] = data.oMf[robot.frame_id(f)].rotation
    return out


@pytest.fixture(scope="module")
def g1():
    return Retargeter.from_config("g1")


def test_g1_maps_its_elbows_as_hinges(g1):
    joints = [h.joint for h in g1.hinges.hinges]
    assert joints == ["left_elbow_joint", "right_elbow_joint"]
    for h in g1.hinges.hinges:
        assert abs(h.axis @ h.long_axis) < 1e-9 and np.linalg.norm(h.bend_side) == pytest.approx(1.0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_an_upper_arm_twisted_about_its_axis_is_put_back_by_the_bend(g1, side):
    """Reachable arm targets (FK) whose upper arm is turned 10-80 deg about its long axis, as a slipping
    suit sensor does: the alignment returns the true upper-arm orientation and leaves everything else."""
    rng = np.random.default_rng(3)
    truth = _arm_rotations(g1, side, rng, 40)
    h = g1.hinges.hinges[0 if side == "left" else 1]
    measured = truth.copy()
    twist = np.radians(rng.uniform(10.0, 80.0, len(truth))) * rng.choice([-1.0, 1.0], len(truth))
    measured[:, h.parent_row] = truth[:, h.parent_row] @ exp_so3(twist[:, None] * h.long_axis)
    aligned = g1.hinges.apply(measured)
    pairs = zip(aligned[:, h.parent_row], truth[:, h.parent_row], strict=True)
    error = np.linalg.norm(np.array([pin.log3(a.T @ t) for a, t in pairs]), axis=1)
    assert error.max() < 1e-6, np.degrees(error.max())
    others = [j for j in range(truth.shape[1]) if j != h.parent_row]
    assert aligned[:, others] == pytest.approx(measured[:, others], abs=1e-9)
    assert g1.hinges.apply(truth) == pytest.approx(truth, abs=1e-9)  # consistent targets are left alone


def test_a_straight_arm_is_left_alone(g1):
    """Near a straight arm the bending plane is undefined: the correction fades out."""
    rng = np.random.default_rng(4)
    h = g1.hinges.hinges[0]
    rotations = np.tile(np.eye(3), (1, len(g1.targets.orientation_targets), 1, 1))
    rotations[0, h.child_row] = rotations[0, h.parent_row] @ exp_so3(rng.normal(size=3) * 1e-3)
    aligned = g1.hinges.apply(rotations)
    assert np.linalg.norm(pin.log3(aligned[0, h.parent_row].T @ rotations[0, h.parent_row])) < 5e-3


def test_hinges_are_checked_against_the_orientation_targets():
    base = {
        "robot": {"name": "g1", "urdf": "x.urdf"},
        "root": {"link": "Pelvis", "frame": "pelvis"},
        "calibration": {},
        "targets": [{"link": "Pelvis", "frame": "pelvis", "position": True}],
    }
    with pytest.raises(RetargetConfigError, match="hinges"):
        config_from_dict({**base, "hinges": [["pelvis", "nowhere"]]})
    with pytest.raises(RetargetConfigError, match="hinges"):
        config_from_dict({**base, "hinges": ["pelvis"]})


def test_frames_off_one_chain_are_refused(g1):
    q = g1.spec.calibration_configuration()
    with pytest.raises(ValueError, match="one kinematic chain"):
        find_hinge(g1.robot, q, "left_wrist_roll_link", "right_wrist_roll_link", 0, 1)
    assert HingeAlignment([]).apply(np.eye(3)[None, None]) is not None


def test_one_live_sample_gets_the_same_correction_as_a_batch(g1):
    """ik_node aligns one sample at a time through a scalar path: it must agree with the array path."""
    rng = np.random.default_rng(5)
    truth = _arm_rotations(g1, "left", rng, 12)
    h = g1.hinges.hinges[0]
    twisted = truth.copy()
    twisted[:, h.parent_row] = truth[:, h.parent_row] @ exp_so3(rng.uniform(-1.2, 1.2, (12, 1)) * h.long_axis)
    batch = g1.hinges.apply(twisted)
    single = np.concatenate([g1.hinges.apply(twisted[k : k + 1]) for k in range(12)])
    assert single == pytest.approx(batch, abs=1e-12)


def test_on_a_real_walk_the_forearm_targets_fall_in_the_elbow_bending_plane(g1):
    """CMU 131_01 (optical mocap, test/data): out of the elbow's bending plane by up to tens of degrees as
    captured; after the alignment every sample bent past the fade-in lies in it (reachable by a bend plus
    the forearm's roll)."""
    from dynik_ros.io.bvh import read_bvh

    motion = read_bvh(__import__("pathlib").Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh")
    g1.reset()
    measurements, _ = g1.motion_measurements(motion)
    rotations = np.array([m.rotations for m in measurements])
    g1.reset()
    off = {}
    for label, table in (("aligned", rotations), ("raw", _unaligned(g1, motion))):
        for h in g1.hinges.hinges:
            d = np.einsum("nji,nj->ni", table[:, h.parent_row], table[:, h.child_row] @ h.child_long_axis)
            bend = np.arctan2(
                np.linalg.norm(d - np.outer(d @ h.long_axis, h.long_axis), axis=1), d @ h.long_axis
            )
            out_of_plane = np.degrees(np.arcsin(np.clip(np.abs(d @ h.axis), 0.0, 1.0)))
            off[label, h.joint] = out_of_plane[bend > g1.hinges.fade].max(initial=0.0)
    for h in g1.hinges.hinges:
        assert off["aligned", h.joint] < 1e-6, off
    assert max(off["raw", h.joint] for h in g1.hinges.hinges) > 5.0, off  # the capture did need it


def _unaligned(retargeter, motion) -> np.ndarray:
    hinges, retargeter.hinges = retargeter.hinges, HingeAlignment([])
    try:
        measurements, _ = retargeter.motion_measurements(motion)
    finally:
        retargeter.hinges = hinges
        retargeter.reset()
    return np.array([m.rotations for m in measurements])
