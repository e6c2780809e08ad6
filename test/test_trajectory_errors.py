"""The whole-trajectory errors (retarget/trajectory_errors.py) against pinocchio and the per-sample evaluator,
and the vectorised trajectory.csv against the csv module's rows."""

from __future__ import annotations

import csv

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.metrics import TrackingEvaluator
from dynik_ros.core.targets import Measurements
from dynik_ros.retarget import Retargeter
from dynik_ros.retarget.fixed_products import times_fixed
from dynik_ros.retarget.trajectory_errors import (
    _frame_positions,
    _frame_rotations,
    _joint_chains,
    joint_kinematics,
    trajectory_errors,
)


def _random_states(robot, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = robot.model
    lower = np.maximum(model.lowerPositionLimit, -1.0)  # the free-flyer's "unbounded" is +-1.8e308
    upper = np.minimum(model.upperPositionLimit, 1.0)
    q = np.array([pin.randomConfiguration(model, lower, upper) for _ in range(n)])
    v = rng.normal(size=(n, model.nv))
    return q, v


@pytest.mark.parametrize("name", ["g1", "icub", "talos"])
def test_joint_kinematics_matches_pinocchio(name):
    """Placements and world angular velocities of every joint equal pinocchio's forwardKinematics(q, v)
    (iCub has unaligned revolute axes, all have a free-flyer)."""
    robot = Retargeter.from_config(name).robot
    model, data = robot.model, robot.model.createData()
    q, v = _random_states(robot, 20, seed=3)
    joints = list(range(1, model.njoints))
    placements, omegas = joint_kinematics(model, q, v, joints)
    for k in range(len(q)):
        pin.forwardKinematics(model, data, q[k], v[k])
        for c, j in enumerate(joints):
            np.testing.assert_allclose(placements[k, c], data.oMi[j].homogeneous, atol=1e-12)
            np.testing.assert_allclose(omegas[k, c], data.oMi[j].rotation @ data.v[j].angular, atol=1e-12)


def test_trajectory_errors_match_the_per_sample_evaluator():
    rt = Retargeter.from_config("g1")
    robot, targets = rt.robot, rt.targets
    q, v = _random_states(robot, 15, seed=5)
    rng = np.random.default_rng(7)
    data = robot.model.createData()
    measurements = []
    for k in range(len(q)):  # targets near forward kinematics of a perturbed q, so errors are not trivial
        qk = pin.integrate(robot.model, q[k], 0.1 * rng.normal(size=robot.model.nv))
        pin.framesForwardKinematics(robot.model, data, qk)
        rot = np.array([data.oMf[robot.frame_id(t.frame)].rotation for t in targets.orientation_targets])
        pos = np.array([data.oMf[robot.frame_id(t.frame)].translation for t in targets.position_targets])
        omega = None if k % 4 == 3 else rng.normal(size=(targets.n_orientation, 3))
        measurements.append(Measurements(pos, rot, None, omega))
    feet = [f.frame for f in rt.config.feet]
    soles = [np.asarray(f.sole, dtype=float).reshape(-1, 3) for f in rt.config.feet]
    contacts = rng.integers(-1, min(len(s) for s in soles), size=(len(q), len(feet)))
    errors = trajectory_errors(robot, targets, q, v, measurements, feet, soles, contacts)
    evaluator = TrackingEvaluator(robot, targets)
    for k in range(len(q)):
        one = evaluator.evaluate(q[k], v[k], measurements[k])
        assert errors.mnte[k] == pytest.approx(one.mnte, abs=1e-14)
        assert errors.position_rmse[k] == pytest.approx(one.position_rmse, abs=1e-14)
        if measurements[k].angular_velocities is None:
            assert np.isnan(errors.angular_velocity_rmse[k])
        else:
            assert errors.angular_velocity_rmse[k] == pytest.approx(one.angular_velocity_rmse, abs=1e-12)
        pin.framesForwardKinematics(robot.model, data, q[k])
        for f, frame in enumerate(feet):
            placement = data.oMf[robot.frame_id(frame)]
            np.testing.assert_allclose(errors.foot_positions[k, f], placement.translation, atol=1e-12)
            if contacts[k, f] < 0:
                assert np.isnan(errors.contact_points[k, f]).all()
            else:
                point = placement.act(soles[f][contacts[k, f]])
                np.testing.assert_allclose(errors.contact_points[k, f], point, atol=1e-12)
        for o, t in enumerate(targets.orientation_targets):
            rel = data.oMf[robot.frame_id(t.frame)].rotation.T @ measurements[k].rotations[o]
            assert errors.orientation_error[k, o] == pytest.approx(np.linalg.norm(pin.log3(rel)), abs=1e-6)


def test_trajectory_csv_rows_are_the_csv_modules(tmp_path):
    """write_csv formats rows itself (speed); the file is what csv.writer wrote before, byte for byte."""
    from types import SimpleNamespace

    from dynik_ros.cli.retarget import write_csv

    robot = Retargeter.from_config("g1").robot
    q, v = _random_states(robot, 6, seed=11)
    q[2, 9] = 1e-300
    v[3, 8] = -123456789.123
    times = np.array([0.0, 1 / 120, 2 / 120, 1.5, 2.0, 1e4])
    origin = 1_700_000_000_123_456_789
    path = write_csv(tmp_path / "t.csv", robot, SimpleNamespace(times=times, q=q, v=v), origin)
    expected = tmp_path / "expected.csv"
    with open(expected, "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        header = ["time", "base_x", "base_y", "base_z", "base_qx", "base_qy", "base_qz", "base_qw"]
        writer.writerow(header + list(robot.joint_names) + [f"{j}_velocity" for j in robot.joint_names])
        stamps = origin + np.round(times * 1e9).astype(np.int64)
        for k, stamp in enumerate(stamps.tolist()):
            sec, nanosec = divmod(stamp, 1_000_000_000)
            writer.writerow([f"{sec}.{nanosec:09d}"] + [f"{x:.9g}" for x in np.concatenate((q[k], v[k, 6:]))])
    assert path.read_bytes() == expected.read_bytes()


def test_times_fixed_is_numpys_stacked_product():
    """One flat BLAS product for a stack times a fixed matrix or vector (fixed_products.times_fixed) gives
    numpy's stacked ``@`` bit for bit, contiguous, strided (4x4 placements' 3x3 part) or broadcast stacks."""
    rng = np.random.default_rng(12)
    for n in (1, 5, 7200):
        stack = rng.normal(size=(n, 3, 3)) * 10.0 ** rng.integers(-4, 4, size=(n, 1, 1))
        strided = np.zeros((n, 4, 4))
        strided[:, :3, :3] = stack
        for s in (stack, strided[:, :3, :3], np.broadcast_to(np.eye(3), (n, 3, 3))):
            for fixed in (rng.normal(size=(3, 3)), rng.normal(size=3)):
                np.testing.assert_array_equal(times_fixed(s, fixed), s @ fixed)


@pytest.mark.parametrize("name", ["g1", "icub", "talos"])
def test_frame_poses_are_those_of_the_placements(name):
    """The frames' rotations and positions on the joint chains (one product per frame, no 4x4 placements)
    are the plain ``oMf = oMi iMf`` on joint_kinematics' placements, bit for bit (iCub's hand frames have a
    translation that rounds differently if einsum sees it contiguous)."""
    robot = Retargeter.from_config(name).robot
    model = robot.model
    q, v = _random_states(robot, 50, seed=13)
    ids = [i for i in range(1, len(model.frames)) if model.frames[i].parentJoint > 0]
    joints = sorted({model.frames[i].parentJoint for i in ids})
    placements, _ = joint_kinematics(model, q, v, joints)
    rot, pos, _ = _joint_chains(model, q, v, joints)
    joint = placements[:, [joints.index(model.frames[i].parentJoint) for i in ids]]
    local = np.array([model.frames[i].placement.homogeneous for i in ids])
    expected_rot = joint[:, :, :3, :3] @ local[:, :3, :3]
    expected_pos = joint[:, :, :3, 3] + np.einsum("nfij,fj->nfi", joint[:, :, :3, :3], local[:, :3, 3])
    np.testing.assert_array_equal(_frame_rotations(model, rot, ids), expected_rot)
    np.testing.assert_array_equal(_frame_positions(model, rot, pos, ids), expected_pos)


@pytest.mark.parametrize("name", ["g1", "icub"])
def test_summary_reads_the_errors_achieved_positions(name):
    """dynik-retarget's summary takes the position targets' frames from the errors' pass
    (result.achieved_positions) instead of placing them again: the same frame_positions of the written q at
    the samples, bit for bit, so the same summary as with them placed again."""
    from dataclasses import replace

    from dynik_ros.cli.retarget import synthetic_motion
    from dynik_ros.cli.retarget_summary import summarize
    from dynik_ros.retarget.trajectory_errors import frame_positions

    rt = Retargeter.from_config(name)
    motion = synthetic_motion("walking", 1.0, 60.0)
    result = rt.retarget_motion(motion, settle=0.1)
    frames = [t.frame for t in rt.targets.position_targets]
    np.testing.assert_array_equal(result.achieved_positions, frame_positions(rt.robot, result.q, frames))
    placed_again = replace(result, achieved_positions=np.zeros((0, len(frames), 3)))
    fast, plain = summarize(rt, result, motion, 0.1, 1.0), summarize(rt, placed_again, motion, 0.1, 1.0)
    assert fast.text == plain.text
    assert repr(fast.stats) == repr(plain.stats)
    moved = result.achieved_positions.copy()  # and it reads them: a frame 1 mm off moves the figures
    moved[len(moved) // 2] += 1e-3
    assert summarize(rt, replace(result, achieved_positions=moved), motion, 0.1, 1.0).stats != fast.stats
    q = result.q.copy()  # a result given another q (test_runaway_verdict) has its own frames placed
    q[:, 0] += 0.5
    other_q = summarize(rt, replace(result, q=q), motion, 0.1, 1.0)
    plain = summarize(rt, replace(placed_again, q=q), motion, 0.1, 1.0)
    assert other_q.text == plain.text and repr(other_q.stats) == repr(plain.stats)
    assert other_q.stats["base_error_max"] > 0.4
