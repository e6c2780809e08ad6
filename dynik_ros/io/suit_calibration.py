"""Suit calibration from a held T-pose or N-pose: world alignment and per-segment orientation offsets.

A suit's own calibration (Xsens MVN) makes every segment frame world-aligned in the T-pose, but the
capture world has an arbitrary heading and origin and small per-segment mis-alignments remain (a sensor
moved, a strap re-tightened). Like the "calibrate all links on the zero pose" step of the paper's stack,
:class:`SuitCalibration` measures both from a short window of a still pose:

* window averages: positions by the mean, orientations by the chordal L2 mean (the mean rotation matrix
  projected on SO(3) by its SVD); the window must be still (largest deviation from the mean within
  ``max_spread`` m and ``max_spread_angle`` rad) or the calibration is refused;
* world alignment ``A = (R_A, o)``: ``R_A = R_z(-psi)`` with ``psi`` the heading of the pelvis x axis
  projected on the ground, ``o`` the pelvis ground projection (height untouched), so the person stands at
  the origin facing +x (REP 103);
* per-segment offsets ``R_off_i = (R_A R_i)^T R_expected_i`` towards the expected pose (T-pose: every
  segment world-aligned; N-pose: both arm chains turned down, ``R_x(-90°)`` left, ``R_x(+90°)`` right);
  a segment further than ``max_pose_error`` from the expected pose refuses the calibration, naming the
  segment and the angle (the person was not in that pose).

Applied to every later sample: ``p' = R_A (p - o)``, ``R' = R_A R R_off``, ``v' = R_A v``, ``w' = R_A w``
(a constant right factor does not change a world angular velocity). ROS-free; saved to and loaded from
YAML so a node reloads it at configure.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from dynik_ros.core.quaternion import quaternion_from_rotation, quaternion_multiply, rotation_from_quaternion
from dynik_ros.io.yaml_file import YamlFileError, load_yaml

FORMAT = "dynik_ros/suit_calibration/1"
POSES = ("tpose", "npose")
LEFT_ARM = ("LeftUpperArm", "LeftForeArm", "LeftHand")
RIGHT_ARM = ("RightUpperArm", "RightForeArm", "RightHand")


class CalibrationError(ValueError):
    """A calibration that cannot be made or loaded; the message says why (segment, angle, file)."""


def rotation_x(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rotation_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rotation_angle(r: np.ndarray) -> np.ndarray:
    """Angle of rotation matrices ``(..., 3, 3)`` in rad."""
    cos = (np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.arccos(np.clip(cos, -1.0, 1.0))


def project_to_so3(m: np.ndarray) -> np.ndarray:
    """Nearest rotation to each ``(..., 3, 3)`` matrix in the Frobenius norm (SVD, det fixed to +1)."""
    u, _, vt = np.linalg.svd(m)
    d = np.sign(np.linalg.det(u @ vt))
    u = u.copy()
    u[..., :, 2] *= d[..., None]
    return u @ vt


def expected_orientations(names: Sequence[str], pose: str) -> np.ndarray:
    """World orientations of the segments in the calibration pose, facing +x: ``(L, 3, 3)``."""
    if pose not in POSES:
        raise CalibrationError(f"unknown calibration pose {pose!r} (choose from {POSES})")
    out = np.repeat(np.eye(3)[None], len(names), axis=0)
    if pose == "npose":
        for i, name in enumerate(names):
            if name in LEFT_ARM:
                out[i] = rotation_x(-np.pi / 2)
            elif name in RIGHT_ARM:
                out[i] = rotation_x(np.pi / 2)
    return out


@dataclass
class WindowAverage:
    """Mean pose of every segment over a window, and how still the window was."""

    names: list[str]
    positions: np.ndarray  # (L, 3)
    rotations: np.ndarray  # (L, 3, 3)
    samples: int
    spread: float  # largest distance of a position from its mean [m]
    spread_angle: float  # largest angle of an orientation from its mean [rad]


@dataclass
class WindowSamples:
    """The samples of a window, shaped as a motion for :func:`dynik_ros.io.skeleton_tpose.skeleton_tpose`."""

    links: list[str]
    positions: np.ndarray  # (K, L, 3)
    rotations: np.ndarray  # (K, L, 3, 3)
    name: str = "the calibration window"

    @property
    def samples(self) -> int:
        return len(self.positions)


class PoseWindow:
    """The raw link poses of the last ``seconds`` (bounded by ``max_samples``), thread-safe: a source
    thread appends while a service callback averages."""

    def __init__(self, seconds: float = 1.0, max_samples: int = 2000):
        self.seconds = float(seconds)
        self._items: deque[tuple[int, tuple[str, ...], np.ndarray, np.ndarray]] = deque(maxlen=max_samples)
        self._lock = threading.Lock()

    def append(
        self, stamp_ns: int, names: Sequence[str], positions: np.ndarray, rotations: np.ndarray
    ) -> None:
        item = (int(stamp_ns), tuple(names), np.array(positions, float), np.array(rotations, float))
        with self._lock:
            self._items.append(item)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def samples(self, seconds: float | None = None) -> WindowSamples:
        """The samples within ``seconds`` (default: the window's) of the newest one that have the newest
        one's links, stacked (at most ``max_samples``: the ring's bound, e.g. 16.7 s at 120 Hz)."""
        seconds = self.seconds if seconds is None else min(float(seconds), self.seconds)
        with self._lock:
            items = list(self._items)
        if not items:
            raise CalibrationError("no samples received yet: is the source publishing?")
        last_ns, names = items[-1][0], items[-1][1]
        use = [it for it in items if it[1] == names and last_ns - it[0] <= seconds * 1e9]
        positions = np.stack([it[2] for it in use])
        rotations = np.stack([it[3] if it[3].ndim == 3 else rotation_from_quaternion(it[3]) for it in use])
        return WindowSamples(list(names), positions, rotations)

    def average(self, seconds: float | None = None) -> WindowAverage:
        """Average over :meth:`samples`."""
        window = self.samples(seconds)
        positions, rotations = window.positions, window.rotations
        mean_p = positions.mean(axis=0)
        mean_r = project_to_so3(rotations.mean(axis=0))
        spread = float(np.linalg.norm(positions - mean_p, axis=-1).max())
        relative = mean_r.swapaxes(-1, -2)[None] @ rotations  # (K, L, 3, 3): each sample against the mean
        spread_angle = float(rotation_angle(relative).max())
        return WindowAverage(window.links, mean_p, mean_r, window.samples, spread, spread_angle)


@dataclass
class SuitCalibration:
    """World alignment and per-segment orientation offsets (see the module docstring)."""

    yaw: float = 0.0  # psi: the measured heading removed by R_A = R_z(-psi) [rad]
    origin: np.ndarray = field(default_factory=lambda: np.zeros(3))  # o, on the ground (z = 0)
    offsets: dict[str, np.ndarray] = field(default_factory=dict)  # R_off per segment
    pose: str = "tpose"
    samples: int = 0
    _quat_cache: tuple | None = field(default=None, repr=False, compare=False)  # (names, q_A, q_off)

    @property
    def world_rotation(self) -> np.ndarray:
        return rotation_z(-self.yaw)

    @classmethod
    def from_window(
        cls,
        average: WindowAverage,
        pose: str = "tpose",
        root: str = "Pelvis",
        max_spread: float = 0.05,
        max_spread_angle: float = np.radians(10.0),
        max_pose_error: float = np.radians(30.0),
    ) -> SuitCalibration:
        """Calibrate from a window average; :class:`CalibrationError` if the window moved or the pose is
        not ``pose``."""
        if average.spread > max_spread or average.spread_angle > max_spread_angle:
            raise CalibrationError(
                f"the person moved during the {average.samples}-sample window (up to "
                f"{average.spread * 1000:.0f} mm and {np.degrees(average.spread_angle):.1f} deg; allowed "
                f"{max_spread * 1000:.0f} mm, {np.degrees(max_spread_angle):.1f} deg): hold the pose still"
            )
        if root not in average.names:
            raise CalibrationError(f"the calibration window has no '{root}' segment")
        i_root = average.names.index(root)
        x_axis = average.rotations[i_root][:, 0]
        yaw = float(np.arctan2(x_axis[1], x_axis[0]))
        r_a = rotation_z(-yaw)
        origin = np.array([average.positions[i_root][0], average.positions[i_root][1], 0.0])
        aligned = r_a[None] @ average.rotations
        expected = expected_orientations(average.names, pose)
        offsets = aligned.swapaxes(-1, -2) @ expected
        angles = rotation_angle(offsets)
        worst = int(np.argmax(angles))
        if angles[worst] > max_pose_error:
            other = "npose" if pose == "tpose" else "tpose"
            raise CalibrationError(
                f"not a {pose}: segment '{average.names[worst]}' is "
                f"{np.degrees(angles[worst]):.0f} deg from it "
                f"(allowed {np.degrees(max_pose_error):.0f} deg); hold the {pose} or calibrate with "
                f"calibration_pose:={other}"
            )
        return cls(yaw, origin, dict(zip(average.names, offsets, strict=True)), pose, average.samples)

    def largest_offset(self) -> tuple[str, float]:
        """The segment with the largest orientation offset and that angle [rad]."""
        if not self.offsets:
            return "", 0.0
        angles = {k: float(rotation_angle(v)) for k, v in self.offsets.items()}
        name = max(angles, key=angles.get)
        return name, angles[name]

    def _offsets(self, names: Sequence[str]) -> np.ndarray:
        """``R_off`` per name ``(L, 3, 3)``; identity for a segment without one."""
        return np.stack([self.offsets.get(n, np.eye(3)) for n in names])

    def _aligned(
        self, positions: np.ndarray, linear: np.ndarray | None, angular: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``R_A (p - o)``, ``R_A v``, ``R_A w``."""
        r_a = self.world_rotation
        p = (np.asarray(positions, float) - self.origin) @ r_a.T
        lin = None if linear is None else np.asarray(linear, float) @ r_a.T
        ang = None if angular is None else np.asarray(angular, float) @ r_a.T
        return p, lin, ang

    def apply(
        self,
        names: Sequence[str],
        positions: np.ndarray,
        rotations: np.ndarray,
        linear: np.ndarray | None = None,
        angular: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Calibrated ``(positions, rotations, linear, angular)``; segments without an offset keep their
        orientation (only the world alignment applies)."""
        p, lin, ang = self._aligned(positions, linear, angular)
        r = self.world_rotation[None] @ np.asarray(rotations, float) @ self._offsets(names)
        return p, r, lin, ang

    def apply_quaternions(
        self,
        names: Sequence[str],
        positions: np.ndarray,
        quaternions: np.ndarray,
        linear: np.ndarray | None = None,
        angular: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """:meth:`apply` on unit quaternions ``(L, 4)`` x y z w: ``q' = q_A ⊗ q ⊗ q_off`` (no matrices;
        the offsets are converted once per link set)."""
        key = tuple(names)
        if self._quat_cache is None or self._quat_cache[0] != key:
            self._quat_cache = (
                key,
                quaternion_from_rotation(self.world_rotation),
                quaternion_from_rotation(self._offsets(names)),
            )
        _, q_world, q_offsets = self._quat_cache
        p, lin, ang = self._aligned(positions, linear, angular)
        q = quaternion_multiply(quaternion_multiply(q_world[None], quaternions), q_offsets)
        return p, q, lin, ang

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "pose": self.pose,
            "samples": int(self.samples),
            "yaw": float(self.yaw),
            "origin": [float(x) for x in self.origin],
            "offsets": {
                k: [[round(float(x), 12) for x in row] for row in v] for k, v in self.offsets.items()
            },
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=110)
        path.write_text("# dynik_ros suit calibration (wearable_node ~/calibrate)\n" + text, encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> SuitCalibration:
        path = Path(path).expanduser()
        try:
            data = load_yaml(path)
        except YamlFileError as exc:
            raise CalibrationError(str(exc)) from None
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise CalibrationError(f"{path}: not a suit calibration (expected format: {FORMAT})")
        try:
            offsets = {
                str(k): np.array(v, dtype=float).reshape(3, 3) for k, v in (data.get("offsets") or {}).items()
            }
            origin = np.array(data.get("origin", [0, 0, 0]), dtype=float).reshape(3)
            yaw = float(data.get("yaw", 0.0))
        except (TypeError, ValueError) as exc:
            raise CalibrationError(f"{path}: {exc}") from None
        for name, r in offsets.items():
            if not np.all(np.isfinite(r)) or np.abs(r @ r.T - np.eye(3)).max() > 1e-6 or np.linalg.det(r) < 0:
                raise CalibrationError(f"{path}: offsets.{name} is not a rotation matrix")
        if not (np.all(np.isfinite(origin)) and np.isfinite(yaw)):
            raise CalibrationError(f"{path}: origin and yaw must be finite")
        return cls(yaw, origin, offsets, str(data.get("pose", "tpose")), int(data.get("samples", 0)))
