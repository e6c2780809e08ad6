"""Held soles stand on the floor (issue 9, "on the ground"): ``contact.held_gain`` (retarget/held_gain.py,
``Measurements.min_gain`` in the core) and the level blend's ``contact.blend_shape`` (retarget/scaling.py).
Ground truth: the planted synthetic walk, whose feet are exactly on the floor, and forward kinematics and
finite differences of the written trajectory; the IK step against an IK with those gains configured."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin
import pytest
from take_tools import (
    assert_row_field_acts_as_the_target_change,
    assert_row_field_refuses,
    written_sole_heights,
)
from test_swing_weight import _one_leg_sway

from dynik_ros.cli import retarget as cli
from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.held_gain import held_min_gains
from dynik_ros.retarget.retargeter import Retargeter

ON_THE_GROUND_MM = 2.0  # the capture table's "on the ground" target (the depth, mirrored)
UNDER_MM = 0.5  # the floor rows keep the corners on or above the floor (test_floor_rows: within this)


def _planted(tmp_path, robot: str, *options: str):
    """``dynik-retarget --motion planted_walk`` (6 s, 100 Hz) on ``robot``: the output directory."""
    out = tmp_path / (robot + "".join(options).replace("-", "_"))
    argv = ["--robot", robot, "--motion", "planted_walk", "--duration", "6", "--rate", "100"]
    assert cli.main(argv + ["--out", str(out), "--no-bag", "--no-plots", "--quiet", *options]) == 0
    return out


@pytest.mark.parametrize("robot", ["g1", "talos"])
def test_held_soles_of_the_planted_walk_stand_on_the_floor(tmp_path, robot):
    """The planted walk's human feet stand exactly on the floor: over the flat part of every contact the
    lowest corner of each robot sole is within 2 mm above the floor (5-6 mm with the gains as configured,
    ``--held-gain 0 --blend-shape linear``: the foot lands where its target steps down to the floor and
    comes down at K = 10 /s), never under it, and no joint leaves its position or velocity limits (finite
    differences of the written trajectory)."""
    half = Retargeter.from_config(robot).config.balance.sole_half_width
    out = _planted(tmp_path, robot)
    heights, flat = written_sole_heights(out, robot, half)
    assert flat[:, 0].sum() > 100 and flat[:, 1].sum() > 100  # both feet stand for seconds
    assert 1e3 * heights[flat].max() <= ON_THE_GROUND_MM
    assert 1e3 * heights.min() >= -UNDER_MM
    data = np.load(out / "retarget.npz")
    rt = Retargeter.from_config(robot)
    joints = data["q"][:, 7:]
    assert (joints >= rt.robot.lower - 1e-9).all() and (joints <= rt.robot.upper + 1e-9).all()
    speeds = np.abs(np.diff(joints, axis=0)) / np.diff(data["times"])[:, None]
    assert (speeds <= rt.robot.velocity_limit * (1 + 1e-6)).all()
    off = _planted(tmp_path, robot, "--held-gain", "0", "--blend-shape", "linear")
    before, flat_before = written_sole_heights(off, robot, half)
    assert 1e3 * before[flat_before].max() > 2 * ON_THE_GROUND_MM


def test_the_bounds_are_the_gain_on_a_held_foots_height_row_only():
    rt = Retargeter.from_config("g1")
    held = np.array([[True, False], [False, False], [True, True]])
    bounds = held_min_gains(40.0, rt.targets, rt._foot_rows, held)
    for k in range(len(held)):
        expected = np.zeros(3 * (rt.targets.n_position + rt.targets.n_orientation))
        for f in np.flatnonzero(held[k]):
            expected[3 * rt._foot_rows[f] + 2] = 40.0
        np.testing.assert_array_equal(bounds[k], expected)
    assert held_min_gains(0.0, rt.targets, rt._foot_rows, held) == [None] * 3


def test_a_step_with_gain_bounds_is_the_step_with_those_gains():
    """The IK step with ``min_gain`` 40 on the left foot's position rows equals the step of an IK whose left
    foot position gain is 40 (same q after 20 steps); bounds under the configured gains change nothing."""
    rt = Retargeter.from_config("g1")
    rt.config = dataclasses.replace(rt.config, contact=dataclasses.replace(rt.config.contact, held_gain=0.0))
    measurements, _ = rt.motion_measurements(_one_leg_sway(duration=0.3))
    assert all(m.min_gain is None for m in measurements)
    assert_row_field_acts_as_the_target_change(
        rt, measurements, "left_ankle_roll_link", "min_gain", 40.0, 1.0,
        lambda t: dataclasses.replace(t, position_gain=40.0),
    )  # fmt: skip


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_negative_or_non_finite_gain_bound_is_refused(bad):
    rt = Retargeter.from_config("g1")
    m, _ = rt.motion_measurements(_one_leg_sway(duration=0.05))
    assert_row_field_refuses(rt, m[0], "min_gain", 0.0, bad)


def test_the_smooth_blend_levels_the_sole_with_no_rate_left_at_its_end():
    """A foot landing heel first (20 deg toe up) on a still human: the orientation target turns level over
    ``blend_time``; its angular-velocity feed-forward is the finite difference of the targets (both shapes),
    and with ``smooth`` it falls to 0 over the second half of the blend (``linear``: the whole turn's rate,
    its angle / 0.1 s, up to the last sample of the blend, then 0)."""
    rates = {}
    for shape in ("smooth", "linear"):
        rt = Retargeter.from_config("g1")
        contact = dataclasses.replace(rt.config.contact, blend_shape=shape)
        rt.config = dataclasses.replace(rt.config, contact=contact)
        rt.set_calibration(rt.calibration)
        motion = _one_leg_sway(duration=0.4, rate=200.0)
        foot = motion.links.index("RightFoot")
        toe = motion.links.index("RightToe")
        pitch = pin.rpy.rpyToMatrix(0.0, -math.radians(20.0), 0.0)
        heel = motion.positions[0, foot].copy()
        for link in (foot, toe):  # the foot pitched about its heel (the foot link), toe up, held still
            lever = motion.positions[:, link] - heel
            motion.positions[:, link] = heel + lever @ pitch.T
            motion.rotations[:, link] = pitch @ motion.rotations[:, link]
        measurements, flags = rt.motion_measurements(motion)
        row = list(rt._foot_ori_rows)[list(rt._foot_ori_feet).index(1)]
        r = np.array([m.rotations[row] for m in measurements])
        w = np.array([m.angular_velocities[row] for m in measurements])
        start = int(np.flatnonzero(flags[:, 1] >= 0)[0])
        dt = 1.0 / 200.0
        blend = round(rt.config.contact.blend_time / dt)
        assert np.degrees(np.arccos(r[start + blend, 2, 2])) < 0.01  # level at the end of the blend
        for k in range(start + 1, start + blend):
            change = pin.log3(r[k + 1] @ r[k - 1].T) / (2 * dt)  # central difference, world frame
            assert np.linalg.norm(change - w[k]) < 0.06 * math.radians(20.0) / 0.1, (shape, k)
        rates[shape] = np.linalg.norm(w[start + blend // 2 : start + blend + 1], axis=1)
        turn_rate = np.linalg.norm(pin.log3(r[start + blend] @ r[start].T)) / 0.1  # the linear blend's
    assert rates["linear"][:-1] == pytest.approx(turn_rate, rel=0.05) and rates["linear"][-1] < 1e-9
    # smooth: the rate falls to 0 over the second half of the blend, 6 / 20 of the linear one a sample before
    assert (np.diff(rates["smooth"]) < 0).all() and rates["smooth"][-1] < 1e-9
    assert rates["smooth"][-2] < 0.3 * turn_rate


def test_the_map_and_the_cli_set_the_held_gain_and_the_blend_shape(tmp_path):
    data = {
        "robot": {"name": "x", "urdf": "x.urdf"},
        "root": {"link": "Pelvis", "frame": "pelvis"},
        "calibration": {"base_rpy_deg": [0, 0, 0], "joints_deg": {}},
        "targets": [{"link": "Pelvis", "frame": "pelvis", "position": True}],
        "contact": {"held_gain": -1.0},
    }
    with pytest.raises(RetargetConfigError, match="contact.held_gain"):
        config_from_dict(data, "bad.yaml")
    data["contact"] = {"blend_shape": "cubic"}
    with pytest.raises(RetargetConfigError, match="contact.blend_shape"):
        config_from_dict(data, "bad.yaml")
    data["contact"] = {"held_gain": 25.0, "blend_shape": "linear"}
    saved = config_from_dict(data, "ok.yaml").to_dict()["contact"]
    assert saved["held_gain"] == 25.0 and saved["blend_shape"] == "linear"
    again = config_from_dict({**data, "contact": saved}, "again.yaml")
    assert again.contact == config_from_dict(data, "ok.yaml").contact
    defaults = Retargeter.from_config("g1").config.contact
    assert defaults.held_gain == 40.0 and defaults.blend_shape == "smooth"
    with pytest.raises(SystemExit):
        cli.main(["--robot", "g1", "--motion", "tpose", "--held-gain", "-2", "--out", str(tmp_path)])
