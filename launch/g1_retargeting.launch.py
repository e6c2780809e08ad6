"""Retargeting human motion to the Unitree G1: retargeting.launch.py with robot:=g1 (map config/g1.yaml).

    ros2 launch dynik_ros g1_retargeting.launch.py [source:=bag bag_path:=...] [rviz:=true]

Every other argument of retargeting.launch.py applies (see the README's launch table).
"""

from __future__ import annotations

from pathlib import Path

from launch.actions import IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description() -> LaunchDescription:
    # share/dynik_ros/launch/ once installed, launch/ in the source tree
    source = PythonLaunchDescriptionSource(
        str(Path(__file__).resolve().parents[1] / "launch/retargeting.launch.py")
    )
    return LaunchDescription([IncludeLaunchDescription(source, launch_arguments={"robot": "g1"}.items())])
