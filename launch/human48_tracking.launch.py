"""Human motion tracking with the Human48 model: human_tracking.launch.py with model:=human48.

    ros2 launch dynik_ros human48_tracking.launch.py [source:=bag bag_path:=...] [rviz:=true]

Every other argument of human_tracking.launch.py applies (see the README's launch table).
"""

from __future__ import annotations

from pathlib import Path

from launch.actions import IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description() -> LaunchDescription:
    # share/dynik_ros/launch/ once installed, launch/ in the source tree
    source = PythonLaunchDescriptionSource(
        str(Path(__file__).resolve().parents[1] / "launch/human_tracking.launch.py")
    )
    return LaunchDescription(
        [IncludeLaunchDescription(source, launch_arguments={"model": "human48"}.items())]
    )
