"""Bag recording and RViz for the dynik_ros launch files (not a launch file itself).

Loaded by path from ``dynik_launch_common.py``, whose namespace then holds these names too
(``COMMON.record``, ``COMMON.rviz_include``, ...): what a launch file needs to record the pipeline's topics
with ``ros2 bag record`` and to include ``rviz.launch.py``, each checking first that its packages are
installed so that a missing one is named before any node starts.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import launch.actions

SHARE = Path(__file__).resolve().parents[1]  # this package's share directory, as in dynik_launch_common.py
RVIZ_LAUNCH = "launch/rviz.launch.py"
# Topics recorded by replay.launch.py (the DESIGN.md interface table, outputs plus the input).
RECORDED_TOPICS = (
    "/human/link_states",
    "/dynik/joint_states",
    "/dynik/base_odom",
    "/dynik/markers",
    "/diagnostics",
    "/tf",
)


STORAGE_PLUGINS = {"mcap": "rosbag2_storage_mcap", "sqlite3": "rosbag2_storage_sqlite3"}


def rosbag2_missing(storage: str) -> str | None:
    """Why ``ros2 bag record --storage <storage>`` cannot run here, or None when it can.

    Checks what the recorder needs, not only ``ros2`` on PATH: ros2cli with the ``bag`` verb (the Python
    package ``ros2bag``, part of rosbag2) and the storage plugin package in the ament index. Before this,
    a ros2cli without rosbag2 passed the check, ``ros2 bag record`` died at start and the replay ran
    unrecorded.
    """
    import importlib.util

    if shutil.which("ros2") is None:
        return "'ros2' is not on PATH"
    if importlib.util.find_spec("ros2bag") is None:
        return "ros2cli has no 'bag' verb (rosbag2 is not installed: ros-$ROS_DISTRO-rosbag2)"
    plugin = STORAGE_PLUGINS.get(storage)
    if plugin is None:
        return f"unknown storage {storage!r} (choose from {sorted(STORAGE_PLUGINS)})"
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return None  # no ament index to ask: let rosbag2 report a missing plugin itself
    try:
        get_package_prefix(plugin)
    except PackageNotFoundError:
        debian = "ros-$ROS_DISTRO-" + plugin.replace("_", "-")
        return f"rosbag2's {storage} storage plugin is not installed ({debian})"
    return None


def record(out_bag: str, storage: str) -> launch.actions.ExecuteProcess:
    """``ros2 bag record`` of :data:`RECORDED_TOPICS` (needs a ROS 2 install with rosbag2; in a pip-only
    environment use ``dynik-ros run`` instead, which records through :mod:`dynik_ros.io.bags`). The
    nodes' topics are absolute (DESIGN.md), so ``namespace`` does not change them."""
    missing = rosbag2_missing(storage)
    if missing:
        raise RuntimeError(
            f"out_bag needs 'ros2 bag record' and {missing}; "
            "without rosbag2, 'dynik-ros run replay' replays and records in one process"
        )
    path = Path(out_bag).expanduser().resolve()
    if path.exists():
        raise RuntimeError(f"out_bag exists already, rosbag2 never overwrites: {path}")
    return launch.actions.ExecuteProcess(
        cmd=["ros2", "bag", "record", "--storage", storage, "--output", str(path), *RECORDED_TOPICS],
        name="ros2_bag_record",
        output="screen",
    )


RVIZ_PACKAGES = ("robot_state_publisher", "rviz2")


def rviz_missing() -> str | None:
    """Why ``rviz.launch.py`` cannot start here (its packages absent from the ament index), or None.

    Checked before anything starts: launch_ros only finds a missing package when it starts that node,
    after the pipeline's processes were started, and then tears them down while they are importing
    (KeyboardInterrupt tracebacks around the real error)."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return None  # no ament index to ask: launch_ros reports it itself
    missing = []
    for package in RVIZ_PACKAGES:
        try:
            get_package_prefix(package)
        except PackageNotFoundError:
            missing.append(package)
    if not missing:
        return None
    debians = ", ".join("ros-$ROS_DISTRO-" + p.replace("_", "-") for p in missing)
    return f"rviz:=true needs {' and '.join(missing)}, not found in the ament index (install {debians})"


def rviz_include(model: str, robot: str, args: Mapping[str, str]) -> launch.actions.IncludeLaunchDescription:
    """``rviz.launch.py`` for ``model`` (human) or ``robot``; a RuntimeError naming what is missing when
    RViz cannot run here (raised while the launch is set up, before any node starts)."""
    from launch.launch_description_sources import PythonLaunchDescriptionSource

    missing = rviz_missing()
    if missing:
        raise RuntimeError(missing)

    arguments = {
        "robot": robot,
        "config_file": args.get("config_file", "") if robot else "",
        "use_sim_time": args.get("use_sim_time", "false"),
        "rviz_config": args.get("rviz_config", ""),
    }
    if not robot:  # rviz.launch.py's model allows the human models only: a robot pipeline leaves it alone
        arguments["model"] = model
    return launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(SHARE / RVIZ_LAUNCH)), launch_arguments=arguments.items()
    )
