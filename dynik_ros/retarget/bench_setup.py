"""Retargeting set-ups for the benchmark (``dynik-bench`` rows for robots, ``benchmarks/retarget_bench.py``).

The human motion is synthetic (Human66 forward kinematics, :mod:`.human`); the measurements are the robot
targets the :class:`.Retargeter` makes from it (alignment, offsets, scaling, foot contact), so every IK
method of the benchmark tracks exactly what the dynamical IK tracks in ``dynik-retarget``.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import Measurements, TargetSet
from dynik_ros.retarget.human import synthetic_human_motion
from dynik_ros.retarget.retargeter import Retargeter


def robot_bench_setup(
    robot_name: str, scenario: str, duration: float, rate: float
) -> tuple[RobotModel, TargetSet, list[Measurements], np.ndarray, np.ndarray]:
    """``(robot, targets, measurements_list, q0, times)`` for retargeting ``scenario`` (``tpose``,
    ``walking``, ``running``) of ``duration`` s at ``rate`` Hz onto ``robot_name`` (``icub``, ``g1``,
    ``talos`` or a map path). ``q0`` is the map's initial pose; ``times`` are the sample times (s)."""
    retargeter = Retargeter.from_config(robot_name)
    motion = synthetic_human_motion(
        scenario, duration, rate, height=retargeter.config.human.height, mass=retargeter.config.human.mass
    )
    measurements, _ = retargeter.motion_measurements(motion)
    return (
        retargeter.robot,
        retargeter.targets,
        measurements,
        retargeter.initial_configuration(),
        motion.times,
    )
