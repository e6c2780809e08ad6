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
