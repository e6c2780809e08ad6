"""Whole-body instantaneous IK with a generic bounded nonlinear least-squares solver (benchmark only).

Sec. 5.1 of Rapetti et al. 2020 solves eq. (17) at every sample with a general NLP solver (IPOPT),
warm-started from the previous sample. We do the same with SciPy's trust-region-reflective
``least_squares`` (joint limits as bounds, analytic Jacobian): the kind of solver people reach for when
they write "IK by optimisation". :class:`~dynik_ros.core.instantaneous_ik.WholeBodyIK` is the strong
variant of the same baseline (Gauss-Newton steps on our QP).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin
from scipy.optimize import least_squares

from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual
from dynik_ros.core.instantaneous_ik import IterationInfo
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet


class NlpWholeBodyIK:
    """Eq. (17) with ``scipy.optimize.least_squares(method="trf")``; variables: base position, a rotation
    vector applied to the warm-start base orientation, joint positions."""

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet | Sequence[FrameTarget],
        tolerance: float = 1e-6,
        max_evaluations: int = 100,
        q0: np.ndarray | None = None,
    ):
        if not robot.floating_base:
            raise ValueError("NlpWholeBodyIK expects a floating-base model")
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.tolerance, self.max_evaluations = tolerance, max_evaluations
        self.kinematics = FrameKinematics.for_targets(robot, self.targets)
        self.weights = self.targets.weights()
        self.q = robot.neutral_configuration() if q0 is None else np.asarray(q0, dtype=float)
        inf = np.full(6, np.inf)
        self._bounds = (np.concatenate((-inf, robot.lower)), np.concatenate((inf, robot.upper)))
        self.info = IterationInfo()

    def step(self, measurements: Measurements, dt: float) -> tuple[np.ndarray, np.ndarray]:
        measurements.validate(self.targets)
        previous = self.q.copy()
        p0, r0, s0 = self.robot.split(self.q)

        def configuration(x: np.ndarray) -> np.ndarray:
            return self.robot.join(x[:3], exp_so3(x[3:6]) @ r0, x[6:])

        def residual(x: np.ndarray) -> np.ndarray:
            positions, rotations = self.kinematics.update(configuration(x))
            r = pose_residual(positions, rotations, measurements.positions, measurements.rotations)
            return self.weights * r

        def jacobian(x: np.ndarray) -> np.ndarray:
            self.kinematics.update(configuration(x))
            return -self.weights[:, None] * self.kinematics.stacked_jacobian(x[:3])

        x0 = np.concatenate((p0, np.zeros(3), np.clip(s0, self.robot.lower, self.robot.upper)))
        result = least_squares(
            residual,
            x0,
            jac=jacobian,
            bounds=self._bounds,
            method="trf",
            xtol=self.tolerance,
            ftol=self.tolerance,
            gtol=self.tolerance,
            max_nfev=self.max_evaluations,
        )
        self.q = configuration(result.x)
        self.info = IterationInfo(int(result.nfev), bool(result.success))
        return self.q, pin.difference(self.robot.model, previous, self.q) / dt
