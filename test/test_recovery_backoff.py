"""The branch-recovery back-off (``core/branch_recovery.py``): fewer trials while they keep rejoining the
main IK's branch, and no slower recovery when something changes.

Set-up: G1 tracking its own small joint sinusoids with the torso target pitched 86 deg past the pelvis
(beyond the waist's range: the error stays ~0.1, above the threshold, and every trial's shadow comes back
to the main IK's joints: it rejoins). A branch flip is the left arm put at the far end of its ranges (the
far start of ``test_recovery.py``) mid-run: the main IK stays there, the shadow from home does better
and the main IK moves over (a transfer).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from dynik_ros.bench.recovery import joint_sinusoid_motion, recovery_setup
from dynik_ros.core.branch_recovery import BranchRecoveryConfig
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import Measurements

DT = 0.01
PITCH = np.array([0.0, 1.5, 0.0])  # rad about the torso's y axis: beyond the waist's pitch range


@pytest.fixture(scope="module")
def g1():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot, targets, home = recovery_setup("g1")
    motion = joint_sinusoid_motion(robot, targets, duration=27.0, rate=1.0 / DT, amplitude=0.05)
    return robot, targets, home, motion


@dataclass
class Run:
    """Trial starts, trial ends that went back to idle, transfer starts (s), and the shadow's steps."""

    starts: list[float] = field(default_factory=list)
    rejoins: list[float] = field(default_factory=list)
    transfers: list[float] = field(default_factory=list)
    shadow_steps: int = 0
    trials: int = 0


def _run(g1, duration: float, pitched=lambda t: True, flip_at: float | None = None, **recovery) -> Run:
    """Step the IK for ``duration`` s; ``pitched(t)``: the torso target is pitched at time t; at
    ``flip_at`` the left arm's joints jump to the far end of their ranges (a branch flip)."""
    robot, targets, home, motion = g1
    config = DynamicalIKConfig(branch_recovery=replace(BranchRecoveryConfig(), **recovery))
    ik = DynamicalIK(robot, targets, config, motion.q[0], home=home)
    torso = next(i for i, t in enumerate(targets.orientation_targets) if t.frame == "torso_link")
    arm = np.array([j.startswith(("left_shoulder", "left_elbow")) for j in robot.joint_names])
    mid, half = 0.5 * (robot.lower + robot.upper), 0.5 * (robot.upper - robot.lower)
    run, r = Run(), ik.recovery
    state = r.state
    for k in range(int(round(duration / DT))):
        t, m = k * DT, motion.measurements[k]
        if flip_at is not None and k == int(round(flip_at / DT)):
            _, _, truth = robot.split(motion.q[k])
            far = mid - 0.95 * half * np.sign(truth - mid + 1e-12)
            ik.joint_positions[arm] = far[arm]
            ik.stop()
        rotations = m.rotations.copy()
        if pitched(t):
            rotations[torso] = rotations[torso] @ exp_so3(PITCH)
        ik.step(Measurements(m.positions, rotations, m.linear_velocities, m.angular_velocities), DT)
        run.shadow_steps += state != r.IDLE  # the shadow stepped in this step's after_step
        if r.state != state:
            if r.state == r.TRIAL:
                run.starts.append(t)
            elif r.state == r.TRANSFER:
                run.transfers.append(t)
            elif state == r.TRIAL:
                run.rejoins.append(t)
            state = r.state
    run.trials = r.trials
    return run


def test_trials_that_rejoin_back_off_doubling_up_to_the_cap(g1):
    """Base cooldown 1 s, cap 4 s (short, to see the cap within 20 s): the waits between a rejoined trial
    and the next are 1, 2, 4, 4, ... s; without the back-off, 1 s each, so about 2.5 times the trials."""
    backoff = _run(g1, 20.0, cooldown=1.0, backoff_cap=4.0)
    plain = _run(g1, 20.0, cooldown=1.0, backoff=1.0)
    for run in (backoff, plain):  # every trial rejoined (none ran its full 2 s, none transferred)
        assert not run.transfers
        assert all(end - start < 0.5 for start, end in zip(run.starts, run.rejoins, strict=False))
    waits = np.subtract(backoff.starts[1:], backoff.rejoins[: len(backoff.starts) - 1])
    expected = np.minimum(2.0 ** np.arange(len(waits)), 4.0)
    np.testing.assert_allclose(waits, expected, atol=1.5 * DT)
    np.testing.assert_allclose(
        np.subtract(plain.starts[1:], plain.rejoins[: len(plain.starts) - 1]), 1.0, atol=1.5 * DT
    )
    assert backoff.trials <= 7 and plain.trials >= 14, (backoff.trials, plain.trials)
    assert backoff.shadow_steps < 0.5 * plain.shadow_steps


def test_a_branch_flip_after_rejoined_trials_is_recovered_as_fast_as_without_the_back_off(g1):
    """Defaults (5 s, cap 20 s): after three rejoined trials a 20 s cooldown runs when the arm flips at
    17 s. The error doubles and stays there: the back-off ends and the transfer comes no later than
    without a back-off (plus the rise window's delay at most); after it the doubling starts over."""
    flip = 17.0
    backoff = _run(g1, 27.0, flip_at=flip)
    plain = _run(g1, 27.0, flip_at=flip, backoff=1.0)
    assert len([t for t in backoff.starts if t < flip]) < len([t for t in plain.starts if t < flip])
    assert plain.transfers and backoff.transfers
    latency, base = backoff.transfers[0] - flip, plain.transfers[0] - flip
    assert latency <= base + 1.5, f"flip to transfer {latency:.2f} s with the back-off, {base:.2f} s without"
    # after the transfer, the next rejoined trial waits the base cooldown again
    start = next(t for t in backoff.starts if t > backoff.transfers[0])
    rejoin = next(t for t in backoff.rejoins if t > start)
    again = [t for t in backoff.starts if t > rejoin]
    assert again and abs(again[0] - rejoin - 5.0) <= 1.5 * DT, (backoff.starts, backoff.rejoins)


def test_with_the_rise_rule_out_of_reach_a_flip_waits_for_the_back_off_then_the_doubling_restarts(g1):
    """Base 1 s, cap 8 s, ``rise=100``: the arm flips at 9 s while an 8 s cooldown runs (from ~7.8 s);
    the transfer comes only when it ends (what the rise rule prevents), and after the transfer the next
    rejoined trial waits the base 1 s again, not the cap."""
    run = _run(g1, 20.0, flip_at=9.0, cooldown=1.0, backoff_cap=8.0, rise=100.0)
    assert run.transfers and run.transfers[0] > 15.0, run.starts
    start = next(t for t in run.starts if t > run.transfers[0])
    rejoin = next(t for t in run.rejoins if t > start)
    again = [t for t in run.starts if t > rejoin]
    assert again and abs(again[0] - rejoin - 1.0) <= 1.5 * DT, (run.starts, run.rejoins)


def test_a_tracked_spell_ends_the_back_off(g1):
    """Rejoined trials push the cooldown to 8 s; the torso target is then reachable for 2 s (the error
    falls below the threshold) and pitched again at 12 s: a new stuck spell, tried after the patience,
    not when the old 8 s cooldown ends (at ~15.7 s, as with the below-threshold rule out of reach)."""
    pitched = lambda t: not 10.0 <= t < 12.0  # noqa: E731
    reset = _run(g1, 14.0, pitched, cooldown=1.0, backoff_cap=8.0)
    kept = _run(g1, 17.0, pitched, cooldown=1.0, backoff_cap=8.0, tracked=100.0)
    assert [t for t in reset.starts if t < 10.0] == [t for t in kept.starts if t < 10.0]
    first = [t for t in reset.starts if t >= 12.0]
    assert first and first[0] <= 12.0 + 1.0, reset.starts
    assert [t for t in kept.starts if t >= 12.0][0] > 15.0, kept.starts


@pytest.mark.parametrize("name, value", [("backoff", 0.5), ("backoff_cap", -1.0), ("rise", float("nan"))])
def test_back_off_settings_are_validated(name, value):
    with pytest.raises(ValueError, match=name):
        BranchRecoveryConfig(**{name: value})


class _RejoiningShadow:
    """A shadow that is always on the main IK's joints (every trial rejoins once settled)."""

    def __init__(self, joints: np.ndarray):
        self.joint_positions, self.joint_velocities, self.last_error = joints, np.zeros_like(joints), 1.0

    def step(self, measurements, dt: float, checked: bool = False) -> None:
        pass


def test_the_back_off_stays_at_its_cap_over_thousands_of_rejoined_trials():
    """An online node runs for hours: 3000 rejoined trials (2**1024 would overflow a float) keep the
    cooldown at the cap."""
    from dynik_ros.core.branch_recovery import BranchRecovery

    joints = np.zeros(3)
    config = BranchRecoveryConfig(patience=0.0, settle_trial=0.0, cooldown=0.01, backoff_cap=0.04)
    recovery = BranchRecovery(config, lambda home: _RejoiningShadow(joints))
    waits, idle = [], 0
    for _ in range(30000):
        state = recovery.state
        recovery.after_step(0.5, 0.01, joints, None, joints)
        idle = idle + 1 if recovery.state == recovery.IDLE else 0
        if state == recovery.IDLE and recovery.state == recovery.TRIAL:
            waits.append(idle)
    assert recovery.trials >= 3000 and recovery.transfers == 0
    assert max(waits[5:]) == min(waits[5:]), "the cooldown left its cap"
