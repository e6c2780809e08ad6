"""Robot registry: a robot is a URDF plus one retargeting map ``config/<robot>.yaml``; no code per robot.

URDF locations in a map (``robot.urdf``):

* ``example-robot-data:<path>`` -- a file of the installed ``example-robot-data`` package (pip wheel,
  conda, apt or robotpkg), e.g. ``example-robot-data:icub_description/robots/icub.urdf``;
* an absolute path;
* a path relative to the YAML file's directory.

Maps are searched in the directories of ``$DYNIK_ROBOT_PATH`` (``:``-separated) first, then in the
package's ``config/`` directory; :func:`load_robot` also takes a YAML path directly.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import LinearJointConstraints, RobotModel
from dynik_ros.core.urdf_check import UrdfError
from dynik_ros.io.yaml_file import YamlFileError, load_yaml
from dynik_ros.models.assets import share_path
from dynik_ros.retarget.config import (
    RetargetConfig,
    RetargetConfigError,
    config_from_dict,
    load_retarget_config,
    rpy_matrix,
)

ROBOT_PATH_ENV = "DYNIK_ROBOT_PATH"
URDF_SUFFIXES = (".urdf", ".xacro", ".xml", ".sdf")  # robot descriptions, which a map names in robot.urdf
EXAMPLE_ROBOT_DATA = "example-robot-data:"
_ERD_RELATIVE = Path("share", "example-robot-data", "robots")


def example_robot_data_dir() -> Path:
    """The ``robots`` directory of the installed ``example-robot-data``.

    Looked up in: the ``cmeel.prefix`` of every ``sys.path`` entry (pip wheels), ``$CONDA_PREFIX``,
    ``$AMENT_PREFIX_PATH`` / ``$CMAKE_PREFIX_PATH`` (apt, colcon), then ``/opt/openrobots`` (robotpkg).
    """
    candidates: list[Path] = []
    for entry in sys.path:
        if entry:
            candidates.append(Path(entry, "cmeel.prefix") / _ERD_RELATIVE)
    for var in ("CONDA_PREFIX", "AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH"):
        for prefix in os.environ.get(var, "").split(os.pathsep):
            if prefix:
                candidates.append(Path(prefix) / _ERD_RELATIVE)
    candidates += [Path("/opt/openrobots") / _ERD_RELATIVE, Path("/usr/local") / _ERD_RELATIVE]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "example-robot-data is not installed (pip install example-robot-data, or apt/robotpkg); looked in "
        + ", ".join(str(p) for p in dict.fromkeys(candidates))
    )


def resolve_urdf(location: str, relative_to: Path | None = None) -> Path:
    """Absolute path of a map's ``robot.urdf`` entry (see the module docstring)."""
    if location.startswith("package://"):
        raise ValueError(
            f"'{location}': package:// URIs are not supported in retargeting maps; use an absolute path, "
            f"a path relative to the YAML file, or {EXAMPLE_ROBOT_DATA}<path>"
        )
    if location.startswith(EXAMPLE_ROBOT_DATA):
        path = example_robot_data_dir() / location[len(EXAMPLE_ROBOT_DATA) :]
    else:
        path = Path(location).expanduser()
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
    if not path.is_file():
        raise FileNotFoundError(f"URDF not found: {path} (from '{location}')")
    return path.resolve()


def config_dirs() -> list[Path]:
    """Directories searched for ``<robot>.yaml``: ``$DYNIK_ROBOT_PATH`` entries, then ``config/``."""
    dirs = [Path(p) for p in os.environ.get(ROBOT_PATH_ENV, "").split(os.pathsep) if p]
    try:
        dirs.append(share_path("config"))
    except Exception:  # no source tree and no ament index: only the user's directories
        pass
    return dirs


def _is_retarget_map(path: Path, strict: bool = False) -> bool:
    """Whether a YAML file is a retargeting map (other nodes' parameter files share ``config/``); a file
    that is not valid YAML (or repeats a key) is not one, or with ``strict`` raises its error."""
    return _map_data(path, strict) is not None


def _map_data(path: Path, strict: bool = False) -> dict | None:
    """The YAML of :func:`_is_retarget_map`'s file when it is a map (else ``None``), for :func:`load_robot` to
    read the map from without parsing it again."""
    try:
        data = load_yaml(path)
    except YamlFileError:
        if strict:
            raise
        return None
    return data if isinstance(data, dict) and "robot" in data and "targets" in data else None


def available_robots() -> list[str]:
    """Names of the robots with a retargeting map, sorted."""
    names = set()
    for d in config_dirs():
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.yaml") if _is_retarget_map(p))
    return sorted(names)


def find_robot_yaml(name_or_path: str | Path) -> Path:
    """The map file of a robot name, or the given path if it is a file."""
    return _find_map(name_or_path)[0]


def _find_map(name_or_path: str | Path) -> tuple[Path, dict | None]:
    """:func:`find_robot_yaml` and, for a robot name, the map's YAML read to find it (``None``: a path)."""
    path = Path(name_or_path)
    if path.suffix.lower() in URDF_SUFFIXES:
        raise RetargetConfigError(
            f"{path}: a URDF, not a retargeting map: give a robot name or the map (.yaml) whose robot.urdf "
            "names this file (README: Adding a robot)"
        )
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise FileNotFoundError(f"retargeting map not found: {path}")
        return path, None
    for d in config_dirs():
        candidate = d / f"{name_or_path}.yaml"
        data = _map_data(candidate, strict=True) if candidate.is_file() else None
        if data is not None:
            return candidate, data
    raise KeyError(
        f"unknown robot '{name_or_path}'; available: {', '.join(available_robots()) or 'none'} "
        f"(or pass the path of a YAML map; extra map directories go in ${ROBOT_PATH_ENV})"
    )


@dataclass
class RobotSpec:
    """A loaded robot: its map, URDF path and :class:`RobotModel` (limits, overrides and coupled-joint
    constraints applied)."""

    name: str
    config: RetargetConfig
    urdf_path: Path
    robot: RobotModel

    def joint_vector(
        self, angles: dict[str, float], key: str, strict: bool = True, clip: bool = True, hint: str = ""
    ) -> np.ndarray:
        """Joint positions from ``{joint: rad}``; unspecified joints at 0 clipped into the limits. With
        ``strict``, given angles outside the limits or violating ``A s <= b`` raise, naming ``key`` (and
        adding ``hint``); with neither ``strict`` nor ``clip`` they are kept as given (a reference pose)."""
        robot = self.robot
        s = np.clip(np.zeros(robot.n_joints), robot.lower, robot.upper)
        for joint, value in angles.items():
            i = robot.joint_index(joint)
            if strict and not robot.lower[i] - 1e-9 <= value <= robot.upper[i] + 1e-9:
                raise RetargetConfigError(
                    f"{self.config.where}: {key}.{joint}: {np.degrees(value):.2f} deg is outside the joint "
                    f"limits [{np.degrees(robot.lower[i]):.2f}, {np.degrees(robot.upper[i]):.2f}] deg{hint}"
                )
            s[i] = np.clip(value, robot.lower[i], robot.upper[i]) if clip or strict else value
        c = robot.constraints
        if strict and c is not None:
            slack = c.b - c.A @ s
            if np.any(slack < -1e-9):
                raise RetargetConfigError(
                    f"{self.config.where}: {key}: the pose violates the coupled-joint constraints "
                    f"(rows {np.flatnonzero(slack < -1e-9).tolist()} of A s <= b)"
                )
        return s

    def standing_configuration(self, joints: np.ndarray, ground: float = 0.0) -> np.ndarray:
        """``q`` with the given joint positions, the base turned by ``calibration.base_rpy_deg`` (the
        robot faces world +x) over the world origin, and its lowest sole point (lowest target frame
        without feet) at height ``ground``."""
        robot = self.robot
        rotation = rpy_matrix(*self.config.calibration_base_rpy)
        q = robot.join(np.zeros(3), rotation, joints)
        data = robot.model.createData()
        pin.framesForwardKinematics(robot.model, data, q)
        if self.config.feet:
            points = [
                data.oMf[robot.frame_id(f.frame)].act(np.asarray(point, dtype=float))
                for f in self.config.feet
                for point in f.sole
            ]
        else:
            points = [data.oMf[robot.frame_id(t.frame)].translation for t in self.config.targets]
        if robot.floating_base:
            q[2] = ground - min(float(p[2]) for p in points)
        return q

    def calibration_configuration(self) -> np.ndarray:
        """The robot's calibration T-pose (``calibration.joints_deg``) standing on the ground, facing +x.
        With ``calibration.beyond_limits`` it may leave the joint limits: a robot that cannot reach the
        T-pose (Romeo's shoulders stop 26.5 deg short) still gets its offsets from it; the IK never goes
        there."""
        beyond = self.config.calibration_beyond_limits
        return self.standing_configuration(
            self.joint_vector(
                self.config.calibration_joints,
                "calibration.joints_deg",
                strict=not beyond,
                clip=not beyond,
                hint=" (a robot that cannot reach the T-pose: set calibration.beyond_limits: true, then it "
                "is the reference of the offsets only)",
            )
        )

    def initial_configuration(self) -> np.ndarray:
        """The IK start: ``initial.joints_deg`` (default: the calibration pose, clipped into the joint
        limits with ``calibration.beyond_limits``) standing, facing +x."""
        angles = self.config.initial_joints
        if angles is None:
            if self.config.calibration_beyond_limits:
                return self.standing_configuration(
                    self.joint_vector(self.config.calibration_joints, "calibration.joints_deg", strict=False)
                )
            return self.calibration_configuration()
        return self.standing_configuration(self.joint_vector(angles, "initial.joints_deg"))


MAX_LIMITING_SPEED = 100.0  # rad/s: a URDF velocity limit above this is a placeholder (motors: 2-40)


def build_robot_model(config: RetargetConfig, urdf_path: Path) -> RobotModel:
    """Parse the URDF with pinocchio, check the map's names against it, apply overrides and constraints."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            robot = RobotModel.from_urdf_file(urdf_path, floating_base=config.floating_base)
        except UrdfError as exc:
            raise RetargetConfigError(f"{config.where}: robot.urdf: {exc}") from None
    robot.name = config.name
    config.check_model(robot)
    if config.velocity_cap is not None:
        robot.velocity_limit[:] = np.minimum(robot.velocity_limit, config.velocity_cap)
    try:
        for joint, (lo, hi) in config.position_limits.items():
            robot.set_position_limits(joint, lo, hi)
        for joint, vmax in config.velocity_limits.items():
            robot.set_velocity_limit(joint, vmax)
        for joint in config.locked_joints:
            robot.lock_joint(joint)
    except ValueError as exc:
        raise RetargetConfigError(f"{config.where}: limits: {exc}") from None
    if config.constraints:
        joints = list(dict.fromkeys(j for c in config.constraints for j in c.joints))
        rows, bounds = [], []
        for c in config.constraints:
            for a_row, b in zip(c.A, c.b, strict=True):
                row = np.zeros(len(joints))
                for j, coefficient in zip(c.joints, a_row, strict=True):
                    row[joints.index(j)] += coefficient
                rows.append(row)
                bounds.append(b)
        robot.set_constraints(LinearJointConstraints(tuple(joints), np.array(rows), np.array(bounds)))
    unlimited = unlimited_joints(robot)
    if unlimited:
        warnings.warn(
            f"{config.where}: the URDF's limits do not limit {', '.join(unlimited)}: the IK keeps no human "
            "range or motor speed there; set them in the map (limits.position_deg, limits.velocity)",
            stacklevel=2,
        )
    return robot


def unlimited_joints(robot: RobotModel) -> list[str]:
    """Free joints whose limits are placeholders (a position range over a full turn, a speed over
    :data:`MAX_LIMITING_SPEED`), each with what it has: a URDF written without real limits."""
    out = []
    for i, name in enumerate(robot.joint_names):
        if robot.locked[i] or name in robot.mimic:
            continue
        span = float(robot.upper[i] - robot.lower[i])
        if span > 2.0 * np.pi:
            out.append(f"{name} (range {np.degrees(span):.3g} deg)")
        elif robot.velocity_limit[i] > MAX_LIMITING_SPEED:
            out.append(f"{name} (speed {robot.velocity_limit[i]:.3g} rad/s)")
    return out


def load_robot(name_or_yaml_path: str | Path) -> RobotSpec:
    """Load a robot by name (``g1``, ``icub``, ``talos``, or any map in the search path) or YAML path.

    Raises:
        KeyError: unknown robot name (the message lists the available ones).
        FileNotFoundError: missing YAML or URDF (named).
        RetargetConfigError: invalid map (file and key named; unknown frames list the closest names).
    """
    path, data = _find_map(name_or_yaml_path)
    # a map found by name was read to find it: built from that YAML (load_retarget_config's own steps)
    config = load_retarget_config(path) if data is None else config_from_dict(data, path)
    try:
        urdf = resolve_urdf(config.urdf, path.parent)
    except ValueError as exc:
        raise RetargetConfigError(f"{path}: robot.urdf: {exc}") from None
    robot = build_robot_model(config, urdf)
    spec = RobotSpec(config.name, config, urdf, robot)
    spec.calibration_configuration()  # validates the calibration pose against limits and constraints
    if config.initial_joints is not None:
        spec.initial_configuration()
    return spec
