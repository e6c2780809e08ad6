"""ik_node calibrated on the stream's own subject (real rclpy nodes and DDS): ``calibrate_after`` (the IK
waits for the stream's first seconds, calibrates on their subject and starts there) and ``~/calibrate`` with
``calibration_pose:=motion`` (mid-stream, approached without a jump), against the ROS-free path of
``dynik-retarget`` (``skeleton_tpose`` + ``Retargeter.calibrate`` + ``retarget_motion``) and forward
kinematics of the published configurations. Subject: a 1.95 m Human66 walking with its feet planted (the
maps' human model is 1.75 m: calibrated on it, the robot's held soles float 11 mm above the floor)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from node_harness import motion_link_msg, ok, params, published_configurations
from take_tools import xsens_ordered

from dynik_ros.io.skeleton_tpose import MIN_SAMPLES, skeleton_tpose
from dynik_ros.io.suit_calibration import WindowSamples
from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
from dynik_ros.retarget import Retargeter
from dynik_ros.retarget.foot_figures import foot_figures

RATE = 60.0
T0 = 1_700_000_000 * 10**9
FIELDS = ("times", "positions", "rotations", "linear_velocities", "angular_velocities")


def _walk(steps: int):
    """A 1.95 m subject's planted walk at 60 Hz (1 s standing first), its stamps."""
    motion = xsens_ordered(planted_walk(PlantedWalkSpec(steps=steps), RATE, 1.95, 75.0))
    return motion, [T0 + round(1e9 * t) for t in motion.times]


def _window(motion, first: int, last: int) -> WindowSamples:
    return WindowSamples(
        list(motion.links), motion.positions[first : last + 1], motion.rotations[first : last + 1]
    )


def _from(motion, stamps, k: int):
    """The samples from ``k`` on, timed by the node's clock (the stamps from ``stamps[k]``)."""
    times = (np.array(stamps[k:]) - stamps[k]) * 1e-9
    return dataclasses.replace(motion, **{f: getattr(motion, f)[k:] for f in FIELDS[1:]}, times=times)


def _assert_same_calibration(got, want) -> None:
    assert got.root_scale == pytest.approx(want.root_scale, abs=1e-9)
    assert got.human_root_height == pytest.approx(want.human_root_height, abs=1e-9)
    for name in ("offsets", "limb_scales", "anchor_offsets", "foot_clearance"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.keys() == b.keys(), name
        for key in a:
            np.testing.assert_allclose(a[key], b[key], atol=1e-9, err_msg=f"{name} {key}")


def _held_sole_float_mm(rt, q, times, contacts) -> float:
    """Highest the lowest sole corner is above the floor while a held foot is flat (forward kinematics of
    ``q``), over both feet."""
    feet, blend = rt.config.feet, rt.config.contact.blend_time
    figures = foot_figures(
        rt.robot, q, times, contacts, feet, blend, half_width=rt.config.balance.sole_half_width
    )
    return max(f.above_flat_max_mm for f in figures)


def _on_the_model() -> Retargeter:
    """G1 on the human model's calibration with the held foot's gain and the smooth level blend off
    (``contact.held_gain`` 0, ``blend_shape: linear``; retarget/held_gain.py): those bring even the held soles
    of a robot whose pelvis target is too high for its legs down to the floor (1.3 mm here), so the
    calibration's own effect shows without them."""
    rt = Retargeter.from_config("g1")
    contact = dataclasses.replace(rt.config.contact, held_gain=0.0, blend_shape="linear")
    rt.config = dataclasses.replace(rt.config, contact=contact)
    rt.set_calibration(rt.calibration)
    return rt


def test_calibrate_after_starts_the_ik_on_the_streams_subject(h):
    """``calibrate_after:=1.5``: nothing is published for the stream's first 1.5 s; at the sample 1.5 s after
    the first the retargeter's calibration is ``Retargeter.calibrate(skeleton_tpose(those 91 samples))``
    (1e-9) and from that sample on the published configurations are ``retarget_motion``'s on the samples from
    there with that calibration (1e-4: with hard stance rows, the maps' default, OSQP's tolerance grows the
    messages' rounding at the landings, 8.2e-6 rad here; ``test_stream_steps.py``). Its held soles, forward
    kinematics of the published configurations, stay under 5 mm above the floor while flat; the human
    model's calibration on the same samples (the node without ``calibrate_after``) leaves them over 10 mm
    (without the held foot's gain: :func:`_on_the_model`)."""
    from dynik_ros.nodes.ik_node import IKNode

    motion, stamps = _walk(steps=2)
    k = round(1.5 * RATE)
    node = IKNode(**params(model="", robot="g1", link_states_reliable=True, calibrate_after=1.5))
    solver = h.add(node)
    published = published_configurations(
        h, solver, lambda i: motion_link_msg(motion, i, stamps[i]), stamps, first=k
    )
    offline = Retargeter.from_config("g1")
    model_scale = offline.calibration.root_scale
    offline.calibrate(skeleton_tpose(_window(motion, 0, k)))
    _assert_same_calibration(solver.retargeter.calibration, offline.calibration)
    assert offline.calibration.root_scale < 0.95 * model_scale  # a taller subject than the model
    assert solver.calibration_time > 0.0
    rest = _from(motion, stamps, k)
    result = offline.retarget_motion(rest, evaluate=False)
    np.testing.assert_allclose(published[1:], result.q[1:], atol=1e-4)
    np.testing.assert_allclose(published[0], offline.initial_configuration(), atol=1e-9)
    subject = _held_sole_float_mm(offline, published, rest.times, result.contacts)
    model = _on_the_model()
    by_model = model.retarget_motion(rest, evaluate=False)
    on_model = _held_sole_float_mm(model, by_model.q, rest.times, by_model.contacts)
    assert subject < 5.0 < 10.0 < on_model, (subject, on_model)


def _call_calibrate(h):
    from std_srvs.srv import Trigger

    client = h.probe.create_client(Trigger, "/ik_node/calibrate")
    assert h.spin_until(client.service_is_ready), "no ~/calibrate"
    future = client.call_async(Trigger.Request())
    assert h.spin_until(future.done, timeout=30.0), "no answer"
    return future.result()


def test_calibrate_on_the_motion_mid_stream_converges_to_the_offline_path(h):
    """``~/calibrate`` with ``calibration_pose:=motion`` 2.5 s into the walk (a 2 s window: standing and a
    step): the calibration is ``Retargeter.calibrate(skeleton_tpose(the window's 121 samples))`` (1e-9); the
    robot is re-aligned where it stands (no jump: the published joints within their velocity limits) and its
    published joints converge to those of ``retarget_motion`` calibrated so from the start (the world
    alignment differs, so the joints and the base height are compared): more than 0.01 rad apart at the call,
    within 1e-3 rad and 1e-5 m over the last second (a steady 2.9e-4 rad remains: with ``anchor: robot``, the
    maps' default, a hold is where the robot's sole was when its contact turned flat, so the path before the
    call lingers in the holds). From 1 s after the call its held soles stay within 5 mm
    of the floor (over 10 mm on the model: :func:`_on_the_model`)."""
    from dynik_ros.nodes.ik_node import IKNode

    motion, stamps = _walk(steps=3)
    call = round(2.5 * RATE)
    node = IKNode(
        **params(
            model="", robot="g1", link_states_reliable=True, calibration_pose="motion", calibration_window=2.0
        )
    )
    solver = h.add(node)
    answers = []

    def before_each(i: int) -> None:
        if i == call:  # between the samples call - 1 and call
            answers.append(_call_calibrate(h))

    published = published_configurations(
        h, solver, lambda i: motion_link_msg(motion, i, stamps[i]), stamps, before_each=before_each
    )
    assert answers[0].success, answers[0].message
    assert "skeleton_tpose of 121 samples" in answers[0].message
    offline = Retargeter.from_config("g1")
    offline.calibrate(skeleton_tpose(_window(motion, call - 121, call - 1)))
    _assert_same_calibration(solver.retargeter.calibration, offline.calibration)
    whole = _from(motion, stamps, 0)
    result = offline.retarget_motion(whole, evaluate=False)
    speed = np.abs(np.diff(published[call - 1 : call + 60, 7:], axis=0)) * RATE  # the second after the call
    assert np.all(speed <= offline.robot.velocity_limit + 1e-9)  # no jump: within the joints' speed limits
    gap = np.abs(published[:, 7:] - result.q[:, 7:]).max(axis=1)
    height = np.abs(published[:, 2] - result.q[:, 2])
    last = whole.times >= whole.times[-1] - 1.0
    assert gap[call] > 1e-2 and gap[last].max() < 1e-3 and height[last].max() < 1e-5, (
        gap[call],
        gap[last].max(),
    )
    settled = whole.times >= whole.times[call] + 1.0
    subject = _held_sole_float_mm(offline, published[settled], whole.times[settled], result.contacts[settled])
    model = _on_the_model()
    by_model = model.retarget_motion(whole, evaluate=False)
    on_model = _held_sole_float_mm(
        model, by_model.q[settled], whole.times[settled], by_model.contacts[settled]
    )
    assert subject < 5.0 < 10.0 < on_model, (subject, on_model)


def test_refused_motion_calibrations_say_why_and_change_nothing(h):
    """``~/calibrate`` (motion) on too few samples, and on a stream without the head, is refused naming why;
    the calibration stays the map's. ``calibrate_after`` on too few samples (0.5 s at 60 Hz) logs the refusal
    and starts the IK on the map's calibration at that sample; with a human model it fails configure."""
    from dynik_ros.nodes.ik_node import IKNode

    motion, stamps = _walk(steps=2)
    solver = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True, calibration_pose="motion",
                                   calibration_window=5.0)))  # fmt: skip
    few = MIN_SAMPLES - 1
    published_configurations(h, solver, lambda i: motion_link_msg(motion, i, stamps[i]), stamps[:few])
    scale = solver.retargeter.calibration.root_scale
    answer = _call_calibrate(h)
    assert not answer.success
    assert f"has {few} samples" in answer.message and f"at least {MIN_SAMPLES}" in answer.message
    assert solver.retargeter.calibration.root_scale == scale

    headless = [n for n in motion.links if n != "Head"]
    pick = [motion.links.index(n) for n in headless]
    cut = dataclasses.replace(motion, links=headless, **{f: getattr(motion, f)[:, pick] for f in FIELDS[1:]})
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import RELIABLE_QOS

    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", RELIABLE_QOS)
    h.wait_matched(pub)
    received = solver.received
    for i in range(few, few + MIN_SAMPLES + 10):
        pub.publish(motion_link_msg(cut, i, stamps[i]))
        assert h.spin_until(lambda i=i: solver.received > received + i - few, timeout=30.0)
    answer = _call_calibrate(h)
    assert not answer.success and "lacks ['Head']" in answer.message, answer.message
    assert solver.retargeter.calibration.root_scale == scale

    assert ok(solver.trigger_deactivate()) and ok(solver.trigger_cleanup())
    late = h.add(IKNode(**params(model="", robot="g1", link_states_reliable=True, calibrate_after=0.5)))
    k = round(0.5 * RATE)
    published = published_configurations(
        h, late, lambda i: motion_link_msg(motion, i, stamps[i]), stamps[: k + 20], first=k
    )
    assert late.retargeter.calibration.root_scale == scale  # refused: the map's calibration
    np.testing.assert_allclose(published[0], late.retargeter.initial_configuration(), atol=1e-9)

    human = h.add(IKNode(**params(model="human66", calibrate_after=1.0)))
    assert not ok(human.trigger_configure())
    assert "calibrate_after" in human.last_error
