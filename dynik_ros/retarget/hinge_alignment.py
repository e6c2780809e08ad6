"""Limb twist from the bend: orientation targets a robot with hinge elbows (or knees) can reach.

A human elbow flexes about an axis fixed in the upper arm; a suit does not see it that cleanly. Soft tissue
turns an IMU on the upper arm about the arm's long axis, and a capture whose T-pose was not held exactly maps
the flexion onto a tilted axis. The two orientation targets of a hinge (upper arm, forearm) then ask for a
forearm rotation relative to the upper arm that no bend of the robot's elbow (plus the roll of its forearm)
produces: on a real Xsens take the left forearm's flexion axis wandered 30 deg in the upper arm's frame, the
unreachable part was 57-75 deg, and the IK split it between both links (G1: 29-50 deg on each).

The twist of the upper arm about its long axis is the least observable quantity and the one the bend decides:
rotate the parent's target about its long axis ``l`` by the angle ``psi`` that puts the child's direction
``d`` (its long axis, in the parent target's frame) into the robot's bending plane, i.e. onto the side
``u = s h x l`` the hinge ``h`` bends to (``s`` from the joint's range at calibration):

    psi = atan2(l . (u x d_perp), u . d_perp),     d_perp = d - (d . l) l,

applied as ``R_parent <- R_parent exp(psi l^)``. Any forearm rotation taking ``l`` to ``d`` then splits into a
bend about ``h`` and a roll about the forearm's own axis (the robot's wrist roll), so both targets become
reachable. Near a straight limb the bending plane is undefined: the correction fades in over the first
``fade`` radians of bend. The child's target is left as measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel


@dataclass(frozen=True)
class Hinge:
    """A parent/child pair of orientation-target rows joined by one bending joint."""

    parent_row: int
    child_row: int
    axis: np.ndarray  # the hinge axis h in the parent link's frame
    long_axis: np.ndarray  # the limb's long axis l in the parent link's frame (from parent to child)
    child_long_axis: np.ndarray  # the same axis in the child link's frame (the limb straight at calibration)
    bend_side: np.ndarray  # u = s h x l: where the child's direction goes when the hinge bends
    joint: str


class HingeAlignment:
    """The twist correction of the module docstring for a list of hinges."""

    def __init__(self, hinges: list[Hinge], fade: float = np.radians(20.0)):
        self.hinges = hinges
        self.fade = float(fade)
        self._cache: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def apply(self, rotations: np.ndarray) -> np.ndarray:
        """``(N, n_ori, 3, 3)`` target rotations with each hinge's parent twisted (a new array)."""
        if not self.hinges:
            return rotations
        if rotations.shape[0] == 1:  # one live sample: scalar arithmetic (numpy calls cost more here)
            return self._apply_one(rotations)
        out = rotations.copy()
        for h, (across, skew_l, skew_l2) in zip(self.hinges, self._bases, strict=True):
            parent = rotations[:, h.parent_row]
            d = np.einsum("nji,nj->ni", parent, rotations[:, h.child_row] @ h.child_long_axis)  # R_p^T R_c l
            along = d @ h.long_axis
            x, y = d @ h.bend_side, d @ across  # d_perp in the bending plane's basis (u, l x u)
            angle = np.arctan2(y, x) * np.clip(np.arctan2(np.hypot(x, y), along) / self.fade, 0.0, 1.0)
            s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
            out[:, h.parent_row] = parent @ (np.eye(3) + s * skew_l + (1.0 - c) * skew_l2)  # exp(angle l^)
        return out

    def _apply_one(self, rotations: np.ndarray) -> np.ndarray:
        out = rotations.copy()
        for h, (across, _, _) in zip(self.hinges, self._bases, strict=True):
            parent = rotations[0, h.parent_row].tolist()
            child = rotations[0, h.child_row].tolist()
            lc = h.child_long_axis.tolist()
            cl = [sum(child[i][j] * lc[j] for j in range(3)) for i in range(3)]  # R_c l_c
            d = [sum(parent[j][i] * cl[j] for j in range(3)) for i in range(3)]  # R_p^T R_c l_c
            along = sum(a * b for a, b in zip(d, h.long_axis.tolist(), strict=True))
            x = sum(a * b for a, b in zip(d, h.bend_side.tolist(), strict=True))
            y = sum(a * b for a, b in zip(d, across.tolist(), strict=True))
            weight = min(max(math.atan2(math.hypot(x, y), along) / self.fade, 0.0), 1.0)
            angle = math.atan2(y, x) * weight
            out[0, h.parent_row] = rotations[0, h.parent_row] @ _rotation_about(h.long_axis, angle)
        return out

    @property
    def _bases(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        if self._cache is None:
            self._cache = []
            for h in self.hinges:
                x, y, z = h.long_axis
                skew_l = np.array(((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0)))
                self._cache.append((np.cross(h.long_axis, h.bend_side), skew_l, skew_l @ skew_l))
        return self._cache


def _rotation_about(axis: np.ndarray, angle: float) -> np.ndarray:
    """``exp(angle axis^)`` for a unit ``axis`` (Rodrigues)."""
    x, y, z = axis.tolist()
    s, c = math.sin(angle), math.cos(angle)
    t = 1.0 - c
    return np.array(
        (
            (c + t * x * x, t * x * y - s * z, t * x * z + s * y),
            (t * x * y + s * z, c + t * y * y, t * y * z - s * x),
            (t * x * z - s * y, t * y * z + s * x, c + t * z * z),
        )
    )


def find_hinge(
    robot: RobotModel, q: np.ndarray, parent_frame: str, child_frame: str, parent_row: int, child_row: int
) -> Hinge:
    """The hinge between two robot frames at the calibration configuration ``q`` (the limb straight): the
    revolute joint on the path whose axis is the most perpendicular to the limb; its range at ``q`` gives the
    side it bends to. The limb's long axis is the axis of a roll joint on the path when there is one (the
    robot's forearm roll: exactly what it can turn about), else the line between the frames. Raises
    ``ValueError`` when the frames are not on one chain or no joint bends it."""
    model = robot.model
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    fp, fc = robot.frame_id(parent_frame), robot.frame_id(child_frame)
    jp, jc = model.frames[fp].parentJoint, model.frames[fc].parentJoint
    path = []
    j = jc
    while j > jp:
        path.append(j)
        j = model.parents[j]
    if j != jp or not path:
        raise ValueError(f"hinge: '{child_frame}' does not follow '{parent_frame}' on one kinematic chain")
    r_parent, p_parent = data.oMf[fp].rotation, data.oMf[fp].translation
    limb = data.oMf[fc].translation - p_parent
    if np.linalg.norm(limb) < 1e-6:
        raise ValueError(f"hinge: '{parent_frame}' and '{child_frame}' coincide")
    limb_world = limb / np.linalg.norm(limb)
    axes = [
        (joint, axis)
        for joint in path
        if model.joints[joint].nv == 1 and (axis := _joint_axis_world(robot, q, joint)) is not None
    ]
    best = max(axes, key=lambda ja: 1.0 - abs(ja[1] @ limb_world), default=None)
    if best is None or 1.0 - abs(best[1] @ limb_world) < 0.5:
        raise ValueError(f"hinge: no joint between '{parent_frame}' and '{child_frame}' bends the limb")
    roll = max(axes, key=lambda ja: abs(ja[1] @ limb_world))
    if abs(roll[1] @ limb_world) > 0.85:  # the forearm's own roll joint: its axis is the limb's long axis
        limb_world = np.sign(roll[1] @ limb_world) * roll[1]
    joint, axis_world = best
    h = r_parent.T @ axis_world
    l_vec = r_parent.T @ limb_world
    l_vec = l_vec - (l_vec @ h) * h
    l_vec /= np.linalg.norm(l_vec)
    name = model.names[joint]
    index = model.idx_qs[joint]
    lo, hi = model.lowerPositionLimit[index], model.upperPositionLimit[index]
    side = 1.0 if hi - q[index] >= q[index] - lo else -1.0
    child_long = data.oMf[fc].rotation.T @ (r_parent @ l_vec)
    return Hinge(parent_row, child_row, h, l_vec, child_long, side * np.cross(h, l_vec), name)


def _joint_axis_world(robot: RobotModel, q: np.ndarray, joint: int) -> np.ndarray | None:
    """World axis of a 1-dof revolute joint at ``q`` (from a small rotation of it); ``None`` if prismatic."""
    model = robot.model
    data = model.createData()
    step = 1e-4
    dq = np.zeros(model.nv)
    dq[model.idx_vs[joint]] = step
    pin.forwardKinematics(model, data, q)
    before = data.oMi[joint].rotation.copy()
    pin.forwardKinematics(model, data, pin.integrate(model, q, dq))
    turn = pin.log3(data.oMi[joint].rotation @ before.T)
    if np.linalg.norm(turn) < 0.5 * step:
        return None
    return turn / np.linalg.norm(turn)
