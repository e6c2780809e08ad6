"""The shapes in time the contact rules give a sole (:mod:`.foot_contact`): the touch-down blend's level
weight ``alpha`` (``contact.blend_shape``: the smoothstep ``h(x) = 3x^2 - 2x^3`` or linear in the share ``x``
of ``blend_time`` spent in contact) and the sole's pitch on the toes ``s(theta)`` (``contact.toe: pitch``),
each with its derivative, which the rules feed forward as the sole's turning rate. Plain floats. ROS-free.
"""

from __future__ import annotations


def toe_pitch(theta: float, full: float) -> tuple[float, float]:
    """Sole pitch ``s(theta)`` on the toes and its slope ``ds/dtheta`` (:mod:`.foot_contact`; radians),
    ``full`` the heel-up pitch from which the sole pitches as the human foot does (``contact.toe_angle``)."""
    start = full / 3.0
    x = (theta - start) / (full - start)
    if x <= 0.0:
        return 0.0, 0.0
    if x >= 1.0:
        return theta, 1.0
    h, dh = smoothstep(x)
    return theta * h, h + theta * dh / (full - start)


def smoothstep(x: float) -> tuple[float, float]:
    """``h(x) = 3x^2 - 2x^3`` and ``dh/dx`` for ``x`` in [0, 1]: 0 to 1 with zero slope at both ends."""
    return x * x * (3.0 - 2.0 * x), 6.0 * x * (1.0 - x)


def blend_in(x: float, shape: str) -> tuple[float, float]:
    """The touch-down blend's level weight ``alpha`` and ``d alpha / dx`` at ``x`` (the share of
    ``blend_time`` spent in contact, in [0, 1]): ``linear`` ``alpha = x``, or ``smooth`` ``alpha = h(x)``
    (:func:`smoothstep`; ``contact.blend_shape``, module docstring)."""
    return smoothstep(x) if shape == "smooth" else (x, 1.0)
