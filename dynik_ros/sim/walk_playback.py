"""A retargeted trajectory played on the simulated robot with a free base, open loop (ROS-free; issue 12).

The robot starts standing in its IK start pose, blends its joints to the first sample over ``blend`` seconds
(raised cosine), then follows the joints of the trajectory played ``time_scale`` times slower (linear
between samples), and holds the last sample for ``hold`` seconds. Commands go to the simulator's joint
reference every ``control_period`` of sim time; everything runs on sim time, so a run is deterministic.
The run stops when the base falls (below ``fall_height`` or tilted more than ``fall_tilt``).
:class:`PlaybackFigures` reports the base's height and tilt over the whole run, against the trajectory's own
base tilt at the same instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dynik_ros.sim.simulator import Simulator
from dynik_ros.sim.walk_stabilizer import SimWalkStabilizer


@dataclass
class PlaybackFigures:
    """What the simulated base did (metres, degrees, seconds of sim time)."""

    duration: float  # sim time played (blend + trajectory + hold, or until the fall)
    fell_at: float | None  # sim time of the fall, None when it stood to the end
    fell_sample: int | None  # the trajectory sample being played when it fell
    min_height: float  # lowest base height
    max_tilt: float  # largest base tilt from the vertical
    max_tilt_error: float  # largest |tilt - the trajectory's base tilt|
    travelled: float  # horizontal distance of the base from its start at the end
    planned_travel: float  # the same in the trajectory


def tilt_deg(rotation: np.ndarray) -> float:
    """Angle between a frame's z axis and the vertical, in degrees."""
    return math.degrees(math.acos(float(np.clip(rotation[2, 2], -1.0, 1.0))))


def _planned_tilt(q: np.ndarray) -> np.ndarray:
    """Base tilt [deg] of each pinocchio configuration (quaternion xyzw at 3:7)."""
    x, y = q[:, 3], q[:, 4]
    r22 = 1.0 - 2.0 * (x * x + y * y) / np.sum(q[:, 3:7] ** 2, axis=1)
    return np.degrees(np.arccos(np.clip(r22, -1.0, 1.0)))


def play(
    sim: Simulator,
    joint_names: list[str],
    times: np.ndarray,
    q: np.ndarray,
    time_scale: float = 1.0,
    blend: float = 2.0,
    hold: float = 1.0,
    control_period: float = 0.005,
    fall_height: float = 0.45,
    fall_tilt: float = 45.0,
    stabilizer: SimWalkStabilizer | None = None,
) -> PlaybackFigures:
    """Play the trajectory ``q`` ``(N, 7 + n_joints)`` (pinocchio layout, ``joint_names`` order) sampled at
    ``times`` on ``sim`` (module docstring). With a ``stabilizer`` (built on the same ``sim`` and plan) its
    corrections are added to the reference once the blend is over."""
    times, q = np.asarray(times, dtype=float), np.asarray(q, dtype=float)
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise ValueError(f"time_scale must be positive, got {time_scale}")
    if q.ndim != 2 or len(q) != len(times) or len(q) < 2 or not np.all(np.diff(times) > 0):
        raise ValueError("q must be (N >= 2, nq) sampled at N strictly increasing times")
    index = [joint_names.index(j) for j in sim.joint_names]
    joints = q[:, 7:][:, index]
    plan_tilt = _planned_tilt(q)
    steps = max(1, int(round(control_period / sim.config.timestep)))
    standing = sim.controlled_positions().copy()
    start = sim.base_pose()[0]
    play_time = (times[-1] - times[0]) * time_scale
    end = blend + play_time + hold
    t0 = sim.time
    figures = PlaybackFigures(0.0, None, None, float(start[2]), 0.0, 0.0, 0.0, 0.0)
    while sim.time - t0 < end:
        t = sim.time - t0
        if t < blend:
            a = 0.5 - 0.5 * math.cos(math.pi * t / blend)
            target, sample, weight = (1.0 - a) * standing + a * joints[0], 0, 0.0
        else:
            clock = times[0] + min(t - blend, play_time) / time_scale
            sample = min(int(np.searchsorted(times, clock, side="right")) - 1, len(times) - 2)
            weight = float(np.clip((clock - times[sample]) / (times[sample + 1] - times[sample]), 0.0, 1.0))
            target = (1.0 - weight) * joints[sample] + weight * joints[sample + 1]
            if stabilizer is not None:
                target = stabilizer.correct(sample, weight, target, steps * sim.config.timestep)
        sim.follower.set_positions(target, sim.time)
        sim.step(steps)
        position, rotation = sim.base_pose()
        tilt = tilt_deg(rotation)
        planned = (1.0 - weight) * plan_tilt[sample] + weight * plan_tilt[min(sample + 1, len(q) - 1)]
        figures.min_height = min(figures.min_height, float(position[2]))
        figures.max_tilt = max(figures.max_tilt, tilt)
        figures.max_tilt_error = max(figures.max_tilt_error, abs(tilt - planned))
        if position[2] < fall_height or tilt > fall_tilt:
            figures.fell_at, figures.fell_sample = sim.time - t0, sample
            break
    figures.duration = sim.time - t0
    figures.travelled = float(np.linalg.norm((sim.base_pose()[0] - start)[:2]))
    figures.planned_travel = float(np.linalg.norm(q[-1, :2] - q[0, :2]))
    return figures
