"""Instantaneous-optimisation baselines of sec. 5.1 of Rapetti et al. 2020 (eq. 17), for comparison only.

* :class:`WholeBodyIK` - one problem for the whole model, solved to a tolerance at every sample by
  Gauss-Newton steps, each a QP with the same cost as eq. (10), joint-limit bounds on the increment and the
  coupled-joint rows ``A (s + delta) <= b`` (eq. 17b), warm-started from the previous sample's solution.
* :class:`PairwiseIK` - the model split into sub-chains between pairs of orientation targets (Figure 6);
  each pair's relative rotation is matched independently on a reduced model holding only that sub-chain's
  joints. The base pose is read from the root target.

Both return ``(q, v)`` like :class:`~dynik_ros.core.dynamical_ik.DynamicalIK`, with ``v`` obtained by
finite differences of consecutive solutions (they have no velocity of their own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3, orientation_residual_world
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP


@dataclass
class IterationInfo:
    iterations: int = 0
    converged: bool = False


class WholeBodyIK:
    """Whole-body instantaneous IK (sec. 5.1): iterate until every target residual is below ``tolerance``."""

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet | Sequence[FrameTarget],
        tolerance: float = 1e-4,
        max_iterations: int = 50,
        q0: np.ndarray | None = None,
        qp: QPSettings | None = None,
    ):
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.tolerance = tolerance
        self.max_iterations = max_iterations
        self.kinematics = FrameKinematics.for_targets(robot, self.targets)
        self.weights = self.targets.weights()
        nb, n = robot.base_dofs, robot.n_joints
        rows = [np.hstack((np.zeros((n, nb)), np.eye(n)))]
        self._coupled = robot.constraints
        if self._coupled is not None:
            rows.append(np.hstack((np.zeros((self._coupled.A.shape[0], nb)), self._coupled.A)))
        self.qp = VelocityQP(self.kinematics.pattern(), np.vstack(rows), qp or QPSettings(damping=1e-6))
        self.q = robot.neutral_configuration() if q0 is None else np.asarray(q0, dtype=float)
        self.info = IterationInfo()

    def step(self, measurements: Measurements, dt: float) -> tuple[np.ndarray, np.ndarray]:
        measurements.validate(self.targets)
        previous = self.q.copy()
        p, rot, s = self.robot.split(self.q)
        converged, iterations = False, 0
        while iterations < self.max_iterations:
            iterations += 1
            q = self.robot.join(p, rot, s)
            positions, rotations = self.kinematics.update(q)
            residual = pose_residual(positions, rotations, measurements.positions, measurements.rotations)
            if np.abs(residual).max(initial=0.0) < self.tolerance:
                converged = True
                break
            jacobian = self.kinematics.stacked_jacobian(p)
            lower, upper = self.robot.lower - s, self.robot.upper - s
            if self._coupled is not None:
                slack = np.maximum(self._coupled.b - self._coupled.A @ s, 0.0)
                lower = np.concatenate((lower, np.full(slack.size, -np.inf)))
                upper = np.concatenate((upper, slack))
            delta = self.qp.solve(jacobian, residual, self.weights, lower, upper).nu
            nb = self.robot.base_dofs
            if nb:
                p = p + delta[:3]
                rot = exp_so3(delta[3:6]) @ rot
            s = np.clip(s + delta[nb:], self.robot.lower, self.robot.upper)
        self.q = self.robot.join(p, rot, s)
        self.info = IterationInfo(iterations, converged)
        return self.q, pin.difference(self.robot.model, previous, self.q) / dt


class PairwiseIK:
    """Pair-wise instantaneous IK (sec. 5.1, Figure 6): one small problem per (parent, child) target pair."""

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet | Sequence[FrameTarget],
        tolerance: float = 1e-4,
        max_iterations: int = 50,
        damping: float = 1e-6,
        q0: np.ndarray | None = None,
    ):
        self.robot = robot
        self.targets = TargetSet.of(targets)
        self.tolerance, self.max_iterations, self.damping = tolerance, max_iterations, damping
        self.q = robot.neutral_configuration() if q0 is None else np.asarray(q0, dtype=float)
        model = robot.model
        frames = [t.frame for t in self.targets.orientation_targets]
        joints_of = {f: set(model.supports[model.frames[robot.frame_id(f)].parentJoint]) for f in frames}
        roots = [f for f in frames if all(not joints_of[g] < joints_of[f] for g in frames if g != f)]
        base_joint = 1 if robot.floating_base else 0
        if len(roots) != 1 or (
            robot.floating_base and model.frames[robot.frame_id(roots[0])].parentJoint != base_joint
        ):
            raise ValueError(
                f"pair-wise IK needs exactly one root orientation target on the base link, got {roots}"
            )
        self.root = roots[0]
        self._root_index = frames.index(self.root)
        self._pairs: list[_Pair] = []
        offset = 7 if robot.floating_base else 0
        for child_index, child in enumerate(frames):
            if child == self.root or any(joints_of[g] == joints_of[child] for g in frames[:child_index]):
                continue  # the root, or rigidly attached to an earlier target (nothing to solve)
            ancestors = [g for g in frames if g != child and joints_of[g] < joints_of[child]]
            parent = max(ancestors, key=lambda g: len(joints_of[g]))
            free = sorted(joints_of[child] - joints_of[parent])
            lock = [j for j in range(1, model.njoints) if j not in free]
            reduced = pin.buildReducedModel(model, lock, self.q)
            columns = [model.joints[j].idx_q - offset for j in free]
            self._pairs.append(_Pair(frames.index(parent), child_index, parent, child, reduced, columns))
        base_frame = model.frames[robot.frame_id(self.root)].placement
        self._root_in_base = (base_frame.translation.copy(), base_frame.rotation.copy())
        self.info = IterationInfo()

    def step(self, measurements: Measurements, dt: float) -> tuple[np.ndarray, np.ndarray]:
        measurements.validate(self.targets)
        previous = self.q.copy()
        p, rot, s = self.robot.split(self.q)
        total, converged = 0, True
        for pair in self._pairs:
            goal = measurements.rotations[pair.parent_index].T @ measurements.rotations[pair.child_index]
            values, iterations, ok = pair.solve(
                goal, s, self.robot, self.tolerance, self.max_iterations, self.damping
            )
            s[pair.columns] = values
            total += iterations
            converged &= ok
        if self.robot.floating_base:
            offset, root_rot = self._root_in_base
            rot = measurements.rotations[self._root_index] @ root_rot.T
            links = self.targets.position_links
            root_link = self.targets.orientation_links[self._root_index]
            if root_link in links:
                p = measurements.positions[links.index(root_link)] - rot @ offset
        self.q = self.robot.join(p, rot, s)
        self.info = IterationInfo(total, converged)
        return self.q, pin.difference(self.robot.model, previous, self.q) / dt


@dataclass
class _Pair:
    parent_index: int
    child_index: int
    parent: str
    child: str
    model: pin.Model
    columns: list[int]

    def __post_init__(self) -> None:
        self.data = self.model.createData()
        self.parent_id = self.model.getFrameId(self.parent)
        self.child_id = self.model.getFrameId(self.child)

    def solve(
        self,
        goal: np.ndarray,
        s: np.ndarray,
        robot: RobotModel,
        tolerance: float,
        max_iterations: int,
        damping: float,
    ) -> tuple[np.ndarray, int, bool]:
        """Match ``R_parent^T R_child`` to ``goal`` with damped Gauss-Newton on this pair's joints."""
        x = s[self.columns].copy()
        lower, upper = robot.lower[self.columns], robot.upper[self.columns]
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        for iteration in range(1, max_iterations + 1):
            pin.computeJointJacobians(self.model, self.data, x)
            pin.updateFramePlacements(self.model, self.data)
            parent_rot = self.data.oMf[self.parent_id].rotation
            child_rot = self.data.oMf[self.child_id].rotation
            residual = orientation_residual_world(child_rot, parent_rot @ goal)
            if np.abs(residual).max() < tolerance:
                return x, iteration, True
            # (eigenpy hands a 6 x 1 Jacobian back as a vector: keep it two-dimensional)
            jac = pin.getFrameJacobian(self.model, self.data, self.child_id, lwa).reshape(6, -1)[3:]
            step = np.linalg.solve(jac.T @ jac + damping * np.eye(x.size), jac.T @ residual)
            x = np.clip(x + step, lower, upper)
        return x, max_iterations, False
