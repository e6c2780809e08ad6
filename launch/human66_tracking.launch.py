"""Human motion tracking with the Human66 model: human_tracking.launch.py with model:=human66.

    ros2 launch dynik_ros human66_tracking.launch.py [source:=bag bag_path:=...] [rviz:=true]

Every other argument of human_tracking.launch.py applies (see the README's launch
table); ``model:=...`` overrides the human66 default like any other argument.
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
    # model defaults to human66 but is a real argument: an override is passed on, never silently dropped
    source = PythonLaunchDescriptionSource(str(HERE.parent / "launch/human_tracking.launch.py"))
    return LaunchDescription(
        [
            *COMMON.declare("model", model="human66"),
            IncludeLaunchDescription(
                source, launch_arguments={"model": LaunchConfiguration("model")}.items()
            ),
        ]
    )
