"""Toe-off release against measurement noise (issue 9): the heel-over-toe noise is measured on the stream
itself (retarget/heel_noise.py) and the heel must rise ``heel_off`` plus ``heel_off_noise`` times it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dynik_ros.motion.synthetic import NoiseSpec
from dynik_ros.retarget.heel_noise import HeelToeNoise
from dynik_ros.retarget.human import synthetic_human_motion
from dynik_ros.retarget.retargeter import Retargeter


def _runs(states: np.ndarray) -> int:
    """Number of contacts (runs of ``states >= 0``)."""
    inside = np.concatenate(([False], states >= 0, [False]))
    return int(np.count_nonzero(np.diff(inside.astype(int)) == 1))


def _contacts(rt: Retargeter, motion, **contact) -> list[int]:
    """Contacts per foot of ``motion`` through the contact rules with ``contact`` changed from the map's."""
    spec = dataclasses.replace(Retargeter.from_config("g1").config.contact, **contact)
    rt.config = dataclasses.replace(rt.config, contact=spec)
    rt.contact.spec = spec
    rt.reset()
    _, flags = rt.motion_measurements(motion)
    return [_runs(flags[:, f]) for f in range(flags.shape[1])]


def test_the_estimate_is_the_std_of_white_noise_and_near_0_on_a_smooth_foot():
    """Second differences of white noise of std s: median |.| = 0.6745 sqrt(6) s; a heel-over-toe height
    swinging 20 mm at 1 Hz (a foot rolling, far faster than a standing one) sampled at 60 Hz: under 0.3 mm.
    Samples out of contact are not counted (no estimate yet: infinite, no toe-off); a 10 Hz stream has no
    estimate (0: the plain rule)."""
    rng = np.random.default_rng(0)
    for s in (0.002, 0.004):
        noise = HeelToeNoise()
        for k in range(200):  # 2 s at 100 Hz, the whole window
            noise.add(k / 100.0, rng.normal(0.0, s), in_contact=True)
        assert noise.std() == pytest.approx(s, rel=0.2)
    smooth = HeelToeNoise()
    for k in range(120):
        smooth.add(k / 60.0, 0.02 * math.sin(2.0 * math.pi * k / 60.0), in_contact=True)
    assert smooth.std() < 3e-4
    swing = HeelToeNoise()
    for k in range(120):
        swing.add(k / 60.0, rng.normal(0.0, 0.003), in_contact=False)
    assert swing.std() == math.inf  # nothing counted out of contact
    early = HeelToeNoise()
    early.add(0.0, 0.0, in_contact=True)
    early.add(1.0 / 60.0, 0.0, in_contact=True)
    assert early.std() == math.inf  # no second difference yet
    early.add(2.0 / 60.0, 0.003, in_contact=True)  # the first one: 3 mm
    assert early.std() == pytest.approx(0.003 / (0.6745 * math.sqrt(6.0)))
    sparse = HeelToeNoise()
    for k in range(30):
        sparse.add(k / 10.0, rng.normal(0.0, 0.003), in_contact=True)
    assert sparse.std() == 0.0


@pytest.mark.parametrize("rate", [30.0, 60.0, 120.0])
def test_a_noisy_standing_subject_keeps_one_contact_per_foot_where_the_plain_rule_flickers(rate):
    """A subject standing in T-pose for 6 s, white noise of 2 and 3 mm on every link position: one contact
    per foot with the default ``heel_off_noise`` (4); the plain 5 mm rule (``heel_off_noise`` 0, the rule
    before) releases and lands the feet again many times (60 Hz: 25 contacts at 2 mm, 75 at 3 mm)."""
    rt = Retargeter.from_config("g1")  # the maps' defaults
    assert rt.config.contact.heel_off_noise == 4.0 and rt.config.contact.heel_off == 0.005
    for sigma in (0.002, 0.003):
        motion = synthetic_human_motion("tpose", 6.0, rate, noise=NoiseSpec(position=sigma), seed=1)
        assert _contacts(rt, motion) == [1, 1]
        assert sum(_contacts(rt, motion, heel_off_noise=0.0)) > 10


def test_a_noisy_heel_raise_still_ends_the_contact_while_the_heel_is_up():
    """The heel raised 45 deg about the ball (test_feet's toe-off motion) with 2 mm of white noise on every
    link: the left contact still ends while the heel is up (later than without noise: the margin is 4x
    the measured noise, ~11 mm here) and starts again once it is down; the still right foot keeps its one
    contact (the plain rule: more than 10 contacts on it)."""
    from test_feet import _heel_raise

    motion, heel = _heel_raise()
    rng = np.random.default_rng(2)
    jitter = rng.normal(0.0, 0.002, motion.positions.shape)
    noisy = dataclasses.replace(motion, positions=motion.positions + jitter)
    rt = Retargeter.from_config("g1")
    spec = rt.config.contact
    rt.reset()
    _, flags = rt.motion_measurements(noisy)
    inside = np.concatenate(([False], flags[:, 0] >= 0, [False]))
    edges = np.flatnonzero(np.diff(inside.astype(int)))
    assert len(edges) == 4, edges  # two contacts: released once, back down once
    end, start = int(edges[1]), int(edges[2])
    foot = motion.links.index("LeftFoot")
    rise = motion.positions[:, foot, 2] - motion.positions[0, foot, 2]
    assert spec.heel_off < rise[end] < 0.03  # released with the heel up, within 30 mm of its rise
    assert heel[end:start].max() == pytest.approx(math.radians(45.0))  # off for the whole raise
    assert rise[start] < 0.02  # back down
    assert _runs(flags[:, 1]) == 1
    assert _contacts(rt, noisy, heel_off_noise=0.0)[1] > 10


def test_a_noisy_30_hz_take_is_judged_on_its_samples_not_on_the_interpolated_ik_steps():
    """``retarget_motion`` interpolates a 30 Hz take onto 0.0167 s IK steps (retarget/ik_steps.py); the
    noise estimate reads the samples only (interpolated steps have second differences 0 between samples,
    which would halve it): the noisy standing subject keeps one contact per foot in the written
    trajectory (counted on all IK steps: 26 contacts at 3 mm)."""
    motion = synthetic_human_motion("tpose", 3.0, 30.0, noise=NoiseSpec(position=0.003), seed=0)
    rt = Retargeter.from_config("g1")
    result = rt.retarget_motion(motion)
    assert [_runs(result.contacts[:, f]) for f in range(2)] == [1, 1]


def test_ik_node_fed_a_noisy_standing_stream_keeps_its_feet_held(h):
    """``ik_node`` (real rclpy and DDS) fed a subject standing in T-pose at 60 Hz with 3 mm of white noise on
    every link position: with the maps' defaults both feet stay in contact, so the published soles (joint
    states and base odometry through forward kinematics) do not move after the first 0.5 s. With the plain
    5 mm rule (``heel_off_noise: 0``) the feet were released and landed again ~4 times a second, and the
    released left foot frame then followed the noisy targets: 16 mm of drift in 3 s (measured offline)."""
    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.nodes.ik_node import IKNode

    motion = synthetic_human_motion("tpose", 1.5, 60.0, noise=NoiseSpec(position=0.003), seed=0)
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * t) for t in motion.times]
    solver = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True)))
    published = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    count = len(stamps)
    rt = solver.retargeter
    late = [k for k in range(count) if motion.times[k] >= 0.5]
    for foot in rt.config.feet:
        centre = np.asarray(foot.sole, dtype=float).reshape(-1, 3).mean(axis=0)
        soles = []
        for k in late:
            at, rot = rt.robot.frame_pose(published[k], foot.frame)
            soles.append(at + rot @ centre)
        soles = np.array(soles)
        assert float(np.linalg.norm(soles - soles[0], axis=1).max()) < 0.001, foot.frame


def test_dynik_retarget_judges_a_noisy_30_hz_take_on_its_samples_too(tmp_path, capsys):
    """The command line runs the same targets as ``retarget_motion`` (``Retargeter.step_measurements``): on
    the noisy 30 Hz standing subject above, its written contacts are one per foot as well (it once fed the
    noise estimate the interpolated IK steps too, and the feet flickered) and its trajectory is the API's."""
    from dynik_ros.cli.retarget import main
    from dynik_ros.io.human_motion import read_npz_motion, save_npz_motion
    from dynik_ros.io.skeleton_tpose import skeleton_tpose

    motion = synthetic_human_motion("tpose", 3.0, 30.0, noise=NoiseSpec(position=0.003), seed=0)
    path = save_npz_motion(motion, tmp_path / "noisy_30hz.npz")
    out = tmp_path / "out"
    args = ["--npz", str(path), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet"]
    assert main(args) == 0
    written = np.load(out / "retarget.npz")
    assert [_runs(written["contacts"][:, f]) for f in range(2)] == [1, 1]
    retargeter = Retargeter.from_config("g1")  # calibrated, like the command line, on the take's own subject
    retargeter.calibrate(skeleton_tpose(read_npz_motion(path)))
    api = retargeter.retarget_motion(motion, settle=1.0)
    np.testing.assert_allclose(written["q"], api.q, atol=1e-9)
