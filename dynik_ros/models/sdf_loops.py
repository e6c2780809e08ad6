"""A robot with kinematic loops from an SDF file (issue 12 item 3; the second seed's closed chains).

pinocchio here is built without SDFormat and MuJoCo reads no SDF, so this module reads the subset of SDF
1.4-1.6 that models such as example-robot-data's Cassie use: one ``<model>`` of ``<link>`` elements with
``<pose>`` (in the model frame), ``<inertial>`` (``<pose>`` in the link frame, ``<mass>``, ``<inertia>``)
and ``<joint>`` elements of type ``revolute``, ``fixed`` or ``ball`` with ``<parent>``, ``<child>``,
``<pose>`` (in the child link frame), ``<axis><xyz>`` (in the joint frame, or in the model frame with
``<use_parent_model_frame>``) and ``<limit>``. Anything else (nested models, ``relative_to`` frames,
prismatic or universal joints) is refused with a message naming the file and the element.

The links and joints form a graph; a breadth-first spanning tree from the root link (the link that is no
joint's child) becomes a URDF built in memory (each tree joint's frame is the URDF joint frame, the child
link's inertial re-expressed there) and loaded by :meth:`RobotModel.from_urdf_string`. Every joint left out
of the tree closes a loop: its frame, placed once on each side (the pose of the SDF's configuration, where
the mechanism is assembled), becomes two frames ``<joint>@<link>`` that must coincide: a
:class:`~dynik_ros.core.loop_closure.LoopClosure` on all three axes (a ball joint is exactly that point
constraint; a revolute joint that closes a loop is approximated by its point too).

Third-party files are read from their installed package; nothing is copied.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from dynik_ros.core.loop_closure import LoopClosure
from dynik_ros.core.robot_model import RobotModel

TREE_TYPES = ("revolute", "fixed")
LOOP_TYPES = ("revolute", "fixed", "ball")
UNLIMITED = math.pi  # joints without a <limit>: +-pi in the URDF
UNLIMITED_VELOCITY = 20.0  # rad/s for joints without a velocity limit


class SdfError(ValueError):
    """An SDF file this reader cannot use; the message names the file and the element."""


@dataclass(frozen=True)
class SdfLink:
    name: str
    pose: pin.SE3  # in the model frame
    mass: float
    inertial_pose: pin.SE3  # in the link frame
    inertia: np.ndarray  # (3, 3) about the centre of mass, in the inertial frame


@dataclass(frozen=True)
class SdfJoint:
    name: str
    kind: str
    parent: str
    child: str
    pose: pin.SE3  # the joint frame in the child link frame
    axis: np.ndarray  # unit, in the joint frame
    limits: tuple[float, float] | None
    velocity: float | None


@dataclass(frozen=True)
class LoopRobot:
    """The spanning tree as a :class:`RobotModel`, the loop closures, and what was read."""

    robot: RobotModel
    loops: tuple[LoopClosure, ...]
    tree_joints: tuple[str, ...]
    loop_joints: tuple[str, ...]
    links: dict[str, SdfLink]
    root: str
    urdf: str


def _floats(text: str | None, count: int, where: str) -> np.ndarray:
    values = (text or "").split()
    try:
        out = np.array([float(v) for v in values], dtype=float)
    except ValueError:
        raise SdfError(f"{where}: expected {count} numbers, got '{text}'") from None
    if out.shape != (count,) or not np.all(np.isfinite(out)):
        raise SdfError(f"{where}: expected {count} finite numbers, got '{text}'")
    return out


def _pose(element: ET.Element | None, where: str) -> pin.SE3:
    """``<pose>x y z roll pitch yaw</pose>`` (rotation ``Rz(yaw) Ry(pitch) Rx(roll)``); identity if absent."""
    if element is None or not (element.text or "").strip():
        return pin.SE3.Identity()
    if element.get("relative_to"):
        raise SdfError(f"{where}: <pose relative_to=...> is not supported (SDF >= 1.7 frames)")
    if element.get("frame"):  # SDF 1.5's frame attribute: only the default ('' = the usual frame) is read
        raise SdfError(f"{where}: <pose frame='{element.get('frame')}'> is not supported")
    x = _floats(element.text, 6, where)
    return pin.SE3(pin.rpy.rpyToMatrix(*x[3:]), x[:3])


def read_sdf(path: str | Path) -> tuple[str, dict[str, SdfLink], list[SdfJoint]]:
    """Model name, links and joints of an SDF file (module docstring for the subset read)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SDF file not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise SdfError(f"{path}: not XML ({exc})") from None
    models = root.findall("model") if root.tag == "sdf" else []
    if len(models) != 1:
        raise SdfError(f"{path}: expected one <model> under <sdf>, found {len(models)}")
    model = models[0]
    if model.find("model") is not None or model.find("include") is not None:
        raise SdfError(f"{path}: nested <model> / <include> are not supported")
    links: dict[str, SdfLink] = {}
    for element in model.findall("link"):
        name = element.get("name") or ""
        where = f"{path}: link '{name}'"
        inertial = element.find("inertial")
        mass, inertia, inertial_pose = 0.0, np.zeros((3, 3)), pin.SE3.Identity()
        if inertial is not None:
            mass = float(_floats(inertial.findtext("mass", "0"), 1, f"{where} <mass>")[0])
            inertial_pose = _pose(inertial.find("pose"), f"{where} <inertial><pose>")
            element_inertia = inertial.find("inertia")
            if element_inertia is not None:
                ixx, iyy, izz, ixy, ixz, iyz = (
                    float(_floats(element_inertia.findtext(k, "0"), 1, f"{where} <{k}>")[0])
                    for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
                )
                inertia = np.array(((ixx, ixy, ixz), (ixy, iyy, iyz), (ixz, iyz, izz)))
        if name in links or not name:
            raise SdfError(f"{where}: empty or repeated link name")
        links[name] = SdfLink(
            name, _pose(element.find("pose"), f"{where} <pose>"), mass, inertial_pose, inertia
        )
    joints = []
    for element in model.findall("joint"):
        name, kind = element.get("name") or "", element.get("type") or ""
        where = f"{path}: joint '{name}'"
        if kind not in LOOP_TYPES:
            raise SdfError(f"{where}: type '{kind}' is not supported (revolute, fixed, ball)")
        parent, child = element.findtext("parent", "").strip(), element.findtext("child", "").strip()
        for end, link in (("parent", parent), ("child", child)):
            if link not in links:
                raise SdfError(f"{where}: <{end}> '{link}' is not a link of the model")
        pose = _pose(element.find("pose"), f"{where} <pose>")
        axis_element = element.find("axis")
        axis = np.array((0.0, 0.0, 1.0))
        limits = velocity = None
        if axis_element is not None:
            axis = _floats(axis_element.findtext("xyz", "0 0 1"), 3, f"{where} <axis><xyz>")
            if np.linalg.norm(axis) < 1e-9:
                raise SdfError(f"{where}: <axis><xyz> is zero")
            axis = axis / np.linalg.norm(axis)
            if axis_element.findtext("use_parent_model_frame", "0").strip() in ("1", "true"):
                joint_world = links[child].pose * pose
                axis = joint_world.rotation.T @ axis  # model frame -> joint frame
            limit = axis_element.find("limit")
            if limit is not None:
                lower, upper = limit.findtext("lower"), limit.findtext("upper")
                if lower is not None and upper is not None:
                    lo = float(_floats(lower, 1, f"{where} <lower>")[0])
                    hi = float(_floats(upper, 1, f"{where} <upper>")[0])
                    if not lo < hi:
                        raise SdfError(f"{where}: <limit> lower {lo} must be below upper {hi}")
                    limits = (lo, hi)
                if limit.findtext("velocity") is not None:
                    velocity = float(_floats(limit.findtext("velocity"), 1, f"{where} <velocity>")[0])
        joints.append(SdfJoint(name, kind, parent, child, pose, axis, limits, velocity))
    return model.get("name") or path.stem, links, joints


def _origin(placement: pin.SE3) -> str:
    xyz = " ".join(f"{v:.12g}" for v in placement.translation)
    rpy = " ".join(f"{v:.12g}" for v in pin.rpy.matrixToRpy(placement.rotation))
    return f'<origin xyz="{xyz}" rpy="{rpy}"/>'


def _inertial(link: SdfLink, frame_in_link: pin.SE3) -> str:
    """The link's inertial re-expressed in a URDF link frame placed at ``frame_in_link``."""
    if link.mass <= 0:
        return ""
    i = link.inertia
    placement = frame_in_link.inverse() * link.inertial_pose
    return (
        f'<inertial>{_origin(placement)}<mass value="{link.mass:.12g}"/>'
        f'<inertia ixx="{i[0, 0]:.12g}" ixy="{i[0, 1]:.12g}" ixz="{i[0, 2]:.12g}" iyy="{i[1, 1]:.12g}" '
        f'iyz="{i[1, 2]:.12g}" izz="{i[2, 2]:.12g}"/></inertial>'
    )


def load_sdf_with_loops(path: str | Path, floating_base: bool = True, loop_gain: float = 50.0) -> LoopRobot:
    """The spanning tree of the SDF model as a :class:`RobotModel` plus one :class:`LoopClosure` per joint
    that closes a loop (module docstring)."""
    name, links, joints = read_sdf(path)
    children = {j.child for j in joints}
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise SdfError(f"{path}: expected one root link (no joint's child), found {roots}")
    root = roots[0]
    # breadth-first spanning tree over the joints (either direction is a graph edge; a tree joint must go
    # parent -> child as written, so a joint reached from its child side is left to close a loop)
    seen = {root}
    frame_of: dict[str, pin.SE3] = {root: pin.SE3.Identity()}  # URDF link frame in the SDF link frame
    tree: list[SdfJoint] = []
    queue = deque([root])
    by_parent: dict[str, list[SdfJoint]] = {}
    for j in joints:
        by_parent.setdefault(j.parent, []).append(j)
    while queue:
        link = queue.popleft()
        for j in by_parent.get(link, []):
            if j.child in seen or j.kind not in TREE_TYPES:
                continue
            seen.add(j.child)
            frame_of[j.child] = j.pose  # the URDF child frame is the SDF joint frame
            tree.append(j)
            queue.append(j.child)
    unreached = sorted(set(links) - seen)
    if unreached:
        raise SdfError(f"{path}: links {unreached} are not reached from '{root}' by revolute/fixed joints")
    loop_joints = [j for j in joints if j not in tree]
    parts = [f'<robot name="{name}">']
    for link in links.values():
        parts.append(f'<link name="{link.name}">{_inertial(link, frame_of[link.name])}</link>')
    for j in tree:
        parent_world = links[j.parent].pose * frame_of[j.parent]
        joint_world = links[j.child].pose * j.pose
        placement = parent_world.inverse() * joint_world
        if j.kind == "fixed":
            parts.append(
                f'<joint name="{j.name}" type="fixed">{_origin(placement)}<parent link="{j.parent}"/>'
                f'<child link="{j.child}"/></joint>'
            )
            continue
        lo, hi = j.limits or (-UNLIMITED, UNLIMITED)
        velocity = j.velocity if j.velocity and j.velocity > 0 else UNLIMITED_VELOCITY
        axis = " ".join(f"{v:.12g}" for v in j.axis)
        parts.append(
            f'<joint name="{j.name}" type="revolute">{_origin(placement)}<parent link="{j.parent}"/>'
            f'<child link="{j.child}"/><axis xyz="{axis}"/>'
            f'<limit lower="{lo:.12g}" upper="{hi:.12g}" effort="1000" velocity="{velocity:.12g}"/></joint>'
        )
    loops = []
    for j in loop_joints:
        anchor_world = links[j.child].pose * j.pose
        names = []
        for link in (j.parent, j.child):
            frame_world = links[link].pose * frame_of[link]
            anchor = frame_world.inverse() * anchor_world
            frame = f"{j.name}@{link}"
            parts.append(
                f'<link name="{frame}"/><joint name="{frame}_fixed" type="fixed">{_origin(anchor)}'
                f'<parent link="{link}"/><child link="{frame}"/></joint>'
            )
            names.append(frame)
        loops.append(LoopClosure(names[0], names[1], (0, 1, 2), loop_gain))
    parts.append("</robot>")
    urdf = "".join(parts)
    robot = RobotModel.from_urdf_string(urdf, floating_base=floating_base)
    return LoopRobot(
        robot,
        tuple(loops),
        tuple(j.name for j in tree),
        tuple(j.name for j in loop_joints),
        links,
        root,
        urdf,
    )


def sdf_configuration(loop_robot: LoopRobot) -> np.ndarray:
    """``q`` of the SDF file's own configuration: every tree joint at 0, the root link at its SDF pose."""
    robot = loop_robot.robot
    if not robot.floating_base:
        return np.zeros(robot.nq)
    pose = loop_robot.links[loop_robot.root].pose
    return robot.join(pose.translation, pose.rotation, np.zeros(robot.n_joints))
