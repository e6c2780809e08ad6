"""Floating-base pose and twist from an optical-mocap rigid body (ROS-free; used by ``mocap_node``).

Calibration averages the first ``calibration_samples`` base poses; world alignment then rotates about the
vertical and translates the mocap world so that the calibrated base sits at ``initial_position`` with
heading ``initial_yaw`` (roll and pitch stay as measured: the mocap z axis is assumed vertical). The twist
is a finite difference of consecutive poses, low-pass filtered (first order, ``cutoff_hz``), expressed in
the base frame as ``nav_msgs/Odometry`` wants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.so3 import project_to_so3, rotation_about


def rpy_to_rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF / REP 103 convention)."""
    return rotation_about("z", yaw) @ rotation_about("y", pitch) @ rotation_about("x", roll)


def yaw_of(rotation: np.ndarray) -> float:
    """Heading of a rotation (the yaw of its ZYX decomposition)."""
    return math.atan2(rotation[1, 0], rotation[0, 0])


@dataclass
class BaseState:
    stamp_ns: int
    position: np.ndarray  # world
    rotation: np.ndarray  # world
    linear_velocity: np.ndarray  # base frame
    angular_velocity: np.ndarray  # base frame


class MocapBaseEstimator:
    """Rigid-body poses in, calibrated and world-aligned base states out."""

    def __init__(
        self,
        offset_position: np.ndarray,
        offset_rotation: np.ndarray,
        calibration_samples: int = 50,
        initial_position: np.ndarray | None = None,
        initial_yaw: float = 0.0,
        align_world: bool = True,
        cutoff_hz: float = 10.0,
        max_dt: float = 0.1,
    ):
        self.offset_position = np.asarray(offset_position, dtype=float)
        self.offset_rotation = np.asarray(offset_rotation, dtype=float)
        self.calibration_samples = int(calibration_samples)
        self.initial_position = (
            np.zeros(3) if initial_position is None else np.asarray(initial_position, float)
        )
        self.initial_yaw = float(initial_yaw)
        self.align_world = align_world
        self.cutoff_hz = cutoff_hz
        self.max_dt = max_dt
        self.reset()

    def reset(self) -> None:
        """Forget the calibration and the filter state."""
        self._samples: list[tuple[np.ndarray, np.ndarray]] = []
        self.world_rotation = np.eye(3)  # world <- mocap world
        self.world_position = np.zeros(3)
        self.calibrated = False
        self._previous: BaseState | None = None
        self._lin_w, self._ang_b, self._filtered = np.zeros(3), np.zeros(3), False

    def restart_velocity(self) -> None:
        """Forget the previous pose (keep the calibration): the next pose starts the velocity estimate
        afresh, e.g. after the body re-appeared somewhere else."""
        self._previous = None
        self._lin_w, self._ang_b, self._filtered = np.zeros(3), np.zeros(3), False

    def _base_in_mocap(self, position: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return position + rotation @ self.offset_position, rotation @ self.offset_rotation

    def update(self, stamp_ns: int, position: np.ndarray, rotation: np.ndarray) -> BaseState | None:
        """Feed one rigid-body pose (mocap world); returns the base state, or None while calibrating."""
        p, r = self._base_in_mocap(np.asarray(position, float), np.asarray(rotation, float))
        if not self.calibrated:
            self._samples.append((p, r))
            if len(self._samples) < self.calibration_samples:
                return None
            self._calibrate()
        p_w = self.world_rotation @ p + self.world_position
        r_w = self.world_rotation @ r
        prev = self._previous
        dt = (stamp_ns - prev.stamp_ns) * 1e-9 if prev is not None else 0.0
        if prev is not None and 0.0 < dt <= self.max_dt:
            lin_w = (p_w - prev.position) / dt
            ang_b = pin.log3(prev.rotation.T @ r_w) / dt  # body-frame rate over the interval
            if self.cutoff_hz > 0 and self._filtered:
                alpha = dt / (dt + 1.0 / (2.0 * math.pi * self.cutoff_hz))
                lin_w = self._lin_w + alpha * (lin_w - self._lin_w)
                ang_b = self._ang_b + alpha * (ang_b - self._ang_b)
            self._lin_w, self._ang_b, self._filtered = lin_w, ang_b, True
        else:  # first sample or a gap: no velocity information
            self._lin_w, self._ang_b, self._filtered = np.zeros(3), np.zeros(3), False
        state = BaseState(stamp_ns, p_w, r_w, r_w.T @ self._lin_w, self._ang_b.copy())
        self._previous = state
        return state

    def _calibrate(self) -> None:
        positions = np.array([p for p, _ in self._samples])
        mean_position = positions.mean(axis=0)
        mean_rotation = project_to_so3(np.mean([r for _, r in self._samples], axis=0))
        if self.align_world:
            self.world_rotation = rotation_about("z", self.initial_yaw - yaw_of(mean_rotation))
            self.world_position = self.initial_position - self.world_rotation @ mean_position
        self.calibrated = True
        self._samples = []
