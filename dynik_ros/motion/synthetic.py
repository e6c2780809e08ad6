"""Deterministic synthetic motions: ground truth for tests, the demo and the benchmark.

A :class:`Motion` is produced by forward kinematics of a joint trajectory of the model itself
(:mod:`dynik_ros.motion.gait`), so the true ``(q, v)`` is known at every sample. Link poses and world
twists are what a wearable suit would stream (Xsens-style, sec. 4.1 of Rapetti et al. 2020); optional
seeded noise and constant bias make the measurements imperfect.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3, rotation_about
from dynik_ros.core.targets import Measurements, TargetSet
from dynik_ros.motion.gait import PROGRAMMES, GaitProgramme

SCENARIOS = tuple(PROGRAMMES)


@dataclass(frozen=True)
class NoiseSpec:
    """Measurement imperfections: white noise (std) and a constant per-link bias drawn once (std)."""

    orientation: float = 0.0  # rad
    position: float = 0.0  # m
    angular_velocity: float = 0.0  # rad/s
    linear_velocity: float = 0.0  # m/s
    orientation_bias: float = 0.0  # rad
    position_bias: float = 0.0  # m


@dataclass
class Motion:
    """Sampled link trajectories plus the ground-truth configuration that produced them."""

    name: str
    rate: float
    times: np.ndarray  # (N,)
    links: list[str]
    positions: np.ndarray  # (N, L, 3) world
    rotations: np.ndarray  # (N, L, 3, 3) world
    linear_velocities: np.ndarray  # (N, L, 3) world
    angular_velocities: np.ndarray  # (N, L, 3) world
    q: np.ndarray  # (N, nq) ground truth, pinocchio layout
    v: np.ndarray  # (N, nv) ground truth, pinocchio tangent

    def __len__(self) -> int:
        return len(self.times)

    def measurements(self, targets: TargetSet) -> list[Measurements]:
        """One :class:`Measurements` per sample for ``targets`` (links found by each target's ``source``)."""
        missing = sorted(set(targets.position_links + targets.orientation_links) - set(self.links))
        if missing:
            raise ValueError(f"motion '{self.name}' has no links {missing}")
        pi = [self.links.index(k) for k in targets.position_links]
        oi = [self.links.index(k) for k in targets.orientation_links]
        return [
            Measurements(
                self.positions[k, pi],
                self.rotations[k, oi],
                self.linear_velocities[k, pi],
                self.angular_velocities[k, oi],
            )
            for k in range(len(self.times))
        ]

    def link_sample(self, k: int) -> tuple[dict, dict]:
        """``({link: (p, R)}, {link: (v, omega)})`` at sample ``k``."""
        poses = {n: (self.positions[k, i], self.rotations[k, i]) for i, n in enumerate(self.links)}
        twists = {
            n: (self.linear_velocities[k, i], self.angular_velocities[k, i]) for i, n in enumerate(self.links)
        }
        return poses, twists


def joint_trajectory(
    robot: RobotModel,
    programme: GaitProgramme,
    times: np.ndarray,
    standing_height: float,
    heading: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Ground-truth ``q`` ``(N, nq)`` and ``v`` ``(N, nv)`` of ``programme`` on ``robot`` (analytic rates).

    Joints named in the programme but absent from the model are skipped; angles are clipped into the
    model's limits (with zero rate where clipped).
    """
    n = len(times)
    s = np.zeros((n, robot.n_joints))
    s_dot = np.zeros((n, robot.n_joints))
    w = programme.omega
    for joint, harmonic in programme.joints.items():
        sides = [(joint, 1.0, 0.0)]
        if joint in programme.mirrored:
            sides.append((joint.replace("Right", "Left"), programme.mirrored[joint], 0.5))
        for name, sign, shift in sides:
            if name not in robot.joint_names:
                continue
            i = robot.joint_index(name)
            angle, rate = harmonic.value(w, times, shift)
            clipped = np.clip(sign * angle, robot.lower[i], robot.upper[i])
            s[:, i], s_dot[:, i] = clipped, np.where(clipped == sign * angle, sign * rate, 0.0)
    q = np.zeros((n, robot.nq))
    v = np.zeros((n, robot.nv))
    nb = robot.base_dofs
    q[:, 7 if nb else 0 :] = s
    v[:, nb:] = s_dot
    if nb:
        yaw = heading + programme.pelvis_yaw * np.sin(w * times)
        yaw_rate = programme.pelvis_yaw * w * np.cos(w * times)
        roll = programme.pelvis_roll * np.sin(w * times)
        roll_rate = programme.pelvis_roll * w * np.cos(w * times)
        direction = np.array([np.cos(heading), np.sin(heading), 0.0])
        for k in range(n):
            rot = rotation_about("z", yaw[k]) @ rotation_about("x", roll[k])
            position = direction * programme.speed * times[k]
            position[2] = standing_height + programme.bounce * np.cos(2.0 * w * times[k])
            velocity = direction * programme.speed
            velocity[2] = -2.0 * w * programme.bounce * np.sin(2.0 * w * times[k])
            omega = np.array([0.0, 0.0, yaw_rate[k]]) + rotation_about("z", yaw[k]) @ np.array(
                [roll_rate[k], 0, 0]
            )
            q[k, :3] = position
            q[k, 3:7] = quaternion_from_rotation(rot)
            v[k, :3], v[k, 3:6] = rot.T @ velocity, rot.T @ omega
    return q, v


def synthesize(
    robot: RobotModel,
    scenario: str,
    duration: float = 10.0,
    rate: float = 60.0,
    links: list[str] | None = None,
    standing_height: float = 0.0,
    noise: NoiseSpec | None = None,
    seed: int = 0,
    heading: float = 0.0,
    times: np.ndarray | None = None,
) -> Motion:
    """Sample ``scenario`` (``tpose``, ``walking``, ``running``) on ``robot`` at ``rate`` Hz for ``duration``
    seconds; ``links`` are the frames to report (default: every body frame). ``times`` (strictly increasing
    seconds) replaces the uniform grid, e.g. for jittered or dropped samples; ``rate`` is then nominal."""
    if scenario not in PROGRAMMES:
        raise ValueError(f"unknown scenario '{scenario}', expected one of {SCENARIOS}")
    if not (rate > 0 and duration > 0):
        raise ValueError("rate and duration must be positive")
    links = links or [
        f.name for f in robot.model.frames if f.type == pin.FrameType.BODY and f.name != "universe"
    ]
    ids = [robot.frame_id(name) for name in links]
    if times is None:
        times = np.arange(int(round(duration * rate))) / rate
    else:
        times = np.asarray(times, dtype=float).reshape(-1)
        if not (np.all(np.isfinite(times)) and np.all(np.diff(times) > 0)):
            raise ValueError("times must be finite and strictly increasing")
    q, v = joint_trajectory(robot, PROGRAMMES[scenario], times, standing_height, heading)
    model, data = robot.model, robot.model.createData()
    n, nl = len(times), len(links)
    poses = np.zeros((n, nl, 4, 4))
    twists = np.zeros((n, nl, 6))
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for k in range(n):
        pin.forwardKinematics(model, data, q[k], v[k])
        pin.updateFramePlacements(model, data)
        poses[k] = [data.oMf[i].homogeneous for i in ids]
        twists[k] = [pin.getFrameVelocity(model, data, i, lwa).vector for i in ids]
    motion = Motion(
        scenario,
        rate,
        times,
        list(links),
        poses[:, :, :3, 3].copy(),
        poses[:, :, :3, :3].copy(),
        twists[:, :, :3].copy(),
        twists[:, :, 3:].copy(),
        q,
        v,
    )
    if noise is not None:
        _corrupt(motion, noise, np.random.default_rng(seed))
    return motion


def _corrupt(motion: Motion, noise: NoiseSpec, rng: np.random.Generator) -> None:
    """Add seeded bias and white noise to the measured quantities (ground truth ``q``, ``v`` untouched)."""
    n, nl = motion.positions.shape[:2]
    motion.positions += rng.normal(0, noise.position_bias, (1, nl, 3)) + rng.normal(
        0, noise.position, (n, nl, 3)
    )
    motion.linear_velocities += rng.normal(0, noise.linear_velocity, (n, nl, 3))
    motion.angular_velocities += rng.normal(0, noise.angular_velocity, (n, nl, 3))
    bias = rng.normal(0, noise.orientation_bias, (nl, 3))
    jitter = rng.normal(0, noise.orientation, (n, nl, 3))
    motion.rotations[:] = motion.rotations @ exp_so3(bias[None] + jitter)
