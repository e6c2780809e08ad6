"""A held foot comes down to the floor (``contact.held_gain``): a higher gain on its height.

A held foot's position target is on the ground from the sample its contact starts (the anchor,
:mod:`.scaling`), while the robot foot is where it was tracking the human's: at touch-down the human sole is
still up to ``contact.height_on`` (3 cm) above its standing height, so the target steps down, and a
heel-striking foot lags its turning level target by a few tenths of a degree. The IK closes such a gap at
the residual's rate only, ``v* = v + K r`` (eq. 9) with the maps' ``K = 10 /s``: 63 % of it in 0.1 s, the
blend time, while a walk's contact lasts 0.3-0.6 s. On the capture table held soles stood up to 16 mm above
the floor over the flat part of their contacts (31 of 52 walk rows over 2 mm), and on the planted synthetic
walk (:mod:`dynik_ros.motion.planted_walk`, feet exactly on the floor) 4-6 mm on every robot.

While a foot is held in contact (touch-down blend included) the gain of one row of eq. (9) is at least
``contact.held_gain``: the world z (the height) of its position target. ``K`` may vary per step (Rapetti et
al. 2020, Remark 2; the IK still caps it at ``max_gain_dt / dt``, keeping ``r+ = (1 - K dt) r`` stable).
The horizontal rows keep their gains (the hold keeps the foot where it landed), and so does its orientation:
with the gain on the tilt too (world x, y of the orientation target) the capture table met every target on
42 of 52 walk rows against 44 with the height alone (a held TALOS sole on the real CMU 131_03 take slid
5.3 mm, 4.3 mm with the height alone). The lower bounds go to the IK per sample (``Measurements.min_gain``).
ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def held_min_gains(gain: float, targets, foot_rows: Sequence[int], held: np.ndarray) -> list | np.ndarray:
    """Per sample the lower bounds on every row's gain of eq. (9) (``Measurements.min_gain``, ``(N, 3 (n_p +
    n_o))``): ``gain`` on the height row (world z) of each held foot's position target (``foot_rows[f]``), 0
    on every other row; ``held`` ``(N, n_feet)``. A list of ``None`` (the gains as configured) with ``gain`` 0
    or no foot."""
    n = len(held)
    if gain <= 0.0 or not len(foot_rows):
        return [None] * n
    bounds = np.zeros((n, 3 * (targets.n_position + targets.n_orientation)))
    on = np.where(np.asarray(held, dtype=bool), float(gain), 0.0)
    for f, row in enumerate(foot_rows):
        bounds[:, 3 * row + 2] = on[:, f]
    return bounds
