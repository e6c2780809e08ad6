"""Human joint torques from the suit and force/torque shoes (issue 13, the floating-base estimation seed):
wearable_node -> dynamics_node on Human66.

    ros2 launch dynik_ros human66_dynamics.launch.py [scenario:=walking] [rate:=120.0]
    ros2 launch dynik_ros human66_dynamics.launch.py source:=bag bag_path:=walking_bag

Both nodes are lifecycle nodes brought to *active* by the launch file (dynamics_node first, then the
source). ``source:=synthetic``: wearable_node also publishes the motion's true shoe readings
(``publish_shoes``: the ground reaction of its inverse dynamics) on /human/shoes/right and
/human/shoes/left; other sources: whatever publishes those topics (e.g. ``ros2 bag play`` of a bag's shoe
topics), the kinematic contact rule while nothing does. Outputs: /human/joint_torques,
/human/foot_wrench/RightFoot, /human/foot_wrench/LeftFoot, /human/contact_state, /diagnostics.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

from launch.actions import OpaqueFunction
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription

ARGUMENTS = (
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
    "log_level",
)


# launch/dynik_launch_common.py (launch files are not importable modules: run it by path)
COMMON = SimpleNamespace(**runpy.run_path(str(Path(__file__).resolve().with_name("dynik_launch_common.py"))))


def _dynamics_pipeline(context: LaunchContext) -> list:
    args = COMMON.values(context)
    namespace, log_level = args.get("namespace", ""), args.get("log_level", "info")
    common = {"use_sim_time": COMMON.as_bool(args, "use_sim_time")}
    dynamics, actions = COMMON.managed_lifecycle_node(
        executable="dynamics_node",
        namespace=namespace,
        parameters={**common, "model": "human66", "link_states_reliable": True},
        log_level=log_level,
    )
    source = args["source"]
    wearable = {
        **common,
        "model": "human66",
        "source": source,
        "scenario": args["scenario"],
        "rate": COMMON.as_float(args, "rate"),
        "loop": COMMON.as_bool(args, "loop"),
        "link_states_reliable": True,
        "publish_shoes": source == "synthetic",
    }
    if source == "bag":
        if not args.get("bag_path"):
            raise RuntimeError("source:=bag needs bag_path:=<rosbag2 directory or file>")
        wearable.update(bag_path=COMMON.existing_file(args["bag_path"], "bag_path"), duration=0.0)
    if source == "file":
        if not args.get("file_path"):
            raise RuntimeError("source:=file needs file_path:=<.mvnx, .bvh or .npz capture file>")
        wearable.update(file_path=COMMON.existing_file(args["file_path"], "file_path"), duration=0.0)
    if source == "xsens":
        wearable.update(
            xsens_host=args.get("xsens_host", "0.0.0.0"),
            xsens_port=COMMON.as_int(args, "xsens_port"),
            xsens_character=COMMON.as_int(args, "xsens_character"),
        )
    _, wearable_actions = COMMON.managed_lifecycle_node(
        executable="wearable_node",
        namespace=namespace,
        parameters=wearable,
        log_level=log_level,
        after=dynamics,
    )
    return actions + wearable_actions


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([*COMMON.declare(*ARGUMENTS), OpaqueFunction(function=_dynamics_pipeline)])
