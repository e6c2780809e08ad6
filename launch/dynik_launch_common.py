"""Shared pieces of the dynik_ros launch files (this module is not a launch file itself).

Launch files are not importable modules, so each ``*.launch.py`` next to this file loads it by path
(``importlib``) and calls :func:`declare` for its arguments and :func:`pipeline` from an
``OpaqueFunction``: the argument values are then plain strings, parsed here with clear errors, and every
node gets typed parameters (``rate:=240`` on the command line reaches the node as the double ``240.0``).

Every dynik_ros node is a lifecycle node. :func:`managed_lifecycle_node` returns the node together with
the event handlers that drive it to *active*: ``configure`` is requested as soon as the node runs (or when
another node reaches *active*, to start producers after their consumers), and ``activate`` when it reaches
*inactive*. A node whose ``configure`` fails stays *unconfigured* and says why in its log.

Files: this package's share directory is the parent of this file's directory (``share/dynik_ros`` when
installed by colcon or pip, the source tree when launched from a checkout). Robot URDFs are the
``robot.urdf`` entries of the retargeting maps ``config/<robot>.yaml``, in ``example-robot-data``: found
through the ament index (``ros-$ROS_DISTRO-example-robot-data``), its Python package, or the pip wheel's
``cmeel.prefix`` (see :func:`example_robot_data_share`).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import launch.actions
import launch.events
import launch_ros.actions
import launch_ros.event_handlers
import launch_ros.events.lifecycle
import lifecycle_msgs.msg
from launch.launch_context import LaunchContext
from launch.launch_description_entity import LaunchDescriptionEntity
from launch.substitutions import LaunchConfiguration

PACKAGE = "dynik_ros"
SHARE = Path(__file__).resolve().parents[1]
"""``share/dynik_ros`` (installed) or the repository root (source checkout)."""

HUMAN_MODELS = ("human66", "human48")
ROBOTS = ("g1", "icub", "talos")
SOURCES = ("synthetic", "bag", "xsens", "file")
SCENARIOS = ("walking", "running", "tpose")
INTERFACES = ("joint_trajectory", "forward_command")

HUMAN_URDFS = {"human66": "urdf/human66.urdf", "human48": "urdf/human48.urdf"}
ROBOT_CONFIGS = {"g1": "config/g1.yaml", "icub": "config/icub.yaml", "talos": "config/talos.yaml"}
RVIZ_CONFIG = "config/dynik.rviz"
# A retargeting map names its robot's URDF as robot.urdf: "example-robot-data:<path under robots/>", an
# absolute path, or a path relative to the map (the convention of dynik_ros.retarget.registry).
EXAMPLE_ROBOT_DATA = "example-robot-data:"
# name -> (default, description, choices). One place for the wording the README's launch table repeats.
ARGUMENTS: dict[str, tuple[str | None, str, Sequence[str] | None]] = {
    "model": ("human66", "Human model tracked from the link states.", HUMAN_MODELS),
    "robot": ("g1", "Robot the human motion is retargeted to.", ROBOTS),
    "config_file": (
        "",
        "Retargeting map for ik_node (empty: the package's config/<robot>.yaml; unused for human tracking).",
        None,
    ),
    "source": (
        "synthetic",
        "Where wearable_node takes link states from: a synthetic motion, a bag, a live Xsens MVN stream, "
        "or a capture file (MVNX, BVH, .npz).",
        SOURCES,
    ),
    "scenario": ("walking", "Synthetic motion played by wearable_node when source:=synthetic.", SCENARIOS),
    "rate": ("60.0", "Sample rate of the synthetic motion [Hz].", None),
    "loop": ("true", "Restart the motion or bag when it ends (stamps keep increasing).", None),
    "bag_path": (
        "",
        "rosbag2 bag (directory, .mcap or .db3) with /human/link_states (source:=bag; replay.launch.py).",
        None,
    ),
    "file_path": ("", "Capture file (.mvnx, .bvh or .npz; format from the content) for source:=file.", None),
    "xsens_host": (
        "0.0.0.0",
        "Local address wearable_node binds for the MVN UDP stream (source:=xsens).",
        None,
    ),
    "xsens_port": ("9763", "UDP port MVN's Network Streamer sends to (source:=xsens).", None),
    "xsens_character": ("0", "MVN character (avatar) id wearable_node follows (source:=xsens).", None),
    "out_bag": ("", "Record the pipeline's topics to this new bag directory (empty: do not record).", None),
    "storage": ("mcap", "Storage of the recorded bag.", ("mcap", "sqlite3")),
    "realtime": (
        "false",
        "true: replay at the bag's pace; false: offline, each sample once the IK answered (deterministic).",
        None,
    ),
    "controller": (
        "joint_trajectory_controller",
        "Controller bridge_node commands (its topic prefix).",
        None,
    ),
    "interface": (
        "joint_trajectory",
        "bridge_node output: JointTrajectory or Float64MultiArray forward command.",
        INTERFACES,
    ),
    "use_mocap": ("false", "Run mocap_node and feed its base odometry to ik_node.", None),
    "sim": (
        "false",
        "Run sim_node: a MuJoCo robot behind the bridge's controller topics (held at the IK's base pose).",
        None,
    ),
    "use_sim_time": ("false", "Use /clock as the nodes' time source.", None),
    "namespace": ("", "ROS namespace of every node of the pipeline.", None),
    "rviz": ("false", "Also start robot_state_publisher and RViz (rviz.launch.py).", None),
    "rviz_config": ("", "RViz configuration file (empty: the package's config/dynik.rviz).", None),
    "log_level": ("info", "Log level of the pipeline's nodes.", ("debug", "info", "warn", "error", "fatal")),
}


# The simulated mocap of the closed loop (sim:=true use_mocap:=true): camera frame (the world in it: x, y, z
# [m], roll, pitch, yaw [deg]; z up, so the floor is at camera z = 0.2) and the rigid body on the base
SIM_MOCAP_CAMERA = (0.5, -1.0, 0.2, 0.0, 0.0, 30.0)
SIM_MOCAP_MARKER = (0.0, 0.0, 0.1, 0.0, 0.0, 0.0)

# Bag recording and RViz: dynik_launch_outputs.py, loaded by path like this module; its names are this
# module's too (COMMON.record, COMMON.rviz_include, ...).
_OUTPUTS = runpy.run_path(str(Path(__file__).resolve().with_name("dynik_launch_outputs.py")))
RECORDED_TOPICS = _OUTPUTS["RECORDED_TOPICS"]
STORAGE_PLUGINS = _OUTPUTS["STORAGE_PLUGINS"]
RVIZ_LAUNCH = _OUTPUTS["RVIZ_LAUNCH"]
RVIZ_PACKAGES = _OUTPUTS["RVIZ_PACKAGES"]
rosbag2_missing = _OUTPUTS["rosbag2_missing"]
record = _OUTPUTS["record"]
rviz_missing = _OUTPUTS["rviz_missing"]
rviz_include = _OUTPUTS["rviz_include"]


def share_file(relative: str) -> Path:
    """A file of this package's share directory, e.g. ``share_file('config/g1.yaml')``."""
    return SHARE / relative


def declare(*names: str, **overrides: str | None) -> list[launch.actions.DeclareLaunchArgument]:
    """``DeclareLaunchArgument`` actions for ``names`` from :data:`ARGUMENTS` (``overrides``: other
    defaults; ``None`` makes the argument required)."""
    actions = []
    for name in names:
        default, description, choices = ARGUMENTS[name]
        default = overrides.get(name, default)
        if choices and default is not None and default not in choices:
            choices = (*choices, default)  # an overridden default (robot:='' for replay) stays valid
        actions.append(
            launch.actions.DeclareLaunchArgument(
                name,
                default_value=default,
                description=description,
                choices=list(choices) if choices else None,
            )
        )
    return actions


def values(context: LaunchContext) -> dict[str, str]:
    """Every declared argument's value as a string (only those set in this launch)."""
    return {
        name: LaunchConfiguration(name).perform(context)
        for name in ARGUMENTS
        if name in context.launch_configurations
    }


def as_bool(args: Mapping[str, str], name: str) -> bool:
    text = args[name].strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise RuntimeError(f"launch argument '{name}' must be true or false, got '{args[name]}'")


def as_float(args: Mapping[str, str], name: str) -> float:
    try:
        return float(args[name])
    except ValueError:
        raise RuntimeError(f"launch argument '{name}' must be a number, got '{args[name]}'") from None


def as_int(args: Mapping[str, str], name: str) -> int:
    try:
        return int(args[name])
    except (KeyError, ValueError):
        raise RuntimeError(f"launch argument '{name}' must be an integer, got '{args.get(name)}'") from None


def existing_file(path: str | Path, what: str) -> str:
    """``path`` as an absolute string, or a RuntimeError naming ``what`` when it is missing."""
    path = Path(path).expanduser()
    if not path.exists():
        raise RuntimeError(f"{what} not found: {path}")
    return str(path.resolve())


def example_robot_data_share() -> Path:
    """``share/example-robot-data`` (it holds ``robots/...``), found in this order:

    1. the ament index: ``ros-$ROS_DISTRO-example-robot-data`` (or a colcon build of it) registers the
       package ``example-robot-data``;
    2. the ``example_robot_data`` Python package (robotpkg / conda builds): ``EXAMPLE_ROBOT_DATA_MODEL_DIR``;
    3. the ``example-robot-data`` pip wheel, which installs into ``<site-packages>/cmeel.prefix/share``.
    """
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("example-robot-data"))
    except (ImportError, LookupError, ValueError):
        pass
    try:
        from example_robot_data.robots_loader import EXAMPLE_ROBOT_DATA_MODEL_DIR

        return Path(EXAMPLE_ROBOT_DATA_MODEL_DIR).parent
    except (ImportError, AttributeError):
        pass
    for entry in sys.path:
        candidate = Path(entry or ".") / "cmeel.prefix" / "share" / "example-robot-data"
        if (candidate / "robots").is_dir():
            return candidate
    raise RuntimeError(
        "example-robot-data not found: install ros-$ROS_DISTRO-example-robot-data (or "
        "'pip install example-robot-data') to get the robot URDFs"
    )


def robot_map(robot: str, config_file: str = "") -> Path:
    """The retargeting map of ``robot``: ``config_file`` if given, else ``config/<robot>.yaml`` here."""
    if config_file:
        return Path(existing_file(config_file, "config_file"))
    if robot not in ROBOT_CONFIGS:
        raise RuntimeError(
            f"unknown robot '{robot}', expected one of {sorted(ROBOT_CONFIGS)} or a config_file"
        )
    return Path(existing_file(share_file(ROBOT_CONFIGS[robot]), f"retargeting map of '{robot}'"))


def robot_urdf(robot: str, config_file: str = "") -> Path:
    """URDF of ``robot``: the ``robot.urdf`` entry of its retargeting map, so RViz shows the model the IK
    solves on (``example-robot-data:<path>``, absolute, or relative to the map)."""
    from dynik_ros.io.yaml_file import load_yaml

    path = robot_map(robot, config_file)
    data = load_yaml(path) or {}
    location = str((data.get("robot") or {}).get("urdf", ""))
    if not location:
        raise RuntimeError(f"retargeting map {path} has no robot.urdf entry")
    if location.startswith(EXAMPLE_ROBOT_DATA):
        urdf = example_robot_data_share() / "robots" / location[len(EXAMPLE_ROBOT_DATA) :]
    else:
        urdf = Path(location).expanduser()
        urdf = urdf if urdf.is_absolute() else path.parent / urdf
    return Path(existing_file(urdf, f"URDF of robot '{robot}' (robot.urdf of {path})"))


def robot_base_frame(config_file: str) -> str:
    """The robot's base link named by its retargeting map (``root.frame``), or '' when it names none."""
    from dynik_ros.io.yaml_file import load_yaml

    data = load_yaml(config_file) or {}
    root = data.get("root") if isinstance(data, dict) else None
    return str(root.get("frame", "")) if isinstance(root, dict) else ""


def mesh_environment(robot: str) -> list[launch.actions.AppendEnvironmentVariable]:
    """RViz resolves the robot meshes' ``package://example-robot-data/...`` through the ament index; the
    pip wheel's prefix is not on ``AMENT_PREFIX_PATH`` by itself, so add it (nothing to do for a ROS
    install)."""
    if not robot:
        return []
    prefix = example_robot_data_share().parents[1]
    index = prefix / "share" / "ament_index" / "resource_index" / "packages" / "example-robot-data"
    known = os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
    if not index.exists() or str(prefix) in known:
        return []
    return [launch.actions.AppendEnvironmentVariable("AMENT_PREFIX_PATH", str(prefix))]


# --- lifecycle nodes ------------------------------------------------------------------------------


def _change_state(node: launch_ros.actions.LifecycleNode, transition_id: int) -> launch.actions.EmitEvent:
    return launch.actions.EmitEvent(
        event=launch_ros.events.lifecycle.ChangeState(
            lifecycle_node_matcher=launch.events.matches_action(node),
            transition_id=transition_id,
        )
    )


def managed_lifecycle_node(
    *,
    executable: str,
    namespace: str,
    parameters: Mapping[str, Any],
    log_level: str = "info",
    after: launch_ros.actions.LifecycleNode | None = None,
) -> tuple[launch_ros.actions.LifecycleNode, list[LaunchDescriptionEntity]]:
    """A dynik_ros lifecycle node named like its executable, plus what brings it to *active*.

    Returns ``(node, actions)``: the handler *inactive* -> ``activate``, the node, and the ``configure``
    request, emitted right after the node starts or, with ``after``, by a handler when ``after`` reaches
    *active* (handlers come before the node so that no transition event is missed). The handlers act once,
    on the start-up transitions only (configuring -> inactive, activating -> active): a user's ``ros2
    lifecycle set <node> deactivate`` later stays deactivated.
    """
    node = launch_ros.actions.LifecycleNode(
        package=PACKAGE,
        executable=executable,
        name=executable,
        namespace=namespace,
        parameters=[dict(parameters)],
        ros_arguments=["--log-level", log_level],
        output="screen",
        emulate_tty=True,
    )
    activate_when_inactive = launch.actions.RegisterEventHandler(
        launch_ros.event_handlers.OnStateTransition(
            target_lifecycle_node=node,
            # start-up only, once: a user's later `ros2 lifecycle set ... deactivate` also ends in
            # 'inactive' and must stay there (it stops the commands)
            start_state="configuring",
            goal_state="inactive",
            handle_once=True,
            entities=[
                launch.actions.LogInfo(msg=f"{executable} is configured, activating it"),
                _change_state(node, lifecycle_msgs.msg.Transition.TRANSITION_ACTIVATE),
            ],
        )
    )
    configure = _change_state(node, lifecycle_msgs.msg.Transition.TRANSITION_CONFIGURE)
    if after is None:
        return node, [activate_when_inactive, node, configure]
    configure_after = launch.actions.RegisterEventHandler(
        launch_ros.event_handlers.OnStateTransition(
            target_lifecycle_node=after,
            start_state="activating",
            goal_state="active",
            handle_once=True,  # a re-activation of `after` later must not re-configure this node
            entities=[configure],
        )
    )
    return node, [activate_when_inactive, configure_after, node]


# --- pipelines --------------------------------------------------------------------------------------


def pipeline(
    context: LaunchContext,
    *,
    robot: bool = False,
    replay: bool = False,
) -> list[LaunchDescriptionEntity]:
    """The nodes of one pipeline from the launch arguments in ``context``.

    * human tracking (default): wearable_node -> ik_node on the human model;
    * ``robot=True``: wearable_node -> ik_node on the robot (retargeting map) -> bridge_node, and
      mocap_node when ``use_mocap:=true``, sim_node (the simulated robot) when ``sim:=true``;
    * ``replay=True``: wearable_node reads ``bag_path``; with ``robot:=...`` the IK retargets; with
      ``out_bag:=...`` ``ros2 bag record`` writes the pipeline's topics.

    ik_node is configured first; wearable_node is configured once ik_node is *active*, so no sample is
    published before the solver listens.
    """
    args = values(context)
    namespace = args.get("namespace", "")
    log_level = args.get("log_level", "info")
    common = {"use_sim_time": as_bool(args, "use_sim_time")}
    model = args.get("model", "human66")
    robot_name = args.get("robot", "") if (robot or replay) else ""
    if robot_name and robot_name not in ROBOTS:
        raise RuntimeError(
            f"launch argument 'robot' must be empty or one of {list(ROBOTS)}, got '{robot_name}'"
        )

    # the retargeting map (robot pipelines only): config_file:=..., else the package's config/<robot>.yaml
    config_file = str(robot_map(robot_name, args.get("config_file", ""))) if robot_name else ""

    actions: list[LaunchDescriptionEntity] = []
    use_mocap = robot and as_bool(args, "use_mocap")
    # use_mocap with sim: the loop closed through the simulated mocap (issue 11). The harness follows the
    # retargeted human pelvis (/dynik/base_target), not the IK's base, which then comes from the mocap
    closed_loop = use_mocap and as_bool(args, "sim")
    if use_mocap:
        mocap = dict(common)
        base_frame = robot_base_frame(config_file)
        if base_frame:
            mocap["base_frame"] = base_frame  # child_frame_id of /robot/base_odom
        if closed_loop:  # what mocap_node must know of the simulated camera and rigid body (eq. 1-2)
            mocap.update(
                robot=config_file,  # the robot world = the IK's world (its start pose)
                rigid_body_in_base=list(SIM_MOCAP_MARKER),
                ground_height=SIM_MOCAP_CAMERA[2],
                calibration_samples=375,  # 0.5 s at 750 Hz: eq. 1's heading to ~0.005 deg (0.1 deg noise)
            )
        _, mocap_actions = managed_lifecycle_node(
            executable="mocap_node", namespace=namespace, parameters=mocap, log_level=log_level
        )
        actions += mocap_actions

    ik, ik_actions = managed_lifecycle_node(
        executable="ik_node",
        namespace=namespace,
        parameters={
            **common,
            "model": model,
            "robot": robot_name,
            "config_file": config_file,
            "use_base_odom": bool(use_mocap),
            "publish_base_target": bool(closed_loop),
            # an offline replay runs ahead of the clock: stamps are checked against the stream only
            **({"max_future_stamp": 0.0} if replay and not as_bool(args, "realtime") else {}),
            "publish_markers": True,
            "publish_tf": True,
        },
        log_level=log_level,
    )
    actions += ik_actions

    if robot and as_bool(args, "sim"):
        # the simulated robot listens before the bridge commands it
        _, sim_actions = managed_lifecycle_node(
            executable="sim_node",
            namespace=namespace,
            parameters={
                **common,
                "robot": str(config_file),
                "controller": args["controller"],
                **(
                    {
                        "base_target_topic": "/dynik/base_target",
                        "mocap_marker_offset": list(SIM_MOCAP_MARKER),
                        "mocap_camera_from_world": list(SIM_MOCAP_CAMERA),
                    }
                    if closed_loop
                    else {}
                ),
            },
            log_level=log_level,
        )
        actions += sim_actions

    if robot:
        _, bridge_actions = managed_lifecycle_node(
            executable="bridge_node",
            namespace=namespace,
            parameters={
                **common,
                "robot": robot_name,
                "config_file": config_file,
                "controller": args["controller"],
                "interface": args["interface"],
            },
            log_level=log_level,
        )
        actions += bridge_actions

    wearable = {**common, "model": model}
    if closed_loop:
        wearable["start_delay"] = 2.0  # mocap_node calibrates (eq. 1) while the robot still stands
    if replay:
        wearable.update(
            source="bag",
            bag_path=existing_file(args["bag_path"], "bag_path") if args.get("bag_path") else "",
            realtime=as_bool(args, "realtime"),
            duration=0.0,  # the whole bag
            loop=as_bool(args, "loop"),
        )
        if not wearable["bag_path"]:
            raise RuntimeError("replay.launch.py needs bag_path:=<rosbag2 directory or file>")
    else:
        wearable.update(
            source=args["source"],
            scenario=args["scenario"],
            rate=as_float(args, "rate"),
            loop=as_bool(args, "loop"),
        )
        if args["source"] == "xsens":  # a live suit: published on arrival, stamped at reception
            wearable.update(
                xsens_host=args.get("xsens_host", "0.0.0.0"),
                xsens_port=as_int(args, "xsens_port"),
                xsens_character=as_int(args, "xsens_character"),
            )
        if args["source"] == "bag":
            if not args.get("bag_path"):
                raise RuntimeError("source:=bag needs bag_path:=<rosbag2 directory or file>")
            wearable["bag_path"] = existing_file(args["bag_path"], "bag_path")
            wearable["duration"] = 0.0  # the whole bag (also wearable_node's default; stated, not relied on)
        if args["source"] == "file":
            if not args.get("file_path"):
                raise RuntimeError("source:=file needs file_path:=<.mvnx, .bvh or .npz capture file>")
            wearable["file_path"] = existing_file(args["file_path"], "file_path")
            wearable["duration"] = 0.0  # the whole take
    out_bag = args.get("out_bag", "") if replay else ""
    if out_bag:
        # ros2 bag record subscribes once it discovers the topics: give it a head start.
        wearable["start_delay"] = 3.0
        actions.append(record(out_bag, args.get("storage", "mcap")))
    _, wearable_actions = managed_lifecycle_node(
        executable="wearable_node", namespace=namespace, parameters=wearable, log_level=log_level, after=ik
    )
    actions += wearable_actions
    return actions
