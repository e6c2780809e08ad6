"""A written trajectory that ran away: ``dynik-retarget``'s verdict beyond NaN and limit breaches.

A run can keep every joint inside its limits and still write a trajectory no robot should be sent: the old
ZMP plan (before 8086e18) led the CoM 11 m off the soles and back, the IK followed it, and the summary said
OK with a position RMSE of 2.3 m and a held sole sliding 12.9 m. The figures judged here are measured on the
written configurations (forward kinematics, :func:`~dynik_ros.retarget.trajectory_errors.frame_positions`
and :mod:`~dynik_ros.retarget.foot_figures`), against thresholds set from the robot's size and the issue's
targets, far beyond what any run of the capture table reaches (README, *Retargeting human motion onto
humanoid robots*, with the figures):

* tracking: the position RMSE (eq. as in ``trajectory_errors``), mean over the samples, above
  :data:`TRACKING_SHARE` of the robot's root height (its standing pelvis height, ``calibration``);
* base: the root frame (a position target in every registry map) farther than :data:`BASE_SHARE` root
  heights from its target on some sample;
* feet: a sole sliding more than :data:`SLIDE_MM` in one contact (flat or on the toes), twenty times the
  issue's 5 mm target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

TRACKING_SHARE = 0.25  # position RMSE mean / robot root height
BASE_SHARE = 1.0  # base distance from its target, max / robot root height
SLIDE_MM = 100.0  # largest slide of one contact


def runaway(
    position_rmse: float,
    base_errors: np.ndarray | None,
    slides_mm: Sequence[tuple[str, float]],
    root_height: float,
) -> list[str]:
    """What ran away, one clause per figure past its threshold naming both (empty: nothing did).

    ``position_rmse``: mean over the samples (m); ``base_errors`` ``(N,)``: the root frame's distance from its
    target (m; ``None``: the root is not a position target); ``slides_mm``: ``(foot, largest slide of one
    contact)`` (NaN: no contact); ``root_height``: the robot's standing root height (m)."""
    failures = []
    limit = TRACKING_SHARE * root_height
    if position_rmse > limit:
        failures.append(
            f"position RMSE mean {1e3 * position_rmse:.0f} mm > {1e3 * limit:.0f} mm "
            f"({TRACKING_SHARE:g} x the root height {root_height:.2f} m)"
        )
    if base_errors is not None and len(base_errors):
        worst, limit = float(np.max(base_errors)), BASE_SHARE * root_height
        if worst > limit:
            failures.append(
                f"base {worst:.2f} m from its target (sample {int(np.argmax(base_errors))}) > {limit:.2f} m "
                f"({BASE_SHARE:g} x the root height)"
            )
    for side, slide in slides_mm:
        if not math.isnan(slide) and slide > SLIDE_MM:
            failures.append(f"foot {side} slid {slide:.0f} mm in one contact > {SLIDE_MM:g} mm")
    return failures
