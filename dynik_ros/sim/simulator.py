"""Headless MuJoCo simulation of a registry robot behind position controllers (ROS-free).

The model is the IK's URDF (:mod:`dynik_ros.sim.urdf_mjcf`) with a free-flying base on a ground plane and
one ``<position>`` actuator per joint. Per physics step (default 1 kHz, ``implicitfast`` integrator):

1. the :class:`~dynik_ros.sim.trajectory.JointTrajectoryFollower` gives the reference ``q_r`` (always
   finite and inside the limits) which becomes ``data.ctrl``;
2. the actuator torque is ``tau = clip(kp (q_r - q) - kv qdot, -effort, effort)``: a joint PD servo like
   the RH5 actuator loop of the mocap seed (eq. 8, without feed-forward torque), torque limit = the URDF
   ``effort``;
3. with ``base_mode="harness"`` a spring-damper wrench pulls the base towards a target pose (the IK's
   base pose and velocity, or where it started): ``f = K (p* - p) + D (v* - v)``,
   ``m = K_r log(R* R^T) + D_r (w* - w)``. The damping of the base's own velocity, ``-D v`` and
   ``-D_r w``, is the free joint's ``dof_damping``, which MuJoCo integrates implicitly; the rest is
   applied at the base's centre of mass (moment corrected for the offset), each part capped. Applied
   explicitly, ``D_r`` (~150 N m s/rad for a 30 kg robot) on a base link as light as the iCub's
   ``root_link`` (1.9e-4 kg m^2: ``D_r dt / I`` ~ 800 at 1 kHz) made the base spin at 15 rad/s in place.
   ``"free"`` applies nothing.

Gains: ``kp = kp_scale * kp_per_effort * effort`` (default effort where the URDF has none), capped so that
``kp dt^2 / M_jj <= 0.25`` (explicit spring stability, ``M_jj`` the joint-space inertia diagonal at the
start pose, rotor armature included); ``kv = kv_scale * 2 zeta sqrt(kp M_jj)`` (critically damped per
joint for ``zeta = 1``; damping is integrated implicitly by MuJoCo).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dynik_ros.sim.trajectory import JointTrajectoryFollower
from dynik_ros.sim.urdf_mjcf import PreparedUrdf, UrdfSimError, prepare_urdf

BASE_MODES = ("free", "harness")


@dataclass
class SimConfig:
    """Physics, servo and harness settings (SI units)."""

    timestep: float = 1e-3
    base_mode: str = "harness"
    kp_per_effort: float = 20.0  # kp [N m/rad] per N m of effort limit: full torque at 0.05 rad error
    default_effort: float = 50.0  # N m (or N) where the URDF gives no effort limit
    kp_scale: float = 1.0
    kv_scale: float = 1.0
    # the RH5 seed's eq. 8 with the reference velocity: ctrl = q_ref + (kv / kp) v_ref makes the position
    # servo's force kp (q_ref - q) + kv (v_ref - v) instead of kp (q_ref - q) - kv v
    velocity_feedforward: bool = False
    damping_ratio: float = 0.7
    armature: float = 0.01  # kg m^2 rotor inertia added to joints whose URDF gives none
    self_collision: bool = False
    friction: float = 1.0
    # s, ground contact stiffness (MuJoCo solref time constant; its default 0.02): at 20 ms the G1's 5 cm wide
    # sole rolls 0.5-2 deg under the robot's weight on one foot; a slow walk stands at 5 ms (README, issue 12)
    contact_time_constant: float = 0.02
    limit_time_constant: float = 0.002  # s, joint-limit constraint stiffness (MuJoCo solref)
    ground_clearance: float = 0.002  # m between the lowest collision point and the ground at start
    harness_stiffness: float = 1.0e4  # N/m
    harness_angular_stiffness: float = 2.0e3  # N m/rad
    harness_damping_ratio: float = 1.0
    harness_max_force: float = 2.0e3  # N
    harness_max_moment: float = 5.0e2  # N m

    def validate(self) -> None:
        if not 1e-4 <= self.timestep <= 2e-3:
            raise ValueError(f"timestep {self.timestep} s: physics must run between 500 Hz and 10 kHz")
        if not (
            math.isfinite(self.contact_time_constant) and self.contact_time_constant >= 2 * self.timestep
        ):
            raise ValueError(
                f"contact_time_constant {self.contact_time_constant} s: must be at least two physics steps"
            )
        if self.base_mode not in BASE_MODES:
            raise ValueError(f"base_mode '{self.base_mode}' is not one of {list(BASE_MODES)}")
        for name in (
            "kp_per_effort",
            "default_effort",
            "kp_scale",
            "harness_max_force",
            "harness_max_moment",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        for name in (
            "kv_scale",
            "damping_ratio",
            "armature",
            "harness_stiffness",
            "harness_angular_stiffness",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")


@dataclass
class StepStats:
    """Steps taken and the wall time they took: the real-time factor is sim time / wall time."""

    steps: int = 0
    wall: float = 0.0
    recent: list[tuple[float, float]] = field(default_factory=list)  # (sim s, wall s) of recent chunks

    def add(self, sim: float, wall: float, steps: int) -> None:
        self.steps += steps
        self.wall += wall
        self.recent.append((sim, wall))
        if len(self.recent) > 200:
            del self.recent[:100]

    @property
    def real_time_factor(self) -> float:
        """Sim time per wall second of stepping over the recent chunks (NaN before any step)."""
        sim = sum(s for s, _ in self.recent)
        wall = sum(w for _, w in self.recent)
        return sim / wall if wall > 0 else float("nan")


class Simulator:
    """A MuJoCo robot with position servos, a joint reference follower and an optional base harness.

    ``joint_names`` are the controller's joints (the IK's joints that have an actuator here, IK order);
    ``lower``/``upper`` the limits commands are clipped to (the IK model's). ``initial_q`` is a pinocchio
    free-flyer configuration ``[x y z qx qy qz qw, joints...]`` in the IK's joint order.
    """

    def __init__(
        self,
        urdf_path: str | Path,
        joint_names: list[str],
        lower: np.ndarray,
        upper: np.ndarray,
        initial_q: np.ndarray,
        config: SimConfig | None = None,
    ):
        import mujoco

        self._mj = mujoco
        self.config = config or SimConfig()
        self.config.validate()
        self.urdf_path = Path(urdf_path)
        prepared = prepare_urdf(self.urdf_path)
        self.prepared: PreparedUrdf = prepared
        spec = self._build_spec(prepared)
        try:
            self.model = spec.compile()
        except ValueError as exc:
            raise UrdfSimError(f"{self.urdf_path}: MuJoCo refused the model ({exc})") from None
        self.data = mujoco.MjData(self.model)
        model = self.model
        self.root_body = model.body(prepared.root_link).id
        self._free_dof = int(model.joint("base_free_joint").dofadr[0])
        actuated = {model.actuator(i).name: i for i in range(model.nu)}
        given = list(joint_names)
        self.joint_names = [j for j in given if j in actuated]
        self.uncontrolled = [j for j in given if j not in actuated]
        keep = [given.index(j) for j in self.joint_names]
        lower = np.asarray(lower, dtype=float)[keep]
        upper = np.asarray(upper, dtype=float)[keep]
        self.actuator_ids = np.array([actuated[j] for j in self.joint_names], dtype=int)
        self.qpos_adr = np.array([model.joint(j).qposadr[0] for j in self.joint_names], dtype=int)
        self.dof_adr = np.array([model.joint(j).dofadr[0] for j in self.joint_names], dtype=int)
        one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        hinge = [i for i in range(model.njnt) if int(model.jnt_type[i]) in one_dof]
        self.all_joint_names = [model.joint(i).name for i in hinge]
        self._all_qpos = np.array([model.jnt_qposadr[i] for i in hinge], dtype=int)
        self._all_dof = np.array([model.jnt_dofadr[i] for i in hinge], dtype=int)
        self._set_initial_state(np.asarray(initial_q, dtype=float), list(joint_names))
        self._initial_qpos = self.data.qpos.copy()
        self.instabilities = 0  # MuJoCo found NaN/huge qpos, qvel or qacc and reset: the start pose restored
        self._bad = [
            int(w)
            for w in (
                mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL,
                mujoco.mjtWarning.mjWARN_BADQACC,
            )
        ]
        self._bad_seen = 0
        initial = self.data.qpos[self.qpos_adr].copy()
        self.follower = JointTrajectoryFollower(self.joint_names, lower, upper, initial)
        self._set_gains()
        self.data.ctrl[self.actuator_ids] = self.follower.position
        self.total_mass = float(model.body_subtreemass[self.root_body])
        c = self.config
        rot_inertia = 0.1 * self.total_mass  # ~ m (0.3 m)^2 about the base
        self._harness_gains = (
            c.harness_stiffness,
            2.0 * c.harness_damping_ratio * math.sqrt(c.harness_stiffness * self.total_mass),
            c.harness_max_force,
            c.harness_angular_stiffness,
            2.0 * c.harness_damping_ratio * math.sqrt(c.harness_angular_stiffness * rot_inertia),
            c.harness_max_moment,
        )
        if c.base_mode == "harness":  # the damping of the base's velocity, implicit (module docstring)
            f = self._free_dof
            model.dof_damping[f : f + 3] = self._harness_gains[1]  # world-frame linear velocity
            model.dof_damping[f + 3 : f + 6] = self._harness_gains[4]  # base-frame angular velocity
        self._quat_error, self._moment_local, self._moment_world = np.zeros(3), np.zeros(3), np.zeros(3)
        self._harness_position = (0.0, 0.0, 0.0)
        self._harness_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._harness_velocity = (0.0, 0.0, 0.0)
        self._harness_angular_velocity = np.zeros(3)
        self._harness_moving = False
        self._inverse_quat, self._target_w_local = np.zeros(4), np.zeros(3)
        self.harness_target: tuple[np.ndarray, np.ndarray] = (np.zeros(3), np.eye(3))
        self.set_harness_target(*self.base_pose())
        self.stats = StepStats()
        mujoco.mj_forward(self.model, self.data)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_robot(cls, name_or_yaml: str | Path, config: SimConfig | None = None) -> Simulator:
        """A registry robot (``g1``, ``icub``, ``talos`` or a map YAML) standing in its IK start pose."""
        from dynik_ros.retarget.registry import load_robot

        spec = load_robot(name_or_yaml)
        robot = spec.robot
        if not robot.floating_base:
            raise UrdfSimError(f"{spec.config.where}: the sim needs a floating-base robot map")
        return cls(
            spec.urdf_path, robot.joint_names, robot.lower, robot.upper, spec.initial_configuration(), config
        )

    def _build_spec(self, prepared: PreparedUrdf):
        mujoco = self._mj
        c = self.config
        spec = mujoco.MjSpec.from_string(prepared.xml, assets=prepared.assets)
        spec.option.timestep = c.timestep
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        root = spec.body(prepared.root_link)
        if root is None:
            raise UrdfSimError(f"{self.urdf_path}: root link '{prepared.root_link}' missing after import")
        root.add_freejoint(name="base_free_joint")
        for geom in spec.geoms:
            geom.contype, geom.conaffinity = 1, (1 if c.self_collision else 0)
            geom.condim = 3
            geom.friction = [c.friction, 0.005, 0.0001]
            geom.solref = [c.contact_time_constant, 1.0]
        floor = spec.worldbody.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
        floor.contype, floor.conaffinity = 0, 1
        floor.friction = [c.friction, 0.005, 0.0001]
        floor.solref = [c.contact_time_constant, 1.0]
        for joint in spec.joints:
            info = prepared.joints.get(joint.name)
            if info is None:
                continue
            if joint.armature <= 0:
                joint.armature = c.armature
            # stiff joint limits (MuJoCo's default 20 ms time constant let a joint slammed into its limit by
            # a full-range step command go 0.5 rad past it); 2 physics steps is the stable minimum
            joint.solref_limit = [max(2.0 * c.timestep, c.limit_time_constant), 1.0]
            joint.solimp_limit = [0.95, 0.99, 0.001, 0.5, 2.0]
            if info.mimic is not None:
                leader, multiplier, offset = info.mimic
                spec.add_equality(
                    type=mujoco.mjtEq.mjEQ_JOINT,
                    name1=joint.name,
                    name2=leader,
                    data=[offset, multiplier, 0, 0, 0] + [0] * 6,
                )
                continue
            effort = info.effort if info.effort is not None else c.default_effort
            actuator = spec.add_actuator(
                name=joint.name, target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT
            )
            actuator.set_to_position(kp=1.0, kv=0.0)
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            actuator.forcerange = [-effort, effort]
        return spec

    def _set_initial_state(self, q: np.ndarray, ik_joints: list[str]) -> None:
        """qpos from a pinocchio configuration; the base lifted so the lowest collision point is
        ``ground_clearance`` above the ground."""
        mj, model, data = self._mj, self.model, self.data
        if q.size != 7 + len(ik_joints) or not np.all(np.isfinite(q)):
            raise ValueError(f"initial configuration has {q.size} values, expected 7 + {len(ik_joints)}")
        free = model.joint("base_free_joint").qposadr[0]
        data.qpos[free : free + 3] = q[:3]
        data.qpos[free + 3 : free + 7] = [q[6], q[3], q[4], q[5]]  # pinocchio xyzw -> MuJoCo wxyz
        for j, name in enumerate(ik_joints):
            try:
                joint = model.joint(name)
            except KeyError:
                continue
            data.qpos[joint.qposadr[0]] = q[7 + j]
        mj.mj_kinematics(model, data)
        lowest = np.inf
        for g in range(model.ngeom):
            if model.geom_bodyid[g] == 0:
                continue
            rbound = model.geom_rbound[g]
            if model.geom_type[g] == mj.mjtGeom.mjGEOM_MESH:
                mesh = model.geom_dataid[g]
                start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
                verts = model.mesh_vert[start : start + count]
                world = data.geom_xpos[g] + verts @ data.geom_xmat[g].reshape(3, 3).T
                lowest = min(lowest, float(world[:, 2].min()))
            else:
                lowest = min(lowest, float(data.geom_xpos[g][2] - rbound))
        if np.isfinite(lowest):
            data.qpos[free + 2] += self.config.ground_clearance - lowest
        data.qvel[:] = 0.0
        mj.mj_forward(model, data)

    def _set_gains(self) -> None:
        mj, model, data = self._mj, self.model, self.data
        c = self.config
        full = np.zeros((model.nv, model.nv))
        mj.mj_fullM(model, data, full)
        inertia = np.diag(full)[self.dof_adr]
        self.kp = np.zeros(len(self.joint_names))
        self.kv = np.zeros(len(self.joint_names))
        for k, a in enumerate(self.actuator_ids):
            effort = float(model.actuator_forcerange[a, 1])
            kp = c.kp_scale * c.kp_per_effort * effort
            kp = min(kp, 0.25 * inertia[k] / c.timestep**2)
            kv = c.kv_scale * 2.0 * c.damping_ratio * np.sqrt(kp * inertia[k])
            model.actuator_gainprm[a, 0] = kp
            model.actuator_biasprm[a, 1] = -kp
            model.actuator_biasprm[a, 2] = -kv
            self.kp[k], self.kv[k] = kp, kv
        self.joint_inertia = inertia
        self._kv_over_kp = np.divide(self.kv, self.kp, out=np.zeros_like(self.kv), where=self.kp > 0)

    # ----------------------------------------------------------------- state
    @property
    def time(self) -> float:
        return float(self.data.time)

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World position and rotation matrix of the root link."""
        return self.data.xpos[self.root_body].copy(), self.data.xmat[self.root_body].reshape(3, 3).copy()

    def base_quaternion_xyzw(self) -> np.ndarray:
        w, x, y, z = self.data.xquat[self.root_body]
        return np.array([x, y, z, w])

    def body_pose(self, body: str) -> tuple[np.ndarray, np.ndarray]:
        b = self.model.body(body).id
        return self.data.xpos[b].copy(), self.data.xmat[b].reshape(3, 3).copy()

    def joint_state(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every 1-DoF joint: names, positions, velocities and actuator torques (0 when unactuated)."""
        effort = self.data.qfrc_actuator[self._all_dof]
        return (
            self.all_joint_names,
            self.data.qpos[self._all_qpos].copy(),
            self.data.qvel[self._all_dof].copy(),
            effort.copy(),
        )

    def controlled_positions(self) -> np.ndarray:
        return self.data.qpos[self.qpos_adr].copy()

    def set_harness_target(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        linear_velocity: np.ndarray | None = None,
        angular_velocity: np.ndarray | None = None,
    ) -> bool:
        """Pull the base towards this pose moving at this velocity (world frame; default at rest), in
        harness mode. A non-finite pose or velocity or a non-rotation is refused (False)."""
        position, rotation = np.asarray(position, dtype=float), np.asarray(rotation, dtype=float)
        linear = np.zeros(3) if linear_velocity is None else np.asarray(linear_velocity, dtype=float)
        angular = np.zeros(3) if angular_velocity is None else np.asarray(angular_velocity, dtype=float)
        if (
            position.shape != (3,)
            or rotation.shape != (3, 3)
            or linear.shape != (3,)
            or angular.shape != (3,)
        ):
            return False
        if not all(np.all(np.isfinite(a)) for a in (position, rotation, linear, angular)):
            return False
        if np.abs(rotation.T @ rotation - np.eye(3)).max() > 1e-3 or np.linalg.det(rotation) <= 0:
            return False
        self.harness_target = (position.copy(), rotation.copy())
        self._harness_position = tuple(float(x) for x in position)
        self._harness_velocity = tuple(float(x) for x in linear)
        self._harness_angular_velocity = angular.copy()
        self._harness_moving = bool(np.any(angular != 0.0))
        quat = np.zeros(4)
        self._mj.mju_mat2Quat(quat, rotation.reshape(-1))
        self._harness_quat = quat
        return True

    # ----------------------------------------------------------------- stepping
    def _harness_wrench(self) -> None:
        """The harness spring-damper's explicit part, ``K (p* - p) + D v*`` and ``K_r log(R* R^T) +
        D_r w*`` (the ``-D v``, ``-D_r w`` part is the free joint's implicit damping), in Python floats
        (numpy's small-array calls and numpy-scalar arithmetic cost more than ``mj_step``)."""
        data, b, mj = self.data, self.root_body, self._mj
        k, d, fmax, kr, dr, mmax = self._harness_gains
        px, py, pz = data.xpos[b].tolist()
        tx, ty, tz = self._harness_position
        ux, uy, uz = self._harness_velocity
        fx, fy, fz = k * (tx - px) + d * ux, k * (ty - py) + d * uy, k * (tz - pz) + d * uz
        norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        if norm > fmax:
            fx, fy, fz = fx * fmax / norm, fy * fmax / norm, fz * fmax / norm
        quat = data.xquat[b]
        err, local = self._quat_error, self._moment_local
        mj.mju_subQuat(err, self._harness_quat, quat)  # in the base frame
        ox = oy = oz = 0.0
        if self._harness_moving:  # the target's angular velocity, in the base frame
            target_w = self._target_w_local
            mj.mju_negQuat(self._inverse_quat, quat)
            mj.mju_rotVecQuat(target_w, self._harness_angular_velocity, self._inverse_quat)
            ox, oy, oz = target_w.tolist()
        ex, ey, ez = err.tolist()
        mx, my, mz = kr * ex + dr * ox, kr * ey + dr * oy, kr * ez + dr * oz
        norm = math.sqrt(mx * mx + my * my + mz * mz)
        if norm > mmax:
            mx, my, mz = mx * mmax / norm, my * mmax / norm, mz * mmax / norm
        local[0], local[1], local[2] = mx, my, mz
        world = self._moment_world
        mj.mju_rotVecQuat(world, local, quat)
        # the force acts at the base origin, xfrc_applied at the base's centre of mass: add r x f
        cx, cy, cz = data.xipos[b].tolist()
        rx, ry, rz = px - cx, py - cy, pz - cz
        ax, ay, az = world.tolist()
        data.xfrc_applied[b] = (
            fx,
            fy,
            fz,
            ax + ry * fz - rz * fy,
            ay + rz * fx - rx * fz,
            az + rx * fy - ry * fx,
        )

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps: reference -> ctrl, harness, ``mj_step``."""
        mj, model, data = self._mj, self.model, self.data
        harness = self.config.base_mode == "harness"
        start_wall, start_sim = time.perf_counter(), data.time
        feedforward = self.config.velocity_feedforward
        lower, upper = self.follower.lower, self.follower.upper
        for _ in range(n):
            reference, velocity = self.follower.sample(data.time)
            if feedforward:  # still within the limits, like every command
                reference = np.clip(reference + self._kv_over_kp * velocity, lower, upper)
            data.ctrl[self.actuator_ids] = reference
            if harness:
                self._harness_wrench()
            mj.mj_step(model, data)
        self.stats.add(data.time - start_sim, time.perf_counter() - start_wall, n)
        bad = sum(int(data.warning[w].number) for w in self._bad)
        if bad != self._bad_seen:
            self._bad_seen = bad
            self._recover()

    def _recover(self) -> None:
        """After MuJoCo reset a diverged simulation (to the model's zero pose, the base inside the ground):
        the start pose again, at rest, every joint holding its start position; counted."""
        self.instabilities += 1
        data = self.data
        data.qpos[:] = self._initial_qpos
        data.qvel[:] = 0.0
        data.xfrc_applied[:] = 0.0
        self.follower.hold(self._initial_qpos[self.qpos_adr])
        data.ctrl[self.actuator_ids] = self.follower.position
        self._mj.mj_forward(self.model, data)
