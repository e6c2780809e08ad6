"""Smoothness of the written joint trajectory (retarget/smoothness.py)."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.retarget.smoothness import chatter_flags, second_differences, smoothness


def test_second_differences_are_exact_on_a_parabola_with_unequal_steps():
    times = np.cumsum(np.random.default_rng(1).uniform(0.005, 0.02, 40))
    positions = np.stack((3.0 * times**2 - times, -0.5 * times**2), axis=1)
    a = second_differences(positions, times)
    assert a.shape == (38, 2)
    np.testing.assert_allclose(a, np.tile([6.0, -1.0], (38, 1)), rtol=1e-9)
    with pytest.raises(ValueError, match="increase"):
        second_differences(positions, times[::-1])


def test_chatter_is_a_sign_flip_above_the_threshold_on_both_sides():
    times = np.arange(200) / 100.0
    smooth = np.sin(2.0 * np.pi * times)  # |a| <= 39.5 rad/s^2: below the threshold, never chatter
    zigzag = np.where(np.arange(200) % 2, 0.01, -0.01)  # |a| = 400 rad/s^2, alternating every sample
    figures = smoothness(np.stack((smooth, zigzag), axis=1), times)
    np.testing.assert_allclose(figures.chatter, [0.0, 1.0])
    assert figures.chatter_share == 0.5
    np.testing.assert_allclose(figures.max[1], 400.0)
    assert figures.worst("p99") == (pytest.approx(400.0), 1)
    a = second_differences(zigzag[:, None], times)
    assert not chatter_flags(a, threshold=500.0).any()
