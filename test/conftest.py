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


def _claim_domain(start: int | None = None) -> tuple[int, object]:
    """A ROS domain (1-100) no other test session on this machine holds: an exclusive, non-blocking lock on
    one file per domain, kept for the whole session and released by the OS when the process ends. (The pid
    alone collided: six sessions at once share a domain with a probability of ~14 %, and then receive each
    other's messages.) Tries 1 + start first (default: the pid modulo 100, so that sessions spread) and
    falls back to that domain when all are held."""
    import fcntl
    import tempfile

    start = os.getpid() % 100 if start is None else start
    for offset in range(100):
        domain = 1 + (start + offset) % 100
        handle = open(os.path.join(tempfile.gettempdir(), f"dynik-test-domain-{domain}.lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        return domain, handle
    return 1 + start, None


DOMAIN_ID, _DOMAIN_LOCK = _claim_domain()


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


@pytest.fixture
def h(ros):
    """Fresh nodes on one executor with a probe node (test/node_harness.py), destroyed after the test."""
    from node_harness import Harness

    harness = Harness(ros)
    yield harness
    harness.close()


@pytest.fixture(scope="module")
def samples():
    """Serialized-ready human link states: 2 s of synthetic walking at 120 Hz (Human66)."""
    from node_harness import walking_samples

    return walking_samples()
