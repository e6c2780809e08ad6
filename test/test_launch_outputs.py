"""The launch files' recording and RViz helpers (``launch/dynik_launch_outputs.py``, offered through
``dynik_launch_common``), executed without `launch`: the checks that run before anything starts."""

from __future__ import annotations

import ast

from test_launch_files import LAUNCH_DIR, _common_module, _tree


def _launch_common_function(name: str, *constants: str):
    """A function (and module constants it uses) of the launch files' recording and RViz helpers
    (dynik_launch_outputs.py, part of dynik_launch_common's namespace), executed without `launch`."""
    import shutil

    tree = _tree(LAUNCH_DIR / "dynik_launch_outputs.py")
    wanted = [
        node
        for node in tree.body
        if (isinstance(node, ast.FunctionDef) and node.name == name)
        or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) in constants for t in node.targets))
    ]
    namespace: dict = {"shutil": shutil, "__name__": "dynik_launch_common_part"}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), "dynik_launch_outputs.py", "exec"), namespace)
    return namespace[name]


def _fake_ament_index(monkeypatch, installed: set[str]) -> None:
    """An ``ament_index_python.packages`` in which exactly the packages of ``installed`` (a set the test
    may grow) have a prefix."""
    import sys
    import types

    class PackageNotFoundError(KeyError):
        pass

    def get_package_prefix(package):
        if package not in installed:
            raise PackageNotFoundError(package)
        return "/opt/ros/kilted"

    ament = types.ModuleType("ament_index_python.packages")
    ament.PackageNotFoundError = PackageNotFoundError
    ament.get_package_prefix = get_package_prefix
    monkeypatch.setitem(sys.modules, "ament_index_python", types.ModuleType("ament_index_python"))
    monkeypatch.setitem(sys.modules, "ament_index_python.packages", ament)


def test_out_bag_checks_for_rosbag2_and_its_storage_plugin_not_only_ros2(monkeypatch):
    """Issue 10: with ros2cli but no rosbag2, ``out_bag:=`` passed the old check (``ros2`` on PATH) and
    ``ros2 bag record`` died at start while the replay ran unrecorded."""
    import importlib.util
    import shutil

    missing = _launch_common_function("rosbag2_missing", "STORAGE_PLUGINS")
    installed: set[str] = set()
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args):
        if name == "ros2bag":
            return object() if "ros2bag" in installed else None
        return real_find_spec(name, *args)

    _fake_ament_index(monkeypatch, installed)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "'ros2' is not on PATH" in missing("mcap")
    monkeypatch.setattr(shutil, "which", lambda name: "/opt/ros/kilted/bin/ros2")
    assert "rosbag2 is not installed" in missing("mcap")  # ros2cli alone: the case the old check let through
    installed.add("ros2bag")
    assert "ros-$ROS_DISTRO-rosbag2-storage-mcap" in missing("mcap")
    installed.add("rosbag2_storage_mcap")
    assert missing("mcap") is None
    assert "sqlite3 storage plugin" in missing("sqlite3")


def test_rviz_checks_its_packages_before_anything_starts(monkeypatch):
    """Found with the real ros2 launch: ``rviz:=true`` without robot_state_publisher / rviz2 failed only
    when launch_ros reached the RViz nodes, after the pipeline's processes were started, which were then
    interrupted while importing (tracebacks around the error). Now one line, before anything starts."""

    missing = _launch_common_function("rviz_missing", "RVIZ_PACKAGES")
    installed: set[str] = set()

    _fake_ament_index(monkeypatch, installed)
    text = missing()
    assert "robot_state_publisher and rviz2" in text and "ros-$ROS_DISTRO-rviz2" in text
    installed.add("rviz2")
    assert "ros-$ROS_DISTRO-robot-state-publisher" in missing() and "rviz2," not in missing()
    installed.add("robot_state_publisher")
    assert missing() is None
    # every include of rviz.launch.py goes through the check, and rviz.launch.py checks on its own
    outputs = (LAUNCH_DIR / "dynik_launch_outputs.py").read_text(encoding="utf-8")
    include = outputs[outputs.index("def rviz_include(") :]
    assert include.index("rviz_missing()") < include.index("IncludeLaunchDescription(")
    assert "rviz_missing()" in (LAUNCH_DIR / "rviz.launch.py").read_text(encoding="utf-8")


def test_the_shared_module_still_offers_the_recording_and_rviz_helpers():
    """dynik_launch_common.py (what every launch file loads) keeps the names that moved to
    dynik_launch_outputs.py: COMMON.record, COMMON.rviz_include, ... are the functions defined there."""
    common = _tree(_common_module())
    outputs = _tree(LAUNCH_DIR / "dynik_launch_outputs.py")
    moved = {n.name for n in outputs.body if isinstance(n, ast.FunctionDef)}
    moved |= {
        t.id for n in outputs.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    offered = {
        t.id for n in common.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    assert {"record", "rosbag2_missing", "rviz_include", "rviz_missing", "RECORDED_TOPICS"} <= moved
    assert moved - {"SHARE"} <= offered, sorted(moved - {"SHARE"} - offered)
