"""PlausibilityGuard: absurd but finite link states refused, fast real motion accepted, lasting jumps
confirmed (ground truth: rotations made from known angular velocities)."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.core.so3 import exp_so3
from dynik_ros.io.plausibility import JUMP, PlausibilityGuard

HALF_TURN = np.diag([-1.0, -1.0, 1.0])


def _spinning(links: int, omega: np.ndarray, dt: float, count: int):
    """``count`` samples of ``links`` links turning at world angular velocity ``omega`` (consistent gyros)."""
    rotations = np.repeat(np.eye(3)[None], links, axis=0)
    for k in range(count):
        yield k, np.zeros((links, 3)), exp_so3(k * dt * omega) @ rotations, np.repeat(omega[None], links, 0)


def test_a_hand_flicked_at_40_rad_per_s_is_accepted_at_every_rate():
    for rate in (60.0, 120.0, 240.0):
        guard = PlausibilityGuard()
        for _, p, r, w in _spinning(1, np.array([0.0, 40.0, 0.0]), 1.0 / rate, 30):
            assert guard.check(p, r, np.zeros_like(p), w, 1.0 / rate) == (None, "")


@pytest.mark.parametrize("rate", [60.0, 120.0, 240.0])
def test_a_half_turn_of_the_world_is_a_jump_even_after_refused_samples(rate):
    """Refused samples do not move the reference, so dt grows: at 120 Hz the third sample after the
    turn is 25 ms from the last accepted one, and the speed bound alone (100 rad/s * dt + 1 rad = 3.5 rad)
    accepted a half turn that the links' gyros (0.4 rad/s) contradict. Now the new regime is confirmed by
    3 agreeing samples and reported as ``rebased``."""
    dt = 1.0 / rate
    guard = PlausibilityGuard()
    samples = list(_spinning(15, np.array([0.0, 0.0, 0.4]), dt, 8))
    for _, p, r, w in samples[:5]:
        assert guard.check(p, r, None, w, dt)[0] is None
    verdicts = [guard.check(p, HALF_TURN @ r, None, w, (k - 4) * dt)[0] for k, p, r, w in samples[5:]]
    assert verdicts == [JUMP, JUMP, "rebased"]


def test_unmeasured_angular_velocities_fall_back_to_the_speed_bound():
    guard = PlausibilityGuard()
    dt = 1.0 / 120.0
    r = np.repeat(np.eye(3)[None], 3, axis=0)
    assert guard.check(np.zeros((3, 3)), r, None, None, dt)[0] is None
    small = exp_so3(np.array([0.0, 0.0, 0.3])) @ r  # 0.3 rad in one sample: within 100 rad/s * dt + 1 rad
    assert guard.check(np.zeros((3, 3)), small, None, None, dt)[0] is None
    assert guard.check(np.zeros((3, 3)), HALF_TURN @ small, None, None, dt)[0] == JUMP


def _walking(links: int, dt: float, count: int):
    """``count`` samples of links moving at 1.3 m/s along x and turning at 0.5 rad/s about z, spread over
    a body (consistent twists): ``(k, positions, rotations, linear, angular)``."""
    offsets = np.linspace(-0.5, 0.5, links)[:, None] * np.array([0.2, 0.3, 1.6])
    velocity, omega = np.array([1.3, 0.0, 0.0]), np.array([0.0, 0.0, 0.5])
    for k in range(count):
        p = offsets + k * dt * velocity
        r = np.repeat(exp_so3(k * dt * omega)[None], links, axis=0)
        yield k, p, r, np.repeat(velocity[None], links, 0), np.repeat(omega[None], links, 0)


def _feed(guard, sample, dt, moved=None, stamp_ns=None):
    _, p, r, v, w = sample
    if isinstance(moved, str):  # "teleport"
        p = p + np.array([100.0, 0.0, 0.0])
    elif moved is not None:  # a rotation of the world about z
        p, r, v, w = p @ moved.T, moved @ r, v @ moved.T, w @ moved.T
    return guard.check(p, r, v, w, dt, stamp_ns)[0]


@pytest.mark.parametrize("moved", ["teleport", "half_turn"])
@pytest.mark.parametrize("length", [3, 6, 10])
def test_a_glitch_that_comes_back_is_recognised_at_once(moved, length):
    """``length`` copies of one sample moved away (100 m, or half a turn of the world) are confirmed and
    re-based; the first sample back where the stream was is ``returned`` (no second confirmation) when
    stamps are given, and re-based again after 3 samples without them (the old behaviour)."""
    turn = HALF_TURN if moved == "half_turn" else moved
    dt, period = 1.0 / 120.0, 8_333_333
    for stamps in (True, False):
        guard = PlausibilityGuard()
        samples = list(_walking(17, dt, 40))
        verdicts = []
        last = None  # index of the last accepted sample: dt is measured from it
        for k, sample in enumerate(samples):
            glitch = 20 <= k < 20 + length
            shown = samples[19] if glitch else sample  # frozen content
            stamp = k * period if stamps else None
            step = (k - last) * dt if last is not None else dt
            v = _feed(guard, shown, step, turn if glitch else None, stamp)
            verdicts.append(v)
            if v in (None, "rebased", "returned"):
                last = k
        after = verdicts[20 + length :]
        if stamps:
            assert verdicts[20:23] == [JUMP, JUMP, "rebased"] and after[0] == "returned", verdicts
            assert all(v is None for v in after[1:])
        else:
            assert "returned" not in verdicts and after[:3] == [JUMP, JUMP, "rebased"], verdicts


def test_a_second_different_move_is_not_a_return():
    """After a confirmed half turn, a turn to 50 deg off the old frame is no return to it (the jump bounds
    alone, 1.28 rad over those 33 ms, would let it pass): it has to be confirmed like any other move."""
    dt, period = 1.0 / 120.0, 8_333_333
    guard = PlausibilityGuard()
    samples = list(_walking(17, dt, 40))
    near = exp_so3(np.array([0.0, 0.0, np.radians(50.0)]))
    verdicts = []
    for k, sample in enumerate(samples):
        turn = None if k < 20 else HALF_TURN if k < 23 else near
        verdicts.append(_feed(guard, sample, dt, turn, k * period))
    assert verdicts[20:23] == [JUMP, JUMP, "rebased"]
    assert verdicts[23:26] == [JUMP, JUMP, "rebased"] and "returned" not in verdicts, verdicts


def test_the_way_back_closes_after_the_return_window():
    """A move that lasted longer than ``return_window`` is the new world: coming back needs confirming."""
    dt, period = 1.0 / 120.0, 8_333_333
    guard = PlausibilityGuard(return_window=0.1)
    samples = list(_walking(17, dt, 60))
    verdicts = [
        _feed(guard, s, dt, "teleport" if 20 <= k < 40 else None, k * period) for k, s in enumerate(samples)
    ]
    assert verdicts[20:23] == [JUMP, JUMP, "rebased"]
    assert verdicts[40:43] == [JUMP, JUMP, "rebased"] and "returned" not in verdicts


def test_the_shortcut_past_the_gyro_check_never_changes_a_verdict():
    """Far inside the bound the gyro prediction is not evaluated (the angle to the prediction is at most
    the turn plus the predicted turn); random samples on both sides of the bound get the verdict of the
    full check."""
    rng = np.random.default_rng(11)
    guard = PlausibilityGuard()
    dt = 1.0 / 240.0
    allowed = guard.jump_angle_margin + 0.5 * guard.max_angular_acceleration * dt * dt
    verdicts = set()
    for _ in range(400):
        r0 = exp_so3(rng.normal(size=(5, 3)))
        w0, w1 = rng.normal(scale=rng.choice([1.0, 60.0, 200.0]), size=(2, 5, 3))
        r1 = exp_so3(rng.normal(scale=rng.choice([0.05, 0.5, 1.2]), size=(5, 3))) @ r0
        cos = np.clip((np.einsum("nij,nij->n", r0, r1) - 1.0) / 2.0, -1.0, 1.0)
        turned = np.arccos(cos.min())
        if turned > guard.max_angular_speed * dt + guard.jump_angle_margin:
            continue  # refused by the turn bound before the gyro check
        predicted = exp_so3(0.5 * dt * (w0 + w1)) @ r0
        off = np.arccos(np.clip((np.einsum("nij,nij->n", r1, predicted) - 1.0) / 2.0, -1.0, 1.0))
        expected = bool(off.max() > allowed)
        got = bool(guard._jump((np.zeros((5, 3)), r0, w0), (np.zeros((5, 3)), r1, w1), dt))
        assert got == expected
        verdicts.add(got)
    assert verdicts == {True, False}  # both sides were exercised
