"""Variable-step Adams weights for integrating the IK velocity ``nu`` (sec. 3.3 integrates by explicit Euler).

The dynamical IK knows ``nu`` at the sample times only. Integrating it over a step ``[t_{k-1}, t_k]`` by
Euler (first order) or the trapezoidal rule (second order) leaves a local error of ``O(dt^2)`` or ``O(dt^3)``
that the feedback gain turns into a steady tracking error of about ``local error / (K dt)``. Adams rules
integrate the polynomial that interpolates ``nu`` at the current and the previous samples:

* Adams-Moulton (``implicit``): nodes ``t_k, t_{k-1}, t_{k-2}, t_{k-3}`` - fourth order, used for the step
  (``nu_k`` is the QP's solution of this step, so the rule is explicit for us);
* Adams-Bashforth (explicit): nodes ``t_{k-1}, t_{k-2}, t_{k-3}`` - third order, used to predict where
  the step ends, the point the Jacobian of eq. (10) is taken at.

With equal steps the weights are the textbook ``(9, 19, -5, 1)/24`` and ``(23, -16, 5)/12``. Unequal steps
(stamps from a real sensor) get their own weights from the interpolating polynomial. A previous sample
whose step differs from the current one by more than ``MAX_STEP_RATIO`` is not used (the polynomial would
extrapolate far beyond its nodes and amplify noise); with no history left the rules fall back to the
trapezoidal rule and to Euler prediction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_STEP_RATIO = 2.0
MAX_HISTORY = 2


def usable_history(step: float, history: Sequence[float]) -> int:
    """How many of the previous step lengths (most recent first) are within ``MAX_STEP_RATIO`` of ``step``
    and of each other, counting from the most recent and stopping at the first that is not."""
    count, last = 0, step
    for length in history[:MAX_HISTORY]:
        if not (last / MAX_STEP_RATIO <= length <= last * MAX_STEP_RATIO):
            break
        count, last = count + 1, length
    return count


def adams_weights(step: float, history: Sequence[float], implicit: bool) -> np.ndarray:
    """Weights ``w`` with ``integral of nu over the step = step * sum_i w_i nu_i``.

    ``history`` holds the lengths of the previous steps, most recent first (``t_{k-1} - t_{k-2}``, ...).
    Implicit (Adams-Moulton): ``nu_i`` runs over ``nu_k, nu_{k-1}, ...``; explicit (Adams-Bashforth): over
    ``nu_{k-1}, nu_{k-2}, ...``. The number of weights is one more than the history used, plus one if
    implicit (a trapezoid when there is no usable history).
    """
    used = usable_history(step, history)
    nodes = [1.0, 0.0] if implicit else [0.0]
    elapsed = 0.0
    for length in history[:used]:
        elapsed += length
        nodes.append(-elapsed / step)
    nodes_array = np.array(nodes)
    powers = np.arange(nodes_array.size)
    vandermonde = nodes_array[None, :] ** powers[:, None]
    moments = 1.0 / (powers + 1.0)  # integral of u^j over [0, 1]
    return np.linalg.solve(vandermonde, moments)
