"""Hostile input to ik_node (issue 8) with real rclpy and DDS: undecodable bytes, stamps from the future or a
new time base, absurd but finite links, teleports and turned worlds (one-off, for good, and back), sender
clock jumps, a held or raising IK step, bounded per-sample statistics, locked joints."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from node_harness import ik, link_msg, ok


# --------------------------------------------------------------------------- hostile input (issue 8)
def _robust_ik(h, **values: Any):
    """An active ik_node (Human66) with a best-effort publisher of /human/link_states feeding it."""
    from sensor_msgs.msg import JointState, MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS

    solver = h.add(ik(**values))
    joints = h.collect(JointState, "/dynik/joint_states")
    pub = h.probe.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    assert ok(solver.trigger_configure()) and ok(solver.trigger_activate())
    h.wait_matched(pub)
    return solver, joints, pub


def _held_contacts_map(directory, robot: str):
    """``config/<robot>.yaml`` written to ``directory`` with ``contact.heel_off: 0`` (no toe-off release)."""
    import yaml

    from dynik_ros.models.assets import share_path

    data = yaml.safe_load(share_path("config", f"{robot}.yaml").read_text())
    data["contact"]["heel_off"] = 0.0
    path = directory / f"{robot}_held_contacts.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _deliver(h, solver, pub, message) -> None:
    """Publish and spin until ik_node took it (best effort: resent if it was lost on the way)."""
    for _ in range(5):
        before = solver.received
        pub.publish(message)
        if h.spin_until(lambda before=before: solver.received > before, timeout=4.0):
            return
    raise AssertionError("ik_node never received the message")


def test_undecodable_bytes_never_end_ik_node(h, samples):
    """A 1-byte or non-CDR message used to raise rclpy's RMWError out of the callback and end the spin."""
    solver, joints, pub = _robust_ik(h)
    t0 = 10**18
    _deliver(h, solver, pub, link_msg(samples[0], t0))
    for garbage in (b"\x01", b"\x00\x01\x00\x00", bytes(range(256)) * 3):
        _deliver(h, solver, pub, garbage)  # raw serialized bytes on the wire
    for k in range(1, 6):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * 10**9 // 120))
    assert solver.steps == 5 and solver.active
    assert solver.rejections.total == 3 and solver.rejections.counts["unhandled"] == 0


@pytest.mark.parametrize("future_check", [1.0, 0.0])
def test_one_message_from_the_future_does_not_block_the_stream(h, samples, future_check):
    """A year ahead: refused (against the node clock, or as an unconfirmed jump of the stream), and the
    valid messages after it are still tracked."""
    solver, joints, pub = _robust_ik(h, max_future_stamp=future_check)
    now = solver.get_clock().now().nanoseconds
    period = 10**9 // 120
    for k in range(5):
        _deliver(h, solver, pub, link_msg(samples[k], now + k * period))
    _deliver(h, solver, pub, link_msg(samples[5], now + 365 * 24 * 3600 * 10**9))
    for k in range(6, 12):
        _deliver(h, solver, pub, link_msg(samples[k], now + k * period))
    assert solver.steps == 10, solver.rejections.counts
    reason = "future_stamp" if future_check else "stamp_jump"
    assert solver.rejections.counts[reason] == 1 and solver.rejections.total == 1


def test_a_stream_restarted_on_a_new_time_base_is_accepted_after_confirmation(h, samples):
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(5):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    t1 = t0 + 3600 * 10**9  # the source restarted an hour later
    for k in range(5, 12):
        _deliver(h, solver, pub, link_msg(samples[k], t1 + k * period))
    assert solver.rejections.counts["stamp_jump"] == 2  # two unconfirmed, the third re-bases
    assert solver.rebased == 1 and solver.steps == 4 + 5


@pytest.mark.parametrize("glitch", ["far", "twist"])
def test_absurd_but_finite_links_are_refused_and_tracking_goes_on(h, samples, glitch):
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(20):
        msg = link_msg(samples[k], t0 + k * period)
        if k == 10:
            if glitch == "far":
                msg.transforms[0].translation.x = 1e20
            else:
                msg.twist[3].angular.z = 1e30
        _deliver(h, solver, pub, msg)
    reason = "implausible_position" if glitch == "far" else "implausible_speed"
    assert solver.rejections.counts[reason] == 1 and solver.rejections.total == 1
    assert solver.steps == 18 and solver.held_steps == 0
    assert h.spin_until(lambda: len(joints) >= 19)
    assert all(np.all(np.isfinite(j.position)) for j in joints)


def test_a_person_walking_kilometres_from_the_origin_is_still_tracked(h, samples):
    """Half an hour of outdoor walking puts the pelvis 2 km from where the suit started: the old 1000 m
    plausibility bound refused every sample from then on (the full-size fuzz runs' endless walk found it)."""
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(20):
        msg = link_msg(samples[k], t0 + k * period)
        for t in msg.transforms:
            t.translation.x += 2000.0
        _deliver(h, solver, pub, msg)
    assert solver.rejections.total == 0 and solver.steps == 19
    assert abs(solver.ik.base_position[0] - 2000.0) < 2.0


def test_a_teleport_that_stays_is_accepted_after_three_samples_and_keeps_the_posture(h, samples):
    """The world moved under the person (100 m): after 3 samples the base follows; the joints continue
    from where they were (restarting from the neutral posture took 0.6-1.1 s to track again)."""
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(70):  # the teleport comes after the start-up transient
        msg = link_msg(samples[k], t0 + k * period)
        if k >= 60:
            for t in msg.transforms:
                t.translation.x += 100.0
        _deliver(h, solver, pub, msg)
    assert solver.rejections.counts["implausible_jump"] == 2
    assert solver.rebased == 1
    assert h.spin_until(lambda: len(joints) >= 68)
    before, after = np.array(joints[59].position), np.array(joints[60].position)  # samples 59 and 62
    walked = max(np.abs(np.array(joints[k + 1].position) - joints[k].position).max() for k in range(50, 59))
    assert np.abs(after - before).max() < 4 * walked  # three samples of walking, not a restart


def _moved(msg, change: str):
    """``msg`` with the world moved 100 m along x, or turned half a turn about z."""
    for t in msg.transforms:
        if change == "teleport":
            t.translation.x += 100.0
            continue
        t.translation.x, t.translation.y = -t.translation.x, -t.translation.y
        r = t.rotation  # z(pi) * q
        r.x, r.y, r.z, r.w = -r.y, r.x, r.w, -r.z
    for tw in msg.twist if change == "half_turn" else ():
        tw.linear.x, tw.linear.y = -tw.linear.x, -tw.linear.y
        tw.angular.x, tw.angular.y = -tw.angular.x, -tw.angular.y
    return msg


@pytest.mark.parametrize("change", ["half_turn", "teleport"])
def test_a_world_that_moves_for_good_is_tracked_again_at_once(h, samples, change):
    """The world turns half a turn about z (or moves 100 m) under the person and stays so: after the 3
    confirming samples, the published joints and base are as close to the (moved) measurements as before.
    The IK's residual used to pair the re-based state with the old-frame reference: 0.08-0.13 rad of error
    right after, 0.6-1.1 s to decay (the fuzz run's half_turn_persistent breach)."""
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0, metrics_rate=1000.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(80):
        msg = link_msg(samples[k], t0 + k * period)
        _deliver(h, solver, pub, _moved(msg, change) if k >= 60 else msg)
    assert solver.rebased == 1 and solver.rejections.counts["implausible_jump"] == 2
    errors = {round((row[0] - t0) / period): row[1] for row in solver.errors}  # of the published (q, v)
    before = max(errors[k] for k in range(40, 60))
    after = max(errors[k] for k in range(62, 80))
    assert after < 5 * before + 1e-6, (before, after)


@pytest.mark.parametrize("change", ["half_turn", "teleport"])
@pytest.mark.parametrize("undo", [True, False])
@pytest.mark.parametrize("robot", ["", "g1"])
def test_a_glitch_that_comes_back_costs_nothing(h, samples, change, undo, robot, tmp_path):
    """Six samples repeat one sample's content moved 100 m (or turned half a turn), then the stream goes on
    where it was: the guard confirms the excursion (3 samples) and re-bases, then sees the stream come
    back, and ik_node resumes from its state before the excursion. The Human66's output right after is as
    close to the measurements as before it; the G1's retargeter is back on its world alignment from before
    the glitch. Re-basing a second time instead (``undo=False``: the return window off, the old behaviour)
    kept the posture the excursion froze (0.4-1.1 s to recover in the fuzz runs) and moved the robot's
    world alignment by the motion during the excursion."""
    # the G1 map with the contacts held to lift-off (heel_off 0): this test compares the error at one sample
    # before the excursion with the worst after it, on a synthetic walk (a forefoot walk) where the default
    # toe-off release puts a release fade before that sample and a touch-down after it; on the clean stream
    # that alone is 2.0x (1.2x held), more than the bound leaves for the glitch
    kinds = {"model": "", "robot": str(_held_contacts_map(tmp_path, robot))} if robot else {}
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0, metrics_rate=1000.0, **kinds)
    if not undo:
        solver.plausible.return_window = 0.0
    t0, period = 10**18, 10**9 // 120
    aligned = []
    for k in range(80):
        if 60 <= k < 66:
            msg = _moved(link_msg(samples[59], t0 + k * period), change)  # frozen content, moved
        else:
            msg = link_msg(samples[k], t0 + k * period)
        _deliver(h, solver, pub, msg)
        if robot and k in (59, 79):
            a = solver.retargeter.alignment
            aligned.append(np.concatenate((a.rotation.ravel(), a.human_origin, a.robot_origin)))
    errors = {round((row[0] - t0) / period): row[1] for row in solver.errors}  # of the published (q, v)
    before = errors[59]  # the last sample before the excursion (the start-up transient still decays)
    after = max(e for k, e in errors.items() if 66 <= k < 80)  # (the old path refused 66, 67)
    assert solver.rebased == (1 if undo else 2) and solver.returned == (1 if undo else 0)
    if robot:  # the retargeted targets carry the alignment: compare it, not the error
        assert np.array_equal(aligned[0], aligned[1]) == undo, aligned
        assert after < 2 * before, (before, after)
    elif undo:
        assert after <= before, (before, after)  # 2e-6 after, 6e-6 before
    else:  # the check has teeth: the old path is measurably worse (5e-4)
        assert after > 20 * before, (before, after)


@pytest.mark.parametrize("window", [None, 0.25])
def test_a_world_turned_and_back_after_a_while_is_tracked_at_once(h, samples, window):
    """The world turns half a turn and, 0.23 s later, back, with the person moving on throughout: both
    moves are re-based and the output stays as close to the measurements as before. (With a return window
    longer than the step can span, ``window=0.25``, the second move was taken for a way back: the IK
    resumed from its state 0.23 s old over a gap clamped to 0.1 s, 0.35 rad off, a second to recover: the
    fuzz campaign's first failure.)"""
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0, metrics_rate=1000.0)
    if window is not None:
        solver.plausible.return_window = window
    t0, period = 10**18, 10**9 // 120
    for k in range(110):
        msg = link_msg(samples[k], t0 + k * period)
        _deliver(h, solver, pub, _moved(msg, "half_turn") if 60 <= k < 88 else msg)
    errors = {round((row[0] - t0) / period): row[1] for row in solver.errors}  # of the published (q, v)
    before = max(errors[k] for k in range(50, 60))
    after = max(e for k, e in errors.items() if 90 <= k < 110)
    if window is None:
        assert solver.rebased == 2 and solver.returned == 0
        assert after < 5 * before + 1e-6, (before, after)
    else:
        assert solver.returned == 1 and after > 100 * before, (before, after)


def test_a_sender_clock_stepping_back_costs_two_samples(h, samples):
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    for k in range(10):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    back = t0 - 15 * 10**9  # the suit PC's clock was set back 15 s
    for k in range(10, 30):
        _deliver(h, solver, pub, link_msg(samples[k], back + k * period))
    assert solver.rejections.counts["stale"] == 2 and solver.rebased == 1
    assert solver.steps == 9 + 18


@pytest.mark.parametrize("jump_s", [-15.0, 15.0])
def test_a_sender_clock_jump_keeps_the_tracking(h, samples, jump_s):
    """The two samples refused while the new time base is confirmed were real motion: the step over the
    seam spans them (three periods), so the output is as close to the measurements right after the jump
    as before it. Stepping over it by one period left the IK two samples behind (0.3-0.9 s to recover in
    the fuzz runs)."""
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0, metrics_rate=1000.0)
    t0, period = 10**18, 10**9 // 120
    shifted = t0 + int(jump_s * 10**9)
    stamps = [(t0 if k < 60 else shifted) + k * period for k in range(80)]
    for k, stamp in enumerate(stamps):
        _deliver(h, solver, pub, link_msg(samples[k], stamp))
    assert solver.rebased == 1
    sent = np.array(stamps, dtype=float)  # the metrics ring stores stamps as floats
    errors = {int(np.argmin(np.abs(sent - row[0]))): row[1] for row in solver.errors}  # published (q, v)
    before = max(errors[k] for k in range(50, 60))  # after the start-up transient
    after = max(errors[k] for k in range(62, 80))
    assert after < 2 * before, (before, after)  # one-period seam: 1.3e-4 against 2e-5 before


def test_a_held_ik_is_reported_as_an_error_and_never_published_as_motion(h, samples):
    """The core's real hold path (OSQP reports failure): ik_node publishes nothing for the held samples,
    says ERROR in /diagnostics, and resumes when solves succeed again."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from dynik_ros.core.velocity_qp import QPSolution

    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    diagnostics = h.collect(DiagnosticArray, "/diagnostics")
    t0, period = 10**18, 10**9 // 120
    for k in range(5):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    assert h.spin_until(lambda: len(joints) >= 5)
    qp, solve = solver.ik.qp, solver.ik.qp.solve
    qp.solve = lambda *a, **kw: QPSolution(np.zeros(qp.n), "primal infeasible", 10, False)
    for k in range(5, 10):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    h.spin(0.3)
    assert len(joints) == 5 and solver.held_steps == 5

    def error_reported() -> bool:
        return any(s.level == DiagnosticStatus.ERROR for m in diagnostics for s in m.status)

    assert h.spin_until(error_reported, timeout=10.0)
    qp.solve = solve
    for k in range(10, 14):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    assert h.spin_until(lambda: len(joints) >= 9) and not solver.held


def test_a_core_step_that_raises_is_counted_and_the_node_keeps_running(h, samples):
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0)
    t0, period = 10**18, 10**9 // 120
    _deliver(h, solver, pub, link_msg(samples[0], t0))
    step = solver.ik.step

    def broken(*args, **kwargs):
        raise RuntimeError("simulated solver bug")

    solver.ik.step = broken
    _deliver(h, solver, pub, link_msg(samples[1], t0 + period))
    solver.ik.step = step
    _deliver(h, solver, pub, link_msg(samples[2], t0 + 2 * period))
    assert solver.rejections.counts["unhandled"] == 1 and solver.active and solver.steps == 1


def test_per_sample_statistics_are_bounded():
    from dynik_ros.core.rolling import RollingSamples

    rng = np.random.default_rng(0)
    window = RollingSamples(capacity=10_000)
    values = rng.exponential(1e-3, 200_000)
    for x in values:
        window.append(x)
    assert len(window) == 10_000 and window.total == 200_000 and window._data.nbytes == 80_000
    np.testing.assert_array_equal(window.array(), values[-10_000:])
    assert window.percentile(99) == pytest.approx(np.percentile(values[-10_000:], 99))
    rows = RollingSamples(capacity=3, width=4)
    for k in range(5):
        rows.append((k, k + 0.1, k + 0.2, k + 0.3))
    assert [r[0] for r in rows] == [2, 3, 4] and rows[1:, 1].tolist() == [3.1, 4.1]


def test_ik_node_locks_joints_by_name(h, samples):
    bad = h.add(ik(locked_joints=["no_such_joint"]))
    assert not ok(bad.trigger_configure()) and "locked_joints" in bad.last_error
    solver, joints, pub = _robust_ik(h, max_future_stamp=0.0, locked_joints=["jRightElbow_roty"])
    held = solver.robot.joint_index("jRightElbow_roty")
    t0, period = 10**18, 10**9 // 120
    for k in range(20):
        _deliver(h, solver, pub, link_msg(samples[k], t0 + k * period))
    assert h.spin_until(lambda: len(joints) >= 20)
    assert len({j.position[held] for j in joints}) == 1 and solver.robot.locked[held]
