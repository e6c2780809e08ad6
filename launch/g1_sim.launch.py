"""A simulated Unitree G1 following a person: retargeting.launch.py with robot:=g1 and sim:=true.

    ros2 launch dynik_ros g1_sim.launch.py [source:=xsens] [rviz:=true]

wearable_node -> ik_node (config/g1.yaml) -> bridge_node -> sim_node (MuJoCo G1 at 1 kHz, held by a soft
harness at the IK's base pose; /joint_states, /sim/base_pose_true and the simulated /mocap/rigid_body).
Every other argument of retargeting.launch.py applies; robot:=... and sim:=false override the defaults.
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
    # defaults g1 and sim:=true, but real arguments: an override is passed on, never silently dropped
    source = PythonLaunchDescriptionSource(str(HERE.parent / "launch/retargeting.launch.py"))
    return LaunchDescription(
        [
            *COMMON.declare("robot", "sim", robot="g1", sim="true"),
            IncludeLaunchDescription(
                source,
                launch_arguments={
                    "robot": LaunchConfiguration("robot"),
                    "sim": LaunchConfiguration("sim"),
                }.items(),
            ),
        ]
    )
