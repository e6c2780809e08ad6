"""An invalid URDF is named with what is wrong: a truncated file, a joint whose parent link does not exist, a
file without links. pinocchio said only "The XML stream does not contain a valid URDF model." (the reason
went to the C++ stderr, without the file name); now ``dynik-retarget`` exits 2 with one line naming the map,
the URDF and the fault, ``ik_node robot:=<map>`` and ``bridge_node urdf:=`` refuse to configure with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_harness import bridge, ik, ok
from take_tools import retarget_cli

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.urdf_check import UrdfError, check_urdf
from dynik_ros.models.assets import share_path
from dynik_ros.retarget.registry import load_robot

LINK = '<link name="{}"/>'
JOINT = '<joint name="{}" type="revolute"><parent link="{}"/><child link="{}"/></joint>'


def _robot(*parts: str) -> str:
    return '<robot name="r">' + "".join(parts) + "</robot>"


BROKEN = {
    # name: (URDF text, what the message must say)
    "truncated": (_robot(LINK.format("a"), LINK.format("b"))[:30], "not valid XML: unclosed token: line 1"),
    "unknown_parent": (
        _robot(LINK.format("a"), LINK.format("b"), JOINT.format("j", "base", "b")),
        "joint 'j' names parent link 'base', not defined",
    ),
    "no_links": (_robot(), "no <link>"),
    "not_robot": ("<sdf><model/></sdf>", "the root element is <sdf>"),
    "link_twice": (_robot(LINK.format("a"), LINK.format("a")), "link 'a' is defined twice"),
    "two_roots": (_robot(LINK.format("a"), LINK.format("b")), "several root links ['a', 'b']"),
    "two_parents": (
        _robot(*(LINK.format(n) for n in "abc"), JOINT.format("j1", "a", "c"), JOINT.format("j2", "b", "c")),
        "link 'c' is the child of two joints ('j1' and 'j2')",
    ),
    "cycle": (
        _robot(*(LINK.format(n) for n in "abc"), JOINT.format("j1", "b", "c"), JOINT.format("j2", "c", "b")),
        "['b', 'c'] form a cycle apart from the root link 'a'",
    ),
}


def _g1_urdf() -> str:
    return load_robot("g1").urdf_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_fault_is_named_with_the_file(tmp_path, case):
    text, expected = BROKEN[case]
    path = tmp_path / f"{case}.urdf"
    path.write_text(text)
    with pytest.raises(UrdfError) as info:
        RobotModel.from_urdf_file(path)
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value), str(info.value)


def test_the_shipped_urdfs_pass_the_check():
    check_urdf(_g1_urdf(), "g1")
    check_urdf(share_path("urdf", "human66.urdf").read_text(), "human66")


def _broken_map(tmp_path: Path) -> dict[str, tuple[Path, Path, str]]:
    """Copies of the G1 map whose robot.urdf names a truncated URDF, one with an unknown parent link, one
    with no links: ``{case: (map, urdf, expected text)}``."""
    g1 = _g1_urdf()
    urdfs = {
        "truncated": (g1[:3000], "not valid XML"),
        "unknown_parent": (
            g1.replace('<parent link="pelvis"/>', '<parent link="pelvis_typo"/>', 1),
            "names parent link 'pelvis_typo', not defined",
        ),
        "no_links": ('<robot name="g1"></robot>', "no <link>"),
    }
    source = share_path("config", "g1.yaml").read_text()
    out = {}
    for case, (text, expected) in urdfs.items():
        urdf = tmp_path / f"{case}.urdf"
        urdf.write_text(text)
        lines = [f"  urdf: {urdf}" if line.startswith("  urdf:") else line for line in source.splitlines()]
        path = tmp_path / f"{case}.yaml"
        path.write_text("\n".join(lines) + "\n")
        out[case] = (path, urdf, expected)
    return out


def test_dynik_retarget_exits_2_with_one_line_naming_map_urdf_and_fault(tmp_path):
    for case, (path, urdf, expected) in _broken_map(tmp_path).items():
        code, lines, stderr = retarget_cli(["--robot", str(path), "--motion", "tpose"], tmp_path / "out")
        assert code == 2 and len(lines) == 1, (case, stderr[-2000:])
        assert f"{path}: robot.urdf: {urdf}: " in lines[0] and expected in lines[0], (case, lines[0])


def test_a_urdf_given_as_the_robot_map_is_named_in_one_short_line(tmp_path):
    urdf = tmp_path / "my.urdf"
    urdf.write_text(_g1_urdf())
    code, lines, stderr = retarget_cli(["--robot", str(urdf), "--motion", "tpose"], tmp_path / "out")
    assert code == 2 and len(lines) == 1 and len(lines[0]) < 300, stderr[-500:]
    assert f"{urdf}: a URDF, not a retargeting map" in lines[0], lines[0]


def test_ik_node_refuses_to_configure_naming_the_urdf_and_the_fault(h, tmp_path):
    for case, (path, urdf, expected) in _broken_map(tmp_path).items():
        node = h.add(ik(robot=str(path)))
        assert not ok(node.trigger_configure())
        assert node.lifecycle_state == "unconfigured"
        assert "parameter 'robot'" in node.last_error and str(urdf) in node.last_error, node.last_error
        assert expected in node.last_error, (case, node.last_error)


def test_bridge_node_refuses_to_configure_naming_the_urdf_parameter(h, tmp_path):
    path = tmp_path / "cut.urdf"
    path.write_text(_g1_urdf()[:3000])
    node = h.add(bridge(urdf=str(path)))
    assert not ok(node.trigger_configure())
    assert "parameter 'urdf'" in node.last_error and f"{path}: not valid XML" in node.last_error
