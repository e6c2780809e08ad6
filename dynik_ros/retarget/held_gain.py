"""A held foot comes down to the floor and turns level (``contact.held_gain``, ``contact.held_tilt_gain``):
higher gains on its height and its tilt.

A held foot's position target is on the ground from the sample its contact starts (the anchor,
:mod:`.foot_contact`), while the robot foot is where it was tracking the human's: at touch-down the human sole
is still up to ``contact.height_on`` (3 cm) above its standing height, so the target steps down, and a
heel-striking foot lags its turning level target by a few tenths of a degree. The IK closes such a gap at
the residual's rate only, ``v* = v + K e`` (eq. 9) with the maps' ``K = 10 /s``: 63 % of it in 0.1 s, the
blend time, while a walk's contact lasts 0.3-0.6 s. On the capture table held soles stood up to 16 mm above
the floor over the flat part of their contacts (31 of 52 walk rows over 2 mm), and on the planted synthetic
walk (:mod:`dynik_ros.motion.planted_walk`, feet exactly on the floor) 4-6 mm on every robot.

While a foot is held in contact (touch-down blend included) the gain of one row of eq. (9) is at least
``contact.held_gain``: the world z (the height) of its position target. ``K`` may vary per step (Rapetti et
al. 2020, Remark 2; the IK still caps it at ``max_gain_dt / dt``, keeping ``r+ = (1 - K dt) r`` stable).
The horizontal rows keep their gains (the hold keeps the foot where it landed), and so does the yaw.

The tilt (``contact.held_tilt_gain``: the world x and y rows of its orientation target). With the height at
40 /s and the tilt at the map's 10 /s the two pull the same leg joints at different rates while the level
blend turns the sole: where the sole cannot turn with its ankle (a leg leaning farther than the ankle roll's
limits level, the ankle roll on its limit, :mod:`.leg_reach`) it turns only as fast as the hip takes the lean
up, and the weighted rows give that way to the height first. On the real CMU 131_03 take G1's right sole came
down with its ankle roll on +15 deg and ended the touch-down blend 3.9 deg behind its level target, which
the hard stance rows (:mod:`dynik_ros.core.stance_rows`) then closed at 10 /s: 3.6 deg on the first flat
sample, over the issue's 3 deg (iCub 3.1). With the tilt at 20 /s its flat tilt is 1.9 deg (iCub 1.2); at 40
/s 1.3, but a TALOS sole on CMU 131_01 then levels first and comes down later (2.5 mm above the floor where
its flat part starts, 1.7 at 20 /s): README, *On the ground*. On 3450e15's defaults (weighted stance rows)
the tilt at 40 /s lost two walk rows (a held TALOS sole on CMU 131_03 slid 5.3 mm). The lower bounds go to
the IK per sample (``Measurements.min_gain``). ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def held_min_gains(
    gain: float,
    targets,
    foot_rows: Sequence[int],
    held: np.ndarray,
    tilt_gain: float = 0.0,
    tilt_rows: Sequence[int | None] = (),
) -> list | np.ndarray:
    """Per sample the lower bounds on every row's gain of eq. (9) (``Measurements.min_gain``, ``(N, 3 (n_p +
    n_o))``): ``gain`` on the height row (world z) of each held foot's position target (``foot_rows[f]``),
    ``tilt_gain`` on the world x and y rows of its orientation target (``tilt_rows[f]``, ``None``: the foot
    has none), 0 on every other row; ``held`` ``(N, n_feet)``. A list of ``None`` (the gains as configured)
    with both gains 0 or no foot."""
    n = len(held)
    if (gain <= 0.0 and tilt_gain <= 0.0) or not len(foot_rows):
        return [None] * n
    bounds = np.zeros((n, 3 * (targets.n_position + targets.n_orientation)))
    held = np.asarray(held, dtype=bool)
    offset = 3 * targets.n_position  # the orientation rows follow the position rows (eq. 5)
    for f, row in enumerate(foot_rows):
        bounds[:, 3 * row + 2] = np.where(held[:, f], max(gain, 0.0), 0.0)
        tilt = tilt_rows[f] if f < len(tilt_rows) else None
        if tilt is not None:
            for axis in (0, 1):
                bounds[:, offset + 3 * tilt + axis] = np.where(held[:, f], max(tilt_gain, 0.0), 0.0)
    return bounds
