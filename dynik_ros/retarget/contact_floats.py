"""The contact rules' per-sample arithmetic on 3-vectors in Python floats (:class:`.foot_contact.FootContact`,
issue 9's speed target): numpy's operations in the same order, so the same values bit for bit
(``test_feet_fast_paths``), without numpy's per-call cost, which is most of the work on a single 3-vector. The
rules run for every foot at every sample of a take, twice offline (``Retargeter.compute`` and the
``anchor: robot`` replay, :mod:`.robot_anchor`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a x b`` of two 3-vectors in float arithmetic, the same operations as ``np.cross`` (which costs
    about ten times more on a single pair: it is called for every held foot at every sample)."""
    return np.array(cross_values(a.tolist(), b.tolist()))


def cross_values(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """:func:`cross` of two 3-vectors given as floats, as three floats."""
    a0, a1, a2 = a
    b0, b1, b2 = b
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


def lowest(points: Sequence[Sequence[float]]) -> int:
    """The index of the lowest of ``points`` (by their third coordinate): ``np.argmin`` of the heights (the
    first of equal ones; the first NaN if there is one), without its per-call cost on a sole's few points."""
    j, low = 0, points[0][2]
    if low != low:
        return 0
    for i in range(1, len(points)):
        z = points[i][2]
        if z != z:
            return i
        if z < low:
            j, low = i, z
    return j


def blended_rate(
    omega: Sequence[float],
    along: Sequence[float],
    level_rate: Sequence[float],
    alpha: float,
    rate_alpha: float,
) -> tuple[float, float, float]:
    """A blending foot's angular-velocity target ``(1 - alpha) omega + rate_alpha along + alpha level_rate``
    (:meth:`FootContact.advance`), per component in floats: numpy's operations on the 3-vectors in the same
    order, without their per-call cost (``test_feet_fast_paths``)."""
    keep = 1.0 - alpha
    return (
        keep * omega[0] + rate_alpha * along[0] + alpha * level_rate[0],
        keep * omega[1] + rate_alpha * along[1] + alpha * level_rate[1],
        keep * omega[2] + rate_alpha * along[2] + alpha * level_rate[2],
    )


NO_RATE = (0.0, 0.0, 0.0)  # a level sole's own angular velocity, not pitched on the toes (blended_rate)


def rate_term_needed(rate_alpha: float, level_rate: Sequence[float]) -> bool:
    """Whether :func:`blended_rate`'s ``rate_alpha along`` term can change its answer, so that ``along`` (a
    rotation times a vector, a BLAS product) must be computed. Not with ``rate_alpha == 0`` (the blend over:
    ``alpha`` is 1) and ``level_rate`` :data:`NO_RATE` (the object itself: not on the toes), for ``0 <
    alpha <= 1`` and a finite ``along``: the term is then a zero, ``+0`` or ``-0``, and each component's last
    addition, of ``alpha * 0.0 = +0``, makes any zero sum ``+0`` and leaves any other value as it is
    (``test_feet_fast_paths``)."""
    return rate_alpha != 0.0 or level_rate is not NO_RATE


def held(
    anchor: Sequence[float],
    lever: Sequence[float],
    reach: Sequence[float],
    omega: Sequence[float],
    beta: float,
    blend: float,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """A held foot's position target ``anchor - lever - (1 - beta) reach`` and its rate ``-(omega x lever)
    + reach / blend`` (``+ 0`` once blended in, ``beta >= 1``) (:meth:`FootContact.advance`), per component in
    floats: numpy's operations on the 3-vectors in the same order (``test_feet_fast_paths``). The vectors
    come as floats (``.tolist()``): the caller has the sole points' as one list already."""
    a0, a1, a2 = anchor
    p0, p1, p2 = lever
    r0, r1, r2 = reach
    rest = 1.0 - beta
    target = (a0 - p0 - rest * r0, a1 - p1 - rest * r1, a2 - p2 - rest * r2)
    c0, c1, c2 = cross_values(omega, lever)
    if beta < 1.0:
        return target, (-c0 + r0 / blend, -c1 + r1 / blend, -c2 + r2 / blend)
    return target, (-c0 + 0.0, -c1 + 0.0, -c2 + 0.0)


def faded(
    target: Sequence[float], rate: Sequence[float], delta: Sequence[float], fade: float, tau: float
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """A released foot's position target ``target + fade delta`` and rate ``rate - (fade / tau) delta`` (the
    held offset ``delta`` fading out, :meth:`FootContact.advance`), per component in floats: numpy's
    operations on the 3-vectors in the same order (``test_feet_fast_paths``). The vectors come as floats: the
    offset is kept as floats from its release on."""
    t0, t1, t2 = target
    v0, v1, v2 = rate
    d0, d1, d2 = delta
    slope = fade / tau
    return (t0 + fade * d0, t1 + fade * d1, t2 + fade * d2), (
        v0 - slope * d0,
        v1 - slope * d1,
        v2 - slope * d2,
    )


def nearest(points: Sequence[float], others: Sequence[float]) -> float:
    """``min_i |points[i] - others[i]|`` of 2-D points given flat, ``[x0, y0, x1, y1, ...]`` (the human foot
    links from their footprint, :class:`.foot_contact.HumanFeet`), in floats:
    ``np.linalg.norm(points - others, axis=1).min()``'s operations (``sqrt(dx dx + dy dy)``) without its
    per-call cost (finite points: the human links are checked finite, ``Retargeter.compute``)."""
    if len(points) != len(others) or len(points) % 2:
        raise ValueError(f"nearest() of {len(points)} and {len(others)} coordinates")
    best = None  # min()'s own rule, in a loop (half the cost of min over a generator): the first, then
    for i in range(0, len(points), 2):  # any that is less
        dx, dy = points[i] - others[i], points[i + 1] - others[i + 1]
        distance = math.sqrt(dx * dx + dy * dy)
        if best is None or distance < best:
            best = distance
    if best is None:
        raise ValueError("nearest() of no points")  # (as min() of nothing)
    return best


def past_margin(excess: float, threshold: float, margin: Callable[[], float]) -> bool:
    """``excess > threshold + margin()`` for a margin that is ``>= 0`` (or NaN; the toe-off rule's noise
    margin, :meth:`.foot_contact.FootContact._decide`), with ``margin()`` called only where ``excess``
    is past ``threshold``: ``threshold + m >= threshold`` for ``m >= 0`` (rounding is monotone), so an
    excess not past the threshold is not past it plus the margin either (the median of the heel noise was
    taken on every held sample)."""
    return excess > threshold and excess > threshold + margin()
