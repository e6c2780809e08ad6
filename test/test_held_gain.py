"""Held soles stand on the floor (issue 9, "on the ground") and level: ``contact.held_gain`` and
``contact.held_tilt_gain`` (retarget/held_gain.py, ``Measurements.min_gain`` in the core) and the level
blend's ``contact.blend_shape`` (retarget/foot_contact.py). Ground truth: the planted synthetic walk, whose
feet are exactly on the floor, a straddle landing beyond the ankle roll's reach, and forward kinematics and
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
from test_blend_last_step import heel_first
from test_leg_reach import _straddle
from test_swing_weight import _one_leg_sway

from dynik_ros.cli import retarget as cli
from dynik_ros.io.human_motion import finite_difference_twists
from dynik_ros.motion.planted_walk import min_jerk
from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.foot_figures import foot_figures
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


def test_the_bounds_are_the_gains_on_a_held_foots_height_and_tilt_rows_only():
    """``held_gain`` on the world z row of a held foot's position target, ``held_tilt_gain`` on the world x
    and y rows of its orientation target (eq. 5 stacks the orientation rows after the position rows), 0 on
    every other row and on the feet in the air."""
    rt = Retargeter.from_config("g1")
    held = np.array([[True, False], [False, False], [True, True]])
    tilt = rt._foot_tilt_rows
    assert all(row is not None for row in tilt)  # G1's feet have orientation targets
    offset = 3 * rt.targets.n_position
    for gain, tilt_gain in ((40.0, 0.0), (40.0, 20.0), (0.0, 20.0)):
        bounds = held_min_gains(gain, rt.targets, rt._foot_rows, held, tilt_gain, tilt)
        for k in range(len(held)):
            expected = np.zeros(3 * (rt.targets.n_position + rt.targets.n_orientation))
            for f in np.flatnonzero(held[k]):
                expected[3 * rt._foot_rows[f] + 2] = gain
                expected[offset + 3 * tilt[f] : offset + 3 * tilt[f] + 2] = tilt_gain
            np.testing.assert_array_equal(bounds[k], expected)
    assert held_min_gains(0.0, rt.targets, rt._foot_rows, held, 0.0, tilt) == [None] * 3
    # a foot without an orientation target gets the height's bound only
    bounds = held_min_gains(40.0, rt.targets, rt._foot_rows, held, 20.0, [tilt[0], None])
    assert (bounds[2, offset + 3 * tilt[1] : offset + 3 * tilt[1] + 3] == 0.0).all()
    assert bounds[2, 3 * rt._foot_rows[1] + 2] == 40.0


LANDING_LEAN = 38.0  # deg: each leg leans this far out about the hip (G1's ankle roll: +-15 deg)


def _landing_beyond_the_ankle_roll(rate: float = 120.0):
    """The straddle of test_leg_reach with the legs leaning 38 deg out, the right foot (level) 10 cm up and
    coming down onto the floor over 0.25 s (minimum jerk) to land at 1 s; at 120 Hz as the CMU takes. The
    robot's right leg swings in with its ankle roll on its limit and the touch-down holds the foot nearer the
    hip (contact.reach), so the sole turns level only as fast as the hip takes the lean up: what the real CMU
    131_03 take does to G1's and iCub's right soles (README, *On the ground*)."""
    motion = _straddle(duration=2.0, rate=rate, lean=math.radians(LANDING_LEAN))
    p = motion.positions.copy()
    t = motion.times - motion.times[0]
    lift = 0.1 * (1.0 - min_jerk(np.clip((t - 0.75) / 0.25, 0.0, 1.0)))
    for link in ("RightFoot", "RightToe"):
        p[:, motion.links.index(link), 2] += lift
    v, w = finite_difference_twists(motion.times, p, motion.rotations)
    return dataclasses.replace(motion, positions=p, linear_velocities=v, angular_velocities=w)


def _combination(tilt_gain: float) -> Retargeter:
    """G1 with --reach on --stance hard --anchor robot --swing-weight 0.1 and ``held_tilt_gain``."""
    rt = Retargeter.from_config("g1")
    combination = {"reach": True, "stance": "hard", "anchor": "robot", "swing_weight": 0.1}
    spec = dataclasses.replace(rt.config.contact, held_tilt_gain=tilt_gain, **combination)
    rt.config = dataclasses.replace(rt.config, contact=spec)
    rt.contact.spec = spec
    return rt


def test_a_sole_landing_beyond_its_ankle_roll_is_level_over_its_flat_part():
    """The right foot lands 38 deg out from its hip; by forward kinematics of the written trajectory its
    sole is within 1.5 deg of level over the flat part of the contact (measured 0.9 deg), never under the
    floor, and no joint leaves its position or velocity limits. With ``held_tilt_gain`` 0 (the code before,
    to the bit: the tilt at the map's K = 10 /s, the height at 40 /s) the flat part starts 3.3 deg rolled,
    over the issue's 3 deg, as on the real CMU 131_03 take."""
    motion = _landing_beyond_the_ankle_roll()
    tilts = {}
    for gain in (Retargeter.from_config("g1").config.contact.held_tilt_gain, 0.0):
        rt = _combination(gain)
        out = rt.retarget_motion(motion, settle=1.0)
        assert out.solved.all()
        contacts = out.contacts[:, 1] >= 0
        assert not contacts[out.times - out.times[0] < 0.85].any() and contacts[-1]  # lands once, stays
        right = foot_figures(
            rt.robot, out.q, out.times, out.contacts, rt.config.feet, rt.config.contact.blend_time,
            half_width=rt.config.balance.sole_half_width,
        )[1]  # fmt: skip
        assert right.phases == 1, right.line()
        tilts[gain] = right.tilt_flat_max_deg
        if gain > 0.0:
            assert right.tilt_flat_max_deg <= 1.5, right.line()
            assert right.penetration_max_mm <= 0.5, right.line()
            joints = out.q[:, 7:]
            assert (joints >= rt.robot.lower - 1e-9).all() and (joints <= rt.robot.upper + 1e-9).all()
            speeds = np.abs(np.diff(joints, axis=0)) / np.diff(out.times)[:, None]
            assert (speeds <= rt.robot.velocity_limit * (1 + 1e-6)).all()
    assert tilts[0.0] > 3.0, tilts  # the take reproduces the miss without the tilt's gain


def test_a_step_with_gain_bounds_is_the_step_with_those_gains():
    """The IK step with ``min_gain`` 40 on the left foot's position rows equals the step of an IK whose left
    foot position gain is 40 (same q after 20 steps); bounds under the configured gains change nothing."""
    rt = Retargeter.from_config("g1")
    contact = dataclasses.replace(rt.config.contact, held_gain=0.0, held_tilt_gain=0.0)
    rt.config = dataclasses.replace(rt.config, contact=contact)
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


def test_the_blend_levels_the_sole_and_its_last_step_carries_the_rest_of_the_turn():
    """A foot landing heel first (20 deg toe up) on a still human: the orientation target turns level over
    ``blend_time``; its angular-velocity feed-forward is the finite difference of the targets (both shapes),
    and with ``smooth`` it falls over the second half of the blend (``linear``: the whole turn's rate, its
    angle / 0.1 s). At the sample that ends the blend the feed-forward is the turn of the last step over its
    length (the secant, README *The blend's last step*), not ``h'`` there (0 for ``smooth``): the IK steps to
    that sample with it, and the flat sample's hard stance rows hold what it leaves."""
    rates = {}
    for shape in ("smooth", "linear"):
        rt = Retargeter.from_config("g1")
        contact = dataclasses.replace(rt.config.contact, blend_shape=shape)
        rt.config = dataclasses.replace(rt.config, contact=contact)
        rt.set_calibration(rt.calibration)
        measurements, flags = rt.motion_measurements(heel_first(rate=200.0, duration=0.4))
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
        last_step = np.linalg.norm(pin.log3(r[start + blend] @ r[start + blend - 1].T)) / dt
        assert rates[shape][-1] == pytest.approx(last_step, rel=1e-3), shape  # the secant of the last step
    assert rates["linear"] == pytest.approx(turn_rate, rel=0.05)
    # smooth: the rate falls over the second half of the blend, 6 / 20 of the linear one a sample before its
    # end, and the last step's secant is below that (1 - h(0.95) over 0.05 of the blend: 0.145 of the linear)
    assert (np.diff(rates["smooth"]) < 0).all()
    assert rates["smooth"][-2] < 0.3 * turn_rate and rates["smooth"][-1] == pytest.approx(
        0.145 * turn_rate, rel=0.02
    )


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
    data["contact"] = {"held_tilt_gain": math.inf}
    with pytest.raises(RetargetConfigError, match="contact.held_tilt_gain"):
        config_from_dict(data, "bad.yaml")
    data["contact"] = {"held_gain": 25.0, "held_tilt_gain": 15.0, "blend_shape": "linear"}
    saved = config_from_dict(data, "ok.yaml").to_dict()["contact"]
    assert saved["held_gain"] == 25.0 and saved["held_tilt_gain"] == 15.0 and saved["blend_shape"] == "linear"
    again = config_from_dict({**data, "contact": saved}, "again.yaml")
    assert again.contact == config_from_dict(data, "ok.yaml").contact
    defaults = Retargeter.from_config("g1").config.contact
    assert defaults.held_gain == 40.0 and defaults.held_tilt_gain == 20.0 and defaults.blend_shape == "smooth"
    for option in ("--held-gain", "--held-tilt-gain"):
        with pytest.raises(SystemExit):
            cli.main(["--robot", "g1", "--motion", "tpose", option, "-2", "--out", str(tmp_path)])
