"""Shared fixtures: the generated human models, loaded once per session; a private ROS domain and rclpy."""

from __future__ import annotations

import os

import pytest

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.models.assets import urdf_path


@pytest.fixture(scope="session")
def human66() -> RobotModel:
    return RobotModel.from_urdf_file(urdf_path("human66"))


@pytest.fixture(scope="session")
def human48() -> RobotModel:
    return RobotModel.from_urdf_file(urdf_path("human48"))


DOMAIN_ID = 1 + os.getpid() % 100


@pytest.fixture(scope="session")
def private_domain():
    """This session's own ROS_DOMAIN_ID (from the pid) and localhost-only discovery, so parallel sessions do
    not meet; the environment is restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")}
    os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    yield DOMAIN_ID
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def ros(private_domain):
    """rclpy's default context, initialised on the private domain (and shut down if we started it)."""
    import rclpy

    owner = not rclpy.ok()
    if owner:
        rclpy.init()
    yield rclpy
    if owner:
        rclpy.shutdown()
