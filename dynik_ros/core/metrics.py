"""Accuracy metrics of sec. 5 of Rapetti et al. 2020: MNTE (eq. 15), angular-velocity RMSE (eq. 16), and
position RMSE for position targets, evaluated for a configuration ``(q, v)`` against one measurement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import normalized_trace_error
from dynik_ros.core.targets import Measurements, TargetSet


def mnte(model_rotations: np.ndarray, target_rotations: np.ndarray) -> float:
    """Mean normalised trace error, eq. (15): mean over targets of ``tr(I - R^T R*) / 2``."""
    return float(np.mean(normalized_trace_error(model_rotations, target_rotations)))


def angular_velocity_rmse(model_omegas: np.ndarray, target_omegas: np.ndarray) -> float:
    """Eq. (16): ``sqrt(mean_j ||omega_j - omega_hat_j||^2 / 3)``."""
    diff = np.asarray(target_omegas) - np.asarray(model_omegas)
    return float(np.sqrt(np.mean(np.sum(diff**2, axis=-1) / 3.0)))


def position_rmse(model_positions: np.ndarray, target_positions: np.ndarray) -> float:
    """Root mean square of the position error over targets and axes (metres)."""
    diff = np.asarray(target_positions) - np.asarray(model_positions)
    return float(np.sqrt(np.mean(diff**2))) if diff.size else 0.0


@dataclass(frozen=True)
class TrackingError:
    mnte: float
    angular_velocity_rmse: float
    position_rmse: float


class TrackingEvaluator:
    """Evaluates eq. (15), (16) and position RMSE of ``(q, v)`` (pinocchio layout) for a target set."""

    def __init__(self, robot: RobotModel, targets: TargetSet):
        self.robot = robot
        self.targets = targets
        self.data = robot.model.createData()
        self._pos_ids = [robot.frame_id(t.frame) for t in targets.position_targets]
        self._ori_ids = [robot.frame_id(t.frame) for t in targets.orientation_targets]

    def evaluate(self, q: np.ndarray, v: np.ndarray, measurements: Measurements) -> TrackingError:
        model, data = self.robot.model, self.data
        pin.forwardKinematics(model, data, q, v)
        pin.updateFramePlacements(model, data)
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        rotations = np.array([data.oMf[i].rotation for i in self._ori_ids]).reshape(-1, 3, 3)
        positions = np.array([data.oMf[i].translation for i in self._pos_ids]).reshape(-1, 3)
        omegas = np.array([pin.getFrameVelocity(model, data, i, lwa).angular for i in self._ori_ids]).reshape(
            -1, 3
        )
        target_omegas = measurements.angular_velocities
        return TrackingError(
            mnte=mnte(rotations, measurements.rotations) if len(self._ori_ids) else 0.0,
            angular_velocity_rmse=(
                angular_velocity_rmse(omegas, target_omegas) if target_omegas is not None else float("nan")
            ),
            position_rmse=position_rmse(positions, measurements.positions),
        )
