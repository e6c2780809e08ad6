"""The simulated robot (dynik_ros.sim): trajectory interpolation against known polynomials, commands that
must never reach the actuators, the harness, tracking in sim time, and the URDF import (real MuJoCo)."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.sim.trajectory import (
    REFUSED_MALFORMED,
    REFUSED_NAN,
    REFUSED_UNKNOWN_JOINT,
    CommandRefused,
    JointTrajectoryFollower,
)

pytest.importorskip("mujoco")

NAMES = ["a", "b"]
LOWER, UPPER = np.array([-1.0, -2.0]), np.array([1.0, 2.0])


def _follower(initial=(0.0, 0.0)) -> JointTrajectoryFollower:
    return JointTrajectoryFollower(NAMES, LOWER, UPPER, np.array(initial))


def test_positions_only_interpolate_linearly_from_the_held_reference_then_hold():
    f = _follower((0.2, -0.4))
    f.set_trajectory(NAMES, [0.1, 0.3], [[0.4, 0.0], [0.0, 1.0]], now=1.0)
    for t, expected in [
        (1.05, [0.3, -0.2]),  # halfway from the held reference to the first point
        (1.1, [0.4, 0.0]),
        (1.2, [0.2, 0.5]),
        (1.3, [0.0, 1.0]),
        (5.0, [0.0, 1.0]),
    ]:
        pos, _ = f.sample(t)
        np.testing.assert_allclose(pos, expected, atol=1e-12)
    _, vel = f.sample(6.0)
    np.testing.assert_array_equal(vel, 0.0)


def _poly(coeffs, t):
    return sum(c * t**k for k, c in enumerate(coeffs)), sum(
        k * c * t ** (k - 1) for k, c in enumerate(coeffs) if k
    )


def _poly_acc(coeffs, t):
    return sum(k * (k - 1) * c * t ** (k - 2) for k, c in enumerate(coeffs) if k > 1)


@pytest.mark.parametrize("order", [3, 5])
def test_velocities_give_the_cubic_and_accelerations_the_quintic_through_the_points(order):
    """Points sampled from a cubic (positions + velocities) or quintic (+ accelerations) polynomial:
    the interpolated reference is that polynomial between the points."""
    coeffs = [0.1, 0.5, -0.8, 0.6] if order == 3 else [0.1, 0.5, -0.8, 0.6, 0.9, -0.7]
    times = np.array([0.0, 0.25, 0.6, 1.0])
    pos = np.array([[_poly(coeffs, t)[0]] * 2 for t in times])
    vel = np.array([[_poly(coeffs, t)[1]] * 2 for t in times])
    acc = np.array([[_poly_acc(coeffs, t)] * 2 for t in times]) if order == 5 else None
    f = _follower((pos[0, 0], pos[0, 0]))
    f.set_trajectory(NAMES, times, pos, now=2.0, velocities=vel, accelerations=acc)
    for t in np.linspace(0.0, 0.975, 40):
        p, v = f.sample(2.0 + t)
        assert p[0] == pytest.approx(_poly(coeffs, t)[0], abs=1e-9)
        assert v[0] == pytest.approx(_poly(coeffs, t)[1], abs=1e-9)
    p, v = f.sample(3.0)  # the end: the last point, held still
    assert p[0] == pytest.approx(_poly(coeffs, 1.0)[0], abs=1e-12) and v[0] == 0.0
    if order == 3:  # the linear interpolation would differ: the test can tell them apart
        assert abs(0.5 * (pos[1, 0] + pos[2, 0]) - _poly(coeffs, 0.425)[0]) > 1e-3


def test_a_new_trajectory_replaces_the_old_one_from_its_start_time():
    f = _follower()
    f.set_trajectory(NAMES, [1.0], [[1.0, 1.0]], now=0.0)  # ramp 0 -> 1 over [0, 1]
    f.set_trajectory(NAMES, [0.5], [[-1.0, 0.0]], now=0.1, start=0.5)  # from t = 0.5
    np.testing.assert_allclose(f.sample(0.4)[0], [0.4, 0.4], atol=1e-12)  # old one still runs
    np.testing.assert_allclose(f.sample(0.5)[0], [0.5, 0.5], atol=1e-12)  # switch: start from here
    np.testing.assert_allclose(f.sample(0.75)[0], [-0.25, 0.25], atol=1e-12)
    np.testing.assert_allclose(f.sample(1.0)[0], [-1.0, 0.0], atol=1e-12)
    # a partial trajectory: the joint it does not name holds
    f.set_trajectory(["b"], [0.1], [[0.7]], now=2.0)
    np.testing.assert_allclose(f.sample(2.1)[0], [-1.0, 0.7], atol=1e-12)


def test_out_of_limit_commands_are_clipped_and_bad_ones_refused_whole():
    f = _follower((0.3, 0.3))
    f.set_positions([5.0, -0.5], now=0.0)
    np.testing.assert_array_equal(f.sample(0.0)[0], [1.0, -0.5])
    assert (f.counts.clipped_commands, f.counts.clipped_values) == (1, 1)
    f.set_trajectory(NAMES, [0.1, 0.2], [[0.0, 0.0], [-9.0, 9.0]], now=0.0, velocities=[[0, 9], [-9, 0]])
    for t in np.linspace(0.0, 0.3, 31):
        pos, _ = f.sample(t)
        assert np.all(pos >= LOWER) and np.all(pos <= UPPER)
    held = f.sample(1.0)[0].copy()
    bad = [
        (REFUSED_NAN, lambda: f.set_positions([np.nan, 0.0], now=1.0)),
        (REFUSED_NAN, lambda: f.set_trajectory(NAMES, [0.1], [[0.0, np.inf]], now=1.0)),
        (REFUSED_NAN, lambda: f.set_trajectory(NAMES, [0.1], [[0, 0]], now=1.0, velocities=[[np.nan, 0]])),
        (REFUSED_UNKNOWN_JOINT, lambda: f.set_trajectory(["a", "z"], [0.1], [[0.0, 0.0]], now=1.0)),
        (REFUSED_MALFORMED, lambda: f.set_trajectory(NAMES, [0.2, 0.1], [[0, 0], [0, 0]], now=1.0)),
        (REFUSED_MALFORMED, lambda: f.set_trajectory(NAMES, [0.1], [[0.0]], now=1.0)),
        (REFUSED_MALFORMED, lambda: f.set_positions([0.0], now=1.0)),
    ]
    for reason, call in bad:
        with pytest.raises(CommandRefused) as info:
            call()
        assert info.value.reason == reason
    assert f.counts.refused == {REFUSED_NAN: 3, REFUSED_UNKNOWN_JOINT: 1, REFUSED_MALFORMED: 3}
    np.testing.assert_array_equal(f.sample(2.0)[0], held)


# ----------------------------------------------------------------------------- MuJoCo


def _g1(base_mode="harness"):
    from dynik_ros.sim.simulator import SimConfig, Simulator

    return Simulator.from_robot("g1", SimConfig(base_mode=base_mode))


def test_out_of_limit_and_nan_commands_never_reach_the_actuators():
    sim = _g1()
    lower, upper = sim.follower.lower, sim.follower.upper
    n = len(sim.joint_names)
    wild = np.where(np.arange(n) % 2 == 0, upper + 1.0, lower - 1.0)
    sim.follower.set_positions(wild, sim.time)
    ctrls = []
    for _ in range(300):
        sim.step(1)
        ctrls.append(sim.data.ctrl[sim.actuator_ids].copy())
    ctrls = np.array(ctrls)
    assert np.all(ctrls >= lower) and np.all(ctrls <= upper)
    np.testing.assert_array_equal(ctrls[-1], np.where(np.arange(n) % 2 == 0, upper, lower))
    q = sim.controlled_positions()
    assert np.all(q >= lower - 0.08) and np.all(q <= upper + 0.08)  # MuJoCo's limits are soft
    before = sim.data.ctrl.copy()
    for command in ([np.nan] * n, [np.inf] + [0.0] * (n - 1)):
        with pytest.raises(CommandRefused):
            sim.follower.set_positions(command, sim.time)
        with pytest.raises(CommandRefused):
            sim.follower.set_trajectory(sim.joint_names, [0.01], [command], sim.time)
        sim.step(20)
        assert np.all(np.isfinite(sim.data.ctrl)) and np.all(np.isfinite(sim.data.qpos))
        np.testing.assert_array_equal(sim.data.ctrl, before)
    assert sim.follower.counts.refused[REFUSED_NAN] == 4
    assert sim.follower.counts.clipped_values == n


def _tilt_deg(rotation: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip(rotation[2, 2], -1.0, 1.0))))


def test_harness_keeps_a_pushed_robot_standing_that_falls_without_it():
    """G1 and iCub standing in their IK start pose, pushed forward at the torso (120 N for 0.3 s): free
    on the ground they fall (base down by more than 0.2 m, tilted past 45 deg); in the harness they stay
    within 2 cm and 3 deg of where they started."""
    from dynik_ros.sim.simulator import SimConfig, Simulator

    for robot, torso in [("g1", "torso_link"), ("icub", "chest")]:
        for mode in ("free", "harness"):
            sim = Simulator.from_robot(robot, SimConfig(base_mode=mode))
            start, _ = sim.base_pose()
            body = sim.model.body(torso).id
            for _ in range(300):
                sim.data.xfrc_applied[body, :3] = [120.0, 0.0, 0.0]
                sim.step(1)
            sim.data.xfrc_applied[body, :3] = 0.0
            sim.step(3000)
            position, rotation = sim.base_pose()
            drift, tilt = float(np.linalg.norm(position - start)), _tilt_deg(rotation)
            if mode == "free":
                assert start[2] - position[2] > 0.2 and tilt > 45.0, (robot, position, tilt)
            else:
                assert drift < 0.02 and tilt < 3.0, (robot, drift, tilt)


def test_harness_follows_its_target():
    sim = _g1()
    start, rotation = sim.base_pose()
    assert not sim.set_harness_target(np.array([np.nan, 0, 0]), rotation)
    assert not sim.set_harness_target(start, 2.0 * rotation)
    yaw = np.array([[np.cos(0.3), -np.sin(0.3), 0], [np.sin(0.3), np.cos(0.3), 0], [0, 0, 1]])
    target = start + np.array([0.0, 0.0, 0.25])  # lifted: the feet leave the ground
    assert sim.set_harness_target(target, yaw @ rotation)
    sim.step(3000)
    position, now = sim.base_pose()
    # hanging from the spring: it sags by m g / K below the target
    sag = sim.total_mass * 9.81 / sim.config.harness_stiffness
    assert 0.01 < sag < 0.1
    np.testing.assert_allclose(position, target - [0.0, 0.0, sag], atol=0.005)
    assert np.degrees(np.arccos(np.clip((np.trace((yaw @ rotation).T @ now) - 1) / 2, -1, 1))) < 2.0


def test_joints_follow_commands_with_bounded_error_and_delay_in_sim_time():
    """G1 hanging in the harness, every joint commanded with a sinusoid at 50 Hz: after the best time
    shift the joints are within 0.01 rad RMS; the shift (delay) p50 is under 60 ms for forward commands
    and one-point trajectories 20 ms ahead, and the trajectories' delay exceeds the forward commands'
    by about their 20 ms."""
    from dynik_ros.sim.tracking import track_sinusoid

    delays = {}
    for interface in ("forward_command", "joint_trajectory"):
        sim = _g1()
        position, rotation = sim.base_pose()
        sim.set_harness_target(position + np.array([0.0, 0.0, 0.3]), rotation)
        sim.step(1000)
        result = track_sinusoid(sim, duration=3.0, interface=interface, time_from_start=0.02)
        assert np.all(result.rms_after_shift < 0.01), result.rms_after_shift
        assert result.delay_p50 < 0.06
        delays[interface] = result.delay_p50
    assert 0.01 <= delays["joint_trajectory"] - delays["forward_command"] <= 0.03, delays


def test_collada_collision_meshes_become_convex_hulls_of_the_same_vertices():
    """iCub's collision meshes are .dae (MuJoCo reads none): each becomes an STL of the convex hull of
    the vertices assimp reads: every STL corner is one of them and every one of them is inside the hull
    (behind every outward face)."""
    import struct

    import coal

    from dynik_ros.retarget.registry import load_robot
    from dynik_ros.sim.urdf_mjcf import prepare_urdf, resolve_mesh_path

    spec = load_robot("icub")
    prepared = prepare_urdf(spec.urdf_path)
    assert prepared.converted_meshes == 28 and len(prepared.assets) == 28
    assert "r_hip_1" in prepared.repaired_inertias  # 0.754 kg with zero inertia in the URDF
    name = next(n for n in prepared.assets if "chest" in n)
    source = resolve_mesh_path(
        "package://example-robot-data/robots/icub_description/meshes/upmc/collision/"
        "icub_simple_collision_chest.dae",
        spec.urdf_path,
    )
    vertices = np.asarray(coal.MeshLoader().load(str(source), np.ones(3)).vertices())
    data = prepared.assets[name]
    (count,) = struct.unpack_from("<I", data, 80)
    assert len(data) == 84 + 50 * count
    faces = np.array([struct.unpack_from("<12f", data, 84 + 50 * i) for i in range(count)]).reshape(-1, 4, 3)
    corners = faces[:, 1:].reshape(-1, 3)
    distance = np.min(np.linalg.norm(corners[:, None, :] - vertices[None, :, :], axis=2), axis=1)
    assert distance.max() < 1e-6  # float32 STL
    for normal, a, b, c in faces:
        n = np.cross(b - a, c - a)
        assert np.dot(n, normal) > 0  # stored normal agrees with the winding
        assert np.max((vertices - a) @ (n / np.linalg.norm(n))) < 1e-5


def test_a_diverged_simulation_restarts_from_the_start_pose_and_is_counted(tmp_path, monkeypatch):
    """MuJoCo resets a simulation whose state went non-finite to the model's zero pose (the base inside
    the ground); the simulator puts the robot back in its start pose, at rest, holding it."""
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning to MUJOCO_LOG.TXT in the working directory
    sim = _g1()
    start, rotation = sim.base_pose()
    sim.follower.set_positions(sim.follower.position + 0.1, sim.time)
    sim.step(100)
    sim.data.qvel[10] = np.nan  # a blow-up
    sim.step(1)
    assert sim.instabilities == 1 and sim.follower.counts.accepted == 1  # the recovery is no command
    position, now = sim.base_pose()
    np.testing.assert_allclose(position, start, atol=1e-9)
    np.testing.assert_allclose(now, rotation, atol=1e-9)
    sim.step(500)
    assert sim.instabilities == 1 and np.all(np.isfinite(sim.data.qpos))
    assert np.linalg.norm(sim.base_pose()[0] - start) < 0.02


def test_the_pacer_keeps_real_time_in_bounded_chunks_and_drops_a_larger_debt():
    from dynik_ros.sim.session import Pacer

    pacer = Pacer(timestep=0.001, real_time_factor=1.0, max_chunk=0.05)
    pacer.restart(wall=100.0, sim=0.0)
    assert pacer.steps(100.010, 0.0) == 10
    assert pacer.steps(100.0115, 0.010) == 1
    assert pacer.steps(101.0, 0.011) == 50  # 989 due: one chunk now, the rest dropped and counted
    assert pacer.overruns == 1 and pacer.dropped == pytest.approx(0.939)
    assert pacer.steps(101.0, 0.061) == 0  # caught up with the dropped time accounted for
    assert pacer.steps(101.005, 0.061) == 5
    fast = Pacer(timestep=0.001, real_time_factor=2.0, max_chunk=0.05)
    fast.restart(wall=0.0, sim=0.0)
    assert fast.steps(0.01, 0.0) == 20
    free = Pacer(timestep=0.002, real_time_factor=0.0, max_chunk=0.05)
    assert free.steps(0.0, 0.0) == 25 and free.steps(0.0, 1.0) == 25  # as fast as asked, chunk by chunk


@pytest.mark.parametrize("mocap_rate", [750.0, 100.0])
def test_mocap_captures_and_state_publications_share_their_sim_time_grid(mocap_rate):
    """Both schedules are anchored at sim time 0, whichever step the session starts at: a 750 Hz mocap
    and 100 Hz states meet at least every 40 ms (30 captures, 4 states; steps rounding k / 750 up give
    more), equal rates at every publication."""
    from dynik_ros.sim.mocap import MocapConfig, MocapSimulator
    from dynik_ros.sim.session import SimSession

    sim = _g1()
    sim.step(7)  # start off the grid
    mocap = MocapSimulator(
        MocapConfig(
            rate=mocap_rate, dropout_fraction=0.0, outlier_fraction=0.0, latency_min=0.0, latency_max=0.0
        )
    )
    session = SimSession(sim, 0.01, mocap)
    states: list[float] = []
    captures: list[float] = []
    session.advance(400, states.append, lambda s: captures.append(s.stamp))
    states_r = {round(t, 6) for t in states[1:]}  # after the first step (both start there)
    captures_r = {round(t, 6) for t in captures[1:]}
    common = sorted(states_r & captures_r)
    period = 0.04 if mocap_rate == 750.0 else 0.01
    grid = {round(k * period, 6) for k in range(1, 100) if 0.008 < k * period <= sim.time + 1e-9}
    if mocap_rate == 750.0:
        assert grid <= set(common), sorted(grid - set(common))[:5]
    else:
        assert set(common) == grid == states_r, (common[:5], sorted(grid)[:5])
    assert all(abs(t * 100 - round(t * 100)) < 1e-6 for t in states[1:])  # states on multiples of 10 ms


def test_a_robot_with_a_light_base_link_comes_to_rest_in_the_harness():
    """The iCub's root_link weighs 4.7 kg but has 1.9e-4 kg m^2 of inertia: the harness's base damping,
    applied as an external moment, spun it at ~15 rad/s in place (the joints rattling by 0.03-0.08 rad,
    the base wandering by millimetres: the 2-14 cm mocap errors of the first iCub loop). Integrated
    implicitly (the free joint's damping) the standing robot comes to rest: base still to 0.05 rad/s and
    0.1 mm over the last second, every joint within 0.01 rad of its command; G1 the same."""
    from dynik_ros.sim.simulator import SimConfig, Simulator

    for robot in ("icub", "g1"):
        sim = Simulator.from_robot(robot, SimConfig(base_mode="harness"))
        sim.step(2000)
        settled, _ = sim.base_pose()
        spin, wander = 0.0, 0.0
        for _ in range(100):
            sim.step(10)
            spin = max(spin, float(np.abs(sim.data.qvel[sim._free_dof + 3 : sim._free_dof + 6]).max()))
            wander = max(wander, float(np.linalg.norm(sim.base_pose()[0] - settled)))
        error = np.abs(sim.controlled_positions() - sim.follower.position).max()
        assert spin < 0.05 and wander < 1e-4 and error < 0.01, (robot, spin, wander, error)
