"""Retargeting human motion to a humanoid robot: wearable_node -> ik_node on the robot (retargeting map
config/<robot>.yaml) -> bridge_node -> the robot's position controller; mocap_node feeds the base when
use_mocap:=true; sim_node drives a simulated (MuJoCo) robot when sim:=true.

    ros2 launch dynik_ros retargeting.launch.py robot:=g1 rviz:=true
    ros2 launch dynik_ros retargeting.launch.py robot:=g1 sim:=true      # a simulated G1 follows
    ros2 launch dynik_ros retargeting.launch.py robot:=g1 source:=xsens   # live from an Xsens suit
    ros2 launch dynik_ros retargeting.launch.py robot:=icub interface:=forward_command \
        controller:=position_controller

The lifecycle nodes are brought to *active* by the launch file (ik_node first, then the source).
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription

ARGUMENTS = (
    "robot",
    "model",
    "config_file",
    "source",
    "scenario",
    "rate",
    "loop",
    "bag_path",
    "file_path",
    "xsens_host",
    "xsens_port",
    "xsens_character",
    "controller",
    "interface",
    "use_mocap",
    "sim",
    "use_sim_time",
    "namespace",
    "rviz",
    "rviz_config",
    "log_level",
)


# launch/dynik_launch_common.py (launch files are not importable modules: run it by path)
COMMON = SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().with_name("dynik_launch_common.py"))))


def _setup(context: LaunchContext) -> list:
    args = COMMON.values(context)
    actions = COMMON.pipeline(context, robot=True)
    if COMMON.as_bool(args, "rviz"):
        actions.append(COMMON.rviz_include("", args["robot"], args))
    return actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*COMMON.declare(*ARGUMENTS), OpaqueFunction(function=_setup)])
