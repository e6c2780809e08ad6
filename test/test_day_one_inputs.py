"""Odd inputs a user hands the tools on day one that used to crash or pass silently: a BVH with a joint named
twice (read as if nothing were wrong: a skeleton map could take either), a one-frame capture (an error that
did not name the file), NaN or negative numbers on dynik-retarget's command line (a NaN swing weight ended in
a traceback, a NaN heel-off or a negative settle ran), an unknown skeleton name (reported as a file that
cannot be read), and a bag deleted while wearable_node replays it in a loop (the exception ended the node)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from node_harness import wearable
from take_tools import xsens_ordered

from dynik_ros.io.bvh import BvhError, SkeletonMapError, builtin_skeleton_maps, read_bvh, write_bvh
from dynik_ros.models.segments import XSENS_SEGMENTS
from dynik_ros.retarget.human import synthetic_human_motion

MAPS = {m.name: m.segments for m in builtin_skeleton_maps()}


@pytest.fixture(scope="module")
def bvh_lines(tmp_path_factory) -> list[str]:
    """A 1 s synthetic walk written as an MVN-named BVH, as lines."""
    motion = xsens_ordered(synthetic_human_motion("walking", duration=1.0, rate=60.0))
    path = write_bvh(motion, tmp_path_factory.mktemp("bvh") / "walk.bvh", names=MAPS["mvn"])
    return path.read_text().splitlines()


def _retarget(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.retarget", *args, "--quiet", "--no-plots", "--no-bag"]
        + ["--out", str(cwd / "out")],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_bvh_joint_named_twice_is_refused_naming_both_lines(bvh_lines, tmp_path):
    joints = [n for n, line in enumerate(bvh_lines) if line.strip().startswith("JOINT")]
    first = bvh_lines[joints[0]].split()[1]
    lines = list(bvh_lines)
    lines[joints[3]] = lines[joints[3]].replace(lines[joints[3]].split()[1], first)
    path = tmp_path / "twice.bvh"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BvhError) as info:
        read_bvh(path)
    message = str(info.value)
    assert str(path) in message and f"joint '{first}' is defined twice" in message, message
    assert f"(line {joints[0] + 1} and line {joints[3] + 1})" in message, message


def test_a_one_frame_capture_is_refused_naming_the_file(bvh_lines, tmp_path):
    motion_at = bvh_lines.index("MOTION")
    path = tmp_path / "one.bvh"
    header, first_frame = bvh_lines[motion_at + 2], bvh_lines[motion_at + 3]  # "Frame Time: ...", frame 0
    path.write_text("\n".join([*bvh_lines[:motion_at], "MOTION", "Frames: 1", header, first_frame]) + "\n")
    result = _retarget(str(path), cwd=tmp_path)
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert lines == [f"dynik-retarget: error: {path}: 1 sample(s); retargeting needs at least two"], lines


@pytest.mark.parametrize(
    "option, value, reason",
    [
        ("--swing-weight", "nan", "must be a finite number, got nan"),
        ("--swing-weight", "0", "must be > 0, got 0"),
        ("--heel-off", "nan", "must be a finite number, got nan"),
        ("--heel-off-noise", "-1", "must be >= 0, got -1"),
        ("--settle", "-1", "must be >= 0, got -1"),
        ("--heading", "inf", "must be a finite number, got inf"),
    ],
)
def test_bad_numbers_on_the_command_line_are_refused_naming_the_option(tmp_path, option, value, reason):
    result = _retarget("--motion", "walking", "--duration", "0.5", option, value, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.splitlines()[-1] == f"dynik-retarget: error: argument {option}: {reason}"
    assert not (tmp_path / "out").exists()


def test_an_unknown_skeleton_name_lists_the_built_in_ones(bvh_lines, tmp_path):
    path = tmp_path / "walk.bvh"
    path.write_text("\n".join(bvh_lines) + "\n")
    with pytest.raises(SkeletonMapError, match=r"unknown skeleton map 'cmu2': a built-in name \(cmu, "):
        read_bvh(path, skeleton="cmu2")


def test_a_bag_deleted_while_replayed_in_a_loop_ends_the_stream_with_an_error(h, tmp_path, human66):
    """The bag is deleted after the first samples: the loop's restart cannot open it. The exception left
    the timer callback and ended the node (the executor raised it); now the stream ends, ``finished``, and
    /diagnostics says ERROR naming the bag."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.io.bags import write_motion_bag
    from dynik_ros.models.human import Subject, pelvis_height
    from dynik_ros.motion.synthetic import synthesize

    motion = synthesize(
        human66, "walking", duration=0.25, rate=60.0, links=list(XSENS_SEGMENTS),
        standing_height=pelvis_height(Subject()),
    )  # fmt: skip
    bag = write_motion_bag(tmp_path / "take", motion)
    node = h.add(wearable(source="bag", bag_path=str(bag), loop=True, duration=0.0, diagnostics_period=0.05))
    samples = h.collect(MultiDOFJointState, "/human/link_states")
    diagnostics = h.collect(DiagnosticArray, "/diagnostics")
    node.trigger_configure()
    assert node.lifecycle_state == "inactive", node.last_error
    node.trigger_activate()
    assert h.spin_until(lambda: node.published >= 3)
    shutil.rmtree(bag)
    assert h.spin_until(lambda: node.finished), (node.published, node.loops)
    assert node.lifecycle_state == "active" and "rosbag2 bag not found" in node.source_error

    def error_reported() -> bool:
        return any(
            s.level == DiagnosticStatus.ERROR and str(bag) in s.message
            for msg in diagnostics
            for s in msg.status
            if "link states" in s.name
        )

    assert h.spin_until(error_reported), [s.message for msg in diagnostics[-3:] for s in msg.status]
    assert len(samples) <= node.published


@pytest.mark.parametrize("value", ["nan", "0", "-5"])
def test_a_run_timeout_that_is_not_a_positive_number_is_refused(tmp_path, value):
    """``dynik-ros run --timeout nan`` (or 0) started the pipeline and stopped it at once as timed out (exit
    1, "the run hit its timeout"); now it is a bad argument (exit 2) before anything starts."""
    result = subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.run_command", "run", "replay", "--no-record"]
        + ["--timeout", value],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith("dynik-ros run: error: argument --timeout: must be ")
