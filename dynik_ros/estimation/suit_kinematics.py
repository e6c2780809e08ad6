"""Human66/Human48 state from the suit's link states: the link-pairwise inverse kinematics of Latella et al.
2019, sec. 3.2 (eq. 6), joint velocities from the link angular velocities, and accelerations by
differences.

Human66's Xsens joints are spherical, three revolute joints ``rotx``, ``roty``, ``rotz`` in that order, and
in the zero configuration every link frame is aligned with the pelvis (:mod:`dynik_ros.models.human`).
The relative rotation of a link pair is therefore ``R_parent^T R_child = R_x(a) R_y(b) R_z(c)``, and
eq. 6 (the angles that best reproduce the measured relative rotation) has the closed-form solution
``b = asin(R_02)``, ``a = atan2(-R_12, R_22)``, ``c = atan2(-R_01, R_00)`` (exact for ``|b| < 90 deg``).
Human48's joints (1 to 3 axes in anatomical order, with limits) are solved by Gauss-Newton on the rotation
error, warm-started from the previous sample and clipped into the limits.

Velocities: the base twist is the pelvis twist in the pelvis frame; the joint velocities solve the
stacked link angular velocities ``omega_L = J_L,ang nu`` in the least-squares sense. Accelerations (the
seed filters with Savitzky-Golay; here a central difference over the neighbouring samples, so the
estimate for a sample is ready one sample later): joint accelerations from the joint velocities, and the
proper sensor accelerations of eq. 12, ``(R_L^T (dv_L/dt - g), R_L^T domega_L/dt)``, from the link
twists.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import cho_factor, cho_solve

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.core.robot_model import RobotModel

GRAVITY = np.array([0.0, 0.0, -9.81])


@dataclass
class SuitSample:
    """One sample of the suit: time [s], world positions, rotations, linear and angular velocities of
    the links in the order of :attr:`SuitKinematics.links`; ``stamp_ns``: the source's stamp, carried
    through unchanged (a float of seconds since 1970 loses the nanoseconds)."""

    time: float
    positions: np.ndarray  # (L, 3)
    rotations: np.ndarray  # (L, 3, 3)
    linear_velocities: np.ndarray  # (L, 3)
    angular_velocities: np.ndarray  # (L, 3)
    stamp_ns: int = 0


@dataclass
class HumanState:
    """The model state at one suit sample: ``q``, ``nu``, joint accelerations and the links' proper
    sensor accelerations (eq. 12), plus the sample it came from."""

    sample: SuitSample
    q: np.ndarray
    v: np.ndarray
    joint_accelerations: np.ndarray
    link_accelerations: np.ndarray  # (L, 6)


_AXES = {"JointModelRX": (1.0, 0.0, 0.0), "JointModelRY": (0.0, 1.0, 0.0), "JointModelRZ": (0.0, 0.0, 1.0)}


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    return pin.exp3(np.asarray(axis) * angle)


class SuitKinematics:
    """Link states of the 23 Xsens links -> Human66/Human48 ``q``, ``nu`` and accelerations (module
    docstring). ``joints``: child link -> Xsens joint; the model's revolute joints named
    ``<xsens joint>_rot<axis>`` (1 to 3 of them, in chain order) model it."""

    def __init__(
        self, robot: RobotModel, links: Sequence[str], parents: dict[str, str], joints: dict[str, str]
    ):
        model = robot.model
        self.robot = robot
        self.links = tuple(links)
        index = {name: i for i, name in enumerate(self.links)}
        absent = [c for c in joints if c not in index or parents[c] not in index]
        if absent or "Pelvis" not in index:
            raise ValueError(f"the suit's links lack {absent or ['Pelvis']}")
        self.pelvis = index["Pelvis"]
        by_xsens: dict[str, list[int]] = {}
        for i, name in enumerate(robot.joint_names):
            by_xsens.setdefault(name.rsplit("_rot", 1)[0], []).append(i)
        unknown = sorted(set(by_xsens) - set(joints.values()))
        if unknown:
            raise ValueError(f"{robot.name}: joints {unknown[:3]} are not Xsens joints <joint>_rot<axis>")
        self.pairs = []  # (parent link, child link, joint indices, axes (k, 3), closed form x-y-z)
        for child, joint in joints.items():
            columns = by_xsens.get(joint, [])
            if not columns:  # a fixed joint (Human48's ball of the foot)
                continue
            kinds = [model.joints[model.getJointId(robot.joint_names[i])].shortname() for i in columns]
            if any(k not in _AXES for k in kinds):
                raise ValueError(f"{robot.name}: joint {joint} is not made of revolute x/y/z joints")
            axes = np.array([_AXES[k] for k in kinds])
            closed = [k[-1] for k in kinds] == ["X", "Y", "Z"]
            self.pairs.append((index[parents[child]], index[child], columns, axes, closed))
        self.frame_ids = [robot.frame_id(name) for name in self.links]
        self.data = model.createData()
        self.window: deque[tuple[SuitSample, np.ndarray, np.ndarray]] = deque(maxlen=3)
        self._last_s = np.zeros(robot.n_joints)
        self._angular_rows = np.zeros((3 * len(self.links), robot.nv))

    @classmethod
    def for_human(cls, robot: RobotModel) -> SuitKinematics:
        """The 23 Xsens links on a Human66 or Human48 model."""
        from dynik_ros.models.human import XSENS_JOINTS, XSENS_PARENT
        from dynik_ros.models.segments import XSENS_SEGMENTS

        return cls(robot, XSENS_SEGMENTS, XSENS_PARENT, XSENS_JOINTS)

    def reset(self) -> None:
        self.window.clear()
        self._last_s = np.zeros(self.robot.n_joints)

    def configuration(self, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        """``q`` from world link poses: the pelvis pose and eq. 6 per link pair, in closed form for x-y-z
        joints (Human66), else by Gauss-Newton on the rotation error from the previous sample's angles,
        clipped into the joint limits (Human48)."""
        s = self._last_s.copy()
        lower, upper = self.robot.lower, self.robot.upper
        for parent, child, columns, axes, closed in self.pairs:
            r = rotations[parent].T @ rotations[child]
            if closed:
                ix, iy, iz = columns
                s[iy] = math.asin(min(1.0, max(-1.0, r[0, 2])))  # scalars: math, not numpy's ufuncs
                s[ix] = math.atan2(-r[1, 2], r[2, 2])
                s[iz] = math.atan2(-r[0, 1], r[0, 0])
                continue
            angles = s[columns]
            for _ in range(6):
                partial = [np.eye(3)]  # R_{i+1} ... R_k, from the last joint back
                for axis, angle in zip(axes[::-1], angles[::-1], strict=True):
                    partial.append(_rotation(axis, angle) @ partial[-1])
                model_r = partial[-1]
                error = pin.log3(model_r.T @ r)  # in the child frame
                jac = np.stack([partial[len(axes) - 1 - i].T @ axes[i] for i in range(len(axes))], axis=1)
                step, *_ = np.linalg.lstsq(jac, error, rcond=None)
                angles = np.clip(angles + step, lower[columns], upper[columns])
                if np.abs(step).max() < 1e-12:
                    break
            s[columns] = angles
        self._last_s = s
        rotation = rotations[self.pelvis]
        return np.concatenate((positions[self.pelvis], quaternion_from_rotation(rotation), s))

    def velocity(self, q: np.ndarray, linear: np.ndarray, angular: np.ndarray) -> np.ndarray:
        """``nu``: the pelvis twist in the pelvis frame, joint velocities by least squares on the links'
        world angular velocities."""
        model, data = self.robot.model, self.data
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        rotation = data.oMf[self.frame_ids[self.pelvis]].rotation
        base = np.concatenate((rotation.T @ linear[self.pelvis], rotation.T @ angular[self.pelvis]))
        jac, lwa = self._angular_rows, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        for i, fid in enumerate(self.frame_ids):
            jac[3 * i : 3 * i + 3] = pin.getFrameJacobian(model, data, fid, lwa)[3:]
        rhs = angular.reshape(-1) - jac[:, :6] @ base
        joints = jac[:, 6:]
        # normal equations by Cholesky (the 23 links' rows have full column rank away from a gimbal lock of
        # eq. 6's x-y-z joints); a singular system falls back to the minimum-norm least squares
        try:
            s_dot = cho_solve(cho_factor(joints.T @ joints, lower=True, check_finite=False), joints.T @ rhs)
        except np.linalg.LinAlgError:
            s_dot, *_ = np.linalg.lstsq(joints, rhs, rcond=None)
        return np.concatenate((base, s_dot))

    def push(self, sample: SuitSample) -> HumanState | None:
        """Add a sample; returns the state of the *previous* sample once it has a neighbour on each side
        (central differences), else ``None``."""
        q = self.configuration(sample.positions, sample.rotations)
        v = self.velocity(q, sample.linear_velocities, sample.angular_velocities)
        self.window.append((sample, q, v))
        if len(self.window) < 3:
            return None
        (before, _, v0), (middle, q1, v1), (after, _, v2) = self.window
        span = after.time - before.time
        if not span > 0:
            raise ValueError(f"suit samples not in time order ({before.time} -> {after.time})")
        joint_acc = (v2[6:] - v0[6:]) / span
        lin = (after.linear_velocities - before.linear_velocities) / span - GRAVITY
        ang = (after.angular_velocities - before.angular_velocities) / span
        rot_t = np.transpose(middle.rotations, (0, 2, 1))
        link_acc = np.concatenate((rot_t @ lin[:, :, None], rot_t @ ang[:, :, None]), axis=1)[:, :, 0]
        return HumanState(middle, q1, v1, joint_acc, link_acc)
