"""Leaving a wrong IK branch: a shadow tracker started from the home posture (beyond the paper).

The dynamical IK is a local method: eq. (10) follows the gradient of the pose error. Limbs with three
joints reach most orientations on two branches, and with joint limits the wrong branch can be a local
minimum of the error: a robot started with its hip pitched to the far end of its range, or one that
flipped branch through a singularity, presses a joint against its limit and stays 30-40 degrees off for
good (measured on the G1 from the far end of every range: MNTE 0.5 for 10 s). No gain or integration
scheme changes that; only a non-local move does.

:class:`BranchRecovery` makes that move, and only when it pays:

1. *stuck*: the weighted RMS of the residual of eq. (5) stays above ``threshold`` for ``patience``
   seconds;
2. *trial*: a second dynamical IK (the shadow) tracks the same measurements for up to ``trial`` seconds,
   started from the main IK's state with the joints of the off limbs at the home posture (the model's
   neutral or the retargeting map's initial pose) and its base on the last measurement of the targets
   attached to the base (the pelvis), so it does not inherit a base turned the wrong way; the main IK
   keeps tracking and publishing as before;
3. *transfer*: if, after ``settle_trial`` seconds, the shadow's error falls below ``improvement`` times
   the main IK's, the main IK adds the joint-space task ``s_dot = K_t (s_shadow - s)`` to its QP with a
   dominant weight (the frame tasks are scaled down), so it travels to the shadow's branch through the
   same QP, inside the position and velocity limits (the shadow's joint velocity is fed forward); when
   every joint is within ``arrival`` of the shadow, or the main IK's error is down to twice the shadow's,
   the task is dropped and the shadow stops.

A target the robot cannot reach leaves the shadow no better than the main IK: no transfer happens and the
next trial waits ``cooldown`` seconds, so an unreachable motion costs a trial's CPU now and then and never
makes the robot wander. A trial also stops (with the cooldown) once, after ``settle_trial``, the shadow is
back within ``arrival`` of the main IK on every joint: it has found the main IK's own branch, and a transfer
would end at once. On real captures the scaled human is never tracked exactly, the error stays above the
threshold and trials start every few seconds; this keeps each one short. Cost: one extra IK step per
sample while a trial or transfer runs, none otherwise.

*Back-off*: a trial that rejoined is evidence that the main IK is on the only branch there is for this
motion, so the cooldown after it grows by ``backoff`` (5, 10, 20 s, capped at ``backoff_cap``) while
trials keep rejoining; a trial that times out or transfers restarts the doubling at ``cooldown``. Three
signs of a new situation cut a running back-off to what ``cooldown`` alone would leave of it and restart
the doubling: a transfer; the error below ``threshold`` for ``tracked`` seconds (the motion is tracked);
the error low-passed over ``rise_window`` (2 s) above ``rise`` (1.5) times its ``level_window`` (10 s)
average recorded when the last trial rejoined (a limb that flips to a wrong branch mid-take is tried about
as soon as without the back-off: the rise window adds at most ~1.4 s to a flip that doubles the error).
On real captures the weighted residual of a scaled human swings 2x within a step cycle; with these
windows neither reset fires on the 60 s take (G1, TALOS, iCub; BVH and MVNX) and trials drop from 11-12
to 5. The cap bounds the latency of a flip that raises the error too little: 20 s keeps it at 4x the base
cooldown, where 40 s would save only another 1.5 trials a minute (~50 shadow steps, ~0.7 % of the IK).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import isfinite, isnan

import numpy as np


@dataclass(frozen=True)
class BranchRecoveryConfig:
    """When to try the home posture and how to move over (see the module docstring)."""

    enabled: bool = True
    threshold: float = 0.05  # weighted RMS residual (rad or m per row) that counts as off the motion
    patience: float = 0.25  # s above the threshold before a trial starts
    trial: float = 2.0  # s the shadow gets to beat the main IK
    improvement: float = 0.5  # the shadow's error must be below this fraction of the main IK's
    settle_trial: float = 0.15  # s the shadow runs before it is compared
    cooldown: float = 5.0  # s between an unsuccessful trial and the next
    backoff: float = 2.0  # each trial that rejoins multiplies the next cooldown by this (1: no back-off)
    backoff_cap: float = 20.0  # s, the longest cooldown of the back-off
    tracked: float = 1.0  # s with the error below the threshold that end the back-off
    rise: float = 1.5  # the back-off ends when the error rises this many times above its level at a rejoin
    rise_window: float = 2.0  # s, time constant of the smoothed error compared for the rise
    level_window: float = 10.0  # s, time constant of the error level recorded at a rejoin
    transfer_gain: float = 20.0  # 1/s, K_t of the joint-space task (capped at 1/dt)
    transfer_weight: float = 10.0  # weight of the joint-space task
    tracking_scale: float = 0.1  # the frame tasks' weights are scaled by this during a transfer
    arrival: float = 0.05  # rad (or m): every joint this close to the shadow ends the transfer
    transfer_timeout: float = 4.0  # s: a transfer that has not arrived by then is given up

    def __post_init__(self) -> None:
        for name in (
            "threshold",
            "patience",
            "trial",
            "improvement",
            "settle_trial",
            "cooldown",
            "backoff",
            "backoff_cap",
            "tracked",
            "rise",
            "rise_window",
            "level_window",
            "transfer_gain",
            "transfer_weight",
            "tracking_scale",
            "arrival",
            "transfer_timeout",
        ):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"branch recovery: {name} must be finite and >= 0, got {value}")
        if self.backoff < 1.0:
            raise ValueError(f"branch recovery: backoff must be >= 1, got {self.backoff}")


@dataclass
class JointTask:
    """A joint-space task for the QP: ``weight^2 |s_dot - velocity|^2`` and the scale of the frame weights."""

    velocity: np.ndarray
    weight: float
    tracking_scale: float


class BranchRecovery:
    """The stuck / trial / transfer state machine of the module docstring for one main IK.

    ``make_shadow(q0)`` builds (once) or resets the shadow solver at ``q0``; it must expose ``step``,
    ``reset``, ``joint_positions``, ``joint_velocities`` and ``last_error``.
    """

    IDLE, TRIAL, TRANSFER = "idle", "trial", "transfer"

    def __init__(self, config: BranchRecoveryConfig, make_shadow: Callable[[np.ndarray], object]):
        self.config = config
        self._make_shadow = make_shadow
        self.shadow = None
        self.reset()

    def reset(self) -> None:
        self.state = self.IDLE
        self._above = 0.0  # time spent above the threshold
        self._timer = 0.0  # time in the current trial / transfer
        self._cooldown = 0.0
        self.trials = self.transfers = 0
        self._rejoins = 0  # trials that rejoined in a row (the back-off's exponent)
        self._applied = self.config.cooldown  # the cooldown set at the last stop
        self._below = 0.0  # time spent below the threshold
        self._fast = self._level = self._rejoin_level = float("nan")  # smoothed errors (nan: none yet)

    def before_step(self, dt: float, joint_positions: np.ndarray) -> JointTask | None:
        """The joint-space task of this step (during a transfer), else ``None``."""
        if self.state != self.TRANSFER or self.shadow is None:
            return None
        c = self.config
        # the shadow keeps moving: its joint velocity is fed forward, the gap closes at K_t (at most 1/dt,
        # so the discrete loop stays stable at any rate)
        gain = min(c.transfer_gain, 1.0 / dt)
        velocity = self.shadow.joint_velocities + gain * (self.shadow.joint_positions - joint_positions)
        return JointTask(velocity, c.transfer_weight, c.tracking_scale)

    def after_step(
        self,
        error: float,
        dt: float,
        home: np.ndarray,
        measurements,
        joint_positions: np.ndarray,
    ) -> None:
        """Advance the state machine with the main IK's residual ``error`` of this step; steps the shadow."""
        c = self.config
        if not c.enabled:
            return
        self._cooldown = max(self._cooldown - dt, 0.0)
        if c.backoff > 1.0:
            self._back_off_watch(error, dt)
        if self.state == self.IDLE:
            self._above = self._above + dt if error > c.threshold else 0.0
            if self._above >= c.patience and self._cooldown <= 0.0:
                self.shadow = self._make_shadow(home)
                self.state, self._timer = self.TRIAL, 0.0
                self.trials += 1
            return
        self._timer += dt
        self.shadow.step(measurements, dt, checked=True)  # the main IK's step has taken them (same targets)
        shadow_error = self.shadow.last_error
        if self.state == self.TRIAL:
            settled = self._timer >= c.settle_trial
            if settled and shadow_error < c.improvement * error:
                self.state, self._timer = self.TRANSFER, 0.0
                self.transfers += 1
                self._end_back_off()
            elif settled and self._rejoined(joint_positions):
                self._stop(cooldown=True, rejoined=True)
            elif self._timer >= c.trial:
                self._stop(cooldown=True)
            return
        if self._rejoined(joint_positions) or error <= max(2.0 * shadow_error, 0.1 * c.threshold):
            self._stop(cooldown=False)
        elif self._timer >= c.transfer_timeout:
            self._stop(cooldown=True)

    def _rejoined(self, joint_positions: np.ndarray) -> bool:
        """Whether the shadow is back within ``arrival`` of the main IK on every joint: it has found the main
        IK's own branch, so no transfer can come of this trial (one would end at once, arrived)."""
        return bool(np.max(np.abs(self.shadow.joint_positions - joint_positions)) <= self.config.arrival)

    def _stop(self, cooldown: bool, rejoined: bool = False) -> None:
        """Back to idle; the cooldown grows with the trials that rejoined in a row (see the back-off)."""
        c = self.config
        self.state, self._above, self._timer = self.IDLE, 0.0, 0.0
        if rejoined and c.backoff > 1.0:
            self._applied = max(min(c.cooldown * c.backoff**self._rejoins, c.backoff_cap), c.cooldown)
            # the exponent stops growing at the cap (backoff**1024 overflows: ~6 h of rejoins at 20 s)
            self._rejoins += self._applied < c.backoff_cap
            self._rejoin_level = self._level
        else:
            self._applied, self._rejoins = c.cooldown, 0
        self._cooldown = self._applied if cooldown else 0.0

    def _back_off_watch(self, error: float, dt: float) -> None:
        """Smooth the error and end a back-off on the signs of a new situation (module docstring)."""
        c = self.config
        if not isfinite(error):
            return
        if isnan(self._fast):  # the first error: both averages start there
            self._fast = self._level = error
        else:  # first-order low-pass filters (a window of 0: no smoothing)
            self._fast += _blend(dt, c.rise_window) * (error - self._fast)
            self._level += _blend(dt, c.level_window) * (error - self._level)
        self._below = self._below + dt if error <= c.threshold else 0.0
        if self._rejoins and (self._below >= c.tracked or self._fast > c.rise * self._rejoin_level):
            self._end_back_off()

    def _end_back_off(self) -> None:
        """The doubling starts over; a running cooldown keeps only what ``cooldown`` alone would leave."""
        base = self.config.cooldown
        self._cooldown = max(self._cooldown - (self._applied - base), 0.0)
        self._applied, self._rejoins = base, 0


def _blend(dt: float, window: float) -> float:
    """The weight of a new sample in a first-order low-pass filter with time constant ``window``."""
    return min(dt / window, 1.0) if window > 0.0 else 1.0
