"""The retargeting map's types (one robot: targets, feet, contact, limits, constraints) and its YAML form
for saving; the schema and the loading with validation are in :mod:`.config`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.robot_model import RobotModel, UnknownFrameError
from dynik_ros.models.human import XSENS_SEGMENTS
from dynik_ros.retarget.balance import BalanceSpec, sections_to_dict

XSENS_LINKS: tuple[str, ...] = tuple(XSENS_SEGMENTS)
"""Default human link names: the 23 Xsens segments of the human models."""

ALIGNMENTS = ("first_frame", "none")
ROTATION_TOLERANCE = 1e-6


class RetargetConfigError(ValueError):
    """An invalid retargeting map; the message names the file and the offending key."""


Vector3 = tuple[float, float, float]


@dataclass(frozen=True)
class Anchor:
    """Root of a limb (human link and the matching robot frame) for the limb's scale ratio."""

    link: str
    frame: str


@dataclass(frozen=True)
class TargetSpec:
    """One human link -> robot frame pair. ``offset`` is ``None`` for ``auto`` (from calibration);
    ``scale`` is ``None`` for a ratio derived from the models."""

    link: str
    frame: str
    orientation: bool = True
    position: bool = False
    offset: np.ndarray | None = None
    orientation_gain: float = 10.0
    position_gain: float = 10.0
    orientation_weight: Vector3 = (1.0, 1.0, 1.0)
    position_weight: Vector3 = (1.0, 1.0, 1.0)
    anchor: Anchor | None = None
    scale: float | None = None


@dataclass(frozen=True)
class FootSpec:
    """A foot kept on the ground: human foot link (and toe link for contact detection), the robot frame
    whose position is tracked, and points of the robot's sole in that frame (metres; e.g. heel and toe):
    the lowest of them touches the ground in contact and none goes below it."""

    side: str
    link: str
    frame: str
    toe: str | None = None
    sole: tuple[Vector3, ...] = ((0.0, 0.0, 0.0),)


@dataclass(frozen=True)
class ContactSpec:
    """Foot contact detection with hysteresis: contact starts when the human sole is below ``height_on``
    above the ground and moves slower than ``speed_on`` horizontally; it ends above ``height_off`` or
    faster than ``speed_off``. After release the held position blends back in ``release_time`` seconds.

    ``hold``: in contact the foot stays where it landed (no slide); ``flatten``: in contact the robot sole
    turns level (the heading it landed with; the human's heel/toe roll is taken up by the ankle), blended
    in and out over ``blend_time`` seconds so the transitions are smooth.

    ``drift_off`` (m, human size): a contact also ends when every point of the human foot (foot and toe
    links) has slid that far horizontally from where it was once the touch-down blend was over: a sliding
    human foot (moonwalk, a slow drag) that no standing robot foot can follow; a new contact may start
    ``release_time`` later, where the human foot is then. 0 switches it off. ``pivot_off`` (deg): the same
    when the human foot's heading has turned that far about the vertical since then (a pivot on the heel
    or the ball of the foot); 0 switches it off. ``heel_off`` (m, human size; default 0.005, 0 switches it
    off; only with ``toe: flat``): a contact also ends when the human heel has risen that much more above
    its lowest in the contact than the toe did (toe-off, :mod:`dynik_ros.retarget.foot_contact`); by
    ``heel_off_noise`` (default 4, 0 switches it off) times the noise of the heel-over-toe height more than
    that, the noise measured on the stream itself (:mod:`dynik_ros.retarget.heel_noise`).

    ``toe``: ``flat`` (the default: every contact levels the sole; the ankle takes the human's heel-up pitch)
    or ``pitch`` (while the human heel is up, from ``toe_angle / 3`` and fully from ``toe_angle`` deg, the
    robot's toe line stays on the ground, level across, and the sole pitches about it like the human's):
    :mod:`dynik_ros.retarget.foot_contact`.

    ``stance``: ``weighted`` (the feet's targets are weighted rows like every other) or ``hard`` (while in
    contact a foot's targets are rows of the QP it must meet: :mod:`dynik_ros.core.stance_rows`).

    ``anchor``: where a held foot stays once its contact is flat: ``human`` (where the human-derived target
    landed) or ``robot`` (where the robot's own sole is then, as the IK left it: a lagging leg is not
    dragged onto the human's footprint; :mod:`dynik_ros.retarget.robot_anchor`).

    ``reach`` (on by default): a foot landing farther beside its hip than the ankle roll's limits let a
    level sole stand is held nearer the hip, across its heading, until they do, and the leg's thigh and
    shank targets lean with it (:mod:`dynik_ros.retarget.leg_reach`).

    ``pelvis_reach`` (opt-in): while feet are held in contact, the pelvis position target moves (up, across)
    just enough that each of their legs leans no farther than its ankle roll lets a level sole stand, rate
    limited, causal (:mod:`dynik_ros.retarget.pelvis_reach`).

    ``floor_rows`` (default on): the feet's sole points are kept on or above the ground by inequality rows of
    the IK's QP (every sample, in contact or not: :mod:`dynik_ros.core.floor_rows`); ``False`` leaves the
    ground to the foot targets alone.

    ``swing_weight`` (1: off): the factor on a foot's position weight while it is not held in contact, back to
    1 as it comes down to the ground (:mod:`dynik_ros.retarget.swing_weight`).

    ``held_gain`` (1/s; 0: off): while a foot is held in contact, the gain ``K`` of eq. (9) on its height (the
    world z of its position target) is at least this, and ``held_tilt_gain`` (1/s; 0: off) on its tilt (the
    world x and y of its orientation target; :mod:`dynik_ros.retarget.held_gain`). ``blend_shape``:
    how the level blend rises after touch-down, ``smooth`` or ``linear``
    (:mod:`dynik_ros.retarget.foot_contact`)."""

    enabled: bool = True
    height_on: float = 0.03
    height_off: float = 0.06
    speed_on: float = 0.4
    speed_off: float = 0.8
    release_time: float = 0.15
    hold: bool = True
    flatten: bool = True
    blend_time: float = 0.1
    drift_off: float = 0.08
    pivot_off: float = 20.0
    heel_off: float = 0.005
    heel_off_noise: float = 4.0
    toe: str = "flat"
    toe_angle: float = 30.0
    stance: str = "hard"
    anchor: str = "robot"
    reach: bool = True
    pelvis_reach: bool = False
    floor_rows: bool = True
    swing_weight: float = 0.1
    held_gain: float = 40.0
    held_tilt_gain: float = 20.0
    blend_shape: str = "smooth"


@dataclass(frozen=True)
class HumanSpec:
    """The human side: link names, the ground height of the input data, and the subject used for the
    default calibration pose (the human model's zero configuration)."""

    links: tuple[str, ...] = XSENS_LINKS
    ground_height: float = 0.0
    height: float = 1.75
    mass: float = 75.0


@dataclass(frozen=True)
class ConstraintSpec:
    """Coupled joints ``A s <= b`` (eq. 11), ``b`` in radians."""

    name: str
    joints: tuple[str, ...]
    A: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class RetargetConfig:
    """A robot's retargeting map; see the module docstring for the YAML form."""

    name: str
    urdf: str
    root: Anchor
    targets: tuple[TargetSpec, ...]
    calibration_base_rpy: Vector3 = (0.0, 0.0, 0.0)
    calibration_joints: dict[str, float] = field(default_factory=dict)
    calibration_file: Path | None = None
    # the calibration pose may leave the joint limits: a reference for the offsets, never commanded
    calibration_beyond_limits: bool = False
    initial_joints: dict[str, float] | None = None
    floating_base: bool = True
    description: str = ""
    human: HumanSpec = field(default_factory=HumanSpec)
    alignment: str = "first_frame"
    feet: tuple[FootSpec, ...] = ()
    contact: ContactSpec = field(default_factory=ContactSpec)
    position_limits: dict[str, tuple[float, float]] = field(default_factory=dict)
    velocity_limits: dict[str, float] = field(default_factory=dict)
    velocity_cap: float | None = None
    locked_joints: tuple[str, ...] = ()
    actuated_joints: tuple[str, ...] = ()  # () = every joint; else the only ones a command carries
    constraints: tuple[ConstraintSpec, ...] = ()
    hinges: tuple[tuple[str, str], ...] = ()  # (parent frame, child frame): retarget/hinge_alignment.py
    source: Path | None = None
    balance: BalanceSpec = field(default_factory=BalanceSpec)  # retarget/balance.py (off by default)
    regularizers: RegularizerConfig = field(default_factory=RegularizerConfig)  # core/regularizers.py

    @property
    def where(self) -> str:
        return str(self.source) if self.source else f"<retarget config '{self.name}'>"

    def target(self, frame: str) -> TargetSpec:
        for t in self.targets:
            if t.frame == frame:
                return t
        raise KeyError(f"{self.where}: no target for robot frame '{frame}'")

    def check_model(self, robot: RobotModel) -> None:
        """Check every robot frame and joint name against ``robot``; the error carries the
        :class:`UnknownFrameError` text with the closest valid names."""

        def frame(name: str, key: str) -> None:
            try:
                robot.frame_id(name)
            except UnknownFrameError as exc:
                raise RetargetConfigError(f"{self.where}: {key}: {exc}") from None

        def joint(name: str, key: str) -> None:
            try:
                robot.joint_index(name)
            except UnknownFrameError as exc:
                raise RetargetConfigError(f"{self.where}: {key}: {exc}") from None

        frame(self.root.frame, "root.frame")
        for i, t in enumerate(self.targets):
            frame(t.frame, f"targets[{i}].frame")
            if t.anchor is not None:
                frame(t.anchor.frame, f"targets[{i}].anchor.frame")
        for foot in self.feet:
            frame(foot.frame, f"feet.{foot.side}.frame")
        for name in self.calibration_joints:
            joint(name, "calibration.joints_deg")
        for name in self.initial_joints or {}:
            joint(name, "initial.joints_deg")
        for name in self.position_limits:
            joint(name, "limits.position_deg")
        for name in self.velocity_limits:
            joint(name, "limits.velocity")
        for name in self.locked_joints:
            joint(name, "locked_joints")
        for name in self.actuated_joints:
            joint(name, "actuated_joints")
        for i, c in enumerate(self.constraints):
            for name in c.joints:
                joint(name, f"constraints[{i}].joints")

    # ------------------------------------------------------------------ saving
    def to_dict(self) -> dict[str, Any]:
        """The YAML form (degrees), such that :func:`config_from_dict` gives this config back."""
        out: dict[str, Any] = {
            "robot": {"name": self.name, "urdf": self.urdf, "floating_base": self.floating_base},
            "human": {
                "links": list(self.human.links),
                "ground_height": self.human.ground_height,
                "height": self.human.height,
                "mass": self.human.mass,
            },
            "root": {"link": self.root.link, "frame": self.root.frame},
            "calibration": {
                "base_rpy_deg": _deg_list(self.calibration_base_rpy),
                "joints_deg": {k: _deg(v) for k, v in self.calibration_joints.items()},
            },
            "alignment": self.alignment,
            "targets": [_target_to_dict(t) for t in self.targets],
        }
        if self.description:
            out["robot"]["description"] = self.description
        if self.calibration_file is not None:
            out["calibration"]["file"] = str(self.calibration_file)
        if self.calibration_beyond_limits:
            out["calibration"]["beyond_limits"] = True
        if self.initial_joints is not None:
            out["initial"] = {"joints_deg": {k: _deg(v) for k, v in self.initial_joints.items()}}
        if self.feet:
            out["feet"] = {
                f.side: {
                    "link": f.link,
                    "frame": f.frame,
                    **({"toe": f.toe} if f.toe else {}),
                    "sole": [[float(x) for x in point] for point in f.sole],
                }
                for f in self.feet
            }
        c = self.contact
        # every field, so a setting added to ContactSpec is saved too (contact.reach once was not)
        out["contact"] = {f.name: getattr(c, f.name) for f in fields(c)}
        limits: dict[str, Any] = {}
        if self.position_limits:
            limits["position_deg"] = {k: _deg_list(v) for k, v in self.position_limits.items()}
        if self.velocity_limits:
            limits["velocity"] = {k: float(v) for k, v in self.velocity_limits.items()}
        if self.velocity_cap is not None:
            limits["velocity_cap"] = float(self.velocity_cap)
        if limits:
            out["limits"] = limits
        if self.locked_joints:
            out["locked_joints"] = list(self.locked_joints)
        if self.actuated_joints:
            out["actuated_joints"] = list(self.actuated_joints)
        if self.constraints:
            out["constraints"] = [
                {
                    "name": c.name,
                    "joints": list(c.joints),
                    "A": c.A.tolist(),
                    "b_deg": _deg_list(c.b),
                }
                for c in self.constraints
            ]
        out.update(sections_to_dict(self.balance, self.regularizers))
        if self.hinges:
            out["hinges"] = [list(pair) for pair in self.hinges]
        return out


def _deg(x: float) -> float:
    return round(math.degrees(float(x)), 10)


def _deg_list(values: Sequence[float]) -> list[float]:
    return [_deg(v) for v in values]


def _target_to_dict(t: TargetSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"link": t.link, "frame": t.frame, "orientation": t.orientation}
    out["position"] = t.position
    out["offset"] = "auto" if t.offset is None else {"matrix": np.asarray(t.offset).tolist()}
    out["orientation_gain"] = t.orientation_gain
    out["position_gain"] = t.position_gain
    out["orientation_weight"] = [float(w) for w in t.orientation_weight]
    out["position_weight"] = [float(w) for w in t.position_weight]
    if t.anchor is not None:
        out["anchor"] = {"link": t.anchor.link, "frame": t.anchor.frame}
    out["scale"] = "auto" if t.scale is None else float(t.scale)
    return out


def save_retarget_config(config: RetargetConfig, path: str | Path) -> Path:
    """Write ``config`` as YAML to ``path`` (loadable with :func:`load_retarget_config`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(config.to_dict(), sort_keys=False, default_flow_style=None, width=110)
    path.write_text(f"# dynik_ros retargeting map for '{config.name}' (saved)\n{text}", encoding="utf-8")
    return path
