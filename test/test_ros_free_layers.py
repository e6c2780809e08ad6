"""The layers below the nodes stay free of ROS (the brief's rule; DESIGN.md): they import numpy, pinocchio,
osqp, mujoco, rosbags and the like, never rclpy, a ROS message package or the nodes/CLI that wrap them, so
they run and are tested without a ROS installation. Checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dynik_ros

ROOT = Path(dynik_ros.__file__).parent
LAYERS = ("core", "io", "retarget", "estimation", "sim", "motion", "models", "testing", "control")
ROS_PACKAGES = {
    "rclpy", "rosidl_runtime_py", "rosidl_parser", "builtin_interfaces", "diagnostic_msgs", "geometry_msgs",
    "lifecycle_msgs", "nav_msgs", "rosgraph_msgs", "sensor_msgs", "std_msgs", "std_srvs", "tf2_msgs",
    "trajectory_msgs", "visualization_msgs", "launch", "launch_ros",
}  # fmt: skip


def imported(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_imports_nothing_from_ros(layer):
    offenders = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for name in imported(path):
            if name.split(".")[0] in ROS_PACKAGES or name.startswith(("dynik_ros.nodes", "dynik_ros.cli")):
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert not offenders, offenders
