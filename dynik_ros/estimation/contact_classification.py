"""Which foot is on the ground (Latella et al. 2019, sec. 3.3, Algorithm 1): offline, online, no shoes.

States: ``DOUBLE`` (both feet), ``LEFT`` / ``RIGHT`` single support, ``NONE`` (flight; only the online and
kinematic classifiers report it). :func:`contact_flags` turns a state into per-foot flags (right, left),
the order of :class:`~dynik_ros.estimation.base_velocity.BaseVelocityFromContacts`' frames used here.

* :func:`classify_offline` -- Algorithm 1 on a whole recording of the shoes' vertical forces: the
  threshold is tuned from the data, ``T = fraction * mean(f_z,RF + f_z,LF)``; a sample is double support
  when ``|f_z,RF - f_z,LF| <= T``, otherwise single support on the foot with the larger force. The seed
  writes ``T = mean(f_z,RF + f_z,LF)`` (``fraction = 1``): a single-support sample is then called double
  whenever the total vertical force dips below its mean (in walking it oscillates by about +-25 % with the
  pelvis bounce), so the default here is ``fraction = 0.5`` (double support while each foot carries at
  least a quarter of the weight).
* :class:`OnlineContactClassifier` -- the online variant the seed names as missing (sec. 5): the weight
  is the running mean of the total vertical force (self-tuned as in Algorithm 1, but causal), and each
  foot is in contact with hysteresis: on above ``on_fraction`` of the weight, off below ``off_fraction``.
* :class:`KinematicContactClassifier` -- no shoes: the sole height and speed rule shared with the
  retargeter (:mod:`.kinematic_contact`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynik_ros.estimation.kinematic_contact import (
    ContactThresholds,
    foot_speeds,
    next_contact,
    sole_heights,
)

NONE, RIGHT, LEFT, DOUBLE = 0, 1, 2, 3
STATE_NAMES = {NONE: "none", RIGHT: "right", LEFT: "left", DOUBLE: "double"}


def contact_flags(state: int) -> tuple[bool, bool]:
    """(right, left) contact flags of a state."""
    return state in (RIGHT, DOUBLE), state in (LEFT, DOUBLE)


def state_from_flags(right: bool, left: bool) -> int:
    """The state of per-foot flags."""
    return DOUBLE if right and left else RIGHT if right else LEFT if left else NONE


def classify_offline(fz_right: np.ndarray, fz_left: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Algorithm 1: ``DOUBLE``, ``RIGHT`` or ``LEFT`` per sample from the shoes' vertical forces [N]
    (positive when the ground pushes the foot up); ``fraction`` scales the self-tuned threshold
    (module docstring; the seed's literal rule is ``fraction = 1``)."""
    right = np.asarray(fz_right, dtype=float).reshape(-1)
    left = np.asarray(fz_left, dtype=float).reshape(-1)
    if right.shape != left.shape or right.size == 0:
        raise ValueError(f"need two equally long non-empty force series, got {right.shape} and {left.shape}")
    if not (np.all(np.isfinite(right)) and np.all(np.isfinite(left))):
        raise ValueError("vertical forces must be finite")
    if not fraction > 0:
        raise ValueError(f"fraction must be positive, got {fraction}")
    threshold = fraction * float(np.mean(right + left))  # line 3, self-tuned
    states = np.where(right > left, RIGHT, LEFT)  # lines 9-12
    states[np.abs(right - left) <= threshold] = DOUBLE  # lines 6-7
    return states


class OnlineContactClassifier:
    """Causal contact classification from the shoes with a self-tuned weight and per-foot hysteresis."""

    def __init__(self, on_fraction: float = 0.10, off_fraction: float = 0.05, weight: float | None = None):
        if not 0 < off_fraction < on_fraction < 1:
            raise ValueError(f"need 0 < off_fraction < on_fraction < 1, got {off_fraction}, {on_fraction}")
        if weight is not None and not weight > 0:
            raise ValueError(f"weight must be positive, got {weight}")
        self.on_fraction, self.off_fraction = on_fraction, off_fraction
        self.fixed_weight = weight
        self.reset()

    def reset(self) -> None:
        self.flags = [False, False]  # right, left
        self._sum, self._count = 0.0, 0

    @property
    def weight(self) -> float:
        """The body weight [N] the thresholds refer to: given, or the running mean of the total force."""
        if self.fixed_weight is not None:
            return self.fixed_weight
        return self._sum / self._count if self._count else 0.0

    def update(self, fz_right: float, fz_left: float) -> int:
        """State after one sample of the two vertical forces [N]."""
        if not (np.isfinite(fz_right) and np.isfinite(fz_left)):
            raise ValueError("vertical forces must be finite")
        total = fz_right + fz_left
        if total > 0:
            self._sum += total
            self._count += 1
        weight = self.weight
        for f, fz in enumerate((fz_right, fz_left)):
            if weight <= 0:
                self.flags[f] = False
            elif self.flags[f]:
                self.flags[f] = fz >= self.off_fraction * weight
            else:
                self.flags[f] = fz > self.on_fraction * weight
        return state_from_flags(*self.flags)

    def run(self, fz_right: np.ndarray, fz_left: np.ndarray) -> np.ndarray:
        """:meth:`update` over whole series (from the current state)."""
        pairs = zip(fz_right, fz_left, strict=True)
        return np.array([self.update(right, left) for right, left in pairs], dtype=int)


class KinematicContactClassifier:
    """Contact without shoes, from the suit's foot links (the retargeter's rule, :mod:`.kinematic_contact`).

    ``feet``: per foot (right first, then left) the link names whose lowest origin is the sole (e.g.
    ``("RightFoot", "RightToe")``); ``clearances``: each link's height above the ground when standing flat;
    ``thresholds``: height and speed thresholds with hysteresis (default: the retargeter's ``ContactSpec``).
    """

    def __init__(
        self,
        links: Sequence[str],
        feet: Sequence[Sequence[str]],
        clearances: dict[str, float],
        ground: float = 0.0,
        thresholds: ContactThresholds | None = None,
    ):
        if len(feet) != 2:
            raise ValueError(f"expected two feet (right, left), got {len(feet)}")
        index = {name: i for i, name in enumerate(links)}
        missing = [n for group in feet for n in group if n not in index or n not in clearances]
        if missing:
            raise ValueError(f"foot links without a position or a standing clearance: {missing}")
        if thresholds is None:
            from dynik_ros.retarget.config import ContactSpec

            thresholds = ContactSpec()
        self.groups = [[index[n] for n in group] for group in feet]
        self.clearances = [np.array([clearances[n] for n in group]) for group in feet]
        self.ground = float(ground)
        self.thresholds = thresholds
        self.reset()

    @classmethod
    def for_human(
        cls, links: Sequence[str], height: float = 1.75, mass: float = 75.0, ground: float = 0.0, **kwargs
    ) -> KinematicContactClassifier:
        """The Xsens feet (foot and toe links) with clearances from the human model's standing pose."""
        from dynik_ros.retarget.human import human_tpose

        pose = human_tpose(height, mass, 0.0)
        feet = (("RightFoot", "RightToe"), ("LeftFoot", "LeftToe"))
        clearances = {n: float(pose[n][0][2]) for group in feet for n in group}
        return cls(links, feet, clearances, ground, **kwargs)

    def reset(self) -> None:
        self.flags = [False, False]

    def heights_and_speeds(self, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sole heights and horizontal speeds ``(N, 2)`` from link positions and velocities ``(N, L, 3)``."""
        return sole_heights(p, self.groups, self.clearances, self.ground), foot_speeds(v, self.groups)

    def update(self, p: np.ndarray, v: np.ndarray) -> int:
        """State after one sample of link positions and velocities ``(L, 3)``."""
        heights, speeds = self.heights_and_speeds(p[None], v[None])
        for f in range(2):
            height, speed = float(heights[0, f]), float(speeds[0, f])
            self.flags[f] = next_contact(self.flags[f], height, speed, self.thresholds)
        return state_from_flags(*self.flags)

    def run(self, p: np.ndarray, v: np.ndarray) -> np.ndarray:
        """:meth:`update` over ``(N, L, 3)`` series."""
        return np.array([self.update(p[k], v[k]) for k in range(p.shape[0])], dtype=int)
