"""Every YAML the project loads refuses a key written twice in one mapping (``yaml.safe_load`` kept the last
one silently: a map with ``contact:`` twice lost the first block), naming the file, the key and both lines;
``<<`` merges may still be overridden. One loader: :mod:`dynik_ros.io.yaml_file`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from take_tools import retarget_cli

from dynik_ros.cli.pipeline_file import PipelineError, load_pipeline, parse_overrides
from dynik_ros.io.skeleton_map import SKELETON_DIR, SkeletonMapError, load_skeleton_map
from dynik_ros.io.suit_calibration import CalibrationError, SuitCalibration
from dynik_ros.io.yaml_file import YamlFileError, parse_yaml
from dynik_ros.models.assets import share_path
from dynik_ros.retarget.calibration import Calibration
from dynik_ros.retarget.config import RetargetConfigError, load_retarget_config
from dynik_ros.retarget.registry import find_robot_yaml


def _line_of(text: str, pattern: str) -> int:
    """1-based line of the first line matching ``pattern``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if re.match(pattern, line))


def _with_duplicate(source: Path, where: Path, block: str) -> tuple[Path, int]:
    """``source`` with ``block`` appended; the path and the line ``block`` starts on."""
    text = source.read_text(encoding="utf-8").rstrip("\n") + "\n"
    path = where / source.name
    path.write_text(text + block, encoding="utf-8")
    return path, len(text.splitlines()) + 1


def _assert_names(message: str, path: Path, key: str, first: int, second: int) -> None:
    assert str(path) in message and f"'{key}'" in message, message
    assert f"(line {first}, column" in message and f"and line {second}, column" in message, message


def test_a_robot_map_with_contact_twice_is_refused_naming_file_key_and_lines(tmp_path):
    source = share_path("config", "g1.yaml")
    path, second = _with_duplicate(source, tmp_path, "contact: {enabled: false}\n")
    with pytest.raises(RetargetConfigError) as info:
        load_retarget_config(path)
    _assert_names(str(info.value), path, "contact", _line_of(source.read_text(), r"contact:"), second)
    # by robot name in a user's directory too (was: 'unknown robot', the map silently skipped)
    with pytest.raises(ValueError, match="'contact' is written twice"):
        find_robot_yaml_in(tmp_path, "g1")


def find_robot_yaml_in(directory: Path, name: str) -> Path:
    import os

    old = os.environ.get("DYNIK_ROBOT_PATH")
    os.environ["DYNIK_ROBOT_PATH"] = str(directory)
    try:
        return find_robot_yaml(name)
    finally:
        if old is None:
            del os.environ["DYNIK_ROBOT_PATH"]
        else:
            os.environ["DYNIK_ROBOT_PATH"] = old


def test_a_nested_duplicate_key_is_refused(tmp_path):
    text = "robot:\n  name: x\n  urdf: a.urdf\n  name: y\ntargets: []\n"
    path = tmp_path / "nested.yaml"
    path.write_text(text)
    with pytest.raises(RetargetConfigError) as info:
        load_retarget_config(path)
    _assert_names(str(info.value), path, "name", 2, 4)


def test_merge_keys_may_still_be_overridden():
    assert parse_yaml("a: &b {x: 1, y: 2}\nm: {<<: *b, x: 3}\n", "text") == {
        "a": {"x": 1, "y": 2},
        "m": {"x": 3, "y": 2},
    }
    with pytest.raises(YamlFileError, match=r"text: not valid YAML: line 1, column 6"):
        parse_yaml("a: [1", "text")


def test_a_pipeline_file_with_a_node_parameter_twice_is_refused(tmp_path):
    text = (
        "description: d\nnodes:\n  - executable: ik_node\n    parameters:\n      rate: 100.0\n"
        "      position_gain: 5.0\n      rate: 50.0\n  - executable: wearable_node\n"
    )
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    _assert_names(str(info.value), path, "rate", 5, 7)
    with pytest.raises(PipelineError, match="'a' is written twice"):
        parse_overrides(["ik_node.x:={a: 1, a: 2}"])
    # and the runner's command line says so with exit status 2, no traceback
    result = subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.run_command", "run", str(path), "--no-record"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "'rate' is written twice" in result.stderr and str(path) in result.stderr, result.stderr


def test_a_skeleton_map_with_a_segment_twice_is_refused(tmp_path):
    source = SKELETON_DIR / "cmu.yaml"
    path, second = _with_duplicate(source, tmp_path, "  Pelvis: LowerBack\n")
    with pytest.raises(SkeletonMapError) as info:
        load_skeleton_map(path)
    _assert_names(str(info.value), path, "Pelvis", _line_of(source.read_text(), r"\s+Pelvis:"), second)


def test_calibration_files_with_a_key_twice_are_refused(tmp_path):
    suit = tmp_path / "suit.yaml"
    suit.write_text("format: x\nyaw: 0.0\nyaw: 1.0\n")
    with pytest.raises(CalibrationError) as info:
        SuitCalibration.load(suit)
    _assert_names(str(info.value), suit, "yaw", 2, 3)
    retarget = tmp_path / "calibration.yaml"
    retarget.write_text("format: x\nrobot: g1\nrobot: icub\n")
    with pytest.raises(RetargetConfigError) as info:
        Calibration.load(retarget)
    _assert_names(str(info.value), retarget, "robot", 2, 3)


def test_dynik_retarget_with_such_a_map_exits_2_with_one_line(tmp_path):
    source = share_path("config", "g1.yaml")
    path, second = _with_duplicate(source, tmp_path, "feet: {}\n")
    code, lines, stderr = retarget_cli(["--robot", str(path), "--motion", "walking"], tmp_path / "out")
    assert code == 2 and len(lines) == 1, stderr[-2000:]
    _assert_names(lines[0], path, "feet", _line_of(source.read_text(), r"feet:"), second)
