"""Structural check of a URDF before pinocchio parses it: one line naming the file and what is wrong.

pinocchio (urdfdom) answers a truncated file, a joint whose parent link does not exist or a file without
links with "The XML stream does not contain a valid URDF model." and prints the reason to the C++ stderr,
without the file name. :func:`check_urdf` finds those faults first: XML syntax (line and column), the
``<robot>`` root, at least one link, unique link and joint names, each joint's ``parent``/``child`` naming a
link, each link the child of at most one joint, and one root link (a tree: no cycle).
"""

from __future__ import annotations

from xml.etree import ElementTree


class UrdfError(ValueError):
    """A URDF that cannot be a robot model (one line naming the source and the fault)."""


def _names(elements: list[ElementTree.Element], kind: str, source: str) -> list[str]:
    """The ``name`` attribute of each element; a missing or repeated name is a :class:`UrdfError`."""
    names: list[str] = []
    for element in elements:
        name = element.get("name")
        if not name:
            raise UrdfError(f"{source}: a <{kind}> without a name")
        if name in names:
            raise UrdfError(f"{source}: {kind} '{name}' is defined twice")
        names.append(name)
    return names


def _link_of(joint: ElementTree.Element, role: str, links: set[str], source: str) -> str:
    """The link a joint's ``<parent>`` or ``<child>`` names; missing or unknown is a :class:`UrdfError`."""
    element = joint.find(role)
    link = element.get("link") if element is not None else None
    if not link:
        raise UrdfError(f"{source}: joint '{joint.get('name')}' has no <{role} link=...>")
    if link not in links:
        raise UrdfError(f"{source}: joint '{joint.get('name')}' names {role} link '{link}', not defined")
    return link


def check_urdf(xml: str, source: str) -> None:
    """Raise :class:`UrdfError` naming ``source`` when ``xml`` is not a well-formed URDF tree."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        raise UrdfError(f"{source}: not valid XML: {exc}") from None
    if root.tag != "robot":
        raise UrdfError(f"{source}: not a URDF (the root element is <{root.tag}>, not <robot>)")
    links = set(_names(root.findall("link"), "link", source))
    if not links:
        raise UrdfError(f"{source}: no <link> in the URDF")
    joints = root.findall("joint")
    _names(joints, "joint", source)
    parent_joint: dict[str, str] = {}
    for joint in joints:
        _link_of(joint, "parent", links, source)
        child = _link_of(joint, "child", links, source)
        if child in parent_joint:
            raise UrdfError(
                f"{source}: link '{child}' is the child of two joints ('{parent_joint[child]}' and "
                f"'{joint.get('name')}')"
            )
        parent_joint[child] = str(joint.get("name"))
    roots = sorted(links - set(parent_joint))
    if len(roots) != 1:
        what = f"several root links {roots[:5]}" if roots else "no root link (the joints form a cycle)"
        raise UrdfError(f"{source}: the links are not one tree: {what}")
    children: dict[str, list[str]] = {}
    for joint in joints:
        children.setdefault(joint.find("parent").get("link"), []).append(joint.find("child").get("link"))
    reached, stack = set(roots), list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in reached:
                reached.add(child)
                stack.append(child)
    if reached != links:
        raise UrdfError(
            f"{source}: the links are not one tree: {sorted(links - reached)[:5]} form a cycle apart from "
            f"the root link '{roots[0]}'"
        )
