"""A sparse live stream stepped like the offline run (retarget/stream_input.py): the targets of every IK step
computed one sample at a time equal the offline ones, and ik_node's published feet stand level on it."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.motion.synthetic import NoiseSpec
from dynik_ros.retarget.human import synthetic_human_motion
from dynik_ros.retarget.retargeter import MAX_IK_STEP, Retargeter


def _streamed(rt: Retargeter, motion, max_step: float = MAX_IK_STEP):
    """Every step's ``(t, targets)`` and the contact flags at the samples, fed one sample at a time."""
    times, p, r, v, w = rt.motion_arrays(motion)
    rt.reset()
    steps, flags = [], []
    for k in range(len(times)):
        poses = {link: (p[k, i], r[k, i]) for i, link in enumerate(rt.links)}
        twists = {link: (v[k, i], w[k, i]) for i, link in enumerate(rt.links)}
        steps += rt.stream_measurements(poses, twists, float(times[k]), max_step=max_step)
        flags.append(rt.last_contacts.copy())
    return steps, np.array(flags)


@pytest.mark.parametrize("rate", [30.0, 10.0])
def test_a_sparse_stream_gets_the_offline_runs_targets_on_every_ik_step(rate):
    """A noisy synthetic walk (2 mm on every link, so the toe-off noise estimate matters) at 30 and 10 Hz:
    streamed, the steps are the offline grid (``Retargeter.step_measurements``) and every step's targets,
    the feet's holds and levelling included, are the offline ones to round-off; the contact flags at the
    samples too. One step a sample (``max_step`` 0, what ik_node did) gives other targets."""
    motion = synthetic_human_motion("walking", 3.0, rate, noise=NoiseSpec(position=0.002), seed=1)
    offline = Retargeter.from_config("g1")
    offline.reset()
    times, expected, contacts, index = offline.step_measurements(motion)
    assert index is not None and len(times) > 1.6 * len(motion.times)  # sparse: steps between the samples
    steps, flags = _streamed(Retargeter.from_config("g1"), motion)
    np.testing.assert_allclose([t for t, _ in steps], times, atol=1e-12)
    for (_, got), want in zip(steps, expected, strict=True):
        for name in ("positions", "rotations", "linear_velocities", "angular_velocities"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(got.stance, want.stance)
    np.testing.assert_array_equal(flags, contacts[index])
    single, _ = _streamed(Retargeter.from_config("g1"), motion, max_step=0.0)
    assert len(single) == len(motion.times)
    worst = max(float(np.abs(m.positions - expected[i].positions).max()) for m, i in zip(
        [m for _, m in single], index, strict=True))  # fmt: skip
    assert worst > 1e-3


def test_a_gap_longer_than_max_gap_is_one_step_and_a_reset_forgets_the_last_sample():
    """A stream that stops for 0.5 s is not interpolated over the gap (a lost stretch, not a sparse stream);
    after ``reset`` (a new take, a re-based world) the first sample is a single step again."""
    motion = synthetic_human_motion("walking", 1.0, 30.0)
    rt = Retargeter.from_config("g1")
    times, p, r, v, w = rt.motion_arrays(motion)

    def sample(k: int, t: float):
        poses = {link: (p[k, i], r[k, i]) for i, link in enumerate(rt.links)}
        twists = {link: (v[k, i], w[k, i]) for i, link in enumerate(rt.links)}
        return rt.stream_measurements(poses, twists, t)

    rt.reset()
    assert len(sample(0, 0.0)) == 1
    assert len(sample(1, 1 / 30)) == 2  # 0.033 s: two steps of 0.017 s
    assert len(sample(2, 1 / 30 + 0.5)) == 1  # a gap beyond max_gap (0.1 s)
    state = rt.save_state()
    rt.reset()
    assert len(sample(3, 0.6)) == 1
    rt.restore_state(state)  # back before the reset: the last sample is known again
    assert len(sample(3, 1 / 30 + 0.5 + 1 / 30)) == 2


def _node_path(rt: Retargeter, motion, max_step: float, times: np.ndarray):
    """ik_node's path without ROS: the configuration after each sample and the contacts at the samples
    (``times``: the node's, from the stamps)."""
    _, p, r, v, w = rt.motion_arrays(motion)
    rt.reset()
    ik = rt.make_ik()
    ik.reset(rt.initial_configuration())
    q = np.zeros((len(times), rt.robot.nq))
    contacts = np.zeros((len(times), len(rt.config.feet)), dtype=int)
    for k in range(len(times)):
        poses = {link: (p[k, i], r[k, i]) for i, link in enumerate(rt.links)}
        twists = {link: (v[k, i], w[k, i]) for i, link in enumerate(rt.links)}
        last = rt.last_sample_time
        steps = rt.stream_measurements(poses, twists, float(times[k]), ik.q, max_step)
        contacts[k] = rt.last_contacts
        q[k] = ik.q
        if k:  # the node's first sample only starts the IK
            for t, m in steps:
                q[k], _ = ik.step(m, t - last)
                last = t
    return q, contacts


@pytest.mark.parametrize("max_step", [0.02, 0.0])
def test_ik_node_on_a_30_hz_stream_steps_like_the_offline_run(h, max_step):
    """ik_node (real rclpy and DDS) fed the synthetic walk at 30 Hz: with ``max_step`` 0.02 s (the default)
    its published configurations are those of the stream path above (two IK steps a sample, the contact
    rules on both), and the soles it commands stand level in contact (flat tilt 1.9 deg, forward kinematics
    of the published joint states and base odometry). With ``max_step`` 0 (one IK step a sample, the node
    before) the touch-down levelling lags: the soles tilt 4.2 deg in contact."""
    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.retarget.foot_figures import foot_figures
    from dynik_ros.retarget.human import synthetic_human_motion as motion_of

    motion = motion_of("walking", 2.0, 30.0)
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * t) for t in motion.times]
    node = IKNode(**params(model="", robot="g1", link_states_reliable=True, max_step=max_step))
    solver = h.add(node)
    published = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    rt = solver.retargeter
    times = (np.array(stamps) - stamps[0]) * 1e-9  # the node's clock: the stamps, rounded to ns
    expected, contacts = _node_path(Retargeter.from_config("g1"), motion, max_step, times)
    # 1e-6: the message's quaternion round trip changes the targets in their last places, and where a floor
    # row binds (a sole corner on the floor) OSQP answers to its tolerance (eps 1e-5 on the step's velocity)
    np.testing.assert_allclose(published, expected, atol=1e-6)
    assert solver.sub_steps == (len(stamps) - 1 if max_step > 0 else 0)
    figures = foot_figures(
        rt.robot, published, motion.times, contacts, rt.config.feet, rt.config.contact.blend_time,
        half_width=rt.config.balance.sole_half_width,
    )  # fmt: skip
    tilt = max(f.tilt_flat_max_deg for f in figures)
    assert tilt < 3.0 if max_step > 0 else tilt > 3.0, tilt
