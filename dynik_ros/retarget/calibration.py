"""Calibration: rotation offsets, scale ratios and world yaw alignment.

From a calibration pose -- the human in T-pose (by default the human model's zero configuration, where
every segment frame is aligned with the pelvis frame, as Xsens segment frames are after their own
calibration) while the robot stands in the matching T-pose of its map (``calibration.joints_deg``) --
and with the human's heading removed (both face world +x):

* rotation offset of each pair: ``R_off = R_human_link^T R_robot_frame`` so that ``R_human_link R_off``
  is the robot frame's orientation target (the ``I R_O_j`` of eq. 2 for the robot);
* root scale: ``k_root`` = robot root height / human root height above the ground;
* limb ratios of anchored position targets: robot limb length / human limb length, each measured from the
  limb root (anchor) to its end in the calibration pose, where limbs are straight, so the distance is the
  sum of the segment lengths;
* anchor offsets: the robot limb root relative to the robot root, in the human root link's frame;
* foot clearances: height of each human foot (and toe) link origin above the ground when standing, used
  to measure sole height for contact detection.

World yaw alignment (:func:`yaw_alignment`): the human data is rotated about world z so that the human's
heading in the first frame equals the robot's initial heading. Without it a 180 deg difference is the one
initial condition the orientation error of eq. (5) cannot correct (Appendix A: ``sk(R^T R*) = 0`` at pi).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from dynik_ros.io.yaml_file import YamlFileError, load_yaml
from dynik_ros.retarget.config import RetargetConfigError, check_rotation
from dynik_ros.retarget.human import human_tpose
from dynik_ros.retarget.registry import RobotSpec

Pose = tuple[np.ndarray, np.ndarray]
CALIBRATION_FORMAT = "dynik_retarget_calibration/1"


def heading(rotation: np.ndarray) -> np.ndarray:
    """Heading angle (rad) about world z of the x axis of ``rotation`` ``(..., 3, 3)``."""
    r = np.asarray(rotation)
    return np.arctan2(r[..., 1, 0], r[..., 0, 0])


def rotation_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def yaw_alignment(human_root_rotation: np.ndarray, robot_root_rotation: np.ndarray, root_offset: np.ndarray):
    """Rotation about world z that turns the human's heading onto the robot's.

    ``robot_root_rotation`` is the robot root frame's orientation; ``root_offset`` the root pair's rotation
    offset, so ``robot_root_rotation @ root_offset.T`` is the human root orientation the robot stands for.
    """
    robot_as_human = np.asarray(robot_root_rotation) @ np.asarray(root_offset).T
    return rotation_z(float(heading(robot_as_human) - heading(human_root_rotation)))


@dataclass
class Calibration:
    """Everything the retargeter derives from the calibration pose (see the module docstring).

    Keys are robot frame names (offsets, limb scales, anchor offsets) and human link names (clearances).
    """

    robot: str
    offsets: dict[str, np.ndarray]
    root_scale: float
    limb_scales: dict[str, float] = field(default_factory=dict)
    anchor_offsets: dict[str, np.ndarray] = field(default_factory=dict)
    human_ground: float = 0.0
    human_root_height: float = 1.0
    robot_root_height: float = 1.0
    foot_clearance: dict[str, float] = field(default_factory=dict)
    source: str = "auto"

    def to_dict(self) -> dict:
        def vec(v: np.ndarray) -> list[float]:
            return [round(float(x), 12) for x in np.ravel(v)]

        return {
            "format": CALIBRATION_FORMAT,
            "robot": self.robot,
            "source": self.source,
            "root_scale": float(self.root_scale),
            "human_ground": float(self.human_ground),
            "human_root_height": float(self.human_root_height),
            "robot_root_height": float(self.robot_root_height),
            "offsets": {k: {"matrix": [vec(row) for row in v]} for k, v in self.offsets.items()},
            "limb_scales": {k: float(v) for k, v in self.limb_scales.items()},
            "anchor_offsets": {k: vec(v) for k, v in self.anchor_offsets.items()},
            "foot_clearance": {k: float(v) for k, v in self.foot_clearance.items()},
        }

    def save(self, path: str | Path) -> Path:
        """Write as YAML (load back with :meth:`load`)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=110)
        path.write_text(f"# dynik_ros retargeting calibration of '{self.robot}'\n{text}", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a file written by :meth:`save`; errors name the file and the key."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"calibration file not found: {path}")
        try:
            data = load_yaml(path)
        except YamlFileError as exc:
            raise RetargetConfigError(str(exc)) from None

        def error(key: str, message: str) -> RetargetConfigError:
            return RetargetConfigError(f"{path}: {key}: {message}")

        if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
            raise error("format", f"not a calibration file (expected format: {CALIBRATION_FORMAT})")
        required = ("robot", "root_scale", "offsets")
        for key in required:
            if key not in data:
                raise error(key, f"missing key '{key}' (required)")
        offsets = {}
        for frame, node in (data.get("offsets") or {}).items():
            matrix = np.array(node["matrix"] if isinstance(node, dict) else node, dtype=float)
            if matrix.shape != (3, 3):
                raise error(f"offsets.{frame}", f"expected a 3x3 matrix, got shape {matrix.shape}")
            check_rotation(matrix, error, f"offsets.{frame}")
            offsets[str(frame)] = matrix
        return cls(
            robot=str(data["robot"]),
            offsets=offsets,
            root_scale=float(data["root_scale"]),
            limb_scales={str(k): float(v) for k, v in (data.get("limb_scales") or {}).items()},
            anchor_offsets={
                str(k): np.array(v, dtype=float) for k, v in (data.get("anchor_offsets") or {}).items()
            },
            human_ground=float(data.get("human_ground", 0.0)),
            human_root_height=float(data.get("human_root_height", 1.0)),
            robot_root_height=float(data.get("robot_root_height", 1.0)),
            foot_clearance={str(k): float(v) for k, v in (data.get("foot_clearance") or {}).items()},
            source=str(path),
        )


def calibrate(
    spec: RobotSpec,
    human_poses: Mapping[str, Pose] | None = None,
    ground_height: float | None = None,
    source: str | None = None,
) -> Calibration:
    """Compute a :class:`Calibration` from a human calibration frame (T-pose) and the robot's T-pose.

    ``human_poses`` default to the human model's zero configuration (:func:`human_tpose`, subject from
    the map's ``human`` section); ``ground_height`` defaults to the map's ``human.ground_height``. Offsets
    given by hand in the map are kept as they are. ``source``: what the poses are (the saved calibration's
    ``source``; default "human model T-pose" or "calibration frame").
    """
    config = spec.config
    ground = config.human.ground_height if ground_height is None else float(ground_height)
    from_model = human_poses is None
    if human_poses is None:
        human_poses = human_tpose(config.human.height, config.human.mass, ground)
    needed = {config.root.link} | {t.link for t in config.targets}
    needed |= {t.anchor.link for t in config.targets if t.anchor is not None}
    needed |= {f.link for f in config.feet} | {f.toe for f in config.feet if f.toe}
    missing = sorted(needed - set(human_poses))
    if missing:
        raise ValueError(f"calibration frame lacks the human links {missing}")

    # Remove the human's heading: both the human and the robot face world +x.
    p_root, r_root = (np.asarray(x, dtype=float) for x in human_poses[config.root.link])
    unturn = rotation_z(-float(heading(r_root)))
    human = {
        k: (unturn @ (np.asarray(p, dtype=float) - p_root), unturn @ np.asarray(r, dtype=float))
        for k, (p, r) in human_poses.items()
        if k in needed
    }
    human_root_height = float(p_root[2] - ground)
    if human_root_height <= 0:
        raise ValueError(
            f"human root '{config.root.link}' is {human_root_height:.3f} m above the ground height {ground}: "
            "check human.ground_height"
        )

    robot = spec.robot
    q = spec.calibration_configuration()
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)

    def robot_pose(frame: str) -> Pose:
        m = data.oMf[robot.frame_id(frame)]
        return m.translation.copy(), m.rotation.copy()

    p_base = robot_pose(config.root.frame)[0]
    robot_root_height = float(p_base[2])  # the robot stands on z = 0
    root_scale = robot_root_height / human_root_height

    offsets: dict[str, np.ndarray] = {}
    limb_scales: dict[str, float] = {}
    anchor_offsets: dict[str, np.ndarray] = {}
    r_human_root = human[config.root.link][1]
    for t in config.targets:
        p_r, r_r = robot_pose(t.frame)
        offsets[t.frame] = t.offset if t.offset is not None else human[t.link][1].T @ r_r
        if not t.position or t.link == config.root.link:
            continue
        if t.anchor is None:
            limb_scales[t.frame] = t.scale if t.scale is not None else root_scale
            anchor_offsets[t.frame] = np.zeros(3)
            continue
        p_anchor = robot_pose(t.anchor.frame)[0]
        human_length = float(np.linalg.norm(human[t.link][0] - human[t.anchor.link][0]))
        robot_length = float(np.linalg.norm(p_r - p_anchor))
        if t.scale is None and human_length < 1e-6:
            raise ValueError(
                f"target '{t.frame}': human link '{t.link}' coincides with its anchor '{t.anchor.link}'"
            )
        limb_scales[t.frame] = t.scale if t.scale is not None else robot_length / human_length
        anchor_offsets[t.frame] = r_human_root.T @ (p_anchor - p_base)
    if config.root.frame in offsets and config.target(config.root.frame).scale is not None:
        root_scale = float(config.target(config.root.frame).scale)

    clearance = {}
    for foot in config.feet:
        for link in (foot.link, foot.toe):
            if link:
                clearance[link] = float(human[link][0][2] + p_root[2] - ground)
    return Calibration(
        robot=spec.name,
        offsets=offsets,
        root_scale=root_scale,
        limb_scales=limb_scales,
        anchor_offsets=anchor_offsets,
        human_ground=ground,
        human_root_height=human_root_height,
        robot_root_height=robot_root_height,
        foot_clearance=clearance,
        source=source or ("human model T-pose" if from_model else "calibration frame"),
    )


def check_calibration(spec: RobotSpec, calibration: Calibration) -> None:
    """Raise :class:`RetargetConfigError` if ``calibration`` does not cover every target of ``spec``."""
    config = spec.config
    where = calibration.source
    missing = [t.frame for t in config.targets if t.frame not in calibration.offsets]
    if missing:
        raise RetargetConfigError(f"{where}: offsets: no offset for robot frames {missing}")
    for t in config.targets:
        if t.position and t.link != config.root.link and t.frame not in calibration.limb_scales:
            raise RetargetConfigError(f"{where}: limb_scales: no scale for position target '{t.frame}'")
    if not (np.isfinite(calibration.root_scale) and calibration.root_scale > 0):
        raise RetargetConfigError(f"{where}: root_scale: must be positive, got {calibration.root_scale}")
