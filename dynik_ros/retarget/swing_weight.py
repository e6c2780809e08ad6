"""A foot in the air weighs less (``contact.swing_weight``): the other leg's stance is not pulled by it.

A held foot's leg leans within the ankle roll's reach only if the hip is where the targets put it; the
robot's pelvis is held there by every weighted target, and a foot in the air, tracked with the weight of a
held one (the maps' 20), can pin it elsewhere through its own leg: on the real CMU 131_01 take the left foot,
released on its toes 11 cm up with its ankle roll on the limit, holds G1's pelvis 14-34 cm behind its target
while the right foot crouches, and that sole rolls 7 deg. While a foot is not held in contact the horizontal
rows (world x, y) of its position target get the factor ``w = contact.swing_weight`` on their weight (1: the
weights as configured), back to the full weight as it comes down: ``s = w + (1 - w) clip(1 - a / SWING_HEIGHT,
0, 1)``, ``a`` the height of its target above its standing height (no weight step at touch-down). Its height
keeps its weight (with all three rows scaled the feet in the air dipped 2-72 mm under the floor on the capture
table). The factors go to the IK per sample (``Measurements.weight_scale``). A lighter foot lands off the
human's footprint: with the hold where the human's foot landed it is then dragged there (a slide), so it goes
with ``contact.anchor: robot``.

Not with a balance plan (``balance.enabled``, ``dynik-retarget --balance``, ``ik_node balance:=true``): the
plan leads the CoM to where the swing foot's target lands, and a light swing foot lands behind it (G1's
synthetic walk at 60 Hz through ``ik_node``: the CoM under 1 cm inside the feet on 30 samples, three after
each landing; the MuJoCo walks on the ZMP plan fell), so the feet keep their weights there.
"""

from __future__ import annotations

import numpy as np

SWING_HEIGHT = 0.05  # m: a foot target this far above its standing height has the swing weight


def swing_scales(heights: np.ndarray, held: np.ndarray, standing: np.ndarray, weight: float) -> np.ndarray:
    """Factors ``(N, n_feet)`` on the feet's position weights: 1 held, ``weight`` from ``SWING_HEIGHT``
    above ``standing`` (per foot, m) on; ``heights`` ``(N, n_feet)`` the foot targets' heights."""
    above = np.asarray(heights, dtype=float) - np.asarray(standing, dtype=float)[None]
    low = np.clip(1.0 - above / SWING_HEIGHT, 0.0, 1.0)
    return np.where(held, 1.0, weight + (1.0 - weight) * low)


def swing_factors(
    weight: float, targets, foot_rows, held: np.ndarray, heights: np.ndarray, standing: np.ndarray
) -> list | np.ndarray:
    """Per sample the factors on every row of eq. (9) (``Measurements.weight_scale``, ``(N, 3 (n_p + n_o))``):
    the feet's horizontal position rows (world x, y) by :func:`swing_scales`, every other row 1; a list of
    ``None`` (the weights as configured) with ``weight`` 1 or no foot."""
    n = len(held)
    if weight == 1.0 or not len(foot_rows):
        return [None] * n
    scales = np.ones((n, 3 * (targets.n_position + targets.n_orientation)))
    feet = swing_scales(heights, held, standing, weight)
    for f, row in enumerate(foot_rows):  # horizontally: its height keeps its weight (no foot under the floor)
        scales[:, 3 * row : 3 * row + 2] = feet[:, f, None]
    return scales
