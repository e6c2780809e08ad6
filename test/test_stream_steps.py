"""A sparse live stream stepped like the offline run (retarget/stream_input.py): the targets of every IK step
computed one sample at a time equal the offline ones, and ik_node's published feet stand level on it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dynik_ros.motion.synthetic import NoiseSpec
from dynik_ros.retarget.human import synthetic_human_motion
from dynik_ros.retarget.retargeter import MAX_IK_STEP, Retargeter
from dynik_ros.retarget.stream_input import stream_path


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


@pytest.mark.parametrize("rate", [120.0, 30.0, 10.0])
def test_the_first_samples_step_is_the_offline_runs_first_step(rate):
    """``first_step_dt``: the dt ``Retargeter.run`` gives a take's first sample (its step grid's first
    interval: the sample interval at 120 Hz, a half at 30 Hz, a third at 10 Hz), from the first two samples
    alone; one step a sample (``max_step`` 0) takes the interval, a gap beyond ``max_gap`` is clamped."""
    from dynik_ros.retarget.ik_steps import first_step_dt

    motion = synthetic_human_motion("walking", 0.5, rate)
    offline = Retargeter.from_config("g1")
    offline.reset()
    times = offline.step_measurements(motion)[0]
    t0, t1 = float(motion.times[0]), float(motion.times[1])
    assert first_step_dt(t0, t1, MAX_IK_STEP) == times[1] - times[0]
    assert first_step_dt(t0, t1, MAX_IK_STEP) == pytest.approx((t1 - t0) / math.ceil((t1 - t0) / 0.02 - 1e-9))
    assert first_step_dt(t0, t1, 0.0) == t1 - t0
    assert first_step_dt(t0, t0 + 0.5, MAX_IK_STEP, max_gap=0.1) == 0.1


def _node_path(rt: Retargeter, motion, max_step: float, times: np.ndarray):
    """ik_node's path without ROS (:func:`stream_path`): the configuration after each sample and the
    contacts at the samples (``times``: the node's, from the stamps)."""
    q, _, contacts, _ = stream_path(rt, dataclasses.replace(motion, times=times), max_step)
    return q, contacts


# stance rows -> (the node's path against the stream path, flat tilt bound with max_step 0.02). Hard rows (the
# maps' default): two QPs a step, and at the landings OSQP's tolerance (eps 1e-5) grows the message round
# trip's 1e-16 to 1.4e-6 rad (0.02) and 1.7e-3 rad (0: one step a sample), back under 1e-6 within ~10
# samples; with eps 1e-9 the two paths agree to 6e-8 (measured by hand). Weighted rows: 2e-12 / 7e-11.
STREAM_STANCES = {"hard": (5e-3, 0.6), "weighted": (1e-6, 0.8)}


@pytest.mark.parametrize("max_step", [0.02, 0.0])
@pytest.mark.parametrize("stance", list(STREAM_STANCES))
def test_ik_node_on_a_30_hz_stream_steps_like_the_offline_run(h, tmp_path, stance, max_step):
    """ik_node (real rclpy and DDS) fed the synthetic walk at 30 Hz: with ``max_step`` 0.02 s (the default)
    its published configurations are those of the stream path (two IK steps a sample, the contact rules on
    both), and the soles it commands stand level in contact (flat tilt 0.5 deg with weighted stance rows,
    0.3 deg with the hard ones, which take over from the touch-down blend at the flat sample, 6 samples into
    this walk's 0.2 s contacts; forward kinematics of the published joint states and base odometry). With
    ``max_step`` 0 (one IK step a sample, the node before) the touch-down levelling lags: the soles tilt
    1.5 deg in contact (weighted), 1.0 deg (hard). (Before the blend's last step carried the rest of its turn,
    README *The blend's last step*: 0.56 / 1.29 deg with ``max_step`` 0.02, 2.1 / 4.2 deg with 0.)"""
    import yaml
    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.retarget.foot_figures import foot_figures
    from dynik_ros.retarget.human import synthetic_human_motion as motion_of

    atol, tilt_bound = STREAM_STANCES[stance]
    motion = motion_of("walking", 2.0, 30.0)
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * t) for t in motion.times]
    offline = Retargeter.from_config("g1")
    offline.config = dataclasses.replace(
        offline.config, contact=dataclasses.replace(offline.config.contact, stance=stance)
    )
    path = tmp_path / "g1.yaml"
    path.write_text(yaml.safe_dump(offline.config.to_dict()))
    node = IKNode(
        **params(model="", robot="g1", config_file=str(path), link_states_reliable=True, max_step=max_step)
    )
    solver = h.add(node)
    published = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    rt = solver.retargeter
    assert rt.config.contact.stance == stance
    times = (np.array(stamps) - stamps[0]) * 1e-9  # the node's clock: the stamps, rounded to ns
    expected, contacts = _node_path(offline, motion, max_step, times)
    # weighted: the message's quaternion round trip changes the targets in their last places, and where a
    # floor row binds (a sole corner on the floor) OSQP answers to its tolerance (eps 1e-5 on the step's
    # velocity); hard: see STREAM_STANCES
    np.testing.assert_allclose(published, expected, atol=atol)
    assert solver.sub_steps == (len(stamps) - 1 if max_step > 0 else 0)
    figures = foot_figures(
        rt.robot, published, motion.times, contacts, rt.config.feet, rt.config.contact.blend_time,
        half_width=rt.config.balance.sole_half_width,
    )  # fmt: skip
    tilt = max(f.tilt_flat_max_deg for f in figures)
    assert tilt < tilt_bound if max_step > 0 else tilt_bound < tilt < 2.0, tilt


def _every_4th_sample_of_the_cmu_excerpt():
    """The committed CMU 131_01 excerpt (120 Hz, starting mid-stride) at 30 Hz, timed by the node's stamps."""
    from pathlib import Path

    from dynik_ros.io.motion_files import detect_format, read_motion_file

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    m = read_motion_file(path, detect_format(path))
    names = ("times", "positions", "rotations", "linear_velocities", "angular_velocities")
    m = dataclasses.replace(m, **{k: getattr(m, k)[::4] for k in names})
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * (t - m.times[0])) for t in m.times]
    return dataclasses.replace(m, times=(np.array(stamps) - stamps[0]) * 1e-9), stamps


@pytest.mark.parametrize("settle", [0.0, 1.0])
def test_ik_node_starts_a_take_as_retarget_motion_does(h, settle):
    """ik_node (real rclpy and DDS) fed a take that starts mid-stride (the CMU excerpt at 30 Hz): it runs
    the offline run's start, ``settle`` s on the first sample then that sample's own IK step (its dt, the
    offline run's first step, known when the second sample comes), so from the second sample on it
    publishes ``Retargeter.retarget_motion(take, settle)``'s configurations (to round-off: 1e-14 at first,
    OSQP's iterations let it grow to ~1e-8 by the end). The first sample is answered with the state before
    its step: the initial configuration, or the settled one, inside the joint limits. Before, the node
    published its initial configuration and never stepped on the first sample: 0.1 rad off from then on."""
    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.nodes.ik_node import IKNode

    motion, stamps = _every_4th_sample_of_the_cmu_excerpt()
    node = IKNode(**params(model="", robot="g1", link_states_reliable=True, settle=settle))
    solver = h.add(node)
    published = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    offline = Retargeter.from_config("g1").retarget_motion(motion, settle=settle, evaluate=False)
    np.testing.assert_allclose(published[1:], offline.q[1:], atol=1e-6)
    rt = Retargeter.from_config("g1")
    q0 = rt.initial_configuration()
    if settle == 0.0:
        np.testing.assert_allclose(published[0], q0, atol=1e-9)
    else:  # the settled pose: far from the start, inside the limits (bridge_node ramps the robot there)
        ik = rt.make_ik()
        rt.settle(ik, rt.motion_measurements(motion)[0][0], settle)
        np.testing.assert_allclose(published[0], ik.q, atol=1e-9)
        assert np.abs(published[0][7:] - q0[7:]).max() > 0.1
    joints = published[:, 7:]
    robot = rt.robot
    assert np.all(joints >= robot.lower - 1e-9) and np.all(joints <= robot.upper + 1e-9)
    # after ~/reset the next sample is a first one again: the same start, the same path
    again = _stream_again_after_reset(h, solver, motion, [s + 10**10 for s in stamps])
    np.testing.assert_allclose(again, published, atol=1e-6)


def _stream_again_after_reset(h, solver, motion, stamps):
    """Call ik_node's ``~/reset`` (real service), stream ``motion`` at ``stamps`` and return the published
    configuration per stamp (base pose then joints)."""
    from nav_msgs.msg import Odometry
    from node_harness import motion_link_msg
    from sensor_msgs.msg import JointState, MultiDOFJointState
    from std_srvs.srv import Trigger

    from dynik_ros.nodes.common import RELIABLE_QOS

    client = h.probe.create_client(Trigger, "/ik_node/reset")
    assert h.spin_until(client.service_is_ready)
    future = client.call_async(Trigger.Request())
    assert h.spin_until(future.done, timeout=30.0) and future.result().success
    joints, odom = h.collect(JointState, "/dynik/joint_states"), h.collect(Odometry, "/dynik/base_odom")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", RELIABLE_QOS)
    h.wait_matched(pub)
    received = solver.received
    for k, stamp in enumerate(stamps):
        pub.publish(motion_link_msg(motion, k, stamp))
        assert h.spin_until(lambda k=k: solver.received > received + k, timeout=30.0)
    assert h.spin_until(lambda: len(joints) >= len(stamps) and len(odom) >= len(stamps), timeout=30.0)
    assert solver.rejections.total == 0

    def stamp_of(msg) -> int:
        return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec

    by_joints = {stamp_of(j): j.position for j in joints}
    by_odom = {stamp_of(o): o.pose.pose for o in odom}
    q = []
    for stamp in stamps:
        pose = by_odom[stamp]
        p, r = pose.position, pose.orientation
        q.append(np.concatenate(([p.x, p.y, p.z, r.x, r.y, r.z, r.w], by_joints[stamp])))
    return np.array(q)


def test_a_settled_start_far_from_the_robot_reaches_it_within_the_velocity_limits(h):
    """``settle:=1`` on the CMU excerpt (G1): ik_node's first output is the settled pose, further from the
    robot standing at its initial configuration than its velocity limits allow in a sample interval; the
    commands bridge_node (real DDS, ramp_time 0, message clock) makes of that stream start at the robot's
    measured joints and never exceed the position or velocity limits (``WireChecks``, what the fuzz
    harness checks on the wire), and reach the IK's output once the robot has caught up."""
    from node_harness import bridge, motion_link_msg, ok, params, published_configurations
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.conversions import joint_state_msg
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.testing.invariants import WireChecks

    motion, stamps = _every_4th_sample_of_the_cmu_excerpt()
    robot = Retargeter.from_config("g1").robot
    q0 = Retargeter.from_config("g1").initial_configuration()[7:]
    names = list(robot.joint_names)
    # (input_depth 0: every IK output commanded, however far behind the bridge's callbacks fall)
    driver = h.add(bridge(robot="g1", clock="message", ramp_time=0.0, input_depth=0))
    commands = h.collect(Float64MultiArray, "/test_ctrl/commands")
    measured = h.probe.create_publisher(JointState, "/joint_states", RELIABLE_QOS)
    assert ok(driver.trigger_configure()), driver.last_error
    assert ok(driver.trigger_activate())
    assert driver.joints == names
    h.wait_matched(measured)
    measured.publish(joint_state_msg(stamps[0], names, q0, np.zeros(len(names))))
    assert h.spin_until(lambda: driver._measured is not None)
    solver = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True, settle=1.0)))
    published = published_configurations(h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps)
    assert h.spin_until(lambda: len(commands) >= len(stamps), timeout=30.0)
    jump = np.abs(published[0, 7:] - q0) / (robot.velocity_limit * (stamps[1] - stamps[0]) * 1e-9)
    assert jump.max() > 1.5  # the settled pose: more than an interval at full speed away
    checks = WireChecks(robot.lower, robot.upper, robot.velocity_limit)
    first_sent = stamps[0] - 10**9 // int(driver.params["command_rate"])  # the bridge's start
    checks.command(q0, first_sent)
    for stamp, command in zip(stamps, commands, strict=True):
        checks.command(np.asarray(command.data), stamp)
    assert not checks.breaches, checks.examples
    assert driver.rate_limited > 0  # the ramp onto the settled pose was the bridge's
    np.testing.assert_allclose(np.asarray(commands[-1].data), published[-1, 7:], atol=1e-9)


def test_samples_that_come_during_the_settle_are_taken_and_stepped_after_it(h):
    """``settle:=2`` (200 IK steps) on the CMU excerpt at its 120 Hz: the settle runs between the node's
    callbacks (``ik_start.SETTLE_CHUNK`` steps a turn), so the samples published during it are taken while
    it runs (the second one before it ends) and stepped after it in order: from the second sample on the
    published configurations are ``retarget_motion(settle=2)``'s (1e-6), none lost. Before, the settle ran in
    the first sample's callback: nothing was taken until it ended (0.2-1.5 s wall on G1; at 120 Hz beyond
    the 10-deep reader queue, samples were lost: README *The start*)."""
    from pathlib import Path

    from node_harness import motion_link_msg, params, published_configurations

    from dynik_ros.io.motion_files import detect_format, read_motion_file
    from dynik_ros.nodes.ik_node import IKNode

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    motion = read_motion_file(path, detect_format(path))
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * (t - motion.times[0])) for t in motion.times]
    motion = dataclasses.replace(motion, times=(np.array(stamps) - stamps[0]) * 1e-9)
    solver = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True, settle=2.0)))
    settling_when_taken = {}

    def before_each(k: int) -> None:  # samples 0..k-1 taken
        settling_when_taken[k - 1] = getattr(solver, "_settling", None) is not None

    published = published_configurations(
        h, solver, lambda k: motion_link_msg(motion, k, stamps[k]), stamps, before_each=before_each
    )
    assert settling_when_taken[1], "the second sample was taken only after the settle"
    offline = Retargeter.from_config("g1").retarget_motion(motion, settle=2.0, evaluate=False)
    np.testing.assert_allclose(published[1:], offline.q[1:], atol=1e-6)
    assert solver.received == len(stamps) and solver.steps == len(stamps) - 1


def test_a_settle_that_fails_is_counted_and_the_next_sample_starts_over(h):
    """The settle runs in the node's own timer turns, outside the sample's callback: a failure there (here
    a settle that raises after a step) is counted as ``unhandled`` like any callback's and never ends the
    node; nothing is answered for that sample, and the next one starts the stream over (its own settle), so
    from it on the published path is ``retarget_motion(settle=1)``'s on the samples from there (1e-6)."""
    from nav_msgs.msg import Odometry
    from node_harness import motion_link_msg, ok, params
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.ik_node import IKNode

    motion = synthetic_human_motion("walking", 1.0, 30.0)
    t0 = 1_700_000_000 * 10**9
    stamps = [t0 + round(1e9 * t) for t in motion.times]
    solver = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True, settle=1.0)))
    joints, odom = h.collect(JointState, "/dynik/joint_states"), h.collect(Odometry, "/dynik/base_odom")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", RELIABLE_QOS)
    assert ok(solver.trigger_configure()) and ok(solver.trigger_activate())
    h.wait_matched(pub)

    def failing(ik, measurement, duration, dt=0.01):
        ik.step(measurement, dt)
        yield
        raise RuntimeError("settle failed")

    solver.retargeter.settle_steps = failing
    pub.publish(motion_link_msg(motion, 0, stamps[0]))
    assert h.spin_until(lambda: solver.rejections.counts["unhandled"] == 1, timeout=30.0)
    del solver.retargeter.settle_steps  # the real one again
    for k in range(1, len(stamps)):
        pub.publish(motion_link_msg(motion, k, stamps[k]))
        assert h.spin_until(lambda k=k: solver.received > k, timeout=30.0)
    count = len(stamps) - 1
    assert h.spin_until(lambda: len(joints) >= count and len(odom) >= count, timeout=30.0)
    assert solver.rejections.total == 1 and "settle failed" in solver.rejections.last_detail
    stamp_of = {j.header.stamp.sec * 10**9 + j.header.stamp.nanosec: j for j in joints}
    assert sorted(stamp_of) == stamps[1:]  # nothing for the sample whose settle failed
    rest = dataclasses.replace(
        motion,
        **{
            f: getattr(motion, f)[1:]
            for f in ("positions", "rotations", "linear_velocities", "angular_velocities")
        },
        times=(np.array(stamps[1:]) - stamps[1]) * 1e-9,
    )
    offline = Retargeter.from_config("g1").retarget_motion(rest, settle=1.0, evaluate=False)
    published = np.array([stamp_of[s].position for s in stamps[1:]])
    np.testing.assert_allclose(published[1:], offline.q[1:, 7:], atol=1e-6)
