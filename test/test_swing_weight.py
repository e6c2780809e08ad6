"""contact.swing_weight (retarget/swing_weight.py) and Measurements.weight_scale (core): a foot in the air
weighs less, so it does not pull the stance leg's hip out of its ankle roll's reach. Ground truth: the
weighted QP with the weights scaled in the targets, and forward kinematics of the written trajectory."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from take_tools import (
    FEET_BEFORE_ISSUE_9,
    assert_row_field_acts_as_the_target_change,
    assert_row_field_refuses,
)
from test_pelvis_reach import _one_leg_sway, _right_stance_sole

from dynik_ros.io.human_motion import finite_difference_twists
from dynik_ros.retarget.retargeter import Retargeter
from dynik_ros.retarget.swing_weight import SWING_HEIGHT, swing_scales


def test_the_factors_are_one_held_the_swing_weight_up_high_and_blend_near_the_ground():
    heights = np.array([[0.5, 0.035], [0.035 + SWING_HEIGHT / 2, 0.035], [0.035, 0.2]])
    held = np.array([[False, True], [False, True], [True, False]])
    scales = swing_scales(heights, held, np.array([0.035, 0.035]), 0.1)
    assert scales == pytest.approx(np.array([[0.1, 1.0], [0.55, 1.0], [1.0, 0.1]]))


def test_a_step_with_weight_factors_is_the_step_with_those_weights():
    """The IK step with ``weight_scale`` s on the left foot's rows equals the step of an IK whose left foot
    position weight is s times the map's (same q after 20 steps); all-ones factors change nothing."""
    rt = Retargeter.from_config("g1")
    motion = _one_leg_sway(duration=0.3)
    measurements, _ = rt.motion_measurements(motion)
    assert_row_field_acts_as_the_target_change(
        rt, measurements, "left_ankle_roll_link", "weight_scale", 0.25, 1.0,
        lambda t: dataclasses.replace(t, position_weight=tuple(0.25 * np.ravel(t.position_weight))),
    )  # fmt: skip


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_negative_or_non_finite_weight_factor_is_refused(bad):
    rt = Retargeter.from_config("g1")
    m, _ = rt.motion_measurements(_one_leg_sway(duration=0.05))
    assert_row_field_refuses(rt, m[0], "weight_scale", 1.0, bad)


def _out_of_reach_swing(out: float = 0.6):
    """Standing on the right leg, the left foot 0.25 m up; over 1-2 s the human's left foot moves ``out``
    farther to the left than its leg reaches (a target no robot leg follows)."""
    motion = _one_leg_sway(sway=0.0)
    p, t, index = motion.positions.copy(), motion.times, motion.links.index
    grow = np.clip(t - 1.0, 0.0, 1.0)
    for name, share in (("LeftFoot", 1.0), ("LeftToe", 1.0), ("LeftLowerLeg", 0.5)):
        p[:, index(name), 1] += share * out * grow
    v, w = finite_difference_twists(t, p, motion.rotations)
    return dataclasses.replace(motion, positions=p, linear_velocities=v, angular_velocities=w)


def test_a_foot_in_the_air_out_of_reach_no_longer_rolls_the_stance_sole():
    """G1 on its right leg while the left foot's target moves 0.6 m (human) out of reach. With weighted stance
    targets and the held feet's weight on the swing foot it drags the pelvis 35 cm over and the right sole
    rolls past 4 deg (measured 10.7, the leg leaning 26 deg); with contact.swing_weight 0.1 the written right
    sole stays within 1 deg of level (measured 0.0, the leg 8 deg), the foot still. The maps' defaults (hard
    stance rows, swing weight 0.1) keep it so too. No joint beyond its limits either way."""
    motion = _out_of_reach_swing()
    for stance, weight in (("weighted", 0.1), ("weighted", 1.0), (None, None)):
        rt = Retargeter.from_config("g1")
        if stance is not None:
            contact = dataclasses.replace(
                rt.config.contact, **{**FEET_BEFORE_ISSUE_9, "stance": stance, "swing_weight": weight}
            )
            rt.config = dataclasses.replace(rt.config, contact=contact)
        out = rt.retarget_motion(motion, settle=1.0)
        tilt, leans, soles = _right_stance_sole(rt, out)
        if weight is None or weight < 1.0:
            assert max(tilt) <= 1.0 and max(abs(x) for x in leans) <= 15.0, (stance, weight)
            assert float(np.ptp(np.array(soles)[:, :2], axis=0).max()) <= 0.005, (stance, weight)
        else:
            assert min(tilt) >= 4.0


def test_the_map_key_its_default_and_a_bad_value():
    from pathlib import Path

    import yaml

    from dynik_ros.retarget.config import RetargetConfigError, config_from_dict

    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "g1.yaml").read_text())
    assert config_from_dict(data).contact.swing_weight == 0.1
    rt = Retargeter.from_config("g1")
    m, _ = rt.motion_measurements(_one_leg_sway(duration=0.05))
    assert m[0].weight_scale is not None  # on by default: the swing foot's rows scaled
    data["contact"]["swing_weight"] = 1.0
    rt.config = config_from_dict(data)
    m, _ = rt.motion_measurements(_one_leg_sway(duration=0.05))
    assert m[0].weight_scale is None  # off: the measurements as before
    data["contact"]["swing_weight"] = 0.2
    assert config_from_dict(data).contact.swing_weight == 0.2
    data["contact"]["swing_weight"] = 0.0
    with pytest.raises(RetargetConfigError, match="contact.swing_weight"):
        config_from_dict(data)
