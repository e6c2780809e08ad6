"""Running the dynamical IK over a whole take (offline): :class:`OfflineRun`, a mixin of
:class:`~dynik_ros.retarget.retargeter.Retargeter` (its ``make_ik``, ``robot``, ``targets``, ``config``,
``robot_anchor``, ``contact``, ``reset`` and ``step_measurements``), and its :class:`RetargetResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from dynik_ros.core.dynamical_ik import DynamicalIK
from dynik_ros.core.targets import Measurements, plainly_valid_all
from dynik_ros.retarget.ik_steps import at_samples, between, steps_over
from dynik_ros.retarget.trajectory_errors import TrajectoryErrors, trajectory_errors

# Longest IK step of :meth:`Retargeter.run` (s): the closed loop (gains K = 10 /s) drifts at 15 Hz and
# breaks at 10 Hz (a 30 Hz capture played 3x slower), so sparser samples are reached in smaller steps.
MAX_IK_STEP = 0.02


def full_rate_step(times: np.ndarray, max_step: float = MAX_IK_STEP) -> float:
    """The IK step of a take stepped at its own rate (s): its median sample interval, split as
    :meth:`OfflineRun.run` splits one longer than ``max_step``; the ``DynamicalIKConfig.sample_period`` of
    the same take stepped at a fraction of its rate (``dynik-retarget --ik-rate``, :mod:`dynik_ros.core.
    step_gain`)."""
    interval = float(np.median(np.diff(np.asarray(times, dtype=float))))
    return interval / steps_over(interval, max_step)


@dataclass
class RetargetResult:
    """Output of :meth:`Retargeter.run`: the robot trajectory and per-sample diagnostics."""

    times: np.ndarray  # (N,)
    q: np.ndarray  # (N, nq) pinocchio layout
    v: np.ndarray  # (N, nv) pinocchio tangent layout
    nu: np.ndarray  # (N, nv) mixed velocity: base linear/angular (world), joint rates
    solve_time: np.ndarray  # (N,) seconds per IK step
    solved: np.ndarray  # (N,) OSQP returned a usable solution
    contacts: np.ndarray  # (N, n_feet) index of the sole point in contact, -1 without contact
    mnte: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,) eq. (15)
    angular_velocity_rmse: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,) eq. (16)
    position_rmse: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (N,)
    position_targets: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3)))  # (N, n_p, 3) solved to
    orientation_error: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (N, n_o) rad
    foot_positions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3)))  # (N, n_feet, 3) achieved
    contact_points: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3)))  # achieved, NaN if none
    # (N, n_p, 3) the position targets' frames as achieved, for the summary, and a copy of the q they were
    # placed at: the summary takes them only while q is still that (a result given another q places its own)
    achieved_positions: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3)))
    achieved_q: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    # contact.anchor robot: (foot, time s, shift m, turn rad) per contact moved onto the robot's sole (a
    # tuple: the ndarray fields are per sample)
    anchor_shifts: tuple[tuple[int, float, float, float], ...] = ()


class OfflineRun:
    """Settling on a first sample and running the IK over a take (see the module docstring)."""

    # ------------------------------------------------------------------ running
    def settle(
        self, ik: DynamicalIK, measurement: Measurements, duration: float = 1.0, dt: float = 0.01
    ) -> None:
        """Converge ``ik`` onto a frozen first sample (zero feed-forward) for ``duration`` seconds of IK time,
        so the first output frame is already on the motion; joint limits hold throughout (eq. 12)."""
        for _ in self.settle_steps(ik, measurement, duration, dt):
            pass

    def settle_steps(
        self, ik: DynamicalIK, measurement: Measurements, duration: float = 1.0, dt: float = 0.01
    ) -> Iterator[None]:
        """:meth:`settle` one IK step at a time: yields after each (ik_node runs its callbacks between
        them); done, with ``ik`` stopped, when exhausted."""
        frozen = Measurements(  # balance targets (CoM, support) kept, their feed-forward dropped too
            measurement.positions,
            measurement.rotations,
            com_position=measurement.com_position,
            com_velocity=None if measurement.com_position is None else np.zeros(3),
            contacts=measurement.contacts,
        )
        for _ in range(int(round(duration / dt))):
            ik.step(frozen, dt)
            yield
        ik.stop()

    def run(
        self,
        times: np.ndarray,
        measurements: Sequence[Measurements],
        ik: DynamicalIK | None = None,
        settle: float = 0.0,
        evaluate: bool = True,
        progress: Callable[[int, int], None] | None = None,
        contacts: np.ndarray | None = None,
        max_step: float = MAX_IK_STEP,
    ) -> RetargetResult:
        """Track ``measurements`` (from :meth:`compute`) sampled at ``times`` with the dynamical IK.

        ``dt`` per step is the time difference of the samples (the first step uses the second's). A sample
        further than ``max_step`` from the previous one is reached in ``ceil(dt / max_step)`` equal IK steps
        towards targets interpolated between the two samples (:func:`between`); only the configuration at
        the sample is written. With ``evaluate``, also computes MNTE (eq. 15), angular-velocity RMSE
        (eq. 16), position RMSE, every orientation target's angle error and the achieved foot positions.
        With ``contact.anchor: robot`` and ``measurements`` from the last :meth:`compute` (same ``times``),
        the feet's holds are moved onto the robot's soles as the IK goes (:mod:`.robot_anchor`; the errors
        are then against the targets so tracked).
        """
        times = np.asarray(times, dtype=float)
        n = len(times)
        if n != len(measurements):
            raise ValueError(f"{n} times for {len(measurements)} measurements")
        ik = ik or self.make_ik()
        dts = np.diff(times)
        if np.any(dts <= 0):
            raise ValueError("sample times must increase strictly")
        dts = np.concatenate((dts[:1] if n > 1 else [0.01], dts))
        robot = self.robot
        q_out = np.zeros((n, robot.nq))
        v_out = np.zeros((n, robot.nv))
        nu_out = np.zeros((n, robot.nv))
        solve = np.zeros(n)
        solved = np.zeros(n, dtype=bool)
        n_feet = len(self.config.feet)
        result_contacts = contacts if contacts is not None else np.full((n, n_feet), -1, dtype=int)
        step_every = max(1, n // 200)
        # every sample validated at once (the live path, ik_node, validates each as it comes); a sample whose
        # feet's rows the replay replaced is checked on those rows, one interpolated between two in full
        tolerance = ik.config.rotation_tolerance
        trusted = plainly_valid_all(measurements, ik.targets, tolerance)
        checked = np.full(n, trusted)
        replay = self.robot_anchor
        if self.config.contact.anchor != "robot" or replay is None or not replay.matches(times):
            replay = None
        else:
            replay.start()
            measurements = list(measurements)  # the feet's rows replaced as the robot's soles land
            frames = [f.frame for f in self.config.feet]
            if n:  # the first sample reads the configuration the IK starts from, before the settle on it
                measurements[0], checked[0] = replay.checked_measurement(
                    0, measurements[0], robot, frames, ik.q, trusted, tolerance
                )
        if settle > 0 and n:
            self.settle(ik, measurements[0], settle)
        period = ik.config.sample_period  # > 0: the take stepped at a fraction of its rate (--ik-rate)
        for k in range(n):
            start = time.perf_counter()
            steps = steps_over(dts[k], max_step) if k else 1
            again = None  # (snapshot, sample k's measurement, q_{k-1}): a hold may move (robot_anchor.py)
            if replay is not None and k:
                q_start = ik.q
                if 0.0 < period < dts[k] and steps == 1 and replay.may_anchor(k):
                    again = replay.snapshot(k), measurements[k], q_start
                measurements[k], checked[k] = replay.checked_measurement(
                    k, measurements[k], robot, frames, q_start, trusted, tolerance
                )
            for j in range(1, steps):  # a sparse take (30 Hz played 3x slower): smaller IK steps between
                ik.step(between(measurements[k - 1], measurements[k], j / steps), float(dts[k]) / steps)
            q, v = ik.step(measurements[k], float(dts[k]) / steps, checked=bool(checked[k]))
            if again is not None and replay.anchored_since(again[0]):
                # the hold read one sample period before t_k, as at the full rate (robot_anchor.py)
                replay.restore(again[0], k)
                at = pin.interpolate(robot.model, again[2], q, 1.0 - period / float(dts[k]))
                measurements[k], checked[k] = replay.checked_measurement(
                    k, again[1], robot, frames, at, trusted, tolerance
                )
                ik.replace_reference(measurements[k])
            solve[k] = time.perf_counter() - start
            q_out[k], v_out[k], nu_out[k] = q, v, ik.nu
            solved[k] = ik.info.solved
            if progress is not None and (k % step_every == 0 or k == n - 1):
                progress(k + 1, n)
        if evaluate:  # one pass over the written trajectory (trajectory_errors.py)
            errors = trajectory_errors(
                robot,
                self.targets,
                q_out,
                v_out,
                measurements,
                [f.frame for f in self.config.feet],
                [np.asarray(f.sole, dtype=float).reshape(-1, 3) for f in self.config.feet],
                result_contacts,
            )
        else:
            empty = np.zeros((0, n_feet, 3))
            errors = TrajectoryErrors(
                np.zeros(0),
                np.zeros(0),
                np.zeros(0),
                np.zeros((0, self.targets.n_position, 3)),
                np.zeros((0, self.targets.n_orientation)),
                empty,
                empty,
            )
        return RetargetResult(
            times=times,
            q=q_out,
            v=v_out,
            nu=nu_out,
            solve_time=solve,
            solved=solved,
            contacts=result_contacts,
            mnte=errors.mnte,
            angular_velocity_rmse=errors.angular_velocity_rmse,
            position_rmse=errors.position_rmse,
            position_targets=errors.position_targets,
            orientation_error=errors.orientation_error,
            foot_positions=errors.foot_positions,
            contact_points=errors.contact_points,
            achieved_positions=(
                errors.achieved_positions
                if errors.achieved_positions is not None
                else np.zeros((0, self.targets.n_position, 3))
            ),
            achieved_q=q_out.copy() if errors.achieved_positions is not None else np.zeros((0, 0)),
            anchor_shifts=tuple(replay.contact.reanchors) if replay is not None else (),
        )

    def retarget_motion(
        self, motion, settle: float = 0.0, evaluate: bool = True, progress=None
    ) -> RetargetResult:
        """:meth:`reset`, :meth:`step_measurements`, :meth:`run`, the result at the samples."""
        self.reset()
        times, measurements, contacts, index = self.step_measurements(motion)
        result = self.run(
            times, measurements, settle=settle, evaluate=evaluate, progress=progress, contacts=contacts
        )
        return at_samples(result, index, self.contact)
