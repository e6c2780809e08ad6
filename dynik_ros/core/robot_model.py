"""Kinematic model of a human or a robot: URDF -> pinocchio, frames, joint limits, coupled-joint constraints.

The configuration space is ``R^3 x SO(3) x R^n`` for a floating base (sec. 2.2 of Rapetti et al. 2020) and
``R^n`` for a fixed base. Only 1-DoF revolute or prismatic joints are accepted as actuated joints, so the
joint part of ``q`` and of ``nu`` share their indices.
"""

from __future__ import annotations

import difflib
import warnings
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion
from dynik_ros.core.urdf_check import UrdfError, check_urdf  # noqa: F401 - UrdfError re-exported

DEFAULT_VELOCITY_LIMIT = 10.0  # rad/s, used where a URDF gives no (or a zero) velocity limit


class UnknownFrameError(KeyError):
    """A frame or joint name that the model does not have; the message lists the closest valid names."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        close = difflib.get_close_matches(name, valid, n=5, cutoff=0.4)
        hint = f"; closest valid names: {', '.join(close)}" if close else ""
        super().__init__(f"unknown {kind} '{name}' in the model{hint}")
        self.name = name

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class LinearJointConstraints:
    """Coupled-joint constraints ``A s <= b`` (eq. 11) with per-row velocity bounds ``b^v`` (eq. 13b).

    ``joints`` names the columns of ``A``; rows are expressed on those joints only.
    """

    joints: tuple[str, ...]
    A: np.ndarray
    b: np.ndarray
    velocity_bound: np.ndarray | None = None

    def __post_init__(self) -> None:
        a = np.atleast_2d(np.asarray(self.A, dtype=float))
        b = np.asarray(self.b, dtype=float).reshape(-1)
        if a.shape != (b.size, len(self.joints)):
            raise ValueError(
                f"linear joint constraints: A has shape {a.shape}, expected ({b.size}, {len(self.joints)}) "
                "for the given b and joint list"
            )
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ValueError("linear joint constraints: A and b must be finite")
        object.__setattr__(self, "A", a)
        object.__setattr__(self, "b", b)
        if self.velocity_bound is not None:
            vb = np.asarray(self.velocity_bound, dtype=float).reshape(-1)
            if vb.shape != b.shape or np.any(vb <= 0):
                raise ValueError("linear joint constraints: velocity_bound must be positive, one per row")
            object.__setattr__(self, "velocity_bound", vb)


@dataclass
class RobotModel:
    """A pinocchio model plus the limits the dynamical IK needs.

    Build it with :meth:`from_urdf_file` or :meth:`from_urdf_string`. Arrays ``lower``, ``upper`` and
    ``velocity_limit`` are indexed like :attr:`joint_names` (the actuated joints in pinocchio order).
    """

    model: pin.Model
    floating_base: bool
    joint_names: list[str]
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    constraints: LinearJointConstraints | None = None
    name: str = "robot"
    _frame_names: list[str] = field(default_factory=list, repr=False)
    # follower joint -> (leader joint, multiplier, offset): s_follower = multiplier s_leader + offset
    mimic: dict[str, tuple[str, float, float]] = field(default_factory=dict)
    # joints held at a fixed value (URDF velocity limit 0, or locked by name); per joint, like `lower`
    locked: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    lock_values: np.ndarray = field(default_factory=lambda: np.zeros(0))

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_urdf_string(
        cls,
        xml: str,
        floating_base: bool = True,
        joint_limit_overrides: dict[str, tuple[float, float]] | None = None,
        velocity_limit_overrides: dict[str, float] | None = None,
        constraints: LinearJointConstraints | None = None,
        locked_joints: list[str] | tuple[str, ...] = (),
        source: str = "URDF",
    ) -> RobotModel:
        """Parse a URDF with pinocchio (free-flyer root unless ``floating_base`` is false).

        ``<mimic>`` joints follow their leader; joints whose URDF velocity limit is 0 (passive joints,
        hands driven elsewhere) and those named in ``locked_joints`` are locked at their neutral value, with
        one warning listing the joints locked by the URDF. A velocity override of 0 also locks. A URDF that
        is not a robot tree is a :class:`UrdfError` naming ``source`` (the file) and the fault."""
        check_urdf(xml, source)
        try:
            model = (
                pin.buildModelFromXML(xml, pin.JointModelFreeFlyer())
                if floating_base
                else pin.buildModelFromXML(xml)
            )
        except (RuntimeError, ValueError) as exc:  # a fault check_urdf does not look for
            raise UrdfError(f"{source}: pinocchio cannot build a model from it: {exc}") from None
        zero_velocity, mimic = _urdf_joint_details(xml)
        robot = cls._from_pinocchio(model, floating_base, joint_limit_overrides, None, constraints)
        robot.mimic = {f: m for f, m in mimic.items() if f in robot.joint_names and m[0] in robot.joint_names}
        given = {
            j for j, v in (velocity_limit_overrides or {}).items() if v > 0
        }  # a positive override unlocks
        by_urdf = [
            j for j in robot.joint_names if j in zero_velocity and j not in robot.mimic and j not in given
        ]
        if by_urdf:
            warnings.warn(
                f"{robot.name}: joints with a zero velocity limit in the URDF are locked at their neutral "
                f"value: {by_urdf}",
                stacklevel=2,
            )
        for joint in [*by_urdf, *locked_joints]:
            robot.lock_joint(joint)
        for joint, vmax in (velocity_limit_overrides or {}).items():
            robot.set_velocity_limit(joint, vmax)
        return robot

    @classmethod
    def from_urdf_file(cls, path: str | Path, **kwargs) -> RobotModel:
        """Read a URDF file; see :meth:`from_urdf_string` for the options."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"URDF file not found: {path}")
        try:
            xml = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UrdfError(f"{path}: cannot read the URDF: {exc}") from None
        return cls.from_urdf_string(xml, source=str(path), **kwargs)

    @classmethod
    def _from_pinocchio(
        cls,
        model: pin.Model,
        floating_base: bool,
        joint_limit_overrides: dict[str, tuple[float, float]] | None,
        velocity_limit_overrides: dict[str, float] | None,
        constraints: LinearJointConstraints | None,
    ) -> RobotModel:
        first = 2 if floating_base else 1
        names = [str(n) for n in model.names[first:]]
        for jid in range(first, model.njoints):
            joint = model.joints[jid]
            if joint.nq != 1 or joint.nv != 1:
                raise ValueError(
                    f"joint '{model.names[jid]}' has nq={joint.nq}, nv={joint.nv}: only 1-DoF revolute or "
                    "prismatic joints are supported (declare continuous joints as revolute with limits)"
                )
        offset = 7 if floating_base else 0
        lower = np.array(model.lowerPositionLimit[offset:], dtype=float)
        upper = np.array(model.upperPositionLimit[offset:], dtype=float)
        vel_offset = 6 if floating_base else 0
        velocity = np.array(model.velocityLimit[vel_offset:], dtype=float)
        velocity[~np.isfinite(velocity) | (velocity <= 0)] = DEFAULT_VELOCITY_LIMIT
        robot = cls(
            model=model,
            floating_base=floating_base,
            joint_names=names,
            lower=lower,
            upper=upper,
            velocity_limit=velocity,
            name=str(model.name) or "robot",
            _frame_names=[str(f.name) for f in model.frames],
            locked=np.zeros(len(names), dtype=bool),
            lock_values=np.zeros(len(names)),
        )
        for joint, (lo, hi) in (joint_limit_overrides or {}).items():
            robot.set_position_limits(joint, lo, hi)
        for joint, vmax in (velocity_limit_overrides or {}).items():
            robot.set_velocity_limit(joint, vmax)
        if constraints is not None:
            robot.set_constraints(constraints)
        bad = np.flatnonzero(~(robot.lower < robot.upper))
        if bad.size:
            raise ValueError(f"joint limits with lower >= upper for: {[names[i] for i in bad]}")
        return robot

    # ----------------------------------------------------------------- sizes and lookups
    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    @property
    def base_dofs(self) -> int:
        """Number of leading entries of ``nu`` that belong to the base (6 or 0)."""
        return 6 if self.floating_base else 0

    @property
    def frame_names(self) -> list[str]:
        return list(self._frame_names)

    def frame_id(self, name: str) -> int:
        """Index of frame ``name``; :class:`UnknownFrameError` naming the closest valid frames otherwise."""
        if name not in self._frame_names:
            raise UnknownFrameError("frame", name, self._frame_names)
        return self.model.getFrameId(name)

    def joint_index(self, name: str) -> int:
        """Position of joint ``name`` in :attr:`joint_names`."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise UnknownFrameError("joint", name, self.joint_names) from None

    # ----------------------------------------------------------------- limits
    def set_position_limits(self, joint: str, lower: float, upper: float) -> None:
        if not (np.isfinite(lower) and np.isfinite(upper) and lower < upper):
            raise ValueError(
                f"position limits of '{joint}' must be finite with lower < upper, got {lower}, {upper}"
            )
        i = self.joint_index(joint)
        self.lower[i], self.upper[i] = lower, upper

    def set_velocity_limit(self, joint: str, limit: float) -> None:
        """Velocity limit of ``joint``; 0 locks it (:meth:`lock_joint`)."""
        if not (np.isfinite(limit) and limit >= 0):
            raise ValueError(f"velocity limit of '{joint}' must be finite and >= 0 (0 locks), got {limit}")
        if limit == 0:
            self.lock_joint(joint)
        else:
            self.velocity_limit[self.joint_index(joint)] = limit

    def lock_joint(self, joint: str, value: float | None = None) -> None:
        """Hold ``joint`` at ``value`` (default: its neutral angle clipped into its limits). Locking a mimic
        leader also holds its followers; a follower cannot be locked on its own."""
        i = self.joint_index(joint)
        if joint in self.mimic:
            raise ValueError(f"'{joint}' mimics '{self.mimic[joint][0]}': lock the leader instead")
        neutral = float(
            np.clip(pin.neutral(self.model)[self.nq - self.n_joints + i], self.lower[i], self.upper[i])
        )
        value = neutral if value is None else float(value)
        if not self.lower[i] <= value <= self.upper[i]:
            raise ValueError(
                f"lock value {value} of '{joint}' outside its limits [{self.lower[i]}, {self.upper[i]}]"
            )
        self.locked[i] = True
        self.lock_values[i] = value

    @property
    def has_reductions(self) -> bool:
        """Some joints are locked or mimic another: the QP works on the free joints only."""
        return bool(self.mimic) or bool(self.locked.any())

    def joint_expansion(self) -> np.ndarray:
        """``E`` (n_joints x n_free) with ``s_dot = E s_dot_free``: identity on free joints, the multiplier
        on a follower's row at its leader's column, zero rows for locked joints (and their followers)."""
        free = [i for i, j in enumerate(self.joint_names) if not self.locked[i] and j not in self.mimic]
        column = {i: c for c, i in enumerate(free)}
        out = np.zeros((self.n_joints, len(free)))
        for i in free:
            out[i, column[i]] = 1.0
        for follower, (leader, multiplier, _) in self.mimic.items():
            j = self.joint_index(leader)
            if j in column:
                out[self.joint_index(follower), column[j]] = multiplier
        return out

    def apply_reductions(self, joints: np.ndarray) -> np.ndarray:
        """``joints`` with locked joints at their lock value and followers at ``m s_leader + o`` (clipped
        into their limits)."""
        out = np.array(joints, dtype=float)
        out[self.locked] = self.lock_values[self.locked]
        for follower, (leader, multiplier, offset) in self.mimic.items():
            i, j = self.joint_index(follower), self.joint_index(leader)
            out[i] = np.clip(multiplier * out[j] + offset, self.lower[i], self.upper[i])
        return out

    def set_constraints(self, constraints: LinearJointConstraints) -> None:
        """Attach ``A s <= b``; missing velocity bounds default to ``|A| v_max`` row by row (eq. 13b)."""
        cols = [self.joint_index(j) for j in constraints.joints]
        a_full = np.zeros((constraints.A.shape[0], self.n_joints))
        a_full[:, cols] = constraints.A
        vb = constraints.velocity_bound
        if vb is None:
            vb = np.abs(a_full) @ self.velocity_limit
        self.constraints = LinearJointConstraints(tuple(self.joint_names), a_full, constraints.b, vb)

    # ----------------------------------------------------------------- configurations
    def neutral_configuration(self, warn: bool = True) -> np.ndarray:
        """Pinocchio neutral ``q`` with the joints clipped into their limits (warns when it had to clip)."""
        q = pin.neutral(self.model)
        offset = 7 if self.floating_base else 0
        s = q[offset:]
        clipped = np.clip(s, self.lower, self.upper)
        moved = np.flatnonzero(clipped != s)
        if moved.size and warn:
            warnings.warn(
                f"{self.name}: neutral angles outside their limits were clipped for "
                f"{[self.joint_names[i] for i in moved]}",
                stacklevel=2,
            )
        q[offset:] = clipped
        return q

    def split(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``q`` -> (base position, base rotation matrix, joint positions)."""
        if not self.floating_base:
            return np.zeros(3), np.eye(3), np.array(q, dtype=float)
        rotation = rotation_from_quaternion(np.asarray(q[3:7]))
        return np.array(q[:3], dtype=float), rotation, np.array(q[7:], dtype=float)

    def join(self, base_position: np.ndarray, base_rotation: np.ndarray, joints: np.ndarray) -> np.ndarray:
        """(base position, base rotation, joint positions) -> pinocchio ``q``."""
        if not self.floating_base:
            return np.array(joints, dtype=float)
        # (pinocchio's Quaternion(matrix) constructor leaks about 80 bytes a call: ours is leak-free)
        quat = quaternion_from_rotation(base_rotation)
        return np.concatenate((base_position, quat, joints))

    def frame_pose(
        self, q: np.ndarray, frame: str, data: pin.Data | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """World position and rotation of ``frame`` at configuration ``q``; ``data``: a ``pin.Data`` of the
        model to compute in (``createData`` costs most of a call), else a new one."""
        data = self.model.createData() if data is None else data
        fid = self.frame_id(frame)
        pin.framesForwardKinematics(self.model, data, q)
        pose = data.oMf[fid]
        return pose.translation.copy(), pose.rotation.copy()


def _urdf_joint_details(xml: str) -> tuple[set[str], dict[str, tuple[str, float, float]]]:
    """Joints whose ``<limit velocity>`` is 0, and ``<mimic>`` relations (comments are ignored)."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return set(), {}
    zero: set[str] = set()
    mimic: dict[str, tuple[str, float, float]] = {}
    for joint in root.iter("joint"):
        name = joint.get("name")
        if name is None or joint.get("type") in ("fixed", "floating", "planar", None):
            continue
        limit = joint.find("limit")
        if limit is not None and limit.get("velocity") is not None:
            try:
                if float(limit.get("velocity")) == 0.0:
                    zero.add(name)
            except ValueError:
                pass
        follows = joint.find("mimic")
        if follows is not None and follows.get("joint"):
            mimic[name] = (
                follows.get("joint"),
                float(follows.get("multiplier", 1.0)),
                float(follows.get("offset", 0.0)),
            )
    return zero, mimic
