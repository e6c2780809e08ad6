"""Ground truth for the dynamics estimator: the synthetic motions of :mod:`dynik_ros.motion.synthetic` with
their inverse dynamics, the ground reaction split between the feet by a known rule.

For every sample the analytic ``q``, ``nu`` of the programme and ``nu_dot`` (central difference of the
analytic ``nu`` over +-0.1 ms, error ~1e-8) give, by pinocchio's RNEA, the generalized force
``M nu_dot + h`` (eq. 1). Its six base rows are the total external wrench ``F_B`` (base frame); a share
``w_f`` of it is applied at each foot frame, ``f_f = w_f * X*_{f<-B} F_B`` (what a shoe under that foot
reads, in the foot frame), so the base rows balance exactly and the joint torques are

    tau = [M nu_dot + h]_joints - sum_f J_s,f^T f_f.

Load-sharing rule (known, smooth, no physical claim): the lower sole carries the weight; while the two
sole heights are within ``band`` of each other the load moves linearly from one foot to the other,
``w_R = clip(1/2 + (h_L - h_R) / (2 band), 0, 1)``, ``w_L = 1 - w_R``. A foot is in contact when ``w_f > 0``.
The suit's link accelerations are the proper sensor accelerations of eq. 12,
``alpha_L^g = (R_L^T (o_L'' - g), R_L^T omega_L')`` in each link's frame, from pinocchio's classical
accelerations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.estimation.kinematic_contact import sole_heights
from dynik_ros.motion.gait import PROGRAMMES
from dynik_ros.motion.synthetic import joint_trajectory

GRAVITY = np.array([0.0, 0.0, -9.81])
FEET = ("RightFoot", "LeftFoot")
SOLE_LINKS = (("RightFoot", "RightToe"), ("LeftFoot", "LeftToe"))


@dataclass
class DynamicsTruth:
    """Sampled ground truth (``N`` samples; feet in the order of ``feet``, right first)."""

    times: np.ndarray  # (N,)
    q: np.ndarray  # (N, nq)
    v: np.ndarray  # (N, nv)
    a: np.ndarray  # (N, nv)
    tau: np.ndarray  # (N, n) joint torques
    feet: tuple[str, ...]
    wrenches: np.ndarray  # (N, n_feet, 6) force, moment on each foot, foot frame
    shares: np.ndarray  # (N, n_feet) load share
    links: list[str]
    link_accelerations: np.ndarray  # (N, L, 6) proper sensor accelerations (eq. 12), link frames

    @property
    def contacts(self) -> np.ndarray:
        """(N, n_feet) booleans: the foot carries load."""
        return self.shares > 0.0

    def vertical_forces(self, robot: RobotModel) -> np.ndarray:
        """World-vertical force under each foot ``(N, n_feet)`` (what Algorithm 1 reads)."""
        data = robot.model.createData()
        ids = [robot.frame_id(f) for f in self.feet]
        out = np.zeros(self.shares.shape)
        for k in range(len(self.times)):
            pin.framesForwardKinematics(robot.model, data, self.q[k])
            for f, fid in enumerate(ids):
                out[k, f] = (data.oMf[fid].rotation @ self.wrenches[k, f, :3])[2]
        return out


def proper_accelerations(robot: RobotModel, data: pin.Data, frame_ids: Sequence[int]) -> np.ndarray:
    """Proper sensor accelerations (eq. 12) ``(L, 6)`` of frames after ``pin.forwardKinematics(q, v, a)``."""
    out = np.zeros((len(frame_ids), 6))
    for i, fid in enumerate(frame_ids):
        acc = pin.getFrameClassicalAcceleration(robot.model, data, fid, pin.ReferenceFrame.LOCAL).vector
        out[i] = acc
        out[i, :3] -= data.oMf[fid].rotation.T @ GRAVITY
    return out


def load_shares(heights: np.ndarray, band: float) -> np.ndarray:
    """``(N, 2)`` shares (right, left) from sole heights ``(N, 2)`` by the rule of the module docstring."""
    right = np.clip(0.5 + (heights[:, 1] - heights[:, 0]) / (2.0 * band), 0.0, 1.0)
    return np.stack([right, 1.0 - right], axis=1)


def synthetic_dynamics(
    robot: RobotModel,
    scenario: str,
    times: np.ndarray,
    standing_height: float,
    links: Sequence[str],
    clearances: dict[str, float],
    band: float = 0.02,
) -> DynamicsTruth:
    """Ground truth of ``scenario`` on ``robot`` (a human model standing on z = 0 with its pelvis at
    ``standing_height``) at ``times``; ``clearances``: standing height of the foot and toe links above the
    ground (sole height, :func:`~dynik_ros.estimation.kinematic_contact.sole_heights`)."""
    programme = PROGRAMMES[scenario]
    times = np.asarray(times, dtype=float)
    step = 1e-4
    q, v = joint_trajectory(robot, programme, times, standing_height)
    _, v_plus = joint_trajectory(robot, programme, times + step, standing_height)
    _, v_minus = joint_trajectory(robot, programme, times - step, standing_height)
    a = (v_plus - v_minus) / (2.0 * step)
    model, data = robot.model, robot.model.createData()
    sole_ids = [[robot.frame_id(n) for n in group] for group in SOLE_LINKS]
    positions = np.zeros((len(times), 4, 3))
    for k in range(len(times)):
        pin.framesForwardKinematics(model, data, q[k])
        positions[k] = [data.oMf[i].translation for group in sole_ids for i in group]
    groups = [[0, 1], [2, 3]]
    clear = [np.array([clearances[name] for name in group]) for group in SOLE_LINKS]
    shares = load_shares(sole_heights(positions, groups, clear, 0.0), band)
    return dynamics_of_motion(robot, times, q, v, a, shares, links)


def dynamics_of_motion(
    robot: RobotModel,
    times: np.ndarray,
    q: np.ndarray,
    v: np.ndarray,
    a: np.ndarray,
    shares: np.ndarray,
    links: Sequence[str],
) -> DynamicsTruth:
    """Inverse dynamics of a sampled motion ``q, v, a`` with the total external wrench split between the
    feet by ``shares`` ``(N, 2)`` (right, left; each row sums to 1), and the proper accelerations of
    ``links``."""
    model, data = robot.model, robot.model.createData()
    link_ids = [robot.frame_id(n) for n in links]
    foot_ids = [robot.frame_id(n) for n in FEET]
    n, nb = len(times), robot.base_dofs
    accelerations = np.zeros((n, len(links), 6))
    generalized = np.zeros((n, robot.nv))
    for k in range(n):
        pin.forwardKinematics(model, data, q[k], v[k], a[k])
        pin.updateFramePlacements(model, data)
        accelerations[k] = proper_accelerations(robot, data, link_ids)
        generalized[k] = pin.rnea(model, data, q[k], v[k], a[k])
    wrenches = np.zeros((n, 2, 6))
    tau = generalized[:, nb:].copy()
    for k in range(n):
        pin.computeJointJacobians(model, data, q[k])
        pin.updateFramePlacements(model, data)
        base = data.oMi[1]
        total = pin.Force(generalized[k, :6])
        for f, fid in enumerate(foot_ids):
            if shares[k, f] == 0.0:
                continue
            wrench = shares[k, f] * (data.oMf[fid].actInv(base.act(total))).vector
            wrenches[k, f] = wrench
            jac = pin.getFrameJacobian(model, data, fid, pin.ReferenceFrame.LOCAL)
            tau[k] -= jac[:, nb:].T @ wrench
    return DynamicsTruth(
        np.asarray(times, dtype=float), q, v, a, tau, FEET, wrenches, np.asarray(shares, dtype=float),
        list(links), accelerations,
    )  # fmt: skip


def human_dynamics_truth(
    scenario: str = "walking",
    duration: float = 2.2,
    rate: float = 60.0,
    kind: str = "human66",
    height: float = 1.75,
    mass: float = 75.0,
) -> tuple[RobotModel, DynamicsTruth]:
    """The Human66/Human48 model of a subject and the ground truth of a synthetic ``scenario`` on it
    (the 23 Xsens links as the suit's links)."""
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.retarget.human import human_model, human_tpose

    robot = human_model(kind, height, mass)
    pose = human_tpose(height, mass, 0.0)
    clearances = {name: float(pose[name][0][2]) for group in SOLE_LINKS for name in group}
    times = np.arange(int(round(duration * rate))) / rate
    standing = pelvis_height(Subject(height=height, mass=mass))
    return robot, synthetic_dynamics(robot, scenario, times, standing, list(XSENS_SEGMENTS), clearances)


PLANTED_TASKS = ("double", "right", "left")


def _planted_q(robot: RobotModel, joints: np.ndarray, foot_id: int, placement: pin.SE3) -> np.ndarray:
    """``q`` with joint angles ``joints`` and the base that puts frame ``foot_id`` at ``placement``."""
    model, data = robot.model, robot.model.createData()
    q = np.concatenate((np.zeros(3), [0.0, 0.0, 0.0, 1.0], joints))
    pin.framesForwardKinematics(model, data, q)
    base = placement * data.oMf[foot_id].inverse()
    q[:3], q[3:7] = base.translation, pin.Quaternion(base.rotation).coeffs()
    return q


def planted_motion(
    robot: RobotModel, task: str, times: np.ndarray, placement: pin.SE3, slowdown: float = 4.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q, v, a`` of a motion whose stance foot never moves (the seed's static tasks, sec. 4.1 Table 1):
    ``"right"`` / ``"left"``: the walk's joint angles with that foot planted at ``placement`` (the other
    leg swings); ``"double"``: only the sagittal leg joints of the walk, the left leg a copy of the right
    one, so both feet stay still (a squat). The programme runs ``slowdown`` times slower than the walk
    (a whole body swung about one ankle at walking pace would need ~2000 N m). The base twist (body frame)
    is the central difference of the base pose (+-1e-5 s), its acceleration the central difference of the
    twist (+-1e-3 s): forward kinematics only."""
    if task not in PLANTED_TASKS:
        raise ValueError(f"planted task must be one of {PLANTED_TASKS}, got {task!r}")
    programme = PROGRAMMES["walking"]
    foot_id = robot.frame_id("LeftFoot" if task == "left" else "RightFoot")
    sagittal = [
        robot.joint_index(name)
        for name in robot.joint_names
        if any(j in name for j in ("Hip", "Knee", "Ankle"))
    ]

    def joints(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q, v = joint_trajectory(robot, programme, t / slowdown, 1.0)
        s, s_dot = q[:, 7:], v[:, 6:] / slowdown
        if task == "double":
            for i in sagittal:
                name = robot.joint_names[i]
                if not name.endswith("roty"):
                    s[:, i] = s_dot[:, i] = 0.0
                elif name.startswith("jLeft"):
                    j = robot.joint_index(name.replace("Left", "Right"))
                    s[:, i], s_dot[:, i] = s[:, j], s_dot[:, j]
        return s, s_dot

    def state(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = 1e-5
        s, s_dot = joints(t)
        s_plus, s_minus = joints(t + h)[0], joints(t - h)[0]
        q = np.array([_planted_q(robot, s[k], foot_id, placement) for k in range(len(t))])
        v = np.zeros((len(t), robot.nv))
        v[:, 6:] = s_dot
        for k in range(len(t)):
            base = pin.XYZQUATToSE3(q[k, :7])
            plus = pin.XYZQUATToSE3(_planted_q(robot, s_plus[k], foot_id, placement)[:7])
            minus = pin.XYZQUATToSE3(_planted_q(robot, s_minus[k], foot_id, placement)[:7])
            v[k, :6] = (pin.log6(base.actInv(plus)).vector - pin.log6(base.actInv(minus)).vector) / (2 * h)
        return q, v

    times = np.asarray(times, dtype=float)
    step = 1e-3
    q, v = state(times)
    a = (state(times + step)[1] - state(times - step)[1]) / (2.0 * step)
    return q, v, a


def planted_dynamics_truth(
    task: str,
    duration: float = 2.2,
    rate: float = 60.0,
    kind: str = "human66",
    height: float = 1.75,
    mass: float = 75.0,
) -> tuple[RobotModel, DynamicsTruth]:
    """Ground truth of a :func:`planted_motion` task: ``"right"`` / ``"left"``: the whole ground reaction
    on the planted foot; ``"double"``: split between the two still feet by the known, smooth rule
    ``w_R = 1/2 + 1/4 sin(2 pi t / T)`` (``T`` the period of the slowed programme: the weight sways side to
    side)."""
    from dynik_ros.models.human import XSENS_SEGMENTS
    from dynik_ros.retarget.human import human_model, human_tpose

    robot = human_model(kind, height, mass)
    pose = human_tpose(height, mass, 0.0)
    foot = "LeftFoot" if task == "left" else "RightFoot"
    placement = pin.SE3(pin.rpy.rpyToMatrix(0.0, 0.0, 0.3), np.asarray(pose[foot][0], dtype=float))
    times = np.arange(int(round(duration * rate))) / rate
    q, v, a = planted_motion(robot, task, times, placement)
    if task == "double":
        right = 0.5 + 0.25 * np.sin(PROGRAMMES["walking"].omega * times / 4.0)
    else:
        right = np.full(len(times), 1.0 if task == "right" else 0.0)
    shares = np.stack([right, 1.0 - right], axis=1)
    return robot, dynamics_of_motion(robot, times, q, v, a, shares, list(XSENS_SEGMENTS))
