"""Floor rows (issue 9 item 3, ``contact.floor_rows``): the corners of the feet's soles never go under the
floor, as inequality rows of the IK's QP; checked on the written trajectory by forward kinematics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest
from take_tools import step_through

from dynik_ros.core.floor_rows import FloorConfig, FloorRows, points_of_feet
from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.retargeter import Retargeter

RATE = 100.0


def _g1(floor: bool, stance: str = "weighted", velocity_limit: float | None = None) -> Retargeter:
    rt = Retargeter.from_config("g1")
    contact = dataclasses.replace(rt.config.contact, floor_rows=floor, stance=stance)
    rt.config = dataclasses.replace(rt.config, contact=contact)
    rt.contact.spec = contact
    if velocity_limit is not None:  # every leg joint slow: the push back is limited by the velocity limits
        names = rt.robot.joint_names
        legs = [i for i, j in enumerate(names) if any(k in j for k in ("hip", "knee", "ankle"))]
        rt.robot.velocity_limit[legs] = np.minimum(rt.robot.velocity_limit[legs], velocity_limit)
    rt.reset()
    return rt


def _standing(rt: Retargeter, seconds: float):
    from dynik_ros.cli.retarget import synthetic_motion

    motion = synthetic_motion("tpose", seconds, RATE)
    measurements, flags = rt.motion_measurements(motion)
    return motion.times - motion.times[0], measurements, flags


def _sole_heights(rt: Retargeter, qs: np.ndarray, half: float | None = None) -> np.ndarray:
    """``(N, points)`` world z of every sole corner of the map's feet (each sole point at +-``half`` across
    the foot, written out here; default the map's half width; 0: the points themselves), by forward
    kinematics of ``qs``."""
    half = rt.config.balance.sole_half_width if half is None else half
    sides = (1.0, -1.0) if half else (0.0,)
    model = rt.robot.model
    data = model.createData()
    out = []
    for q in qs:
        pin.framesForwardKinematics(model, data, q)
        row = []
        for foot in rt.config.feet:
            placement = data.oMf[rt.robot.frame_id(foot.frame)]
            row += [placement.act(np.array([x, y + s * half, z]))[2] for x, y, z in foot.sole for s in sides]
        out.append(row)
    return np.array(out)


def _run(rt: Retargeter, measurements, q0: np.ndarray | None = None, settle: bool = True):
    """Step the map's IK through ``measurements`` at RATE: written ``q`` per sample and each step's info."""
    ik = rt.make_ik(q0=q0)
    if settle:
        rt.settle(ik, measurements[0], 1.0)
    qs, infos = step_through(ik, measurements, 1.0 / RATE)
    return ik, qs, infos


def _within_limits(rt: Retargeter, qs: np.ndarray) -> None:
    """No NaN, every joint inside its limits, finite-difference speeds within the velocity limits."""
    robot = rt.robot
    joints = qs[:, robot.nq - robot.n_joints :]
    assert np.all(np.isfinite(qs))
    assert np.all(joints >= robot.lower - 1e-9) and np.all(joints <= robot.upper + 1e-9)
    speeds = np.abs(np.diff(joints, axis=0)) * RATE
    assert np.all(speeds <= robot.velocity_limit * (1 + 1e-6) + 1e-9)


def _dip_left_foot(measurements, rt: Retargeter, t: np.ndarray, depth: float, ramp: float = 0.5):
    """The left foot's position target lowered by up to ``depth`` over ``ramp`` seconds, then held."""
    row = [x.frame for x in rt.targets.position_targets].index(rt.config.feet[0].frame)
    out = []
    for k, m in enumerate(measurements):
        s = min(t[k] / ramp, 1.0)
        positions, velocities = m.positions.copy(), m.linear_velocities.copy()
        positions[row, 2] -= depth * s
        velocities[row, 2] -= depth / ramp if t[k] < ramp else 0.0
        out.append(dataclasses.replace(m, positions=positions, linear_velocities=velocities))
    return out


def test_heights_read_from_the_placement_table_match_the_frame_reads_and_copies_read_their_own_data():
    """``FloorRows`` reads its points' frames from one gather of the placement table of the ``data`` it is
    given (:mod:`dynik_ros.core.frame_placements`): the heights equal the frame-by-frame reads bit for bit,
    a second ``data`` gets its own view, and a deep copy (a shadow IK's) reads the ``data`` it is given, not
    a snapshot of the original's."""
    import copy

    rt = _g1(True)
    robot = rt.robot
    config = FloorConfig(points_of_feet(rt.config.feet, rt.config.balance.sole_half_width), height=0.02)
    rows = FloorRows(robot, config)
    rng = np.random.default_rng(7)
    model = robot.model
    datas, expected = [], []
    for _ in range(2):
        q = rt.initial_configuration()
        n = robot.n_joints
        q[robot.nq - n :] = np.clip(q[robot.nq - n :] + rng.uniform(-0.4, 0.4, n), robot.lower, robot.upper)
        q[3:7] = pin.Quaternion(pin.exp3(rng.normal(size=3) * 0.3)).coeffs()
        data = model.createData()
        pin.framesForwardKinematics(model, data, q)
        datas.append(data)
        plain = FloorRows(robot, config)
        plain._viewed, plain._table = data, None  # the frame-by-frame reads
        expected.append(plain.heights(data))
        np.testing.assert_allclose(expected[-1], _sole_heights(rt, [q])[0] - 0.02, atol=1e-12)
    for data, heights in zip(datas * 2, expected * 2, strict=True):
        np.testing.assert_array_equal(rows.heights(data), heights)
    assert rows._table is not None  # the table was used
    twin = copy.deepcopy(rows)
    np.testing.assert_array_equal(twin.heights(datas[1]), expected[1])
    np.testing.assert_array_equal(twin.heights(datas[0]), expected[0])


def test_point_jacobian_is_the_height_rate_in_mixed_coordinates():
    """``J_z nu`` of every sole point equals the finite difference of its height (forward kinematics) for a
    random ``nu`` (base linear and angular velocity in the world frame, joint rates), at a bent pose."""
    rt = _g1(True)
    robot = rt.robot
    config = FloorConfig(points_of_feet(rt.config.feet, rt.config.balance.sole_half_width), height=0.1)
    rows = FloorRows(robot, config)
    rng = np.random.default_rng(3)
    q = rt.initial_configuration()
    n = robot.n_joints
    q[robot.nq - n :] = np.clip(q[robot.nq - n :] + rng.uniform(-0.3, 0.3, n), robot.lower, robot.upper)
    q[3:7] = pin.Quaternion(pin.exp3(rng.normal(size=3) * 0.3)).coeffs()
    model, data = robot.model, robot.model.createData()
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    rows.observe(data)
    dt = 0.01
    rows.prepare(model, data, dt, np.zeros(robot.nv))
    np.testing.assert_allclose(rows.previous, _sole_heights(rt, [q])[0] - 0.1, atol=1e-12)
    nu = rng.normal(size=robot.nv)
    h = 1e-7
    p, rotation, joints = robot.split(q)
    moved = robot.join(p + h * nu[:3], pin.exp3(h * nu[3:6]) @ rotation, joints + h * nu[6:])
    rate = (_sole_heights(rt, [moved])[0] - _sole_heights(rt, [q])[0]) / h
    a, lower, upper = rows.rows(1.0, np.zeros(robot.nv))
    np.testing.assert_allclose(a @ nu, rate, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lower, -config.gain * rows.previous / dt, atol=1e-9)  # at q: -gamma d / dt
    assert np.all(np.isinf(upper))
    a, lower, _ = rows.rows(0.5, nu)  # the trapezoid: rows on the mean 0.5 nu_k + carried
    np.testing.assert_allclose(a, 0.5 * rows.rows(1.0, np.zeros(robot.nv))[0])
    np.testing.assert_allclose(lower, -config.gain * rows.previous / dt - rate, rtol=1e-5, atol=1e-6)
    # the same rows from the IK's stacked Jacobian (the feet have position and orientation targets)
    from dynik_ros.core.frame_kinematics import FrameKinematics

    kinematics = FrameKinematics.for_targets(robot, rt.targets)
    kinematics.update(q)
    stacked = FloorRows(robot, config, rt.targets)
    assert stacked._stacked_rows is not None
    stacked.observe(kinematics.data)
    stacked.prepare(model, kinematics.data, dt, np.zeros(robot.nv), kinematics.stacked_jacobian(q[:3]))
    np.testing.assert_allclose(stacked.rows(1.0, np.zeros(robot.nv))[0] @ nu, rate, rtol=1e-5, atol=1e-6)


def test_a_foot_target_3_cm_under_the_floor_leaves_the_written_soles_on_it():
    """G1 standing, its left foot's target lowered 3 cm under the floor in 0.5 s: the weighted feet follow
    it (a sole point 2-3 cm under); with floor rows no written sole point is more than 0.5 mm under, no
    joint leaves its limits or exceeds its velocity limit, and every step meets the rows as posed."""
    depths = {}
    for floor in (False, True):
        rt = _g1(floor)
        t, measurements, _ = _standing(rt, 1.5)
        dipped = _dip_left_foot(measurements, rt, t, 0.03)
        _, qs, infos = _run(rt, dipped)
        _within_limits(rt, qs)
        assert all(info.solved for info in infos)
        depths[floor] = -_sole_heights(rt, qs).min()
        if floor:
            assert {info.floor for info in infos} == {"hard"}
        else:
            assert {info.floor for info in infos} == {""}
    assert depths[False] > 0.02
    assert depths[True] < 5e-4


def _roll_left_foot(measurements, rt: Retargeter, t: np.ndarray, degrees: float, ramp: float = 0.5):
    """The left foot's orientation target rolled about its own x axis (along the foot) by up to
    ``degrees`` over ``ramp`` seconds, then held; its position target as it was (on the floor)."""
    row = [x.frame for x in rt.targets.orientation_targets].index(rt.config.feet[0].frame)
    out = []
    for k, m in enumerate(measurements):
        rotations, velocities = m.rotations.copy(), m.angular_velocities.copy()
        axis = rotations[row][:, 0]
        rotations[row] = pin.exp3(np.radians(degrees) * min(t[k] / ramp, 1.0) * axis) @ rotations[row]
        velocities[row] += np.radians(degrees) / ramp * axis if t[k] < ramp else 0.0
        out.append(dataclasses.replace(m, rotations=rotations, angular_velocities=velocities))
    return out


def test_a_stance_sole_rolled_10_deg_keeps_its_corners_on_the_floor():
    """G1 standing, its left foot's orientation target rolled 10 deg across the foot with its position on
    the floor (a sole rolled in contact, as on the CMU 131 takes): the weighted foot follows the roll. With
    rows on the sole's centre line only (the rows before) the line stays up and the outer edge goes 3.8 mm
    under; with the map's rows (the corners, 25 mm half width) no written corner is more than 0.1 mm under,
    every step solved with the rows as posed and within the joints' limits; the foot still rolls (by at
    least 8 deg: it is lifted on its edge, not held flat)."""
    depths = {}
    for half in (0.0, None):
        rt = _g1(True)
        t, measurements, _ = _standing(rt, 1.5)
        rolled = _roll_left_foot(measurements, rt, t, 10.0)
        config = rt.ik_config()
        if half == 0.0:
            config = dataclasses.replace(
                config, floor=dataclasses.replace(config.floor, points=points_of_feet(rt.config.feet, 0.0))
            )
        else:
            assert len(config.floor.points) == 8  # the map's rows: four corners per sole
        ik = rt.make_ik(config)
        rt.settle(ik, rolled[0], 1.0)
        qs, infos = step_through(ik, rolled, 1.0 / RATE)
        _within_limits(rt, qs)
        assert all(info.solved for info in infos) and {info.floor for info in infos} == {"hard"}
        depths[half] = -_sole_heights(rt, qs).min()  # the corners, whichever rows
        data = rt.robot.model.createData()
        pin.framesForwardKinematics(rt.robot.model, data, qs[-1])
        roll = np.degrees(abs(np.arcsin(data.oMf[rt.robot.frame_id(rt.config.feet[0].frame)].rotation[2, 1])))
        assert roll > 8.0, roll
    assert depths[0.0] > 3e-3
    assert depths[None] < 1e-4


def test_a_sole_1_cm_under_the_floor_comes_back_within_the_velocity_limits():
    """G1 started 1 cm low with the whole human 1 cm low, leg joints limited to 0.5 rad/s: without floor rows
    the soles stay 1 cm under; with them the deepest sole point rises without ever sinking again, to within
    0.1 mm of the floor within 0.5 s, each step within the joints' position and velocity limits."""
    final = {}
    for floor in (False, True):
        rt = _g1(floor, velocity_limit=0.5)
        t, measurements, _ = _standing(rt, 1.0)
        low = [
            dataclasses.replace(m, positions=m.positions - np.array([0.0, 0.0, 0.01])) for m in measurements
        ]
        q0 = rt.initial_configuration()
        q0[2] -= 0.01
        _, qs, infos = _run(rt, low, q0=q0, settle=False)
        _within_limits(rt, np.vstack((q0, qs)))
        assert all(info.solved for info in infos)
        deepest = -_sole_heights(rt, np.vstack((q0, qs))).min(axis=1)
        final[floor] = deepest[1:][t >= 0.5].max()
        if floor:
            assert deepest[0] > 0.009
            assert np.all(np.diff(np.maximum(deepest, 0.0)) <= 1e-6)  # never sinks again (while under)
    assert final[False] > 0.009
    assert final[True] < 1e-4


def test_hard_stance_rows_that_push_a_foot_under_the_floor_give_way_to_the_floor_rows():
    """Hard stance rows on both feet (a foot flat in contact moves as its targets say) and floor rows: the
    standing robot solves every step with the floor rows as posed, its soles within 0.1 mm of where they are
    without floor rows once the settle's roll is taken up (0.5 s). When the stance rows themselves push a
    foot under the floor (its target dipping 3 cm while flat in contact) the two contradict; priority 1
    (core/stance_priority.py) keeps the floor rows, so the stance rows give way only where the floor says:
    every step solved with the floor rows as posed, never held, never NaN or out of a limit, no sole point
    under the floor, and the dipped foot ends on the floor at its target's horizontal place and orientation
    (within 0.1 mm, 0.1 deg). With the plain rows the floor rows were softened, then left out on 90 steps,
    and the foot followed its target 3 cm under."""
    rt = _g1(True, stance="hard")
    t, measurements, flags = _standing(rt, 1.0)
    assert all(m.stance.all() for m in measurements[20:])
    _, qs, infos = _run(rt, measurements)
    _within_limits(rt, qs)
    assert {info.floor for info in infos} == {"hard"} and all(info.solved for info in infos)
    heights = _sole_heights(rt, qs)
    assert -heights.min() < 5e-4
    without = _g1(False, stance="hard")
    _, qs_without, _ = _run(without, _standing(without, 1.0)[1])
    # the settle leaves G1's stance soles rolled a little, a corner 1.8 mm under without the rows: they lift
    # it at first; from 0.5 s on both stand alike
    heights_without = _sole_heights(without, qs_without)
    assert -heights_without.min() > 1e-3
    assert np.abs(heights - heights_without)[t >= 0.5].max() < 1e-4
    dipped = _dip_left_foot(measurements, rt, t, 0.03)
    ik, qs, infos = _run(rt, dipped)
    _within_limits(rt, qs)
    assert all(info.solved and not info.held for info in infos)
    assert {info.floor for info in infos} == {"hard"}
    assert -_sole_heights(rt, qs).min() < 5e-4
    yielded = [info.stance == "yielded" for info in infos]
    assert sum(yielded) >= 80 and ik.extra.priority.counts["yielded"] == sum(yielded)
    foot = rt.config.feet[0].frame
    model, data = rt.robot.model, rt.robot.model.createData()
    pin.framesForwardKinematics(model, data, qs[-1])
    placement = data.oMf[rt.robot.frame_id(foot)]
    target = dipped[-1]
    p = target.positions[[x.frame for x in rt.targets.position_targets].index(foot)]
    r = target.rotations[[x.frame for x in rt.targets.orientation_targets].index(foot)]
    assert np.abs(placement.translation[:2] - p[:2]).max() < 1e-4
    assert np.degrees(np.linalg.norm(pin.log3(r.T @ placement.rotation))) < 0.1
    assert abs(placement.translation[2] - (p[2] + 0.03)) < 5e-4  # on the floor, 3 cm over its target


def test_hard_stance_rows_still_hold_feet_pulled_by_the_legs_with_floor_rows():
    """The hard stance rows' test (test_stance_rows.py: the legs' targets turned and the pelvis target moved
    down and sideways) with floor rows too: both feet within 0.1 mm and 0.1 deg, as without them. (With
    the floor rows appended, the stance rows once lost their last four places: a foot moved 1 mm, tilted
    2.5 deg.)"""
    from test_stance_rows import _stand_against_the_legs

    for moved, tilt in _stand_against_the_legs("hard", floor_rows=True):
        assert moved < 1e-4 and tilt < 0.1


def test_the_map_and_the_cli_switch_the_floor_rows():
    data = {
        "robot": {"name": "x", "urdf": "x.urdf"},
        "root": {"link": "Pelvis", "frame": "pelvis"},
        "calibration": {"base_rpy_deg": [0, 0, 0], "joints_deg": {}},
        "targets": [{"link": "Pelvis", "frame": "pelvis", "position": True}],
        "contact": {"floor_rows": "yes"},
    }
    with pytest.raises(RetargetConfigError, match="contact.floor_rows"):
        config_from_dict(data, "bad.yaml")
    data["contact"]["floor_rows"] = True
    assert config_from_dict(data, "ok.yaml").contact.floor_rows is True
    assert config_from_dict(data, "ok.yaml").to_dict()["contact"]["floor_rows"] is True
    rt = _g1(True)
    floor = rt.ik_config().floor
    half = rt.config.balance.sole_half_width
    assert floor.points == points_of_feet(rt.config.feet, half) and len(floor.points) == 8
    assert floor.height == rt.contact.robot_ground
    assert not _g1(False).ik_config().floor.enabled
    with pytest.raises(ValueError, match="gain"):
        FloorConfig(floor.points, gain=0.0)


@pytest.mark.parametrize("value, rows", [("on", 8), ("off", 0), ("map", 8)])
def test_ik_node_parameter_switches_the_floor_rows(h, value, rows):
    """ik_node's ``floor_rows`` (a real rclpy node, configured): 'on' gives G1's IK the rows of its eight sole
    corners at the map's ground, as 'map' does (the maps' default), 'off' none."""
    from node_harness import ik, ok

    solver = h.add(ik(model="", robot="g1", floor_rows=value))
    assert ok(solver.trigger_configure())
    floor = solver.ik.extra.floor if solver.ik.extra is not None else None
    assert (floor.n_rows if floor is not None else 0) == rows
    if floor is not None:
        feet = solver.retargeter.config.feet
        assert floor.config.points == points_of_feet(feet, solver.retargeter.config.balance.sole_half_width)


def test_ik_node_refuses_a_floor_rows_value_it_does_not_know(h):
    from node_harness import ik, ok

    solver = h.add(ik(model="", robot="g1", floor_rows="yes"))
    assert not ok(solver.trigger_configure())
    assert "floor_rows" in solver.last_error
