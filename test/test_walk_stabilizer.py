"""The walking stabilizer (control/stabilizer.py, sim/walk_stabilizer.py): the control law's signs and limits
on hand-made feet, the contact wrench measured in real MuJoCo against the robot's weight, a pelvis shift
through the leg Jacobian, and the retargeted 3-step ZMP walk on the sim's defaults, which stands with the
stabilizer and falls without it (sim time only: deterministic, no wall clock)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dynik_ros.control.stabilizer import (
    GRAVITY,
    FootState,
    PlanSample,
    Stabilizer,
    StabilizerConfig,
    closest_in_polygon,
    convex_hull,
)

SOLE = np.array([[0.08, 0.03], [-0.08, 0.03], [-0.08, -0.03], [0.08, -0.03]])


def foot(y: float, fz: float, cop_offset=(0.0, 0.0)) -> FootState:
    centre = np.array([0.0, y, 0.0])
    cop = centre + np.array([cop_offset[0], cop_offset[1], 0.0])
    return FootState(centre + [0, 0, 0.07], np.eye(3), SOLE, centre, np.array([0.0, 0.0, fz]), cop)


def plan_at(com_xy, loaded=(True, True)) -> PlanSample:
    com = np.array([com_xy[0], com_xy[1], 0.69])
    return PlanSample(com, np.zeros(3), np.array(com_xy, dtype=float), loaded)


def test_closest_point_of_a_shrunk_polygon():
    square = convex_hull(np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]]))
    assert len(square) == 4
    assert closest_in_polygon(np.array([0.3, 0.4]), square) == pytest.approx([0.3, 0.4])
    assert closest_in_polygon(np.array([2.0, 0.5]), square, 0.1) == pytest.approx([0.9, 0.5])
    assert closest_in_polygon(np.array([2.0, 2.0]), square, 0.1) == pytest.approx([0.9, 0.9])
    assert closest_in_polygon(np.array([2.0, 2.0]), square, 0.6) == pytest.approx([0.5, 0.5])  # empty


def test_ankle_turns_the_way_the_ground_pushes_and_relaxes_without_load():
    """CoP 3 cm ahead of the desired one: the sole pitches toe-up (negative about y), by A * torque * dt;
    2 cm to the left: rolls left side up (positive about x); an unloaded foot's offset decays."""
    config = StabilizerConfig(dcm_gain=1.0, margin=0.0, ankle_admittance=0.02, ankle_return=0.5)
    weight = 30.0 * GRAVITY
    stab = Stabilizer(config, 30.0)
    feet = (foot(0.0, weight, (0.03, 0.02)), foot(-0.2, 0.0))
    offsets = stab.update(0.01, plan_at((0.0, 0.0), (True, False)), np.array([0, 0, 0.69]), np.zeros(3), feet)
    assert offsets.ankle[0, 1] == pytest.approx(-0.02 * 0.03 * weight * 0.01)  # pitch: toe up
    assert offsets.ankle[0, 0] == pytest.approx(0.02 * 0.02 * weight * 0.01)  # roll: left edge up
    assert np.all(offsets.ankle[1] == 0.0)
    before = offsets.ankle[0].copy()
    air = (foot(0.0, 0.0), foot(-0.2, 0.0))
    offsets = stab.update(0.01, plan_at((0.0, 0.0), (True, False)), np.array([0, 0, 0.69]), np.zeros(3), air)
    assert offsets.ankle[0] == pytest.approx(before * (1.0 - 0.01 / 0.5))


def test_dcm_error_moves_the_desired_zmp_and_is_clipped_to_the_sole():
    stab = Stabilizer(StabilizerConfig(dcm_gain=2.0, margin=0.005, velocity_filter=0.0), 30.0)
    weight = 30.0 * GRAVITY
    feet = (foot(0.0, weight), foot(-0.2, 0.0))
    plan = plan_at((0.0, 0.0), (True, False))
    stab.update(0.005, plan, np.array([0.01, 0.0, 0.69]), np.zeros(3), feet)  # 1 cm ahead, at rest
    assert stab.log.desired_zmp == pytest.approx([0.02, 0.0])
    stab.update(0.005, plan, np.array([0.0, 0.0, 0.69]), np.array([0.0, 0.5, 0.0]), feet)  # moving left
    assert stab.log.desired_zmp == pytest.approx([0.0, 0.025])  # sole edge 0.03 less the margin


def test_overloaded_foot_rises_in_double_support():
    """Desired ZMP midway: each foot should carry half; the left one carries 2/3, so it lifts."""
    config = StabilizerConfig(dcm_gain=1.0, force_gain=1e-4, force_return=1.0)
    stab = Stabilizer(config, 30.0)
    weight = 30.0 * GRAVITY
    feet = (foot(0.1, 2 * weight / 3), foot(-0.1, weight / 3))
    offsets = stab.update(0.01, plan_at((0.0, 0.0)), np.array([0, 0, 0.69]), np.zeros(3), feet)
    assert stab.log.load == pytest.approx([0.5, 0.5])
    assert offsets.lift[0] == pytest.approx(0.5 * 0.01 * 1e-4 * weight / 3)
    assert offsets.lift[1] == pytest.approx(-offsets.lift[0])


def test_non_finite_measurement_holds_the_offsets():
    stab = Stabilizer(StabilizerConfig(), 30.0)
    weight = 30.0 * GRAVITY
    feet = (foot(0.0, weight, (0.03, 0.0)), foot(-0.2, 0.0))
    held = stab.update(0.01, plan_at((0.0, 0.0)), np.array([0, 0, 0.69]), np.zeros(3), feet).ankle.copy()
    bad = np.array([np.nan, 0.0, 0.69])
    assert np.all(stab.update(0.01, plan_at((0.0, 0.0)), bad, np.zeros(3), feet).ankle == held)
    with pytest.raises(ValueError):
        StabilizerConfig(ankle_return=0.0).validate()


def test_contact_wrench_of_a_standing_robot_carries_its_weight():
    """Real MuJoCo, G1 standing still (1 s): the feet's vertical forces sum to m g, the CoP lies between the
    feet under the measured CoM, each foot's CoP inside its own sole. A plan with repeated times, too few
    samples, the wrong width or a NaN is refused."""
    pytest.importorskip("mujoco")
    from dynik_ros.retarget.registry import load_robot
    from dynik_ros.sim.simulator import SimConfig, Simulator
    from dynik_ros.sim.walk_stabilizer import SimWalkStabilizer

    sim = Simulator.from_robot("g1", SimConfig(base_mode="free"))
    spec = load_robot("g1")
    q = np.array([spec.initial_configuration()] * 3)
    joints = spec.robot.joint_names
    for times, plan in (([0.0, 1.0, 1.0], q), ([0.0, 1.0], q[:2]), ([0.0, 1.0, 2.0], q[:, :-1])):
        with pytest.raises(ValueError):
            SimWalkStabilizer(sim, joints, np.array(times), plan)
    bad = q.copy()
    bad[1, 9] = np.nan
    with pytest.raises(ValueError):
        SimWalkStabilizer(sim, joints, np.array([0.0, 1.0, 2.0]), bad)
    stab = SimWalkStabilizer(sim, joints, np.array([0.0, 1.0, 2.0]), q)
    sim.step(1000)
    feet = stab.foot_states()
    total = sum(f.force for f in feet)
    assert total[2] == pytest.approx(sim.total_mass * GRAVITY, rel=0.01)
    assert np.abs(total[:2]).max() < 0.01 * total[2]
    zmp = sum(f.force[2] * f.cop[:2] for f in feet) / total[2]
    com, velocity = stab.measured_com()
    assert np.linalg.norm(zmp - com[:2]) < 0.005 and np.linalg.norm(velocity) < 0.01
    for f in feet:
        local = f.rotation.T @ (f.cop - f.centre)
        assert np.all(np.abs(local[:2]) <= f.sole.max(axis=0) + 1e-3)
    assert stab.plan_loaded.all() and stab.plan_share == pytest.approx(0.5, abs=0.02)


def test_pelvis_shift_through_the_leg_jacobian_moves_the_com():
    """Real MuJoCo, the standing G1 (knees stretched: the leg Jacobian is singular): a held 2 cm pelvis shift
    to the left moves the measured CoM 1-2 cm left and the robot keeps standing on both feet. (A plain
    solve of the 6x6 Jacobian commanded ~30 rad and the robot collapsed.)"""
    pytest.importorskip("mujoco")
    from dynik_ros.control.stabilizer import Offsets
    from dynik_ros.retarget.registry import load_robot
    from dynik_ros.sim.simulator import SimConfig, Simulator
    from dynik_ros.sim.walk_stabilizer import SimWalkStabilizer

    spec = load_robot("g1")
    sim = Simulator.from_robot("g1", SimConfig(base_mode="free"))
    q = np.array([spec.initial_configuration()] * 3)
    stab = SimWalkStabilizer(sim, spec.robot.joint_names, np.array([0.0, 1.0, 2.0]), q)
    shift = Offsets()
    shift.com_shift[:] = (0.0, 0.02)
    stab.controller.update = lambda *args, **kwargs: shift  # the offsets held, no feedback
    standing = sim.controlled_positions().copy()
    sim.step(500)
    before = stab.measured_com()[0]
    for _ in range(400):  # 2 s
        target = stab.correct(0, 0.0, standing, 0.005)
        assert np.abs(target - standing).max() < 0.1
        sim.follower.set_positions(target, sim.time)
        sim.step(5)
    moved = stab.measured_com()[0] - before
    assert 0.01 < moved[1] < 0.02 and abs(moved[0]) < 0.005 and abs(moved[2]) < 0.005
    assert all(f.force[2] > 0.2 * sim.total_mass * GRAVITY for f in stab.foot_states())


def test_three_step_zmp_walk_on_default_sim_stands_only_with_the_stabilizer():
    """The planted walk (3 steps of 1.25 s) retargeted with the ZMP plan, played at its own speed on the sim's
    defaults (servos kp_scale 1, MuJoCo's 20 ms contact): open loop it falls; with the stabilizer it walks
    the whole way, pelvis tilt within 5 deg of the plan's."""
    pytest.importorskip("mujoco")
    from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.sim.simulator import SimConfig, Simulator
    from dynik_ros.sim.walk_playback import play
    from dynik_ros.sim.walk_stabilizer import SimWalkStabilizer

    retargeter = Retargeter.from_config("g1")
    human = retargeter.config.human
    motion = planted_walk(PlantedWalkSpec(steps=3), 100.0, height=human.height, mass=human.mass)
    balance = replace(retargeter.config.balance, enabled=True, plan="zmp")
    retargeter.config = replace(retargeter.config, balance=balance)
    measurements, flags = retargeter.motion_measurements(motion)
    balanced = retargeter.balanced(motion.times, measurements, flags)
    q = np.asarray(retargeter.run(motion.times, balanced, settle=1.0, contacts=flags).q)
    joints = retargeter.robot.joint_names
    config = SimConfig(base_mode="free")

    open_loop = play(Simulator.from_robot("g1", config), joints, motion.times, q)
    assert open_loop.fell_at is not None

    sim = Simulator.from_robot("g1", config)
    stabilizer = SimWalkStabilizer(sim, joints, motion.times, q)
    closed = play(sim, joints, motion.times, q, stabilizer=stabilizer)
    assert closed.fell_at is None
    assert closed.duration == pytest.approx(2.0 + motion.times[-1] - motion.times[0] + 1.0, abs=0.01)
    assert closed.max_tilt_error < 5.0 and closed.min_height > 0.65
    assert closed.travelled > 0.9 * closed.planned_travel > 0.3
    assert np.all(np.isfinite(sim.data.ctrl))
