"""Per-step gains when one IK step covers several of the take's samples (``dynik-retarget --ik-rate``).

Most of the IK's gains are rates (``K`` of eq. 9, 1/s: the step's ``dt`` scales them). A few act per step
instead, a share of an error closed each step: the floor rows' barrier ``d_k >= (1 - gamma) d_{k-1}``
(:mod:`.floor_rows`). Tuned on takes stepped once a sample, such a gain closes half as much per second when
the IK steps every second sample: at 60 Hz on the 120 Hz captures a sole came down onto the floor half as
fast and stood above it where its flat part starts (up to 3.0 mm against 1.9 mm, four walk rows of the capture
table missing the 2 mm "on the ground" target; ``gamma`` at :func:`per_step_gain`'s 0.75: none).

The IK is told the step its per-step gains were tuned at (``DynamicalIKConfig.sample_period``: the take's
own IK step, given by whoever steps it at another rate; 0, the default: every step is one) and a step of
``dt`` covers ``n = dt / sample_period`` of them: the gain of ``n`` steps in a row, ``1 - (1 - g)^n``, which
leaves the same share of the error per second. ROS-free.
"""

from __future__ import annotations


def per_step_gain(gain: float, steps: float) -> float:
    """The share ``1 - (1 - gain)^steps`` of an error that ``steps`` steps of the per-step gain ``gain`` (in
    [0, 1]) close together; ``gain`` itself (the same float) at one step."""
    if steps == 1.0:
        return gain
    return 1.0 - (1.0 - gain) ** steps
