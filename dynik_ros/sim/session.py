"""Running a :class:`~dynik_ros.sim.simulator.Simulator` against a clock (ROS-free): which steps to take,
when to publish, what the mocap sees.

:class:`Pacer` turns the wall time elapsed into physics steps: ``real_time_factor`` sim seconds per
wall second (0 = as fast as possible), at most ``max_chunk`` sim seconds per call; a larger debt (the
machine was too slow or the process stalled) is dropped and counted instead of being caught up in one
burst. :class:`SimSession` steps the simulator one physics step at a time, lets the mocap capture at
every step, and calls back for every state publication (every ``publish_period`` of sim time) and every
delivered mocap sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from dynik_ros.sim.mocap import MocapSample, MocapSimulator


def next_grid_time(t: float, period: float) -> float:
    """The first multiple of ``period`` after ``t`` (instants within 1 us of ``t`` count as reached)."""
    return (math.floor(t / period + 1e-6) + 1) * period


@dataclass
class Pacer:
    """Steps to take per call; see the module docstring. Times in seconds."""

    timestep: float
    real_time_factor: float = 1.0
    max_chunk: float = 0.05
    _wall_start: float | None = None
    _sim_start: float = 0.0
    dropped: float = 0.0  # sim seconds of debt dropped
    overruns: int = 0  # calls that dropped debt

    def restart(self, wall: float, sim: float) -> None:
        """Start pacing now (after activation, or after a pause)."""
        self._wall_start, self._sim_start = wall, sim
        self.dropped = 0.0

    def steps(self, wall: float, sim: float) -> int:
        """Physics steps to take now for the simulation at ``sim`` to keep its pace."""
        if self._wall_start is None:
            self.restart(wall, sim)
        max_steps = max(1, int(self.max_chunk / self.timestep))
        if self.real_time_factor <= 0:
            return max_steps
        target = self._sim_start + (wall - self._wall_start) * self.real_time_factor - self.dropped
        n = int((target - sim) / self.timestep + 1e-9)
        if n > max_steps:
            self.dropped += (n - max_steps) * self.timestep
            self.overruns += 1
            n = max_steps
        return max(n, 0)


class SimSession:
    """The simulator, its mocap and the publication schedule, in sim time."""

    def __init__(
        self,
        sim,
        publish_period: float,
        mocap: MocapSimulator | None = None,
        mocap_body: str | None = None,
    ):
        self.sim = sim
        self.publish_period = publish_period
        self.mocap = mocap
        self.mocap_body = sim.model.body(mocap_body).id if mocap_body else sim.root_body
        self._next_publish = sim.time

    def advance(
        self,
        steps: int,
        on_state: Callable[[float], None] | None = None,
        on_mocap: Callable[[MocapSample], None] | None = None,
    ) -> None:
        """Take ``steps`` physics steps; ``on_state(t)`` at every publication time reached, ``on_mocap``
        for every mocap sample delivered (both called with the simulator at that step)."""
        sim, mocap, data, body = self.sim, self.mocap, self.sim.data, self.mocap_body
        for _ in range(steps):
            sim.step(1)
            t = sim.time
            if mocap is not None:
                if mocap.due(t):
                    mocap.capture(t, data.xpos[body], data.xmat[body].reshape(3, 3))
                if on_mocap is not None:
                    for sample in mocap.deliver(t):
                        on_mocap(sample)
            if t >= self._next_publish - 1e-9:
                self._next_publish = next_grid_time(t, self.publish_period)
                if on_state is not None:
                    on_state(t)
