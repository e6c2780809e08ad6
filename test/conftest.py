"""Shared fixtures: the generated human models, loaded once per session."""

from __future__ import annotations

import pytest

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.models.assets import urdf_path


@pytest.fixture(scope="session")
def human66() -> RobotModel:
    return RobotModel.from_urdf_file(urdf_path("human66"))


@pytest.fixture(scope="session")
def human48() -> RobotModel:
    return RobotModel.from_urdf_file(urdf_path("human48"))
