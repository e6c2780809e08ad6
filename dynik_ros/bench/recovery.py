"""Recovery scenario: a robot's own motion as targets, the IK started far from it.

Targets are made by forward kinematics of the robot itself (joint sinusoids around mid-range, inside the
position and velocity limits, a swaying and turning base), so the exact answer is known and reachable. The
IK starts elsewhere -- at the model's neutral pose, at the far end of every joint range, or turned in yaw
-- and must converge to the steady-state accuracy of a start at the truth, without leaving a position
limit or exceeding a velocity limit on the *output trajectory* (``(q_{k+1} - q_k) / dt``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.metrics import TrackingEvaluator
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import rotation_about
from dynik_ros.core.targets import FrameTarget, Measurements, TargetSet

STARTS = ("truth", "neutral", "far", "yaw90", "yaw180")


@dataclass
class JointMotion:
    """A robot trajectory with its targets: ``q`` (N, nq), the measurements and their stamps."""

    times: np.ndarray
    q: np.ndarray
    measurements: list[Measurements]


def joint_sinusoid_motion(
    robot: RobotModel,
    targets: TargetSet,
    duration: float = 6.0,
    rate: float = 100.0,
    seed: int = 0,
    amplitude: float = 0.25,
    speed_fraction: float = 0.3,
) -> JointMotion:
    """Targets from the robot's own joints: ``s_i(t) = mid_i + a_i sin(w_i t + phi_i)``.

    ``a_i`` is ``amplitude`` times the half range; ``w_i`` is chosen so that the peak speed ``a_i w_i`` is
    ``speed_fraction`` of the velocity limit (and at most 2 Hz). A floating base sways 5 cm and turns
    +-20 deg about z. Velocities of the targets are exact (pinocchio frame velocities).
    """
    rng = np.random.default_rng(seed)
    model, data = robot.model, robot.model.createData()
    n = robot.n_joints
    mid = 0.5 * (robot.lower + robot.upper)
    half = 0.5 * (robot.upper - robot.lower)
    amp = amplitude * half
    omega = np.minimum(speed_fraction * robot.velocity_limit / np.maximum(amp, 1e-9), 2 * np.pi * 2.0)
    omega *= rng.uniform(0.6, 1.0, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    times = np.arange(int(round(duration * rate))) / rate
    pos_ids = [robot.frame_id(t.frame) for t in targets.position_targets]
    ori_ids = [robot.frame_id(t.frame) for t in targets.orientation_targets]
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    qs, out = [], []
    q0 = robot.neutral_configuration()
    base_height = _standing_height(robot, q0)
    expansion = robot.joint_expansion() if robot.has_reductions else None
    free = [i for i, j in enumerate(robot.joint_names) if not robot.locked[i] and j not in robot.mimic]
    for t in times:
        s = mid + amp * np.sin(omega * t + phase)
        s_dot = amp * omega * np.cos(omega * t + phase)
        if expansion is not None:  # locked joints still, mimic joints on their leader: reachable targets
            s, s_dot = robot.apply_reductions(s), expansion @ s_dot[free]
        if robot.floating_base:
            yaw, yaw_dot = np.radians(20) * np.sin(0.7 * t), np.radians(20) * 0.7 * np.cos(0.7 * t)
            p = np.array([0.05 * np.sin(1.1 * t), 0.05 * np.sin(0.9 * t), base_height])
            p_dot = np.array([0.05 * 1.1 * np.cos(1.1 * t), 0.05 * 0.9 * np.cos(0.9 * t), 0.0])
            rot = rotation_about("z", yaw)
            q = robot.join(p, rot, s)
            v = np.concatenate((rot.T @ p_dot, [0.0, 0.0, yaw_dot], s_dot))
        else:
            q, v = s, s_dot
        pin.forwardKinematics(model, data, q, v)
        pin.updateFramePlacements(model, data)
        out.append(
            Measurements(
                np.array([data.oMf[i].translation for i in pos_ids]).reshape(-1, 3),
                np.array([data.oMf[i].rotation for i in ori_ids]).reshape(-1, 3, 3),
                np.array([pin.getFrameVelocity(model, data, i, lwa).linear for i in pos_ids]).reshape(-1, 3),
                np.array([pin.getFrameVelocity(model, data, i, lwa).angular for i in ori_ids]).reshape(-1, 3),
            )
        )
        qs.append(q)
    return JointMotion(times, np.array(qs), out)


def _standing_height(robot: RobotModel, q: np.ndarray) -> float:
    """Base height putting the lowest frame at z = 0 (only to place the motion sensibly)."""
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    lowest = min(data.oMf[i].translation[2] for i in range(robot.model.nframes))
    return float(q[2] - lowest) if robot.floating_base else 0.0


def start_configuration(robot: RobotModel, motion: JointMotion, start: str) -> np.ndarray:
    """Where the IK starts: ``truth`` (the motion's first sample), ``neutral`` (the model's neutral pose
    clipped into the limits, base at the truth's position), ``far`` (every joint at 95 % of its range
    on the side away from the truth), ``yaw90``/``yaw180`` (the truth turned about the vertical)."""
    if start not in STARTS:
        raise ValueError(f"start must be one of {STARTS}, got '{start}'")
    truth = motion.q[0]
    if start == "truth":
        return truth.copy()
    base_p, base_r, s = robot.split(truth)
    if start == "neutral":
        _, _, s0 = robot.split(robot.neutral_configuration())
        return robot.join(base_p, np.eye(3), s0)
    if start == "far":
        mid = 0.5 * (robot.lower + robot.upper)
        half = 0.5 * (robot.upper - robot.lower)
        far = mid - 0.95 * half * np.sign(s - mid + 1e-12)
        return robot.join(base_p, base_r, far)
    angle = np.radians(90.0 if start == "yaw90" else 180.0)
    return robot.join(base_p, rotation_about("z", angle) @ base_r, s)


@dataclass
class RecoveryResult:
    """Per-sample error and the output-trajectory invariants of one run."""

    start: str
    mnte: np.ndarray
    omega_rmse: np.ndarray
    converge_time: float  # s until MNTE stays within the threshold; inf if never
    position_violations: int  # output samples with a joint outside its limits (beyond 1e-9 rad)
    position_excess: float  # largest excursion outside a limit, rad
    velocity_violations: int  # joint-samples with |dq/dt| above the velocity limit (beyond 1e-9)
    velocity_excess: float  # largest |dq/dt| / limit
    steady_mnte: float  # median MNTE over the last third
    steady_omega_rmse: float  # median angular-velocity RMSE over the last third
    step_p99_ms: float


def run_recovery(
    robot: RobotModel,
    targets: TargetSet,
    motion: JointMotion,
    start: str,
    config: DynamicalIKConfig | None = None,
    reference: np.ndarray | None = None,
    home: np.ndarray | None = None,
) -> RecoveryResult:
    """Run the IK from ``start`` through ``motion``. Converged from the first sample after which MNTE
    stays within 2x ``reference`` (per sample: the MNTE of the run started at the truth) + 1e-9; without a
    reference, within 2x the median of the last third."""
    ik = DynamicalIK(robot, targets, config, start_configuration(robot, motion, start), home=home)
    evaluator = TrackingEvaluator(robot, targets)
    n = len(motion.times)
    mnte, rmse, steps = np.zeros(n), np.zeros(n), np.zeros(n)
    joints = np.zeros((n + 1, robot.n_joints))
    joints[0] = robot.split(ik.q)[2]
    dts = np.diff(motion.times, prepend=motion.times[0] - (motion.times[1] - motion.times[0]))
    for k, m in enumerate(motion.measurements):
        begin = time.perf_counter()
        q, v = ik.step(m, float(dts[k]))
        steps[k] = time.perf_counter() - begin
        joints[k + 1] = robot.split(q)[2]
        err = evaluator.evaluate(q, v, m)
        mnte[k], rmse[k] = err.mnte, err.angular_velocity_rmse
    tail = slice(2 * n // 3, None)
    threshold = 2.0 * (np.full(n, np.median(mnte[tail])) if reference is None else reference) + 1e-9
    above = np.flatnonzero(mnte > threshold)
    if above.size == 0:
        converge = 0.0
    elif above[-1] == n - 1:
        converge = float("inf")
    else:
        converge = float(motion.times[above[-1] + 1] - motion.times[0])
    over_low = np.maximum(robot.lower - joints, 0.0)
    over_high = np.maximum(joints - robot.upper, 0.0)
    excess = np.maximum(over_low, over_high)
    speed = np.abs(np.diff(joints, axis=0)) / dts[:, None] / robot.velocity_limit
    return RecoveryResult(
        start=start,
        mnte=mnte,
        omega_rmse=rmse,
        converge_time=converge,
        position_violations=int(np.sum(np.any(excess > 1e-9, axis=1))),
        position_excess=float(excess.max()),
        velocity_violations=int(np.sum(speed > 1.0 + 1e-9)),
        velocity_excess=float(speed.max()),
        steady_mnte=float(np.median(mnte[tail])),
        steady_omega_rmse=float(np.median(rmse[tail])),
        step_p99_ms=float(np.percentile(steps, 99) * 1e3),
    )


def frame_targets(
    robot: RobotModel, orientation_frames: Sequence[str], position_frames: Sequence[str] = ()
) -> TargetSet:
    """Orientation targets on ``orientation_frames`` plus position targets on ``position_frames``."""
    targets = [FrameTarget(f, position=f in position_frames, orientation=True) for f in orientation_frames]
    targets += [
        FrameTarget(f, position=True, orientation=False)
        for f in position_frames
        if f not in orientation_frames
    ]
    return TargetSet(targets)


# Romeo (example-robot-data, not in the registry): a generic link list, as a user would write it.
ROMEO_URDF = "example-robot-data:romeo_description/urdf/romeo.urdf"
ROMEO_ORIENTATION_FRAMES = (
    "body", "torso", "LShoulderYawLink", "LElbowYawLink", "l_wrist", "RShoulderYawLink", "RElbowYawLink",
    "r_wrist", "LHipPitchLink", "LKneePitchLink", "l_ankle", "RHipPitchLink", "RKneePitchLink", "r_ankle",
    "HeadRollLink",
)  # fmt: skip
RECOVERY_MODELS = ("g1", "icub", "talos", "romeo", "human66", "human48")


def recovery_setup(name: str, gain: float = 20.0) -> tuple[RobotModel, TargetSet, np.ndarray]:
    """Robot, targets (every mapped link's orientation plus the root position, gain ``gain``) and home
    posture for a registry robot, Romeo (loaded from its URDF like a robot the registry does not have)
    or a human model."""
    if name in ("human66", "human48"):
        from dynik_ros.models.assets import urdf_path
        from dynik_ros.models.segments import XSENS_SEGMENTS

        robot = RobotModel.from_urdf_file(urdf_path(name))
        frames, root, home = list(XSENS_SEGMENTS), "Pelvis", None
    elif name == "romeo":
        from dynik_ros.retarget.registry import resolve_urdf

        robot = RobotModel.from_urdf_file(resolve_urdf(ROMEO_URDF))
        frames, root, home = list(ROMEO_ORIENTATION_FRAMES), "body", None
    else:
        from dynik_ros.retarget.registry import load_robot

        spec = load_robot(name)
        robot, root, home = spec.robot, spec.config.root.frame, spec.initial_configuration()
        frames = [t.frame for t in spec.config.targets]
    targets = TargetSet(
        [FrameTarget(f, position=(f == root), position_gain=gain, orientation_gain=gain) for f in frames]
    )
    return robot, targets, robot.neutral_configuration(warn=False) if home is None else home


def recovery_table(
    models: Sequence[str], duration: float = 8.0, rate: float = 100.0, starts: Sequence[str] = STARTS
) -> tuple[str, list[tuple[str, RecoveryResult]]]:
    """The recovery scenario of ``dynik-bench``: per model and start, time to converge (MNTE within 2x the
    start-at-truth run, sample by sample), peak error, limit breaches on the output, steady accuracy."""
    header = (
        f"{'model':<9}{'start':<9}{'converged s':>12}{'peak MNTE':>11}{'steady MNTE':>13}{'steady RMSE':>13}"
        f"{'pos viol':>9}{'speed viol':>11}{'max |ds/dt|/lim':>16}{'p99 ms':>8}"
    )
    lines, results = [header, "-" * len(header)], []
    for name in models:
        robot, targets, home = recovery_setup(name)
        motion = joint_sinusoid_motion(robot, targets, duration=duration, rate=rate)
        reference = None
        for start in ("truth", *[s for s in starts if s != "truth"]):
            r = run_recovery(robot, targets, motion, start, reference=reference, home=home)
            if start == "truth":
                reference = r.mnte
            results.append((name, r))
            converged = "reference" if start == "truth" else f"{r.converge_time:.2f}"
            lines.append(
                f"{name:<9}{start:<9}{converged:>12}{r.mnte.max():>11.1e}{r.steady_mnte:>13.1e}"
                f"{r.steady_omega_rmse:>13.1e}{r.position_violations:>9d}{r.velocity_violations:>11d}"
                f"{r.velocity_excess:>16.3f}{r.step_p99_ms:>8.2f}"
            )
    return "\n".join(lines), results
