"""Tracking figures of a simulated robot: how far and how late the joints follow a commanded signal.

The delay of one joint is the time shift ``tau`` minimising the RMS of ``q(t) - c(t - tau)`` over the
run, with ``c`` the commanded signal linearly interpolated between the commands' send times (searched
on a 1 ms grid); the error is that RMS at ``tau`` and the maximum of ``|q(t) - c(t)|`` (no shift).
All times are sim times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class TrackingResult:
    """Per controlled joint: delay [s], RMS error after the shift [rad], max error without shift [rad]."""

    joints: list[str]
    delay: np.ndarray
    rms_after_shift: np.ndarray
    max_error: np.ndarray

    @property
    def delay_p50(self) -> float:
        return float(np.median(self.delay))


def estimate_delay(
    send_times: np.ndarray,
    commands: np.ndarray,
    times: np.ndarray,
    positions: np.ndarray,
    max_delay: float = 0.5,
    resolution: float = 1e-3,
) -> tuple[np.ndarray, np.ndarray]:
    """Per column: the shift of the commanded signal that best explains the measured one, and the RMS
    left at that shift. ``commands`` (K x n) sent at ``send_times``; ``positions`` (T x n) at ``times``."""
    shifts = np.arange(0.0, max_delay + resolution / 2, resolution)
    n = commands.shape[1]
    delay, rms = np.zeros(n), np.zeros(n)
    keep = times >= send_times[0] + max_delay  # every shift has a commanded value to compare with
    for j in range(n):
        best = (np.inf, 0.0)
        for tau in shifts:
            c = np.interp(times[keep] - tau, send_times, commands[:, j])
            err = float(np.sqrt(np.mean((positions[keep, j] - c) ** 2)))
            if err < best[0]:
                best = (err, tau)
        rms[j], delay[j] = best
    return delay, rms


def sinusoid_commands(
    centre: np.ndarray, lower: np.ndarray, upper: np.ndarray, amplitude: float, frequency: float, t: float
) -> np.ndarray:
    """A test signal per joint: ``centre + a sin(2 pi f t + phase_j)`` with ``a`` at most ``amplitude``
    and kept 0.05 rad inside the limits, phases spread over the joints."""
    room = np.minimum(centre - lower, upper - centre) - 0.05
    a = np.clip(room, 0.0, amplitude)
    phase = np.linspace(0.0, np.pi, centre.size)
    return centre + a * np.sin(2 * np.pi * frequency * t + phase)


def track_sinusoid(
    sim,
    command_rate: float = 50.0,
    duration: float = 4.0,
    amplitude: float = 0.2,
    frequency: float = 0.5,
    interface: str = "forward_command",
    time_from_start: float = 0.05,
) -> TrackingResult:
    """Command every controlled joint of ``sim`` (a :class:`~dynik_ros.sim.simulator.Simulator`) with a
    sinusoid at ``command_rate`` (forward commands, or one-point trajectories reaching each command
    ``time_from_start`` later, as bridge_node sends) and measure the tracking."""
    follower = sim.follower
    centre = follower.position.copy()
    steps_per_command = max(1, int(round(1.0 / (command_rate * sim.config.timestep))))
    n_commands = int(duration * command_rate)
    send_times, commands, times, positions = [], [], [], []
    for _ in range(n_commands):
        now = sim.time
        command = sinusoid_commands(centre, follower.lower, follower.upper, amplitude, frequency, now)
        if interface == "forward_command":
            follower.set_positions(command, now)
        else:
            follower.set_trajectory(sim.joint_names, [time_from_start], [command], now)
        send_times.append(now)
        commands.append(command)
        for _ in range(steps_per_command):
            sim.step(1)
            times.append(sim.time)
            positions.append(sim.controlled_positions())
    send = np.asarray(send_times)
    cmd = np.asarray(commands)
    t = np.asarray(times)
    q = np.asarray(positions)
    delay, rms = estimate_delay(send, cmd, t, q)
    valid = t >= send[0] + 0.5
    plain = np.abs(q[valid] - np.array([np.interp(t[valid], send, cmd[:, j]) for j in range(cmd.shape[1])]).T)
    return TrackingResult(list(sim.joint_names), delay, rms, plain.max(axis=0))
