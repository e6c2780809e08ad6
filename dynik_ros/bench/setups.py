"""Benchmark set-ups: which model, which targets, which motion generator and which initial configuration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import TargetSet
from dynik_ros.models.assets import human_tracking_targets, urdf_path
from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
from dynik_ros.motion.synthetic import Motion

MODELS = ("human66", "human48")


@dataclass
class BenchSetup:
    robot: RobotModel
    targets: TargetSet
    motion_robot: RobotModel  # the model whose forward kinematics makes the ground truth
    links: list[str]
    standing_height: float
    q0: np.ndarray
    adapt: Callable[[Motion], Motion] = lambda motion: motion


def load_setup(name: str) -> BenchSetup:
    if name not in MODELS:
        raise ValueError(f"unknown benchmark model '{name}', expected one of {MODELS}")
    robot = RobotModel.from_urdf_file(urdf_path(name))
    height = pelvis_height(Subject())
    q0 = robot.neutral_configuration()
    q0[2] = height
    return BenchSetup(robot, human_tracking_targets(), robot, list(XSENS_SEGMENTS), height, q0)
