"""The retargeting map of one robot: YAML schema and loading with validation (its types and saving are in
:mod:`.config_types`).

One file per robot, ``config/<robot>.yaml``. Angles are in degrees in the file (keys end in ``_deg``) and
in radians in the dataclasses; lengths in metres; velocity limits in rad/s, as in URDF. Example (the
complete files are ``config/icub.yaml``, ``config/g1.yaml`` and ``config/talos.yaml``)::

    robot:
      name: g1
      urdf: example-robot-data:g1_description/urdf/g1_29dof_rev_1_0.urdf
    root: {link: Pelvis, frame: pelvis}          # human root link -> robot base frame
    calibration:                                 # the robot's T-pose, matching the human model's zero
      base_rpy_deg: [0, 0, 0]                    # base orientation when the robot faces world +x
      joints_deg: {left_shoulder_roll_joint: 90, right_shoulder_roll_joint: -90}
      beyond_limits: false                       # true: a T-pose outside the joint limits is a reference
                                                 # for the offsets only (Romeo's arms cannot reach it)
    targets:
      - {link: Pelvis, frame: pelvis, position: true}
      - {link: T8, frame: torso_link}
      - link: LeftFoot
        frame: left_ankle_roll_link
        position: true                           # also track the (scaled) position
        position_weight: 4.0
        anchor: {link: LeftUpperLeg, frame: left_hip_roll_link}   # limb root for the limb ratio
        offset: auto                             # or {rpy_deg: [r, p, y]} or {matrix: [[...], ...]}
    feet:
      left: {link: LeftFoot, toe: LeftToe, frame: left_ankle_roll_link,
             sole: [[-0.05, 0, -0.035], [0.12, 0, -0.035]]}     # heel and toe in that frame
    limits:
      position_deg: {left_knee_joint: [0, 150]}
      velocity: {left_knee_joint: 12.0}         # rad/s, per joint
      velocity_cap: 20.0                         # rad/s, every joint (before the per-joint values); 0 locks
    locked_joints: [waist_roll_joint]            # held at their neutral value (URDF velocity 0: locked too)
    actuated_joints: []                          # the motors, if not all: bridge_node commands only these;
                                                 # the others (passive loop joints) are solved, never sent
    constraints:                                 # A s <= b on the listed joints (eq. 11)
      - {name: hip + knee, joints: [left_hip_pitch_joint, left_knee_joint], A: [[-1, 1]], b_deg: [170]}

Top-level keys: ``robot``, ``root``, ``calibration``, ``targets`` (required); ``human``, ``initial``,
``alignment``, ``defaults``, ``feet``, ``contact``, ``limits``, ``constraints``, ``locked_joints``,
``actuated_joints``, ``balance`` (:mod:`.balance`), ``regularizers`` (:mod:`dynik_ros.core.regularizers`)
(optional). Every error names the file and the key (``config/g1.yaml: targets[3].offset: ...``).

Rotation offsets: ``R_robot_frame = R_human_link @ offset`` (the robot frame's orientation in the human
link's frame), so the orientation target of eq. (2) for the robot frame is the measured human link
rotation times the offset; ``auto`` computes it from the calibration T-pose (:mod:`.calibration`).
"""

from __future__ import annotations

import difflib
import math
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.io.yaml_file import YamlFileError, load_yaml
from dynik_ros.retarget.balance import balance_from_dict, regularizers_from_dict
from dynik_ros.retarget.config_types import (  # noqa: F401 - re-exported: the map's types live there
    ALIGNMENTS,
    ROTATION_TOLERANCE,
    XSENS_LINKS,
    Anchor,
    ConstraintSpec,
    ContactSpec,
    FootSpec,
    HumanSpec,
    RetargetConfig,
    RetargetConfigError,
    TargetSpec,
    Vector3,
    save_retarget_config,
)

STANCES = ("weighted", "hard")  # contact.stance
ANCHORS = ("human", "robot")  # contact.anchor
TOE_MODES = ("pitch", "flat")  # contact.toe
BLEND_SHAPES = ("smooth", "linear")  # contact.blend_shape


# ---------------------------------------------------------------------- loading
class _Reader:
    """Key checking with messages that name the file and the key path."""

    def __init__(self, where: str):
        self.where = where

    def error(self, key: str, message: str) -> RetargetConfigError:
        return RetargetConfigError(f"{self.where}: {key}: {message}" if key else f"{self.where}: {message}")

    def mapping(
        self, node: Any, key: str, required: Sequence[str] = (), optional: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        if not isinstance(node, Mapping):
            shown = reprlib.repr(node)  # a whole file read as one string must not fill the screen
            raise self.error(key, f"expected a mapping, got {type(node).__name__} {shown}")
        valid = list(required) + list(optional)
        for name in node:
            if name not in valid:
                close = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.6)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise self.error(
                    _join(key, str(name)), f"unknown key '{name}'{hint}; valid keys: {', '.join(valid)}"
                )
        for name in required:
            if name not in node:
                raise self.error(_join(key, name), f"missing key '{name}' (required)")
        return node

    def string(self, node: Any, key: str) -> str:
        if not isinstance(node, str) or not node.strip():
            raise self.error(key, f"expected a non-empty string, got {node!r}")
        return node

    def boolean(self, node: Any, key: str) -> bool:
        if not isinstance(node, bool):
            raise self.error(key, f"expected true or false, got {node!r}")
        return node

    def number(self, node: Any, key: str, minimum: float | None = None, positive: bool = False) -> float:
        if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
            raise self.error(key, f"expected a finite number, got {node!r}")
        if positive and node <= 0:
            raise self.error(key, f"must be > 0, got {node}")
        if minimum is not None and node < minimum:
            raise self.error(key, f"must be >= {minimum}, got {node}")
        return float(node)

    def vector(self, node: Any, key: str, size: int = 3, minimum: float | None = None) -> tuple[float, ...]:
        if isinstance(node, (int, float)) and not isinstance(node, bool) and size == 3:
            node = [node] * 3  # a scalar weight applies to the three axes
        if not isinstance(node, (list, tuple)) or len(node) != size:
            raise self.error(key, f"expected a list of {size} numbers, got {node!r}")
        return tuple(self.number(x, f"{key}[{i}]", minimum) for i, x in enumerate(node))

    def joint_angles(self, node: Any, key: str) -> dict[str, float]:
        if node is None:
            return {}
        if not isinstance(node, Mapping):
            raise self.error(key, f"expected a mapping joint -> degrees, got {node!r}")
        return {
            self.string(j, key): math.radians(self.number(v, _join(key, str(j)))) for j, v in node.items()
        }


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _rotation_offset(r: _Reader, node: Any, key: str) -> np.ndarray | None:
    if node is None or node == "auto":
        return None
    if isinstance(node, str):
        raise r.error(key, f"expected 'auto', {{rpy_deg: [r, p, y]}} or {{matrix: [[...]]}}, got '{node}'")
    node = r.mapping(node, key, optional=("rpy_deg", "matrix"))
    if len(node) != 1:
        raise r.error(key, "give exactly one of rpy_deg or matrix")
    if "rpy_deg" in node:
        roll, pitch, yaw = (math.radians(a) for a in r.vector(node["rpy_deg"], f"{key}.rpy_deg"))
        return rpy_matrix(roll, pitch, yaw)
    m = node["matrix"]
    if (
        not isinstance(m, (list, tuple))
        or len(m) != 3
        or any(not isinstance(row, (list, tuple)) or len(row) != 3 for row in m)
    ):
        raise r.error(f"{key}.matrix", f"expected a 3x3 list of lists, got {m!r}")
    matrix = np.array([[r.number(x, f"{key}.matrix") for x in row] for row in m])
    check_rotation(matrix, r.error, f"{key}.matrix")
    return matrix


def check_rotation(matrix: np.ndarray, error: Any, key: str, tolerance: float = ROTATION_TOLERANCE) -> None:
    """Raise ``error(key, message)`` unless ``matrix`` is a rotation (orthonormal, det +1)."""
    gram = np.abs(matrix.T @ matrix - np.eye(3)).max()
    det = float(np.linalg.det(matrix))
    if gram > tolerance or det <= 0:
        raise error(
            key,
            f"offset is not a rotation matrix (|R^T R - I| = {gram:.2e}, det = {det:.3f}; "
            f"tolerance {tolerance:g}, det must be +1)",
        )


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF's fixed-axis roll-pitch-yaw)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
                              math.sin(yaw))  # fmt: skip
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    return rz @ ry @ rx


_TARGET_KEYS = (
    "orientation",
    "position",
    "offset",
    "orientation_gain",
    "position_gain",
    "orientation_weight",
    "position_weight",
    "anchor",
    "scale",
)


def _target(r: _Reader, node: Any, key: str, defaults: Mapping[str, Any], links: Sequence[str]) -> TargetSpec:
    node = r.mapping(node, key, required=("link", "frame"), optional=_TARGET_KEYS)
    link = _human_link(r, node["link"], f"{key}.link", links)
    frame = r.string(node["frame"], f"{key}.frame")
    orientation = r.boolean(node.get("orientation", True), f"{key}.orientation")
    position = r.boolean(node.get("position", False), f"{key}.position")
    if not (orientation or position):
        raise r.error(key, "tracks neither orientation nor position: set orientation or position to true")
    values = {**defaults, **{k: node[k] for k in node if k in defaults}}
    anchor = None
    if node.get("anchor") is not None:
        a = r.mapping(node["anchor"], f"{key}.anchor", required=("link", "frame"))
        anchor = Anchor(
            _human_link(r, a["link"], f"{key}.anchor.link", links),
            r.string(a["frame"], f"{key}.anchor.frame"),
        )
        if not position:
            raise r.error(f"{key}.anchor", "an anchor scales a position target: set position: true")
    scale = node.get("scale", "auto")
    return TargetSpec(
        link=link,
        frame=frame,
        orientation=orientation,
        position=position,
        offset=_rotation_offset(r, node.get("offset", "auto"), f"{key}.offset"),
        orientation_gain=r.number(values["orientation_gain"], f"{key}.orientation_gain", minimum=0.0),
        position_gain=r.number(values["position_gain"], f"{key}.position_gain", minimum=0.0),
        orientation_weight=r.vector(values["orientation_weight"], f"{key}.orientation_weight", minimum=0.0),
        position_weight=r.vector(values["position_weight"], f"{key}.position_weight", minimum=0.0),
        anchor=anchor,
        scale=None if scale == "auto" else r.number(scale, f"{key}.scale", positive=True),
    )


def _sole_points(r: _Reader, node: Any, key: str) -> tuple[Vector3, ...]:
    """One point ``[x, y, z]`` or a list of points."""
    if isinstance(node, list) and node and all(isinstance(x, list) for x in node):
        return tuple(r.vector(x, f"{key}[{i}]") for i, x in enumerate(node))
    return (r.vector(node, key),)


def _human_link(r: _Reader, node: Any, key: str, links: Sequence[str]) -> str:
    name = r.string(node, key)
    if name not in links:
        close = difflib.get_close_matches(name, list(links), n=5, cutoff=0.4)
        hint = f"; closest valid names: {', '.join(close)}" if close else ""
        raise r.error(key, f"unknown human link '{name}'{hint}")
    return name


def config_from_dict(data: Any, source: str | Path | None = None) -> RetargetConfig:
    """Validate a parsed YAML document and build the :class:`RetargetConfig` (radians)."""
    where = str(source) if source is not None else "<retarget config>"
    r = _Reader(where)
    top = r.mapping(
        data,
        "",
        required=("robot", "root", "calibration", "targets"),
        optional=(
            "human",
            "initial",
            "alignment",
            "defaults",
            "feet",
            "contact",
            "limits",
            "constraints",
            "locked_joints",
            "actuated_joints",
            "balance",
            "regularizers",
            "hinges",
        ),
    )
    robot = r.mapping(
        top["robot"], "robot", required=("name", "urdf"), optional=("floating_base", "description")
    )
    human_node = r.mapping(
        top.get("human") or {}, "human", optional=("links", "ground_height", "height", "mass")
    )
    links = XSENS_LINKS
    if "links" in human_node:
        if not isinstance(human_node["links"], list) or not human_node["links"]:
            raise r.error("human.links", "expected a non-empty list of link names")
        links = tuple(r.string(x, "human.links") for x in human_node["links"])
    human = HumanSpec(
        links=links,
        ground_height=r.number(human_node.get("ground_height", 0.0), "human.ground_height"),
        height=r.number(human_node.get("height", 1.75), "human.height", positive=True),
        mass=r.number(human_node.get("mass", 75.0), "human.mass", positive=True),
    )
    root_node = r.mapping(top["root"], "root", required=("link", "frame"))
    root = Anchor(
        _human_link(r, root_node["link"], "root.link", links), r.string(root_node["frame"], "root.frame")
    )

    cal = r.mapping(
        top["calibration"], "calibration", optional=("base_rpy_deg", "joints_deg", "file", "beyond_limits")
    )
    base_rpy = tuple(
        math.radians(a) for a in r.vector(cal.get("base_rpy_deg", [0, 0, 0]), "calibration.base_rpy_deg")
    )
    calibration_file = None
    if cal.get("file") is not None:
        calibration_file = Path(r.string(cal["file"], "calibration.file"))
        if not calibration_file.is_absolute() and source is not None:
            calibration_file = Path(source).parent / calibration_file
    initial = None
    if top.get("initial") is not None:
        init = r.mapping(top["initial"], "initial", required=("joints_deg",))
        initial = r.joint_angles(init["joints_deg"], "initial.joints_deg")

    alignment = top.get("alignment", "first_frame")
    if alignment not in ALIGNMENTS:
        raise r.error("alignment", f"expected one of {', '.join(ALIGNMENTS)}, got {alignment!r}")

    defaults = {
        "orientation_gain": 10.0,
        "position_gain": 10.0,
        "orientation_weight": 1.0,
        "position_weight": 1.0,
    }
    given = r.mapping(top.get("defaults") or {}, "defaults", optional=tuple(defaults))
    defaults.update(given)

    if not isinstance(top["targets"], list) or not top["targets"]:
        raise r.error("targets", "expected a non-empty list of {link, frame, ...} entries")
    targets = tuple(_target(r, t, f"targets[{i}]", defaults, links) for i, t in enumerate(top["targets"]))
    seen_frames: dict[str, int] = {}
    seen_links: dict[str, int] = {}
    for i, t in enumerate(targets):
        if t.frame in seen_frames:
            raise r.error(
                f"targets[{i}]",
                f"duplicate target: robot frame '{t.frame}' is already mapped by "
                f"targets[{seen_frames[t.frame]}]",
            )
        if t.link in seen_links:
            raise r.error(
                f"targets[{i}]",
                f"duplicate target: human link '{t.link}' is already mapped by targets[{seen_links[t.link]}]",
            )
        seen_frames[t.frame], seen_links[t.link] = i, i
    if root.link not in seen_links:
        raise r.error("root.link", f"the root link '{root.link}' must also be a target")
    root_target = targets[seen_links[root.link]]
    if root_target.frame != root.frame:
        raise r.error(
            "root.frame",
            f"root link '{root.link}' maps to '{root_target.frame}' in targets, not to '{root.frame}'",
        )

    feet = []
    feet_node = r.mapping(top.get("feet") or {}, "feet", optional=("left", "right"))
    for side, node in feet_node.items():
        key = f"feet.{side}"
        node = r.mapping(node, key, required=("link", "frame"), optional=("toe", "sole"))
        foot = FootSpec(
            side=side,
            link=_human_link(r, node["link"], f"{key}.link", links),
            frame=r.string(node["frame"], f"{key}.frame"),
            toe=_human_link(r, node["toe"], f"{key}.toe", links) if node.get("toe") else None,
            sole=_sole_points(r, node.get("sole", [0, 0, 0]), f"{key}.sole"),
        )
        if foot.frame not in seen_frames or not targets[seen_frames[foot.frame]].position:
            raise r.error(f"{key}.frame", f"'{foot.frame}' must be a target with position: true")
        if targets[seen_frames[foot.frame]].link != foot.link:
            raise r.error(
                f"{key}.link", f"target '{foot.frame}' follows '{targets[seen_frames[foot.frame]].link}'"
            )
        feet.append(foot)

    c = r.mapping(
        top.get("contact") or {},
        "contact",
        optional=(
            "enabled",
            "height_on",
            "height_off",
            "speed_on",
            "speed_off",
            "release_time",
            "hold",
            "flatten",
            "blend_time",
            "drift_off",
            "pivot_off",
            "heel_off",
            "heel_off_noise",
            "toe",
            "toe_angle",
            "stance",
            "anchor",
            "reach",
            "pelvis_reach",
            "floor_rows",
            "swing_weight",
            "held_gain",
            "held_tilt_gain",
            "blend_shape",
        ),
    )
    contact = ContactSpec(
        enabled=r.boolean(c.get("enabled", True), "contact.enabled"),
        height_on=r.number(c.get("height_on", 0.03), "contact.height_on"),
        height_off=r.number(c.get("height_off", 0.06), "contact.height_off"),
        speed_on=r.number(c.get("speed_on", 0.4), "contact.speed_on", positive=True),
        speed_off=r.number(c.get("speed_off", 0.8), "contact.speed_off", positive=True),
        release_time=r.number(c.get("release_time", 0.15), "contact.release_time", minimum=0.0),
        hold=r.boolean(c.get("hold", True), "contact.hold"),
        flatten=r.boolean(c.get("flatten", True), "contact.flatten"),
        blend_time=r.number(c.get("blend_time", 0.1), "contact.blend_time", minimum=0.0),
        drift_off=r.number(c.get("drift_off", 0.08), "contact.drift_off", minimum=0.0),
        pivot_off=r.number(c.get("pivot_off", 20.0), "contact.pivot_off", minimum=0.0),
        heel_off=r.number(c.get("heel_off", ContactSpec.heel_off), "contact.heel_off", minimum=0.0),
        heel_off_noise=r.number(
            c.get("heel_off_noise", ContactSpec.heel_off_noise), "contact.heel_off_noise", minimum=0.0
        ),
        toe=str(c.get("toe", "flat")),
        toe_angle=r.number(c.get("toe_angle", 30.0), "contact.toe_angle", positive=True),
        stance=str(c.get("stance", ContactSpec.stance)),
        anchor=str(c.get("anchor", ContactSpec.anchor)),
        reach=r.boolean(c.get("reach", ContactSpec.reach), "contact.reach"),
        pelvis_reach=r.boolean(c.get("pelvis_reach", ContactSpec.pelvis_reach), "contact.pelvis_reach"),
        floor_rows=r.boolean(c.get("floor_rows", ContactSpec.floor_rows), "contact.floor_rows"),
        swing_weight=r.number(
            c.get("swing_weight", ContactSpec.swing_weight), "contact.swing_weight", positive=True
        ),
        held_gain=r.number(c.get("held_gain", ContactSpec.held_gain), "contact.held_gain", minimum=0.0),
        held_tilt_gain=r.number(
            c.get("held_tilt_gain", ContactSpec.held_tilt_gain), "contact.held_tilt_gain", minimum=0.0
        ),
        blend_shape=str(c.get("blend_shape", ContactSpec.blend_shape)),
    )
    if contact.toe not in TOE_MODES:
        raise r.error("contact.toe", f"expected one of {TOE_MODES}, got '{contact.toe}'")
    if contact.stance not in STANCES:
        raise r.error("contact.stance", f"expected one of {STANCES}, got '{contact.stance}'")
    if contact.anchor not in ANCHORS:
        raise r.error("contact.anchor", f"expected one of {ANCHORS}, got '{contact.anchor}'")
    if contact.blend_shape not in BLEND_SHAPES:
        raise r.error("contact.blend_shape", f"expected one of {BLEND_SHAPES}, got '{contact.blend_shape}'")
    if contact.height_off < contact.height_on or contact.speed_off < contact.speed_on:
        raise r.error("contact", "hysteresis needs height_off >= height_on and speed_off >= speed_on")

    lim = r.mapping(top.get("limits") or {}, "limits", optional=("position_deg", "velocity", "velocity_cap"))
    position_limits: dict[str, tuple[float, float]] = {}
    for joint, pair in (lim.get("position_deg") or {}).items():
        lo, hi = r.vector(pair, f"limits.position_deg.{joint}", size=2)
        if not lo < hi:
            raise r.error(f"limits.position_deg.{joint}", f"lower {lo} must be below upper {hi}")
        position_limits[str(joint)] = (math.radians(lo), math.radians(hi))
    velocity_limits = {
        str(j): r.number(v, f"limits.velocity.{j}", minimum=0.0)  # 0 locks the joint
        for j, v in (lim.get("velocity") or {}).items()
    }
    locked = top.get("locked_joints") or []
    if not isinstance(locked, list) or not all(isinstance(j, str) for j in locked):
        raise r.error("locked_joints", "expected a list of joint names")
    actuated = top.get("actuated_joints") or []
    if not isinstance(actuated, list) or not all(isinstance(j, str) for j in actuated):
        raise r.error("actuated_joints", "expected a list of joint names")
    if len(set(actuated)) != len(actuated):
        raise r.error("actuated_joints", "repeated joint names")

    constraints = []
    for i, node in enumerate(top.get("constraints") or []):
        key = f"constraints[{i}]"
        node = r.mapping(node, key, required=("joints", "A", "b_deg"), optional=("name",))
        joints = node["joints"]
        if not isinstance(joints, list) or not joints:
            raise r.error(f"{key}.joints", "expected a non-empty list of joint names")
        a_rows = node["A"]
        if (
            not isinstance(a_rows, list)
            or not a_rows
            or any(not isinstance(row, list) or len(row) != len(joints) for row in a_rows)
        ):
            raise r.error(f"{key}.A", f"expected a list of rows with {len(joints)} numbers each")
        a = np.array([[r.number(x, f"{key}.A") for x in row] for row in a_rows])
        b = np.radians(r.vector(node["b_deg"], f"{key}.b_deg", size=len(a_rows)))
        constraints.append(
            ConstraintSpec(
                str(node.get("name", f"constraint {i}")), tuple(map(str, joints)), a, np.asarray(b)
            )
        )

    hinges = []
    for i, pair in enumerate(top.get("hinges") or []):
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(f, str) for f in pair):
            raise r.error(f"hinges[{i}]", "expected [parent frame, child frame]")
        for f in pair:
            if f not in seen_frames or not targets[seen_frames[f]].orientation:
                raise r.error(f"hinges[{i}]", f"'{f}' must be an orientation target")
        hinges.append((pair[0], pair[1]))

    return RetargetConfig(
        name=r.string(robot["name"], "robot.name"),
        urdf=r.string(robot["urdf"], "robot.urdf"),
        floating_base=r.boolean(robot.get("floating_base", True), "robot.floating_base"),
        description=str(robot.get("description", "")),
        human=human,
        root=root,
        targets=targets,
        calibration_base_rpy=base_rpy,
        calibration_joints=r.joint_angles(cal.get("joints_deg"), "calibration.joints_deg"),
        calibration_file=calibration_file,
        calibration_beyond_limits=r.boolean(cal.get("beyond_limits", False), "calibration.beyond_limits"),
        initial_joints=initial,
        alignment=alignment,
        feet=tuple(feet),
        contact=contact,
        position_limits=position_limits,
        velocity_limits=velocity_limits,
        locked_joints=tuple(locked),
        actuated_joints=tuple(actuated),
        velocity_cap=(
            None
            if lim.get("velocity_cap") is None
            else r.number(lim["velocity_cap"], "limits.velocity_cap", positive=True)
        ),
        constraints=tuple(constraints),
        hinges=tuple(hinges),
        source=Path(source) if source is not None else None,
        balance=balance_from_dict(r, top.get("balance")),
        regularizers=regularizers_from_dict(r, top.get("regularizers")),
    )


def load_retarget_config(path: str | Path) -> RetargetConfig:
    """Read and validate ``path``; :class:`RetargetConfigError` names the file and the key on any error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"retargeting map not found: {path}")
    try:
        data = load_yaml(path)
    except YamlFileError as exc:
        raise RetargetConfigError(str(exc)) from None
    return config_from_dict(data, path)
