"""Human motion tracking: wearable_node (synthetic motion, a bag or a live Xsens suit) -> ik_node on Human66
or Human48.

    ros2 launch dynik_ros human_tracking.launch.py model:=human48 scenario:=running rviz:=true
    ros2 launch dynik_ros human_tracking.launch.py source:=bag bag_path:=walking_bag
    ros2 launch dynik_ros human_tracking.launch.py source:=xsens xsens_port:=9763 rviz:=true

Both nodes are lifecycle nodes brought to *active* by the launch file (ik_node first, then the source).
Outputs: /dynik/joint_states, /dynik/base_odom, /dynik/markers, /diagnostics, world -> Pelvis on /tf.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription

ARGUMENTS = (
    "model",
    "source",
    "scenario",
    "rate",
    "loop",
    "bag_path",
    "file_path",
    "xsens_host",
    "xsens_port",
    "xsens_character",
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
    actions = COMMON.pipeline(context)
    if COMMON.as_bool(args, "rviz"):
        actions.append(COMMON.rviz_include(args["model"], "", args))
    return actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*COMMON.declare(*ARGUMENTS), OpaqueFunction(function=_setup)])
