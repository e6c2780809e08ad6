"""Floating-base velocity from the feet in contact (Latella et al. 2019, sec. 3.2, eq. 7-10).

A foot in contact with the ground is still: its twist ``J_C(q) nu = J_b(q) v_B + J_s(q) s_dot = 0``
(eq. 7, the contact Jacobian split into its base and joint columns, eq. 2). Given the joint velocities the
base twist is the least-squares solution

    v_B* = argmin || J_b v_B + J_s s_dot ||^2

over the stacked Jacobians of the feet in contact (eq. 8 right foot, eq. 9 left foot, eq. 10 both). With
one foot ``J_b`` is the 6x6 adjoint from base to foot and the solution is exact; with both feet the two
constraints are reconciled in the least-squares sense.

Conventions are pinocchio's: ``v_B`` is the base twist in the base frame (linear, angular), the first six
entries of ``nu``; the contact twists are taken in each foot's own frame (``LOCAL``), where "still" is a
zero vector whatever the frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel


class BaseVelocityFromContacts:
    """Base twist that keeps the contact frames still (eq. 8-10)."""

    def __init__(self, robot: RobotModel, contact_frames: Sequence[str]):
        if not robot.floating_base:
            raise ValueError(f"{robot.name}: base velocity from contacts needs a floating-base model")
        if not contact_frames:
            raise ValueError("at least one contact frame is needed")
        self.robot = robot
        self.frames = tuple(contact_frames)
        self.frame_ids = [robot.frame_id(name) for name in self.frames]
        self.data = robot.model.createData()

    def contact_jacobians(self, q: np.ndarray) -> list[np.ndarray]:
        """``J_C(q)`` (6 x nv, foot frame) of every contact frame (eq. 2)."""
        model, data = self.robot.model, self.data
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        return [pin.getFrameJacobian(model, data, fid, pin.ReferenceFrame.LOCAL) for fid in self.frame_ids]

    def estimate(self, q: np.ndarray, s_dot: np.ndarray, contacts: Sequence[bool]) -> np.ndarray | None:
        """``v_B*`` (6,) for the frames flagged in ``contacts`` (eq. 8, 9 or 10); ``None`` when no frame is
        in contact (nothing constrains the base)."""
        if len(contacts) != len(self.frames):
            raise ValueError(f"expected {len(self.frames)} contact flags, got {len(contacts)}")
        if not any(contacts):
            return None
        jacobians = self.contact_jacobians(q)
        stacked = np.vstack([j for j, on in zip(jacobians, contacts, strict=True) if on])
        j_b, j_s = stacked[:, :6], stacked[:, 6:]
        solution, *_ = np.linalg.lstsq(j_b, -j_s @ np.asarray(s_dot, dtype=float), rcond=None)
        return solution

    def estimate_world(
        self, q: np.ndarray, s_dot: np.ndarray, contacts: Sequence[bool]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``(linear, angular)`` velocity of the base in world axes (the suit's pelvis velocity convention),
        or ``None`` without contact."""
        twist = self.estimate(q, s_dot, contacts)
        if twist is None:
            return None
        rotation = self.robot.split(q)[1]
        return rotation @ twist[:3], rotation @ twist[3:]
