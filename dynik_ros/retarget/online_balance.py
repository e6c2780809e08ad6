"""Quasi-static balance one sample at a time (``ik_node balance:=true``; the offline plan is
:mod:`dynik_ros.retarget.balance`).

Online the future contact sequence is unknown, so the offline plan's look-ahead (the next stance foot, a
foot about to lift) is replaced by what the gait so far tells (Schumacher et al. 2021, sec. V-4: the CoM
within the stance foot in single support, on the line to the next foot in between):

* **single support**: the CoM target is the centre of the stance foot's sole;
* **double support** after a step: the target moves on the line from where it was to the foot that landed
  last (in walking, the next stance foot) over ``shift_time``; both feet down from the start (standing):
  the middle of the feet;
* **no foot in contact** (the detection leaves such gaps between single supports on fast walks): the
  target moves from where it was to the centre of the foot that was *not* the last stance foot (in walking,
  the swing foot, which lands next), tracking that foot as it moves, over the duration of the previous such
  gap (``shift_time`` for the first) less 50 ms, so that the CoM, which follows at the CoM gain, is over the
  swing foot when it lands (measured on the G1 walk at 60 Hz: 8 mm inside at each landing without the
  lead, 1 cm asked).

The feed-forward is the target's finite difference within a phase (zero at a phase change), and the support
rows of the core use the feet in contact now. The contact state comes from the retargeter's kinematic foot
contact (:class:`~dynik_ros.retarget.foot_contact.FootContact`) or from outside (``dynamics_node``'s
``/human/contact_state``: ``none``, ``left``, ``right``, ``double``; :func:`contacts_from_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from dynik_ros.core.targets import Measurements
from dynik_ros.retarget.balance import BalancedTargets, BalanceSpec

CONTACT_STATES = ("none", "left", "right", "double")
_SINGLE, _DOUBLE, _NONE = "single", "double", "none"
_LEAD = 0.05  # s: without contact the target reaches the swing foot this long before the expected landing


def contacts_from_state(state: str, sides: Sequence[str]) -> np.ndarray:
    """One flag per foot (``sides``: each foot's ``left`` / ``right``) from a contact-state name."""
    if state not in CONTACT_STATES:
        raise ValueError(f"contact state must be one of {CONTACT_STATES}, got '{state}'")
    return np.array([state == "double" or state == side for side in sides], dtype=bool)


class OnlineBalance:
    """The CoM target and support of each sample from the contacts seen so far (module docstring)."""

    def __init__(self, retargeter, spec: BalanceSpec):
        self.spec = spec
        self.sides = [f.side for f in retargeter.config.feet]
        self._centres = BalancedTargets(retargeter, spec).centres
        self.reset()

    def reset(self) -> None:
        n = len(self.sides)
        self._contact = np.zeros(n, dtype=bool)
        self._landed = np.full(n, -np.inf)  # when each foot last came into contact
        self._stance: int | None = None  # the foot of the last single support
        self._phase: tuple | None = None  # (kind, goal foot or None, start time, start target)
        self._target: np.ndarray | None = None  # (2,)
        self._time: float | None = None
        self._gap_start: float | None = None
        self._gap = self.spec.shift_time  # duration of the last phase without contact

    def apply(self, time: float, measurement: Measurements, contacts: np.ndarray) -> Measurements:
        """``measurement`` with the CoM target, its velocity and the support flags of this sample."""
        contacts = np.asarray(contacts, dtype=bool)
        if contacts.shape != self._contact.shape:
            raise ValueError(f"contacts must hold {len(self.sides)} flags, got shape {contacts.shape}")
        if self._time is not None and time <= self._time - 1.0:
            self.reset()  # the stream went back in time (a new take): start over
        centres = self._centres([measurement])[0][:, :2]
        landed = contacts & ~self._contact
        self._landed[landed] = time
        feet = np.flatnonzero(contacts)
        if len(feet) == 0 and self._contact.any():
            self._gap_start = time
        if len(feet) and not self._contact.any() and self._gap_start is not None:
            self._gap = min(max(time - self._gap_start, 0.05), 1.0)
            self._gap_start = None
        if len(feet) == 1:
            self._stance = int(feet[0])
            phase = (_SINGLE, self._stance)
        elif len(feet) > 1:
            newest = feet[np.argmax(self._landed[feet])]
            steps = np.count_nonzero(self._landed[feet] == self._landed[newest]) == 1
            phase = (_DOUBLE, int(newest) if steps else None)
        else:
            others = [f for f in range(len(self.sides)) if f != self._stance]
            phase = (_NONE, others[0] if self._stance is not None and len(others) == 1 else None)
        middle = centres.mean(axis=0)
        previous = self._target if self._target is not None else middle
        if self._phase is None or self._phase[:2] != phase:
            self._phase = (*phase, time, previous.copy())
        kind, goal, start_time, start = self._phase
        if kind == _SINGLE:
            target = centres[goal]
        elif goal is None:
            target = middle
        else:
            duration = self.spec.shift_time if kind == _DOUBLE else self._gap - _LEAD
            alpha = min(max((time - start_time) / max(duration, 1e-9), 0.0), 1.0)
            target = start + alpha * (centres[goal] - start)
        velocity = np.zeros(3)
        if self._time is not None and time > self._time and start_time < time:
            velocity[:2] = (target - previous) / (time - self._time)
        self._target, self._time, self._contact = target.copy(), time, contacts
        com = np.array([target[0], target[1], 0.0])
        return replace(measurement, com_position=com, com_velocity=velocity, contacts=contacts.copy())
