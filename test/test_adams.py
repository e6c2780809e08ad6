"""Variable-step Adams weights: textbook values, exactness on polynomials, and the history cut-off."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.core.adams import MAX_STEP_RATIO, adams_weights, usable_history


def test_equal_steps_give_the_textbook_weights():
    np.testing.assert_allclose(adams_weights(0.1, [0.1, 0.1], implicit=True) * 24, [9, 19, -5, 1])
    np.testing.assert_allclose(adams_weights(0.1, [0.1, 0.1], implicit=False) * 12, [23, -16, 5])
    np.testing.assert_allclose(adams_weights(0.1, [0.1], implicit=True) * 12, [5, 8, -1])
    np.testing.assert_allclose(adams_weights(0.1, [], implicit=True), [0.5, 0.5])  # trapezoid
    np.testing.assert_allclose(adams_weights(0.1, [], implicit=False), [1.0])  # Euler


@pytest.mark.parametrize("implicit", [True, False])
def test_unequal_steps_integrate_polynomials_of_the_rule_order_exactly(implicit):
    rng = np.random.default_rng(0)
    for _ in range(20):
        step, history = rng.uniform(0.8, 1.2) / 60, list(rng.uniform(0.7, 1.3, 2) / 60)
        weights = adams_weights(step, history, implicit)
        nodes = np.concatenate(([step] if implicit else [], [0.0], -np.cumsum(history)))
        coefficients = rng.normal(size=weights.size)  # a polynomial of degree len(weights) - 1
        exact = np.polyval(np.polyint(coefficients), step) - np.polyval(np.polyint(coefficients), 0.0)
        np.testing.assert_allclose(step * weights @ np.polyval(coefficients, nodes), exact, rtol=1e-10)
        # one degree more is not integrated exactly: the test above can tell rules apart
        higher = np.append(coefficients, 0.0)
        higher[0] = 1.0
        exact_higher = np.polyval(np.polyint(higher), step) - np.polyval(np.polyint(higher), 0.0)
        assert abs(step * weights @ np.polyval(higher, nodes) - exact_higher) > 1e-14


def test_history_far_from_the_current_step_is_not_used():
    assert usable_history(1.0, [1.0, 1.0]) == 2
    assert usable_history(1.0, [1.0, 1.0, 1.0]) == 2  # at most two previous steps
    assert usable_history(1.0, [MAX_STEP_RATIO * 1.01, 1.0]) == 0  # a dropped sample before this one
    assert usable_history(1.0, [1.0, 5.0]) == 1
    assert usable_history(10.0, [1.0, 1.0]) == 0  # this step follows a gap: extrapolating would amplify
    np.testing.assert_allclose(adams_weights(10.0, [1.0, 1.0], implicit=True), [0.5, 0.5])
