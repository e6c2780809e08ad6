"""Kinematic loops as equality rows of the one QP per step (issue 12 item 3; second seed sec. IV-C b).

The seed keeps a mechanism with loops assembled by imposing its joint constraints exactly while the IK
targets are objectives, "so that the robot remains in an assembled configuration" even when targets cannot
be reached (eq. 3: ``min f_IK(s) + R(s)  s.t.  C_IK(s) = 0``). Here the robot is a kinematic tree (pinocchio,
generalised coordinates) whose loops are cut at one joint each; a :class:`LoopClosure` names the two frames
that coincide at the cut (one on each side) and the world axes of that coincidence (all three, or the two
of a planar loop's plane). With ``e = p_a - p_b`` (at ``q_{k-1}``) the rows ask the step to close the loop:

    (J_a - J_b) nu_k = -K_loop e        (K_loop dt <= 1: the closure error shrinks by (1 - K dt) per step),

linearised where the step is predicted to end like the support rows (:mod:`.com_objective`): with
``e_pred`` the error at the predicted configuration, ``e_k ~ e_pred + dt J (nu_k - m_pred)``, so the rows are
``J nu_k = ((1 - K dt) e_{k-1} - e_pred) / dt + J m_pred``. They are equalities (``l = u``) next to the joint
limits: targets that would pull the mechanism apart are simply not met, and if the rows cannot be met with the
limits the step holds (the solver's failure path). Steps are integrated by Euler when loops are present (a
multistep rule against always-active rows alternates, as measured for the support rows).

The rows are first order: a large step (a target 1 m away asks for 70 rad/s on the test's four-bar) opened
the loop by 3.7 cm in one step, and the next steps' rows, asked to close it within the velocity limits, were
infeasible (the IK held for good). So after each step the joints are projected back onto the loops, as the
seed's forward kinematics does (``min |C(s)|^2`` by Gauss-Newton, eq. 1): ``ds = -J^+ e`` on the joint
columns until ``|e| < 1e-10`` m (at most 5 iterations), joints clipped into their limits. Both the rows and
the projection act only in the directions the joints move the loops in (:data:`RANK_TOLERANCE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.frame_kinematics import mixed_jacobian
from dynik_ros.core.robot_model import RobotModel

RANK_TOLERANCE = 1e-6  # loop directions moved less than this (relative to the best) are left alone


def _well_conditioned(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A nu = b`` rotated onto the directions the joints can move the loops in (``U^T A nu = U^T b``,
    singular values above ``RANK_TOLERANCE`` times the largest) and padded with ``0 = 0`` rows. A nearly
    planar loop (Cassie's rods: joint axes parallel to 1e-3) has a third direction the joints move it by
    1e-7 m per rad: asked to close a round-off error there, the rows (and the projection) demanded
    radians per step and drove the joints into their limits."""
    if not a.size:
        return a, b
    u, singular, vt = np.linalg.svd(a, full_matrices=False)
    keep = singular > RANK_TOLERANCE * max(float(singular[0]), 1e-300)
    rows = np.zeros_like(a)
    rhs = np.zeros_like(b)
    n = int(keep.sum())
    rows[:n] = singular[keep, None] * vt[keep]
    rhs[:n] = u[:, keep].T @ b
    return rows, rhs


@dataclass(frozen=True)
class LoopClosure:
    """Two frames that coincide when the loop is closed, the world axes compared, and the gain [1/s]."""

    frame_a: str
    frame_b: str
    axes: tuple[int, ...] = (0, 1, 2)
    gain: float = 50.0

    def __post_init__(self) -> None:
        if (
            not self.axes
            or any(a not in (0, 1, 2) for a in self.axes)
            or len(set(self.axes)) != len(self.axes)
        ):
            raise ValueError(f"loop {self.frame_a}-{self.frame_b}: axes must be distinct values of 0, 1, 2")
        if not (np.isfinite(self.gain) and self.gain > 0):
            raise ValueError(f"loop {self.frame_a}-{self.frame_b}: gain must be positive and finite")


class LoopRows:
    """The equality rows of a set of :class:`LoopClosure` for one :class:`RobotModel`."""

    def __init__(self, robot: RobotModel, loops: Sequence[LoopClosure]):
        self.robot = robot
        self.loops = tuple(loops)
        self._ids = [(robot.frame_id(c.frame_a), robot.frame_id(c.frame_b)) for c in self.loops]
        self.n_rows = sum(len(c.axes) for c in self.loops)
        self.errors = np.zeros(self.n_rows)

    def observe(self, data: pin.Data) -> None:
        """Closure errors ``e`` at ``q_{k-1}`` (``data`` holds its frame placements)."""
        self.errors = self._errors(data)

    def _errors(self, data: pin.Data) -> np.ndarray:
        out = []
        for (a, b), loop in zip(self._ids, self.loops, strict=True):
            diff = data.oMf[a].translation - data.oMf[b].translation
            out.append(diff[list(loop.axes)])
        return np.concatenate(out) if out else np.zeros(0)

    def rows(
        self,
        model: pin.Model,
        data: pin.Data,
        base_rotation: np.ndarray,
        dt: float,
        predicted_mean: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` of ``A nu_k = b`` with ``data`` holding the step's Jacobians and frame placements."""
        nb = self.robot.base_dofs
        blocks, targets = [], []
        e_pred = self._errors(data)
        k = 0
        for (a, b), loop in zip(self._ids, self.loops, strict=True):
            jac = pin.getFrameJacobian(model, data, a, pin.LOCAL_WORLD_ALIGNED)[:3]
            jac = jac - pin.getFrameJacobian(model, data, b, pin.LOCAL_WORLD_ALIGNED)[:3]
            if nb:  # pinocchio's base-local twist -> mixed (world) base velocity
                jac = mixed_jacobian(jac, base_rotation)
            rows = jac[list(loop.axes)]
            m = len(loop.axes)
            shrink = 1.0 - min(1.0, loop.gain * dt)
            targets.append((shrink * self.errors[k : k + m] - e_pred[k : k + m]) / dt + rows @ predicted_mean)
            blocks.append(rows)
            k += m
        return _well_conditioned(np.vstack(blocks), np.concatenate(targets))

    def project(
        self, joints: np.ndarray, base_position, base_rotation, tolerance: float = 1e-10
    ) -> np.ndarray:
        """``joints`` moved (minimum norm, Gauss-Newton) until every loop is closed to ``tolerance``."""
        robot = self.robot
        model = robot.model
        data = getattr(self, "_data", None) or model.createData()
        self._data = data
        nb = robot.base_dofs
        for _ in range(5):
            q = robot.join(base_position, base_rotation, joints) if nb else joints
            pin.computeJointJacobians(model, data, q)
            pin.updateFramePlacements(model, data)
            error = self._errors(data)
            if not error.size or np.abs(error).max() < tolerance:
                break
            jac = np.vstack(
                [
                    (
                        pin.getFrameJacobian(model, data, a, pin.LOCAL_WORLD_ALIGNED)[:3]
                        - pin.getFrameJacobian(model, data, b, pin.LOCAL_WORLD_ALIGNED)[:3]
                    )[list(loop.axes), nb:]
                    for (a, b), loop in zip(self._ids, self.loops, strict=True)
                ]
            )
            step = np.linalg.lstsq(jac, -error, rcond=RANK_TOLERANCE)[0]
            joints = np.clip(joints + step, robot.lower, robot.upper)
            if robot.has_reductions:
                joints = robot.apply_reductions(joints)
        return joints
