"""Replay: a bag's /human/link_states -> wearable_node (source:=bag) -> ik_node [-> ros2 bag record].

    ros2 launch dynik_ros replay.launch.py bag_path:=walking_bag out_bag:=walking_out
    ros2 launch dynik_ros replay.launch.py bag_path:=walking_bag robot:=g1 realtime:=true rviz:=true

realtime:=false (default) replays offline: wearable_node sends the next sample once ik_node's output for
the previous one arrived, as fast as the solver goes, and the output is the same for the same input.
With out_bag:=<dir>, ``ros2 bag record`` (a ROS 2 install with rosbag2 and its mcap plugin) records the
pipeline's topics; wearable_node waits 3 s after activation so the recorder subscribes first. The launch
keeps running when the bag has been replayed: stop it with Ctrl-C, which also closes the recorded bag.
Without ros2 bag, ``dynik-ros run`` runs the same replay in one process and writes the bag itself.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription

ARGUMENTS = (
    "bag_path",
    "out_bag",
    "storage",
    "realtime",
    "loop",
    "model",
    "robot",
    "config_file",
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
    actions = COMMON.pipeline(context, replay=True)
    if COMMON.as_bool(args, "rviz"):
        actions.append(COMMON.rviz_include(args["model"], args["robot"], args))
    return actions


def generate_launch_description() -> LaunchDescription:
    # bag_path has no default: ros2 launch refuses to start without it.
    declared = COMMON.declare(*ARGUMENTS, bag_path=None, robot="", loop="false")
    return LaunchDescription([*declared, OpaqueFunction(function=_setup)])
