"""The walking stabilizer (``control/stabilizer.py``) on the simulated robot (ROS-free; issue 12 item 4).

What a real robot would read from its sensors is read from MuJoCo here, and what it would add to the
commanded joints is added to the playback's joint reference:

* **Plan** (once, from the trajectory): per sample the CoM (MuJoCo's subtree CoM of the planned
  configuration, same model), its velocity and acceleration (central differences), the cart-table ZMP
  ``p = c - (c_z - ground) / g * c_ddot`` (Kajita 2003, as ``retarget/zmp_plan.py`` plans it), the sole
  centres and which feet are down (sole within ``contact_height`` of the plan's ground).
* **Measured** each period: per foot the sum of its contact forces with the ground (``mj_contactForce``;
  on a robot, a 6-axis force/torque sensor at the ankle) and their centre of pressure, the sole pose, the
  whole-body CoM and its velocity (``mj_subtreeVel``). The plan is moved into the measured world by the
  horizontal offset between the measured and planned soles, weighted by the plan's load on each foot.
* **Applied**: the sole rotation offsets become ankle joint offsets (least squares on the two ankle joints'
  world axes); the foot lifts and the pelvis shift become leg joint offsets through the 6x6 Jacobian of the
  sole relative to the pelvis (leg joints only, foot orientation kept), at the measured configuration.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.control.stabilizer import GRAVITY, FootState, PlanSample, Stabilizer, StabilizerConfig
from dynik_ros.sim.simulator import Simulator

G1_FEET = ("left_ankle_roll_link", "right_ankle_roll_link")


class SimWalkStabilizer:
    """Measures ``sim``, runs a :class:`Stabilizer` against the plan ``q`` (pinocchio layout, ``joint_names``
    order, sampled at ``times``) and corrects the playback's joint reference (module docstring)."""

    def __init__(
        self,
        sim: Simulator,
        joint_names: list[str],
        times: np.ndarray,
        q: np.ndarray,
        config: StabilizerConfig | None = None,
        feet: tuple[str, str] = G1_FEET,
        contact_height: float = 0.01,
        jacobian_damping: float = 0.02,
    ):
        import mujoco

        self._mj = mujoco
        self.sim = sim
        model = sim.model
        self.config = config or StabilizerConfig()
        self.controller = Stabilizer(self.config, sim.total_mass)
        self.feet = [model.body(f).id for f in feet]
        self.ground = model.geom("ground").id
        self._foot_of_body = {}
        for b in range(model.nbody):  # each body below a foot counts as that foot
            a = b
            while a > 0 and a not in self.feet:
                a = int(model.body_parentid[a])
            if a in self.feet:
                self._foot_of_body[b] = self.feet.index(a)
        self.sole_corners, self.sole_centre_local = [], []
        for f in self.feet:
            geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == f]
            if not geoms:
                raise ValueError(f"foot body {model.body(f).name} has no collision geometry")
            pos = model.geom_pos[geoms]
            radius = model.geom_rbound[geoms]
            lo, hi = pos[:, :2].min(axis=0), pos[:, :2].max(axis=0)
            centre = np.array([*(0.5 * (lo + hi)), float((pos[:, 2] - radius).min())])
            half = 0.5 * (hi - lo)
            self.sole_centre_local.append(centre)
            self.sole_corners.append(
                np.array([[half[0], half[1]], [-half[0], half[1]], [-half[0], -half[1]], [half[0], -half[1]]])
            )
        index = {name: k for k, name in enumerate(sim.joint_names)}
        self.legs, self.ankles = [], []
        for f in self.feet:
            chain = []
            b = f
            while b > 0:
                for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
                    name = model.joint(j).name
                    if name in index:
                        chain.append(index[name])
                b = int(model.body_parentid[b])
            chain.reverse()  # hip first
            if len(chain) < 6:
                raise ValueError(f"foot {model.body(f).name}: {len(chain)} actuated leg joints, need 6")
            self.legs.append(np.array(chain[-6:]))
            self.ankles.append(np.array(chain[-2:]))
        self._jnt = [model.joint(name).id for name in sim.joint_names]
        times, q = np.asarray(times, dtype=float), np.asarray(q, dtype=float)
        if q.ndim != 2 or q.shape[1] != 7 + len(joint_names) or len(q) != len(times) or len(q) < 3:
            raise ValueError(f"q must be (N >= 3, 7 + {len(joint_names)}) sampled at N times, got {q.shape}")
        if not (np.all(np.diff(times) > 0) and np.all(np.isfinite(q))):
            raise ValueError("the plan must be finite and its times strictly increasing")
        self._plan(joint_names, times, q, contact_height)
        self._jacp, self._jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        self.jacobian_damping = jacobian_damping  # m (per rad), of the damped least-squares leg offsets
        self._force = np.zeros(6)
        # (sim time, the controller's StabilizerLog, ankle offsets, lifts) of every correction
        self.history: list[tuple] = []

    # ----------------------------------------------------------------- plan
    def _plan(self, joint_names: list[str], times: np.ndarray, q: np.ndarray, contact_height: float) -> None:
        mj, model, sim = self._mj, self.sim.model, self.sim
        data = mj.MjData(model)
        index = [joint_names.index(j) for j in sim.joint_names]
        free = model.joint("base_free_joint").qposadr[0]
        n = len(q)
        com, soles = np.zeros((n, 3)), np.zeros((n, 2, 3))
        for k in range(n):
            data.qpos[free : free + 3] = q[k, :3]
            data.qpos[free + 3 : free + 7] = [q[k, 6], q[k, 3], q[k, 4], q[k, 5]]
            data.qpos[sim.qpos_adr] = q[k, 7:][index]
            mj.mj_kinematics(model, data)
            mj.mj_comPos(model, data)
            com[k] = data.subtree_com[sim.root_body]
            for i, f in enumerate(self.feet):
                soles[k, i] = data.xpos[f] + data.xmat[f].reshape(3, 3) @ self.sole_centre_local[i]
        ground = float(soles[:, :, 2].min())
        velocity = np.gradient(com, times, axis=0)
        acceleration = np.gradient(velocity, times, axis=0)
        height = com[:, 2:3] - ground
        zmp = com[:, :2] - height / (GRAVITY + acceleration[:, 2:3]) * acceleration[:, :2]
        loaded = soles[:, :, 2] < ground + contact_height
        share = np.zeros((n, 2))
        for k in range(n):
            if loaded[k].all():
                a, b = soles[k, 0, :2], soles[k, 1, :2]
                span = b - a
                t = float(np.clip((zmp[k] - a) @ span / max(float(span @ span), 1e-9), 0.0, 1.0))
                share[k] = (1.0 - t, t)
            elif loaded[k].any():
                share[k] = loaded[k].astype(float)
            else:
                share[k] = 0.5
        self.times, self.plan_com, self.plan_velocity, self.plan_zmp = times, com, velocity, zmp
        self.plan_soles, self.plan_loaded, self.plan_share = soles, loaded, share

    # ----------------------------------------------------------------- measure
    def foot_states(self) -> list[FootState]:
        """Per foot: contact force on it and its centre of pressure, sole pose (world)."""
        mj, model, data = self._mj, self.sim.model, self.sim.data
        force = [np.zeros(3), np.zeros(3)]
        moment_z = [np.zeros(2), np.zeros(2)]  # sum of fz * contact point (x, y)
        for c in range(data.ncon):
            contact = data.contact[c]
            g1, g2 = int(contact.geom1), int(contact.geom2)
            if self.ground not in (g1, g2):
                continue
            other = g2 if g1 == self.ground else g1
            foot = self._foot_of_body.get(int(model.geom_bodyid[other]))
            if foot is None:
                continue
            mj.mj_contactForce(model, data, c, self._force)
            # contact frame rows: normal (geom1 -> geom2), tangents; the force is the one on geom2
            world = contact.frame.reshape(3, 3).T @ self._force[:3]
            if other == g1:
                world = -world
            force[foot] += world
            moment_z[foot] += world[2] * contact.pos[:2]
        states = []
        for i, f in enumerate(self.feet):
            rotation = data.xmat[f].reshape(3, 3).copy()
            centre = data.xpos[f] + rotation @ self.sole_centre_local[i]
            fz = force[i][2]
            cop = centre.copy()
            if fz > 1e-6:
                cop[:2] = moment_z[i] / fz
                cop[2] = 0.0
            ankle = data.xpos[f].copy()
            states.append(FootState(ankle, rotation, self.sole_corners[i], centre, force[i], cop))
        return states

    def measured_com(self) -> tuple[np.ndarray, np.ndarray]:
        mj, model, data = self._mj, self.sim.model, self.sim.data
        mj.mj_subtreeVel(model, data)
        b = self.sim.root_body
        return data.subtree_com[b].copy(), data.subtree_linvel[b].copy()

    # ----------------------------------------------------------------- control
    def plan_sample(self, sample: int, weight: float, feet: list[FootState]) -> PlanSample:
        """The plan between ``sample`` and the next, moved into the measured world (module docstring)."""
        k1 = min(sample + 1, len(self.times) - 1)

        def at(values):
            return (1.0 - weight) * values[sample] + weight * values[k1]

        share = at(self.plan_share)
        soles = at(self.plan_soles)
        offset = np.zeros(3)
        if share.sum() > 0:
            for i in (0, 1):
                offset[:2] += share[i] / share.sum() * (feet[i].centre[:2] - soles[i, :2])
        loaded = tuple(bool(x) for x in self.plan_loaded[sample])
        com, zmp = at(self.plan_com) + offset, at(self.plan_zmp) + offset[:2]
        return PlanSample(com, at(self.plan_velocity), zmp, loaded)

    def correct(self, sample: int, weight: float, target: np.ndarray, dt: float) -> np.ndarray:
        """The joint reference ``target`` (``sim.joint_names`` order) with the stabilizer's offsets added."""
        feet = self.foot_states()
        com, velocity = self.measured_com()
        plan = self.plan_sample(sample, weight, feet)
        offsets = self.controller.update(dt, plan, com, velocity, (feet[0], feet[1]))
        out = np.array(target, dtype=float)
        mj, model, data = self._mj, self.sim.model, self.sim.data
        for i, f in enumerate(self.feet):
            move = np.array([-offsets.com_shift[0], -offsets.com_shift[1], offsets.lift[i]])
            if np.any(move != 0.0):
                mj.mj_jacBody(model, data, self._jacp, self._jacr, f)
                dofs = self.sim.dof_adr[self.legs[i]]
                jac = np.vstack([self._jacp[:, dofs], self._jacr[:, dofs]])
                # damped least squares: a stretched knee makes the leg Jacobian singular (a plain solve gave
                # joint offsets of ~30 rad for a 2 cm pelvis shift on the standing G1)
                twist = np.concatenate([move, np.zeros(3)])
                damped = jac @ jac.T + self.jacobian_damping**2 * np.eye(6)
                out[self.legs[i]] += jac.T @ np.linalg.solve(damped, twist)
            rotation = feet[i].rotation @ np.array([offsets.ankle[i, 0], offsets.ankle[i, 1], 0.0])
            axes = np.stack([data.xaxis[self._jnt[j]] for j in self.ankles[i]], axis=1)  # (3, 2)
            out[self.ankles[i]] += np.linalg.lstsq(axes, rotation, rcond=None)[0]
        self.history.append((self.sim.time, self.controller.log, offsets.ankle.copy(), offsets.lift.copy()))
        return out
