"""contact.pelvis_reach (retarget/pelvis_reach.py): while feet are held in contact the pelvis target gives way
so their legs lean no farther than the ankle roll lets a level sole stand. Ground truth: the lean geometry
of the targets, and forward kinematics of the written trajectory."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pinocchio as pin
import pytest
from take_tools import FEET_BEFORE_ISSUE_9

from dynik_ros.io.human_motion import finite_difference_twists
from dynik_ros.retarget.pelvis_reach import (
    LEG_STRETCH,
    SHIFT_PER_BLEND,
    Leg,
    bend_leg,
    lean,
    required_shift,
)
from dynik_ros.retarget.retargeter import Retargeter

BOUNDS = (-math.radians(14.0), math.radians(14.0))  # G1's ankle roll less the margin


def _lean_deg(offset: np.ndarray, yaw: float = 0.0) -> float:
    y, z = lean(offset, yaw)
    return math.degrees(math.atan2(y, z))


def test_one_foot_beyond_its_bound_gets_the_smallest_shift_that_meets_it():
    """A foot 0.2 m beside its hip 0.5 m below (21.8 deg): the shift brings it to 14 deg, and it is the
    smallest one (the projection onto the bound's plane ``c a + tan(14) h = y - z tan(14)``)."""
    offset = np.array([[0.0, 0.2, -0.5]])
    d = required_shift(offset, np.zeros(1), [BOUNDS], np.array([0.7]))
    assert _lean_deg(offset[0] - d) == pytest.approx(14.0, abs=0.05)
    t = math.tan(BOUNDS[1])
    v = 0.2 - 0.5 * t
    assert np.linalg.norm(d) == pytest.approx(v / math.hypot(1.0, t), rel=0.01)
    assert d[1] > 0.0 and d[2] > 0.0  # towards the foot, and up
    turned = required_shift(offset @ pin.rpy.rpyToMatrix(0, 0, 0.7).T, np.array([0.7]), [BOUNDS], np.ones(1))
    assert np.linalg.norm(turned) == pytest.approx(np.linalg.norm(d), rel=1e-3)  # any heading alike


def test_a_wide_double_stance_is_raised_not_shifted_and_a_foot_within_reach_asks_nothing():
    """Both feet 0.15 m outside their hips, 0.45 m below (18.4 deg each way): no lateral shift (it would
    help one and hurt the other), the pelvis raised until both lean 14 deg: z = 0.15 / tan(14 deg)."""
    offsets = np.array([[0.0, 0.15, -0.45], [0.0, -0.15, -0.45]])
    d = required_shift(offsets, np.zeros(2), [BOUNDS, BOUNDS], np.array([0.7, 0.7]))
    assert abs(d[0]) < 1e-6 and abs(d[1]) < 1e-6
    assert 0.45 + d[2] == pytest.approx(0.15 / math.tan(BOUNDS[1]), rel=0.005)
    inside = np.array([[0.0, 0.1, -0.5], [0.0, -0.05, -0.5]])
    assert not required_shift(inside, np.zeros(2), [BOUNDS, BOUNDS], np.array([0.7, 0.7])).any()


def test_a_straight_leg_caps_the_raise_and_the_rest_is_the_best_compromise():
    """Legs 0.62 m long, feet 0.2 m outside, 0.55 m below: meeting 14 deg needs z = 0.80 m, longer than the
    legs, so the raise stops at ``LEG_STRETCH`` of their length and nothing moves sideways."""
    offsets = np.array([[0.0, 0.2, -0.55], [0.0, -0.2, -0.55]])
    d = required_shift(offsets, np.zeros(2), [BOUNDS, BOUNDS], np.array([0.62, 0.62]))
    assert abs(d[1]) < 1e-6
    assert np.linalg.norm(offsets[0] - d) == pytest.approx(LEG_STRETCH * 0.62, abs=1e-5)


def test_the_thigh_and_shank_targets_bent_for_a_moved_hip_reach_the_foot_from_it():
    """A planar leg (thigh 0.3, shank 0.32 m, knee forward) whose hip moves up 5 cm and 4 cm across: the
    turned thigh and shank directions, chained from the new hip, end on the foot (forward kinematics of the
    two segments), and the knee stays in front of the hip-foot line."""
    thigh, shank = 0.3, 0.32
    hip, foot = np.zeros(3), np.array([0.05, 0.12, -0.5])
    leg = Leg(BOUNDS, thigh + shank, 0.0, thigh, shank, (0,), (1,))
    d = foot - hip
    length = float(np.linalg.norm(d))
    a = math.acos((thigh**2 + length**2 - shank**2) / (2 * thigh * length))
    u = d / length
    side = np.cross(u, np.array([1.0, 0.0, 0.0]))
    side /= np.linalg.norm(side)
    knee = hip + thigh * (pin.exp3(a * side) @ u)

    down = np.array([0.0, 0.0, -1.0])  # each segment frame's -z along its segment
    rotations = np.array([_rotation_to(down, knee - hip), _rotation_to(down, foot - knee)])
    assert np.allclose(hip + thigh * rotations[0][:, 2] * -1 + shank * -rotations[1][:, 2], foot, atol=1e-9)
    shift = np.array([0.0, 0.04, 0.05])
    bend_leg(rotations, leg, d, shift, 0.0)
    reached = hip + shift - thigh * rotations[0][:, 2] - shank * rotations[1][:, 2]
    assert np.allclose(reached, foot, atol=1e-6)
    new_knee = hip + shift - thigh * rotations[0][:, 2]
    assert new_knee[0] > (hip + shift)[0] + 1e-3  # still bent forward


def _rotation_to(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s = float(np.linalg.norm(axis))
    return pin.exp3(axis / s * math.atan2(s, float(a @ b))) if s > 1e-12 else np.eye(3)


def _smooth(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _one_leg_sway(sway: float = 0.35, lift: float = 0.25, duration: float = 3.0, rate: float = 100.0):
    """A subject standing on the right leg (the left abducted until its foot is ``lift`` up, by 0.9 s) while
    the pelvis sways ``sway`` to the left over 1.0-2.0 s, the right leg straight and leaning out under it
    (the real CMU 131_03 left contact at 3.6-4.4 s: a lean growing from 0 to 28 deg during the contact)."""
    from dynik_ros.cli.retarget import synthetic_motion

    motion = synthetic_motion("tpose", duration, rate)
    t, p0, r0 = motion.times, motion.positions, motion.rotations
    p, r = p0.copy(), r0.copy()
    index = motion.links.index
    legs = {s: [index(s + k) for k in ("UpperLeg", "LowerLeg", "Foot", "Toe")] for s in ("Left", "Right")}
    (lhip, lknee, lfoot, ltoe), (rhip, rknee, rfoot, rtoe) = legs["Left"], legs["Right"]
    length = float(np.linalg.norm(p0[0, rfoot] - p0[0, rhip]))
    y = sway * _smooth((t - 1.0) / 1.0)
    y0 = float(p0[0, rhip, 1] - p0[0, rfoot, 1])
    drop = math.sqrt(length**2 - y0**2) - np.sqrt(length**2 - (y0 + y) ** 2)
    body = [i for i in range(len(motion.links)) if i not in {lknee, lfoot, ltoe, rknee, rfoot, rtoe}]
    p[:, body, 1] += y[:, None]
    p[:, body, 2] -= drop[:, None]
    for k in range(len(t)):  # the right leg straight from its hip to the still foot
        turn = _rotation_to(p0[0, rfoot] - p0[0, rhip], p0[0, rfoot] - p[k, rhip])
        p[k, rknee] = p[k, rhip] + turn @ (p0[0, rknee] - p0[0, rhip])
        r[k, rhip], r[k, rknee] = turn @ r0[k, rhip], turn @ r0[k, rknee]
    angle = math.acos((length - lift) / length) * _smooth((t - 0.4) / 0.5)
    for k in range(len(t)):  # the left leg abducted, straight
        turn = pin.rpy.rpyToMatrix(angle[k], 0.0, 0.0)
        for i in (lknee, lfoot, ltoe):
            p[k, i] = p[k, lhip] + turn @ (p0[0, i] - p0[0, lhip])
        for i in (lhip, lknee, lfoot, ltoe):
            r[k, i] = turn @ r0[k, i]
    v, w = finite_difference_twists(t, p, r)
    return dataclasses.replace(motion, positions=p, rotations=r, linear_velocities=v, angular_velocities=w)


def _right_stance_sole(rt: Retargeter, out, start: float = 2.2):
    """G1's right sole from ``start`` s on, written trajectory ``out`` of :func:`_one_leg_sway`-like takes
    (right foot in contact throughout, the left one in the air from ``start``): per sample its tilt from
    level (deg), its leg's lean (deg) and its position; no joint of the whole take beyond its limits."""
    robot, data = rt.robot, rt.robot.model.createData()
    foot, hip = robot.frame_id("right_ankle_roll_link"), robot.frame_id("right_hip_roll_link")
    late = out.times >= start
    assert (out.contacts[:, 1] >= 0).all() and (out.contacts[late, 0] < 0).all()
    tilt, leans, soles = [], [], []
    for q in out.q[late]:
        pin.framesForwardKinematics(robot.model, data, q)
        tilt.append(math.degrees(math.acos(min(1.0, data.oMf[foot].rotation[2, 2]))))
        leans.append(_lean_deg(data.oMf[foot].translation - data.oMf[hip].translation))
        soles.append(data.oMf[foot].translation.copy())
    assert (out.q[:, 7:] <= robot.upper + 1e-9).all() and (out.q[:, 7:] >= robot.lower - 1e-9).all()
    return tilt, leans, soles


def _retargeter(on: bool, **contact) -> Retargeter:
    rt = Retargeter.from_config("g1")
    rt.config = dataclasses.replace(
        rt.config, contact=dataclasses.replace(rt.config.contact, pelvis_reach=on, **contact)
    )
    rt.set_calibration(rt.calibration)
    return rt


WEIGHTED = FEET_BEFORE_ISSUE_9  # the weighted stance targets the pelvis reach was built for


def test_a_stance_leg_leaning_out_during_the_contact_keeps_a_level_sole_with_the_pelvis_moved_back():
    """G1 standing on its right leg while the human pelvis sways 0.35 m away from that foot (the leg leans
    ~21 deg, G1's ankle roll allows 15). With weighted stance targets and contact.pelvis_reach the written
    right sole stays within 1 deg of level and the foot still (measured: 0.0 deg), the leg within 15 deg of
    lean (13.4); without it the sole rolls more than 4 deg (measured 4.2-4.3, the leg 19.7 deg). The maps'
    defaults (hard stance rows) keep the sole level and still without it (0.0 deg, the leg 15.3 deg). No
    joint beyond its limits in any case."""
    motion = _one_leg_sway()
    for on, contact in ((True, WEIGHTED), (False, WEIGHTED), (False, {})):
        rt = _retargeter(on, **contact)
        out = rt.retarget_motion(motion, settle=1.0)
        tilt, leans, soles = _right_stance_sole(rt, out)
        if on:
            assert max(tilt) <= 1.0 and max(abs(x) for x in leans) <= 15.0
        elif contact:
            assert min(tilt) >= 4.0
            continue
        else:
            assert max(tilt) <= 1.0
        assert float(np.ptp(np.array(soles)[:, :2], axis=0).max()) <= 0.005


def test_the_rule_is_causal_and_its_shift_never_steps():
    """The targets of the whole take at once equal those of one sample at a time (as ik_node gives them:
    only the current and past samples), and the pelvis target's shift from the human's moves at most
    ``SHIFT_PER_BLEND`` per ``blend_time`` (no step), from zero."""
    motion = _one_leg_sway()
    on, off = _retargeter(True), _retargeter(False)
    batch, _ = on.motion_measurements(motion)
    human, _ = off.motion_measurements(motion)
    on.reset()
    single = []
    for k in range(len(motion)):
        twists = {
            name: (motion.linear_velocities[k, i], motion.angular_velocities[k, i])
            for i, name in enumerate(motion.links)
        }
        single.append(on.measurements(motion.sample(k), twists, time=float(motion.times[k])))
    pelvis = on._pelvis_row
    for a, b in zip(batch, single, strict=True):
        assert np.allclose(a.positions, b.positions, atol=1e-9)
        assert np.allclose(a.rotations, b.rotations, atol=1e-9)
    shift = np.array([m.positions[pelvis] - h.positions[pelvis] for m, h in zip(batch, human, strict=True)])
    assert not shift[0].any() and np.linalg.norm(shift, axis=1).max() > 0.05
    speed = SHIFT_PER_BLEND / on.config.contact.blend_time
    steps = np.linalg.norm(np.diff(shift, axis=0), axis=1)
    assert steps.max() <= speed * float(np.diff(motion.times).max()) * (1 + 1e-9)


def test_the_map_key_its_default_and_a_bad_value():
    from pathlib import Path

    import yaml

    from dynik_ros.retarget.config import RetargetConfigError, config_from_dict

    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "g1.yaml").read_text())
    assert config_from_dict(data).contact.pelvis_reach is False
    assert Retargeter.from_config("g1").pelvis_reach is None  # off: no rule, the targets as before
    data["contact"]["pelvis_reach"] = True
    assert config_from_dict(data).contact.pelvis_reach is True
    assert _retargeter(True).pelvis_reach is not None
    data["contact"]["pelvis_reach"] = "sometimes"
    with pytest.raises(RetargetConfigError, match="contact.pelvis_reach"):
        config_from_dict(data)
