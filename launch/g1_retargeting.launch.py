"""Retargeting human motion to the Unitree G1: retargeting.launch.py with robot:=g1 (map config/g1.yaml).

    ros2 launch dynik_ros g1_retargeting.launch.py [source:=bag bag_path:=...] [rviz:=true]

Every other argument of retargeting.launch.py applies (see the README's launch
table); ``robot:=...`` overrides the g1 default like any other argument.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from launch.actions import IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration

HERE = Path(__file__).resolve().parent  # share/dynik_ros/launch/ once installed, launch/ in the source tree
COMMON = SimpleNamespace(**runpy.run_path(str(HERE / "dynik_launch_common.py")))


def generate_launch_description() -> LaunchDescription:
    # robot defaults to g1 but is a real argument: an override is passed on, never silently dropped
    source = PythonLaunchDescriptionSource(str(HERE.parent / "launch/retargeting.launch.py"))
    return LaunchDescription(
        [
            *COMMON.declare("robot", robot="g1"),
            IncludeLaunchDescription(
                source, launch_arguments={"robot": LaunchConfiguration("robot")}.items()
            ),
        ]
    )
