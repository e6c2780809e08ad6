"""The dynamical IK's base-velocity feed-forward from the feet in contact (Latella et al. 2019, sec. 3.2,
eq. 8-10), for a suit that gives no pelvis velocity. ROS-free.

The feed-forward of eq. (9) of the IK, ``v* = v_ref + K e``, needs the reference velocity of every target;
a suit without velocities (or a stream that drops them) leaves the pelvis position to the gain alone, a lag
of ``v / K`` (0.11 m at a 4 km/h walk with K = 10/s). ``source`` chooses what the targets on the floating
base (the pelvis) get:

* ``"suit"``: the measured velocities as they are;
* ``"contacts"``: the base twist that keeps the feet in contact still (eq. 8-10, least squares over the
  contact Jacobians) at the IK's configuration, with the joint velocities the suit's link angular
  velocities give there (least squares over the orientation targets' Jacobians: the seed's ``s_dot``
  comes from the suit too), or the IK's own last joint velocities when the suit gives no angular
  velocity; zero when no foot is in contact;
* ``"none"``: zero (the base tracks its pose by the gain alone).

The other targets keep their measured velocities. The contact state is the kinematic rule shared with the
retargeter (:mod:`.kinematic_contact`) on the human's foot links, or the retargeter's own foot contact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import Measurements, TargetSet
from dynik_ros.estimation.base_velocity import BaseVelocityFromContacts
from dynik_ros.estimation.contact_classification import KinematicContactClassifier

BASE_VELOCITY_SOURCES = ("suit", "contacts", "none")
HUMAN_FOOT_LINKS = ("RightFoot", "RightToe", "LeftFoot", "LeftToe")


class BaseFeedForward:
    """Replaces the velocity feed-forward of the targets on the floating base (module docstring).

    ``contact_frames``: the model's frames that are still while in contact (the feet), in the order of the
    contact flags given to :meth:`apply`."""

    def __init__(
        self,
        robot: RobotModel,
        targets: TargetSet,
        source: str = "suit",
        contact_frames: Sequence[str] = ("RightFoot", "LeftFoot"),
    ):
        if source not in BASE_VELOCITY_SOURCES:
            raise ValueError(f"base velocity source must be one of {BASE_VELOCITY_SOURCES}, got {source!r}")
        if source != "suit" and not robot.floating_base:
            raise ValueError(f"{robot.name}: base_velocity_source '{source}' needs a floating-base model")
        self.robot, self.source = robot, source
        frames = robot.model.frames
        on_base = [frames[robot.frame_id(t.frame)].parentJoint == 1 for t in targets.targets]
        self.position_rows = [
            i
            for i, t in enumerate(targets.position_targets)
            if frames[robot.frame_id(t.frame)].parentJoint == 1
        ]
        self.orientation_rows = [
            i
            for i, t in enumerate(targets.orientation_targets)
            if frames[robot.frame_id(t.frame)].parentJoint == 1
        ]
        self.offsets = np.array(
            [
                frames[robot.frame_id(targets.position_targets[i].frame)].placement.translation
                for i in self.position_rows
            ]
        ).reshape(-1, 3)
        if source != "suit" and not any(on_base):
            raise ValueError(f"{robot.name}: no target on the floating base to give a base velocity")
        self.n_position, self.n_orientation = targets.n_position, targets.n_orientation
        self.orientation_ids = [robot.frame_id(t.frame) for t in targets.orientation_targets]
        self.data = robot.model.createData()
        self.base = BaseVelocityFromContacts(robot, contact_frames) if source == "contacts" else None
        self.classifier: KinematicContactClassifier | None = None
        self.twist: tuple[np.ndarray, np.ndarray] | None = None  # the last base twist given (world axes)
        self.uses = 0  # samples given the contact twist

    @classmethod
    def for_human(
        cls,
        robot: RobotModel,
        targets: TargetSet,
        source: str,
        height: float = 1.75,
        mass: float = 75.0,
        ground: float = 0.0,
    ) -> BaseFeedForward:
        """For a human model tracking the suit: the feet ``RightFoot``/``LeftFoot`` and their contact from
        the suit's foot and toe links (:meth:`contacts_from_links`)."""  # fmt: skip
        out = cls(robot, targets, source)
        out.classifier = KinematicContactClassifier.for_human(HUMAN_FOOT_LINKS, height, mass, ground)
        return out

    def reset(self) -> None:
        if self.classifier is not None:
            self.classifier.reset()
        self.twist = None
        self.uses = 0

    def contacts_from_links(
        self,
        poses: Mapping[str, tuple[np.ndarray, np.ndarray]],
        twists: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    ) -> list[bool]:
        """Right, left foot in contact from one sample of the suit's foot links (sole height and speed
        with hysteresis; without twists the speed counts as zero)."""
        if self.classifier is None:
            raise ValueError("contacts_from_links needs BaseFeedForward.for_human")
        p = np.array([poses[name][0] for name in HUMAN_FOOT_LINKS], dtype=float)
        v = np.zeros_like(p)
        if twists:
            for i, name in enumerate(HUMAN_FOOT_LINKS):
                if name in twists:
                    v[i] = twists[name][0]
        self.classifier.update(p, v)
        return list(self.classifier.flags)

    def base_twist(
        self, q: np.ndarray, s_dot: np.ndarray, contacts: Sequence[bool]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """World-axes ``(linear, angular)`` velocity of the base by eq. 8-10, ``None`` without contact."""
        assert self.base is not None
        return self.base.estimate_world(q, s_dot, [bool(c) for c in contacts])

    def joint_velocities(self, q: np.ndarray, angular_velocities: np.ndarray) -> np.ndarray:
        """``s_dot`` that best explains the measured world angular velocities ``(n_o, 3)`` of the
        orientation targets at ``q`` (least squares; the base's angular velocity is solved with them)."""
        model, data = self.robot.model, self.data
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        rows = np.vstack(
            [pin.getFrameJacobian(model, data, fid, lwa)[3:, 3:] for fid in self.orientation_ids]
        )
        solution, *_ = np.linalg.lstsq(rows, np.asarray(angular_velocities, dtype=float).ravel(), rcond=None)
        return solution[3:]

    def apply(
        self,
        measurements: Measurements,
        q: np.ndarray,
        contacts: Sequence[bool] | None,
        joint_velocities: np.ndarray | None = None,
    ) -> Measurements:
        """``measurements`` with the base targets' feed-forward from :attr:`source`; ``q``: the IK's
        configuration, ``contacts``: per contact frame, ``joint_velocities``: used for eq. 8-10 when the
        measurements carry no angular velocity (e.g. the IK's last step; default zero)."""
        if self.source == "suit":
            return measurements
        lin = (
            np.zeros((self.n_position, 3))
            if measurements.linear_velocities is None
            else np.array(measurements.linear_velocities, dtype=float)
        )
        ang = (
            np.zeros((self.n_orientation, 3))
            if measurements.angular_velocities is None
            else np.array(measurements.angular_velocities, dtype=float)
        )
        twist = None
        if self.source == "contacts" and contacts is not None and any(contacts):
            if measurements.angular_velocities is not None and self.n_orientation:
                s_dot = self.joint_velocities(q, measurements.angular_velocities)
            elif joint_velocities is not None:
                s_dot = np.asarray(joint_velocities, dtype=float)
            else:
                s_dot = np.zeros(self.robot.n_joints)
            twist = self.base_twist(q, s_dot, contacts)
        self.twist = twist
        self.uses += twist is not None
        if twist is None:
            lin[self.position_rows] = 0.0
            ang[self.orientation_rows] = 0.0
        else:
            linear, angular = twist
            rotation = self.robot.split(q)[1]
            lin[self.position_rows] = linear + np.cross(angular, self.offsets @ rotation.T)
            ang[self.orientation_rows] = angular
        return dataclasses.replace(measurements, linear_velocities=lin, angular_velocities=ang)
