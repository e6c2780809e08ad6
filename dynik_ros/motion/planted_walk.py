"""A slow human walk whose stance foot is planted by construction, with real double supports.

The harmonic programmes of :mod:`dynik_ros.motion.gait` move every joint as a Fourier series while the
pelvis goes on at constant speed: their feet slide, and the retargeter's contact detection sees gaps without
any foot down between single supports (0.27 s per step on the walk), which no quasi-static balance can hold.
This programme is written the other way round, from the feet (issue 12 item 4):

* a footstep plan: both feet side by side, then ``steps`` steps alternating from ``first`` (a half step,
  full steps of ``step_length``, a closing half step that brings the feet side by side again);
* each step is a double support of ``double_support`` seconds (the load moves to the next stance foot)
  followed by a single support of ``single_support`` seconds in which the swing foot, level, rises by
  ``lift`` (straight up, then forward to its next footstep, then straight down; minimum-jerk profiles);
* the pelvis moves, level and facing +x, to the point ``sway`` of the way from the middle of the feet to the
  loaded foot, the load following the same minimum-jerk profile across each double support; its height is
  the standing one less ``crouch`` (bent knees, away from the knee singularity);
* the arms hang (shoulders and elbows as the harmonic walk's offsets), the spine and the head upright.

The human joint trajectory comes from the dynamical IK on the Human66 model tracking these feet (position
and orientation, weight 10), the pelvis and the upright upper body, and the 23 Xsens link poses and twists
from forward kinematics of its output: a :class:`~dynik_ros.motion.synthetic.Motion` like the others, so it
goes through the retargeter unchanged. With the defaults the double supports are 20 % of the gait cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.targets import FrameTarget, Measurements
from dynik_ros.motion.synthetic import Motion

DEG = math.pi / 180.0
FEET = ("RightFoot", "LeftFoot")
SWING_RISE = 0.25  # share of the swing spent lifting (and lowering) the foot
SWING_HOLD = 0.15  # share of the swing before the foot moves forward (and after it stops)
KNEE_START = 0.3  # rad, knee flexion of the human IK's start pose (off the straight-knee singularity)
SETTLE_TOLERANCE = 1e-4  # m / rad: the settle on the first sample must reach its targets this closely
UPRIGHT = (
    "T8",
    "Head",
    "RightUpperArm",
    "LeftUpperArm",
    "RightForeArm",
    "LeftForeArm",
    "RightHand",
    "LeftHand",
)


@dataclass(frozen=True)
class PlantedWalkSpec:
    """Footsteps and timing of the walk (metres, seconds, of the human)."""

    steps: int = 4  # including the closing half step
    step_length: float = 0.3
    double_support: float = 0.25
    single_support: float = 1.0
    lift: float = 0.1
    sway: float = 0.6  # 0: pelvis over the middle of the feet, 1: over the loaded foot
    crouch: float = 0.04
    stand: float = 1.0  # standing still before the first and after the last step
    first: str = "right"  # the first swing foot

    def validate(self) -> None:
        if self.steps < 2:
            raise ValueError("a planted walk needs at least 2 steps (a half step and the closing one)")
        for name in ("step_length", "double_support", "single_support", "lift", "stand"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.first not in ("right", "left"):
            raise ValueError("first must be 'right' or 'left'")

    @property
    def duration(self) -> float:
        return 2 * self.stand + self.steps * (self.double_support + self.single_support)


def min_jerk(tau: np.ndarray) -> np.ndarray:
    """``10 tau^3 - 15 tau^4 + 6 tau^5`` on [0, 1] (clipped): zero velocity and acceleration at both ends."""
    tau = np.clip(tau, 0.0, 1.0)
    return tau**3 * (10.0 - 15.0 * tau + 6.0 * tau**2)


def swing_height(tau: np.ndarray) -> np.ndarray:
    """Lift of the swing foot (0..1) over its single support ``tau`` in [0, 1]: straight up over the first
    quarter, straight down over the last (minimum jerk), so the foot leaves and lands vertically."""
    return min_jerk(tau / SWING_RISE) * min_jerk((1.0 - tau) / SWING_RISE)


def swing_forward(tau: np.ndarray) -> np.ndarray:
    """Forward progress of the swing foot (0..1): minimum jerk between 15 % and 85 % of the swing."""
    return min_jerk((tau - SWING_HOLD) / (1.0 - 2.0 * SWING_HOLD))


def footstep_plan(
    spec: PlantedWalkSpec, start: np.ndarray, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Feet positions ``(N, 2, 3)`` (right, left) from their standing positions ``start`` ``(2, 3)`` and the
    load on the right foot ``(N,)`` (0..1; 0.5 standing), at ``times``."""
    n = len(times)
    feet = np.repeat(start[None], n, axis=0).astype(float)
    load = np.full(n, 0.5)
    swing = 0 if spec.first == "right" else 1
    ahead = start[:, 0].copy()
    t0 = spec.stand
    previous_load = 0.5
    for i in range(spec.steps):
        stance = 1 - swing
        stance_load = 0.0 if swing == 0 else 1.0  # the load on the right foot while `stance` carries it
        shift = min_jerk((times - t0) / spec.double_support)
        load = np.where(times >= t0, previous_load + shift * (stance_load - previous_load), load)
        t1 = t0 + spec.double_support
        if i == 0 or i == spec.steps - 1:
            goal = ahead[stance] + (0.5 * spec.step_length if i == 0 else 0.0)
        else:
            goal = ahead[stance] + spec.step_length
        tau = (times - t1) / spec.single_support
        after = times >= t1
        feet[after, swing, 0] = ahead[swing] + swing_forward(tau[after]) * (goal - ahead[swing])
        feet[:, swing, 2] += spec.lift * swing_height(tau)
        ahead[swing] = goal
        previous_load = stance_load
        t0 = t1 + spec.single_support
        swing = stance
    final = min_jerk((times - t0) / spec.double_support)
    load = np.where(times >= t0, previous_load + final * (0.5 - previous_load), load)
    return feet, load


def _standing_configuration(human) -> np.ndarray:
    """Human66 standing, arms hanging (the harmonic walk's shoulder and elbow offsets), facing +x."""
    q = human.neutral_configuration()
    for name, value in (
        ("jRightShoulder_rotx", 75.0),
        ("jLeftShoulder_rotx", -75.0),
        ("jRightElbow_rotz", 20.0),
        ("jLeftElbow_rotz", -20.0),
    ):
        q[7 + human.joint_index(name)] = value * DEG
    return q


def _bent_knees(human, q: np.ndarray, flexion: float = KNEE_START) -> np.ndarray:
    """``q`` with both knees flexed by ``flexion`` (rad; Human66 knees flex about +y, the shank swinging
    back), the IK's start. With straight knees the pelvis height is singular (no leg joint moves it to first
    order): the crouch got no pull, the IK left the singularity only once round-off had grown (it crouched
    3.7 cm at samples 70-100, inside the first stand: the knee kink of every retargeted planted walk), and
    on whichever branch the round-off chose (the left knee bent backwards, 13-23 cm behind the hip-ankle
    line over the whole walk; the human model has no joint limits to stop it)."""
    q = q.copy()
    for name in ("jLeftKnee_roty", "jRightKnee_roty"):
        q[7 + human.joint_index(name)] = flexion
    return q


def _check_settled(human, q, targets, positions: np.ndarray, rotations: np.ndarray) -> None:
    """Raise if the settle left a position or orientation target more than ``SETTLE_TOLERANCE`` away."""
    model, data = human.model, human.model.createData()
    pin.framesForwardKinematics(model, data, q)
    worst = 0.0
    for i, target in enumerate(targets):
        pose = data.oMf[human.frame_id(target.frame)]
        if target.position:
            worst = max(worst, float(np.linalg.norm(pose.translation - positions[i])))
        worst = max(worst, float(np.linalg.norm(pin.log3(pose.rotation.T @ rotations[i]))))
    if worst > SETTLE_TOLERANCE:
        raise RuntimeError(f"planted walk: the human IK did not settle on the first sample ({worst:.2e} off)")


def planted_walk(
    spec: PlantedWalkSpec | None = None, rate: float = 100.0, height: float = 1.75, mass: float = 75.0
) -> Motion:
    """The 23 Xsens links of a Human66 subject walking ``spec`` (module docstring), sampled at ``rate``."""
    from dynik_ros.core.dynamical_ik import DynamicalIK
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.retarget.human import human_model

    spec = spec or PlantedWalkSpec()
    spec.validate()
    human = human_model("human66", height, mass)
    model, data = human.model, human.model.createData()
    q0 = _standing_configuration(human)
    q0[2] = pelvis_height(Subject(height=height, mass=mass))
    pin.framesForwardKinematics(model, data, q0)
    ids = {link: human.frame_id(link) for link in XSENS_SEGMENTS}
    start = np.array([data.oMf[ids[f]].translation for f in FEET])
    foot_rotations = [data.oMf[ids[f]].rotation.copy() for f in FEET]
    upright = [data.oMf[ids[link]].rotation.copy() for link in UPRIGHT]
    pelvis0 = data.oMf[ids["Pelvis"]]
    times = np.arange(int(round(spec.duration * rate)) + 1) / rate
    feet, load = footstep_plan(spec, start, times)
    middle = feet.mean(axis=1)
    loaded = load[:, None] * feet[:, 0] + (1.0 - load[:, None]) * feet[:, 1]
    pelvis = middle + spec.sway * (loaded - middle)
    pelvis[:, 2] = pelvis0.translation[2] - spec.crouch
    pelvis[:, 0] += pelvis0.translation[0] - start[:, 0].mean()
    strong = (10.0,) * 3
    targets = [
        FrameTarget(f, position=True, orientation=True, position_weight=strong, orientation_weight=strong)
        for f in FEET
    ]
    targets.append(FrameTarget("Pelvis", position=True, orientation=True))
    targets += [FrameTarget(link, position=False, orientation=True) for link in UPRIGHT]
    positions = np.concatenate([feet, pelvis[:, None]], axis=1)
    velocities = np.gradient(positions, times, axis=0)
    rotations = np.array([*foot_rotations, pelvis0.rotation, *upright])
    ik = DynamicalIK(human, targets, None, _bent_knees(human, q0))
    first = Measurements(positions[0], rotations)
    for _ in range(300):  # settle on the first sample (the crouch), so the first stand stands still
        q, _ = ik.step(first, 0.01)
    _check_settled(human, q, targets, positions[0], rotations)
    n, nl = len(times), len(XSENS_SEGMENTS)
    qs, vs = np.zeros((n, human.nq)), np.zeros((n, human.nv))
    poses = np.zeros((n, nl, 4, 4))
    twists = np.zeros((n, nl, 6))
    lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    zeros = np.zeros((len(rotations), 3))
    for k in range(n):
        dt = times[k] - times[k - 1] if k else 1.0 / rate
        q, v = ik.step(Measurements(positions[k], rotations, velocities[k], zeros), dt)
        qs[k], vs[k] = q, v
        pin.forwardKinematics(model, data, q, v)
        pin.updateFramePlacements(model, data)
        poses[k] = [data.oMf[ids[link]].homogeneous for link in XSENS_SEGMENTS]
        twists[k] = [pin.getFrameVelocity(model, data, ids[link], lwa).vector for link in XSENS_SEGMENTS]
    return Motion(
        "planted_walk",
        rate,
        times,
        list(XSENS_SEGMENTS),
        poses[:, :, :3, 3].copy(),
        poses[:, :, :3, :3].copy(),
        twists[:, :, :3].copy(),
        twists[:, :, 3:].copy(),
        qs,
        vs,
    )
