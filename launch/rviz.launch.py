"""RViz for dynik_ros: robot_state_publisher with the human or robot URDF, driven by /dynik/joint_states,
and rviz2 with config/dynik.rviz (RobotModel, TF, /dynik/markers; fixed frame ``world``).

    ros2 launch dynik_ros rviz.launch.py model:=human66          # next to a human tracking pipeline
    ros2 launch dynik_ros rviz.launch.py robot:=g1               # next to a G1 retargeting pipeline

ik_node publishes world -> base on /tf (robot_state_publisher ignores floating joints); robot_state_publisher
publishes the rest of the tree from the joint states and the URDF on /robot_description, which the
RobotModel display reads. Needs a ROS 2 install with robot_state_publisher and rviz2.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import launch_ros.actions
from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription
from launch_ros.parameter_descriptions import ParameterValue

ARGUMENTS = ("model", "robot", "config_file", "rviz_config", "use_sim_time")


# launch/dynik_launch_common.py (launch files are not importable modules: run it by path)
COMMON = SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().with_name("dynik_launch_common.py"))))


def _setup(context: LaunchContext) -> list:
    args = COMMON.values(context)
    missing = COMMON.rviz_missing()
    if missing:
        raise RuntimeError(missing)
    robot = args["robot"]
    if robot:
        urdf = COMMON.robot_urdf(robot, args["config_file"])
    else:
        urdf = COMMON.existing_file(COMMON.share_file(COMMON.HUMAN_URDFS[args["model"]]), "human URDF")
    rviz_config = COMMON.existing_file(
        args["rviz_config"] or COMMON.share_file("config/dynik.rviz"), "rviz_config"
    )
    use_sim_time = COMMON.as_bool(args, "use_sim_time")
    description = Path(urdf).read_text(encoding="utf-8")
    return [
        *COMMON.mesh_environment(robot),
        launch_ros.actions.Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            name="robot_state_publisher",
            parameters=[
                {
                    "robot_description": ParameterValue(description, value_type=str),
                    "use_sim_time": use_sim_time,
                }
            ],
            remappings=[("joint_states", "/dynik/joint_states")],
            output="screen",
        ),
        launch_ros.actions.Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            arguments=["-d", rviz_config],
            parameters=[{"use_sim_time": use_sim_time}],
            output="screen",
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*COMMON.declare(*ARGUMENTS, robot=""), OpaqueFunction(function=_setup)])
