"""Benchmark set-ups: which model, which targets, which motion generator and which initial configuration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import Measurements, TargetSet
from dynik_ros.models.assets import human_tracking_targets, urdf_path
from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
from dynik_ros.motion.synthetic import synthesize

HUMANS = ("human66", "human48")
ROBOTS = ("icub", "g1")
MODELS = HUMANS + ROBOTS


@dataclass
class BenchCase:
    """One model and scenario: what the solvers track and from where they start."""

    robot: RobotModel
    targets: TargetSet
    measurements: list[Measurements]
    times: np.ndarray
    q0: np.ndarray


def load_case(name: str, scenario: str, duration: float, rate: float) -> BenchCase:
    """Human models track their own synthetic motion (forward kinematics: exact ground truth); robots track
    the targets the retargeter makes from Human66's motion (the paper's iCub rows, sec. 4.2)."""
    if name in ROBOTS:
        from dynik_ros.retarget.bench_setup import robot_bench_setup

        robot, targets, measurements, q0, times = robot_bench_setup(name, scenario, duration, rate)
        return BenchCase(robot, targets, measurements, times, q0)
    if name not in HUMANS:
        raise ValueError(f"unknown benchmark model '{name}', expected one of {MODELS}")
    robot = RobotModel.from_urdf_file(urdf_path(name))
    height = pelvis_height(Subject())
    targets = human_tracking_targets()
    motion = synthesize(robot, scenario, duration, rate, list(XSENS_SEGMENTS), height)
    q0 = robot.neutral_configuration()
    q0[2] = height
    return BenchCase(robot, targets, motion.measurements(targets), motion.times, q0)
