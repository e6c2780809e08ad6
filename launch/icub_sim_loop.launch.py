"""The iCub loop closed through a simulated mocap (issue 11, the RH5 mocap seed): retargeting.launch.py with
robot:=icub, sim:=true and use_mocap:=true.

    ros2 launch dynik_ros icub_sim_loop.launch.py [source:=xsens] [rviz:=true]

wearable_node -> ik_node (config/icub.yaml, base pose from /robot/base_odom) -> bridge_node -> sim_node
(MuJoCo iCub; its harness follows the retargeted human pelvis on /dynik/base_target; the rigid body on
root_link seen by the simulated mocap on /mocap/rigid_body) -> mocap_node (eq. 1-2) -> /robot/base_odom ->
ik_node. The person's motion starts 2 s after activation, while mocap_node calibrates on the standing
robot. Every other argument of retargeting.launch.py applies.
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
    # defaults g1, sim and mocap, but real arguments: an override is passed on, never silently dropped
    source = PythonLaunchDescriptionSource(str(HERE.parent / "launch/retargeting.launch.py"))
    return LaunchDescription(
        [
            *COMMON.declare("robot", "sim", "use_mocap", robot="icub", sim="true", use_mocap="true"),
            IncludeLaunchDescription(
                source,
                launch_arguments={
                    "robot": LaunchConfiguration("robot"),
                    "sim": LaunchConfiguration("sim"),
                    "use_mocap": LaunchConfiguration("use_mocap"),
                }.items(),
            ),
        ]
    )
