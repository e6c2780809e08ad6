"""A held foot anchored where the robot's own sole is (``contact.anchor: robot``, retarget/robot_anchor.py):
checked on the written trajectory (forward kinematics of the output q) of a robot whose legs cannot keep up
with a quick human step (leg velocity limits cut to 0.5 rad/s), offline (``Retargeter.run``) and one sample
at a time as ``ik_node`` does (``Retargeter.measurements(..., robot_q=ik.q)``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dynik_ros.retarget.config import RetargetConfigError, config_from_dict
from dynik_ros.retarget.foot_figures import foot_figures
from dynik_ros.retarget.retargeter import Retargeter

STEP, LIFT, SWING = 0.3, 0.08, 0.15  # m forward, m up, s: the human's left foot steps at 0.5 s
SLOW_LEGS = 0.5  # rad/s on every hip, knee and ankle joint (G1's are 20-32)
# The slide target. The lagging sole reaches its flat sample still 3 mm up and travelling 5 mm a
# sample; its hold is its sole at the configuration before that sample's step, so it settles back onto it:
# 2.9 / 3.5 mm with the held feet's weight on the swing foot (weighted / hard rows), 4.6 / 4.2 mm with the
# maps' default swing weight 0.1 (the lighter foot lags more). The human's hold: 17-29 mm.
SLIDE_LIMIT = 0.005


def _quick_step(duration: float = 2.5, rate: float = 100.0):
    """A subject in T-pose whose left foot (foot and toe) steps ``STEP`` forward in ``SWING`` s (lifted
    ``LIFT``, smoothstep in x, half a sine in z) from 0.5 s, then stands; the rest still."""
    from dynik_ros.cli.retarget import synthetic_motion

    motion = synthetic_motion("tpose", duration, rate)
    t = motion.times - motion.times[0]
    x = np.clip((t - 0.5) / SWING, 0.0, 1.0)
    s = x * x * (3.0 - 2.0 * x)
    ds = np.where((x > 0.0) & (x < 1.0), 6.0 * x * (1.0 - x) / SWING, 0.0)
    positions, velocities = motion.positions.copy(), motion.linear_velocities.copy()
    for link in ("LeftFoot", "LeftToe"):
        i = motion.links.index(link)
        positions[:, i, 0] += STEP * s
        positions[:, i, 2] += LIFT * np.sin(np.pi * s)
        velocities[:, i, 0] += STEP * ds
        velocities[:, i, 2] += LIFT * np.pi * np.cos(np.pi * s) * ds
    return dataclasses.replace(motion, positions=positions, linear_velocities=velocities)


def _slow_g1(anchor: str, stance: str = "weighted") -> Retargeter:
    rt = Retargeter.from_config("g1")
    contact = dataclasses.replace(rt.config.contact, anchor=anchor, stance=stance)
    rt.config = dataclasses.replace(rt.config, contact=contact)
    for name in rt.robot.joint_names:
        if any(part in name for part in ("hip", "knee", "ankle")):
            rt.robot.set_velocity_limit(name, SLOW_LEGS)
    return rt


def _landing(flags: np.ndarray) -> tuple[int, int]:
    """``[start, end)`` of the left foot's last contact (the one after the step)."""
    inside = np.concatenate(([False], flags[:, 0] >= 0, [False]))
    edges = np.flatnonzero(np.diff(inside.astype(int)))
    return int(edges[-2]), int(edges[-1])


def _sole_centres(rt: Retargeter, q: np.ndarray) -> np.ndarray:
    """World position of the left sole's centre (mean of its sole points) for every output ``q``."""
    foot = rt.config.feet[0]
    centre = np.asarray(foot.sole, dtype=float).reshape(-1, 3).mean(axis=0)
    out = []
    for qk in q:
        p, r = rt.robot.frame_pose(qk, foot.frame)
        out.append(p + r @ centre)
    return np.array(out)


def _offline(anchor: str, stance: str = "weighted"):
    rt = _slow_g1(anchor, stance)
    motion = _quick_step()
    rt.reset()
    measurements, flags = rt.motion_measurements(motion)
    result = rt.run(motion.times, measurements, settle=1.0, contacts=flags)
    return rt, motion, measurements, flags, result


@pytest.mark.parametrize("stance", ["weighted", "hard"])
def test_a_lagging_foot_is_held_where_the_robot_put_it_not_dragged_onto_the_human_footprint(stance):
    human_rt, motion, _, human_flags, human = _offline("human", stance)
    robot_rt, _, _, robot_flags, robot = _offline("robot", stance)
    np.testing.assert_array_equal(robot_flags, human_flags)  # the contacts are the human's either way
    np.testing.assert_array_equal(robot.contacts, human.contacts)
    start, end = _landing(robot_flags)
    flat = start + int(round(robot_rt.config.contact.blend_time / (motion.times[1] - motion.times[0])))
    assert robot_rt.contact.flat[flat, 0] and not robot_rt.contact.flat[flat - 1, 0]

    # the legs lag: when the landing contact turns flat the robot's sole is well short of the human target
    shifts = np.array(robot.anchor_shifts).reshape(-1, 4)
    landing = shifts[(shifts[:, 0] == 0) & (np.abs(shifts[:, 1] - motion.times[flat]) < 1e-9)]
    assert len(landing) == 1 and landing[0, 2] > 0.008

    # ground truth on the written trajectory: the old hold drags the standing sole onto the human's
    # footprint during the flat contact (a slide); the robot's hold keeps it where it landed
    for rt, result, limit in ((human_rt, human, None), (robot_rt, robot, SLIDE_LIMIT)):
        centres = _sole_centres(rt, result.q[flat:end])
        slide = float(np.linalg.norm(centres[:, :2] - centres[0, :2], axis=1).max())
        if limit is None:
            assert slide > 0.008, slide
        else:
            assert slide < limit, slide
    figures = {
        name: foot_figures(
            rt.robot,
            r.q,
            r.times,
            r.contacts,
            rt.config.feet,
            rt.config.contact.blend_time,
            half_width=rt.config.balance.sole_half_width,
        )[0]
        for name, rt, r in (("human", human_rt, human), ("robot", robot_rt, robot))
    }
    assert figures["robot"].slide_max_mm < 1e3 * SLIDE_LIMIT < 8.0 < figures["human"].slide_max_mm
    assert figures["robot"].penetration_max_mm <= figures["human"].penetration_max_mm + 0.5

    # the written joints stay within their velocity limits (finite differences of the output)
    rates = np.abs(np.diff(robot.q[:, 7:], axis=0)) / np.diff(robot.times)[:, None]
    assert np.all(rates <= robot_rt.robot.velocity_limit * (1 + 1e-6) + 1e-9)


def test_one_sample_at_a_time_with_the_robot_configuration_holds_the_foot_as_offline():
    """``ik_node``'s path: each sample's targets from ``measurements(..., robot_q=ik.q)`` then one IK step."""
    motion = _quick_step()
    slides = {}
    for anchor in ("human", "robot"):
        rt = _slow_g1(anchor)
        rt.reset()
        times, p, r, v, w = rt.motion_arrays(motion)
        ik = rt.make_ik()
        q_out, flags = [], []
        for k, t in enumerate(times):
            poses = {link: (p[k, i], r[k, i]) for i, link in enumerate(rt.links)}
            twists = {link: (v[k, i], w[k, i]) for i, link in enumerate(rt.links)}
            m = rt.measurements(poses, twists, time=float(t), robot_q=ik.q)
            if k == 0:
                rt.settle(ik, m, 1.0)
            q, _ = ik.step(m, 0.01)
            q_out.append(q.copy())
            flags.append(rt.last_contacts.copy())
        flags = np.array(flags)
        start, end = _landing(flags)
        flat = start + 10
        centres = _sole_centres(rt, np.array(q_out)[flat:end])
        slides[anchor] = float(np.linalg.norm(centres[:, :2] - centres[0, :2], axis=1).max())
        if anchor == "robot":
            assert len(rt.contact.reanchors) >= 1
            assert max(shift for foot, _, shift, _ in rt.contact.reanchors if foot == 0) > 0.008
        else:
            assert len(rt.contact.reanchors) == 0
    assert slides["robot"] < SLIDE_LIMIT < 0.008 < slides["human"], slides


@pytest.mark.parametrize("settle", [0.0, 1.0])
def test_a_sparse_stream_moves_the_holds_as_the_offline_run_does(settle):
    """The quick step at 30 Hz (two IK steps a sample, :mod:`.ik_steps`) on the slow-legged G1: ik_node's path
    without ROS (:func:`stream_path`, every step of a sample computed when it comes, with the configuration
    the IK has then) and ``retarget_motion`` (the steps' targets replayed as the IK goes) read the robot's
    soles at the same configuration, the last sample's (the first: the one the IK starts from, before the
    settle): the same holds moved by the same amounts, the same path (1e-6). Before, the offline run read
    the configuration before every step: 0.0047 / 0.0020 rad apart here (settle 0 / 1), 0.046 rad on the CMU
    excerpt."""
    from dynik_ros.retarget.stream_input import stream_path

    motion = _quick_step(rate=30.0)
    stream = _slow_g1("robot")
    q, _, contacts, _ = stream_path(stream, motion, settle=settle)
    offline = _slow_g1("robot")
    result = offline.retarget_motion(motion, settle=settle, evaluate=False)
    moved = [shift for _, _, shift, _ in stream.contact.reanchors]
    assert max(moved) > 0.008  # the legs lag: holds moved by centimetres
    np.testing.assert_allclose(moved, [shift for _, _, shift, _ in result.anchor_shifts], atol=1e-9)
    np.testing.assert_array_equal(contacts, result.contacts)
    np.testing.assert_allclose(q[1:], result.q[1:], atol=1e-6)


def test_a_stream_remembers_the_last_moved_holds_and_an_offline_take_every_one(monkeypatch):
    """``ik_node``'s retargeter lives as long as the stream: with ``anchor: robot`` it logged every moved
    hold (one per contact: +20 per 11 s of walking, ~1 MB an hour, deep-copied at every re-base), unbounded.
    Now a stream keeps the last ``RECENT_REANCHORS``; ``run`` (a whole take, ``RetargetResult.anchor_shifts``)
    still every one."""
    from dynik_ros.core.robot_model import RobotModel
    from dynik_ros.models.assets import urdf_path
    from dynik_ros.motion.synthetic import synthesize
    from dynik_ros.retarget import foot_contact

    rt = _slow_g1("robot")
    rate, laps = 30.0, 7
    walk = synthesize(RobotModel.from_urdf_file(urdf_path("human66")), "walking", 11.0, rate, links=rt.links)
    q = rt.initial_configuration()  # the contact rule only reads the robot's soles at q
    rt.reset()
    landings, previous, k = 0, np.zeros(2, dtype=bool), 0
    for _ in range(laps):  # 77 s of walking, the clock running on (a lap's seam is a re-base in ik_node)
        for i in range(len(walk.times)):
            poses = {link: (walk.positions[i, j], walk.rotations[i, j]) for j, link in enumerate(walk.links)}
            rt.measurements(poses, time=k / rate, robot_q=q)
            now = rt.last_contacts >= 0
            landings += int(np.sum(now & ~previous))
            previous, k = now, k + 1
    assert landings > foot_contact.RECENT_REANCHORS + 20, landings
    assert len(rt.contact.reanchors) == foot_contact.RECENT_REANCHORS
    assert rt.contact.reanchors[-1][1] > (k - 1) / rate - 1.2  # the newest are the ones kept

    monkeypatch.setattr(foot_contact.FootContact, "reanchor_log", 1)  # a stream that keeps only the last one
    _, _, _, _, result = _offline("robot")
    assert len(result.anchor_shifts) >= 2  # the take's every contact, both feet


def test_the_map_names_a_bad_anchor_and_writes_a_good_one():
    data = {
        "robot": {"name": "x", "urdf": "x.urdf"},
        "root": {"link": "Pelvis", "frame": "pelvis"},
        "calibration": {"base_rpy_deg": [0, 0, 0], "joints_deg": {}},
        "targets": [{"link": "Pelvis", "frame": "pelvis", "position": True}],
        "contact": {"anchor": "floor"},
    }
    with pytest.raises(RetargetConfigError, match="contact.anchor"):
        config_from_dict(data, "bad.yaml")
    data["contact"]["anchor"] = "robot"
    assert config_from_dict(data, "ok.yaml").contact.anchor == "robot"
    assert config_from_dict(data, "ok.yaml").to_dict()["contact"]["anchor"] == "robot"
    del data["contact"]["anchor"]
    assert config_from_dict(data, "ok.yaml").contact.anchor == "robot"


def test_dynik_retarget_anchor_robot_moves_the_holds_and_keeps_the_contacts(tmp_path, capsys):
    """The maps' default (``anchor: robot``) on the committed CMU excerpt with TALOS (its legs at their
    velocity limits on 44 % of the samples): the same contacts in retarget.npz as ``--anchor human``, a
    different trajectory, and the summary says how far the holds moved (``--anchor human`` has no such
    line)."""
    from pathlib import Path

    from dynik_ros.cli.retarget import main

    excerpt = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    common = [str(excerpt), "--robot", "talos", "--no-bag", "--no-plots", "--quiet", "--settle", "0.2"]
    assert main([*common, "--out", str(tmp_path / "robot")]) == 0
    line = [
        x for x in capsys.readouterr().out.splitlines() if x.startswith("holds moved onto the robot soles")
    ]
    assert len(line) == 1 and " contacts; moved median / max " in line[0]
    assert main([*common, "--out", str(tmp_path / "human"), "--anchor", "human"]) == 0
    assert "holds moved onto the robot soles" not in capsys.readouterr().out
    robot, human = (np.load(tmp_path / name / "retarget.npz") for name in ("robot", "human"))
    np.testing.assert_array_equal(robot["contacts"], human["contacts"])
    assert np.abs(robot["q"] - human["q"]).max() > 1e-4


def test_ik_node_holds_the_lagging_foot_where_the_robot_put_it(h, tmp_path):
    """``ik_node`` with a map saying ``contact.anchor: robot`` (and the slow legs), real rclpy and DDS: the
    node gives its retargeter the IK's configuration, so the landing contact's hold is moved onto the robot's
    sole (by more than 8 mm: the leg lags) and the published left sole stays still while it is flat."""
    import yaml
    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.nodes.ik_node import IKNode

    rt = _slow_g1("robot")
    data = rt.config.to_dict()
    data["contact"]["anchor"] = "robot"
    data["limits"] = {
        **data.get("limits", {}),
        "velocity": {
            name: SLOW_LEGS
            for name in rt.robot.joint_names
            if any(p in name for p in ("hip", "knee", "ankle"))
        },
    }
    path = tmp_path / "g1_slow.yaml"
    path.write_text(yaml.safe_dump(data))
    motion = _quick_step(duration=1.6)
    rt.reset()
    _, flags = rt.motion_measurements(motion)
    start, end = _landing(flags)
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * (t - motion.times[0])) for t in motion.times]

    solver = h.add(IKNode(**params(model="", robot="g1", config_file=str(path), link_states_reliable=True)))
    q = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    landing = [s for f, t, s, _ in solver.retargeter.contact.reanchors if f == 0 and t > 0.5]
    assert len(landing) == 1 and landing[0] > 0.008
    centres = _sole_centres(rt, q[start + 10 : end])
    assert float(np.linalg.norm(centres[:, :2] - centres[0, :2], axis=1).max()) < SLIDE_LIMIT


def test_the_offline_replay_reuses_the_human_contact_decisions_and_writes_what_deciding_again_writes():
    """``Retargeter.run`` replays the feet with the robot's soles taking ``compute``'s contact decisions
    (``RobotAnchoredFeet.decided``, FootContact._decide reads the human alone) instead of running the
    touch-down, toe-off and footprint rules a second time: on the committed CMU excerpt (G1, the defaults:
    anchor robot, hard stance) the written trajectory, the moved holds and the replay's contacts are those
    of the replay deciding again, bit for bit."""
    from pathlib import Path

    from dynik_ros.io.motion_files import detect_format, read_motion_file

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    motion = read_motion_file(path, detect_format(path))
    rt = Retargeter.from_config("g1")
    assert rt.config.contact.anchor == "robot"
    rt.reset()
    measurements, flags = rt.motion_measurements(motion)
    replay = rt.robot_anchor
    np.testing.assert_array_equal(replay.decided, flags >= 0)
    starts = np.diff((flags >= 0).astype(int), axis=0)
    assert (starts > 0).sum() >= 3 and (starts < 0).sum() >= 3  # contacts begin and end
    runs = {}
    for reuse in (True, False):
        replay.decided = (flags >= 0) if reuse else None
        result = rt.run(motion.times, measurements, settle=0.2, evaluate=False, contacts=flags)
        runs[reuse] = result, replay.flags.copy(), replay.flat.copy()
    (reused, reused_flags, reused_flat), (again, again_flags, again_flat) = runs[True], runs[False]
    assert len(again.anchor_shifts) >= 3  # holds were moved onto the robot's soles
    assert reused.anchor_shifts == again.anchor_shifts
    np.testing.assert_array_equal(reused_flags, again_flags)
    np.testing.assert_array_equal(reused_flat, again_flat)
    np.testing.assert_array_equal(again_flags >= 0, flags >= 0)  # deciding again: the human's decisions
    np.testing.assert_array_equal(reused.q, again.q)


def _cmu_excerpt_on_g1():
    from pathlib import Path

    from dynik_ros.io.motion_files import detect_format, read_motion_file

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    motion = read_motion_file(path, detect_format(path))
    rt = Retargeter.from_config("g1")
    rt.reset()
    measurements, flags = rt.motion_measurements(motion)
    return rt, motion, measurements, flags


def test_an_offline_run_validates_the_take_at_once_and_the_replayed_feet_rows_as_they_come(monkeypatch):
    """``Retargeter.run`` validates the whole take up front (``plainly_valid_all``) and the rows the
    ``anchor: robot`` replay replaces as it replaces them, and steps the IK ``checked``: on the CMU excerpt
    every step is checked so, and the trajectory is the one of steps validating each sample themselves, bit
    for bit. A non-finite row out of the replay still stops the run with the step's error."""
    from dynik_ros.core.dynamical_ik import DynamicalIK
    from dynik_ros.core.targets import InvalidMeasurementError
    from dynik_ros.retarget import offline_run

    rt, motion, measurements, flags = _cmu_excerpt_on_g1()
    plain_step = DynamicalIK.step
    told = []

    def step(ik, m, dt, checked=False):
        if ik.config.branch_recovery.enabled:  # the run's IK (its branch-recovery shadow's steps aside)
            told.append(checked)
        return plain_step(ik, m, dt, checked)

    monkeypatch.setattr(DynamicalIK, "step", step)
    fast = rt.run(motion.times, measurements, settle=0.0, evaluate=False, contacts=flags)
    assert len(told) == len(motion.times) and all(told)
    assert len(fast.anchor_shifts) >= 3  # the replay replaced the feet's rows
    told.clear()
    monkeypatch.setattr(offline_run, "plainly_valid_all", lambda *args: False)
    slow = rt.run(motion.times, measurements, settle=0.0, evaluate=False, contacts=flags)
    assert len(told) == len(motion.times) and not any(told)
    np.testing.assert_array_equal(fast.q, slow.q)
    monkeypatch.undo()
    # a foot's rotation passed through unchanged by the replay (in the air, no level blend) made NaN
    replay = rt.robot_anchor
    ori, foot = int(replay.orientation_rows[0]), int(replay.orientation_feet[0])
    k = next(
        k
        for k in range(10, len(motion.times))
        if np.array_equal(measurements[k].rotations[ori], replay.rotations[k, foot])
    )
    replay.rotations[k, foot, 0, 0] = np.nan
    with pytest.raises(InvalidMeasurementError, match="rotations"):
        rt.run(motion.times, measurements, settle=0.0, evaluate=False, contacts=flags)


def test_the_sole_reader_computing_in_one_data_reads_what_frame_pose_reads():
    """``robot_sole_reader(..., data)`` (the offline replay reuses one ``pin.Data`` for every read) gives
    ``RobotModel.frame_pose``'s pose bit for bit, configuration after configuration and foot after foot in
    the same data (nothing read from a previous configuration)."""
    from dynik_ros.retarget.robot_anchor import robot_sole_reader

    rt = Retargeter.from_config("g1")
    robot, frames = rt.robot, [f.frame for f in rt.config.feet]
    data = robot.model.createData()
    rng = np.random.default_rng(4)
    q0 = rt.initial_configuration()
    for trial in range(6):
        q = q0.copy()
        q[7:] += rng.uniform(-0.4, 0.4, size=len(q) - 7)
        q[:3] += rng.normal(size=3)
        read = robot_sole_reader(robot, frames, q, data)
        for f in (trial % 2, 1 - trial % 2):
            position, rotation = read(f)
            expected = robot.frame_pose(q, frames[f])
            np.testing.assert_array_equal(position, expected[0])
            np.testing.assert_array_equal(rotation, expected[1])
