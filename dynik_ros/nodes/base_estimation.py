"""Floating-base pose and twist from an optical-mocap rigid body (ROS-free; used by ``mocap_node``).

Frames as in the RH5 mocap seed (Sensors 22:9853, sec. 2.2, Figure 2): the camera world ``{C}`` (the mocap
system's calibrated frame, z up, the floor at ``ground_height``), the robot world ``{R}``, the base ``{B}``
and the tracked rigid body ``{IMU}`` fixed on the robot, ``T_b,imu`` from the base (``rigid_body_*``).

* **Calibration, eq. (1)**: ``T_cr = T_c,imu,0 (T_b,imu)^-1 (T_rb,0)^-1``. ``T_c,imu,0`` is the robust
  mean of ``calibration_samples`` rigid-body poses while the robot stands still (the window slides on
  until its two halves agree within ``still_position`` / ``still_angle``: a robot settling in a harness
  turned 2 deg in its first 0.15 s; a pose that agrees with neither neighbour within the outlier gate is
  left out). ``T_rb,0``, the base in the robot world at
  t = 0, follows the seed: the robot world is the ground projection of the initial base (z = 0 on the
  floor) with the base's initial orientation. Here
  that orientation is the base's *heading* by default (``world_orientation="heading"``: the world stays
  level if the base starts tilted, roll and pitch are kept in the base pose); ``"full"`` takes the whole
  initial orientation as the seed writes it. ``initial_position`` (x, y) and ``initial_yaw`` place that
  ground point in the robot world (e.g. where the IK's base starts). ``robot_world="camera"`` skips eq. (1):
  ``T_cr = I``, the camera frame is the robot world.
* **Base pose per sample, eq. (2)**: ``T_rb,i = (T_cr)^-1 T_c,imu,i (T_b,imu)^-1``.
* **Twist**: finite difference over the accepted poses of the last ``velocity_window`` s (at least the
  previous pose), then a first-order low-pass at ``cutoff_hz``; linear and angular velocity in the base
  frame (REP 105, ``nav_msgs/Odometry``). A gap longer than ``max_dt`` restarts the estimate at zero.
* **Outliers**: a pose further than the gate from the constant-velocity prediction of the last accepted
  pose (``gate_position`` + ``max_acceleration dt^2 / 2``, likewise for the angle) is refused; ``confirm``
  consecutive refused poses that agree with each other are a real jump, accepted with the twist restarted.
* **Recalibration**: :meth:`recalibrate` re-solves eq. (1) at the current raw pose with ``T_rb,0`` replaced
  by the base pose last published, so the published pose goes on without a jump (the mocap's camera frame
  or rigid-body definition changed under a robot that did not move).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from dynik_ros.core.so3 import project_to_so3, rotation_about

ACCEPTED, CALIBRATING, OUTLIER, JUMP = "accepted", "calibrating", "outlier", "jump"
ROBOT_WORLDS = ("initial_base", "camera")
WORLD_ORIENTATIONS = ("heading", "full")


def rpy_to_rotation(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF / REP 103 convention)."""
    return rotation_about("z", yaw) @ rotation_about("y", pitch) @ rotation_about("x", roll)


def yaw_of(rotation: np.ndarray) -> float:
    """Heading of a rotation (the yaw of its ZYX decomposition)."""
    return math.atan2(rotation[1, 0], rotation[0, 0])


def angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Geodesic angle between two rotations [rad]."""
    return float(np.linalg.norm(pin.log3(a.T @ b)))


@dataclass
class BaseState:
    stamp_ns: int
    position: np.ndarray  # robot world
    rotation: np.ndarray  # robot world
    linear_velocity: np.ndarray  # base frame
    angular_velocity: np.ndarray  # base frame

    def predicted(self, stamp_ns: int) -> BaseState:
        """The state moved to ``stamp_ns`` at constant twist (latency compensation)."""
        dt = (stamp_ns - self.stamp_ns) * 1e-9
        position = self.position + self.rotation @ self.linear_velocity * dt
        rotation = self.rotation @ pin.exp3(self.angular_velocity * dt)
        return BaseState(stamp_ns, position, rotation, self.linear_velocity, self.angular_velocity)


@dataclass
class EstimatorConfig:
    """Frames, calibration, twist filter and outlier gate of :class:`MocapBaseEstimator` (SI, rad)."""

    rigid_body_position: np.ndarray = field(default_factory=lambda: np.zeros(3))  # T_b,imu translation
    rigid_body_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))  # T_b,imu rotation
    calibration_samples: int = 50
    robot_world: str = "initial_base"
    world_orientation: str = "heading"
    ground_height: float = 0.0  # camera-frame z of the floor
    initial_position: tuple[float, float] = (0.0, 0.0)  # ground point under the initial base, robot world
    initial_yaw: float = 0.0
    velocity_window: float = 0.02
    cutoff_hz: float = 10.0
    max_dt: float = 0.1
    gate_position: float = 0.02
    gate_angle: float = math.radians(5.0)
    max_acceleration: float = 20.0
    max_angular_acceleration: float = 200.0
    confirm: int = 3
    still_position: float = 0.002  # the calibration window's halves agree this well, or it slides on
    still_angle: float = math.radians(0.2)

    def validate(self) -> None:
        if self.robot_world not in ROBOT_WORLDS:
            raise ValueError(f"robot_world must be one of {ROBOT_WORLDS}, got '{self.robot_world}'")
        if self.world_orientation not in WORLD_ORIENTATIONS:
            raise ValueError(f"world_orientation must be one of {WORLD_ORIENTATIONS}")
        if self.calibration_samples < 1 or self.confirm < 1:
            raise ValueError("calibration_samples and confirm must be >= 1")


class MocapBaseEstimator:
    """Rigid-body poses in (camera frame), base states in the robot world out; see the module docstring."""

    def __init__(self, config: EstimatorConfig | None = None):
        self.config = config or EstimatorConfig()
        self.config.validate()
        c = self.config
        self._rb_r = np.asarray(c.rigid_body_rotation, dtype=float)
        self._rb_p = np.asarray(c.rigid_body_position, dtype=float)
        self.reset()

    # ------------------------------------------------------------------ frames
    def reset(self) -> None:
        """Forget the calibration and the filter state."""
        self._samples: list[tuple[np.ndarray, np.ndarray]] = []
        self._stamps: list[int] = []
        self.camera_from_robot = (np.eye(3), np.zeros(3))  # T_cr (rotation, translation)
        self.calibrated = False
        self.last_state: BaseState | None = None
        self.last_raw: tuple[int, np.ndarray, np.ndarray] | None = None  # stamp, camera-frame pose
        self.outliers = self.jumps = self.calibration_restarts = 0
        self.restart_velocity()

    def restart_velocity(self) -> None:
        """Forget the pose history (keep the calibration): the next pose is accepted as it is and starts the
        velocity estimate afresh (e.g. after the body re-appeared somewhere else)."""
        self._history: deque[BaseState] = deque()
        self._lin_w, self._ang_b, self._filtered = np.zeros(3), np.zeros(3), False
        self._refused: list[BaseState] = []
        self._predictor: BaseState | None = None  # the last accepted pose with the unfiltered twist

    def base_in_camera(self, position: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``T_c,b = T_c,imu (T_b,imu)^-1``."""
        r = rotation @ self._rb_r.T
        return position - r @ self._rb_p, r

    def to_robot_world(self, position: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eq. (2): ``T_rb = (T_cr)^-1 T_c,imu (T_b,imu)^-1`` for a raw rigid-body pose."""
        p_cb, r_cb = self.base_in_camera(position, rotation)
        r_cr, p_cr = self.camera_from_robot
        return r_cr.T @ (p_cb - p_cr), r_cr.T @ r_cb

    def _solve_eq1(self, r_cb: np.ndarray, p_cb: np.ndarray, r_rb: np.ndarray, p_rb: np.ndarray) -> None:
        """Eq. (1): ``T_cr = T_c,b,0 (T_rb,0)^-1`` given the base in the camera and in the robot world."""
        r_cr = r_cb @ r_rb.T
        self.camera_from_robot = (r_cr, p_cb - r_cr @ p_rb)

    def _initial_base_in_robot_world(
        self, r_cb: np.ndarray, p_cb: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``T_rb,0``: the world on the floor under the initial base, with its heading (or its whole
        orientation), the ground point placed at ``initial_position`` facing ``initial_yaw``."""
        c = self.config
        height = float(p_cb[2] - c.ground_height)
        yaw = rotation_about("z", c.initial_yaw)
        if c.world_orientation == "full":
            rotation = yaw
        else:
            rotation = yaw @ rotation_about("z", -yaw_of(r_cb)) @ r_cb
        return rotation, np.array([c.initial_position[0], c.initial_position[1], height])

    def _robust_mean(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Mean of the calibration poses that agree (within the outlier gate) with a neighbour in the window
        (a mislabelled capture agrees with neither and would bias a plain mean by centimetres), and the
        indices of those poses. The robot stands still for the calibration (the seed's t = 0)."""
        c = self.config
        n = len(self._samples)

        def agree(i: int, j: int) -> bool:
            (p, r), (q, u) = self._samples[i], self._samples[j]
            return bool(np.linalg.norm(p - q) <= c.gate_position and angle_between(r, u) <= c.gate_angle)

        keep = [i for i in range(n) if (i > 0 and agree(i, i - 1)) or (i + 1 < n and agree(i, i + 1))]
        keep = keep or list(range(n))
        positions = np.array([self._samples[i][0] for i in keep])
        rotations = np.array([self._samples[i][1] for i in keep])
        return positions.mean(axis=0), project_to_so3(rotations.mean(axis=0)), keep

    def _still(self) -> bool:
        """Whether the calibration window's two halves have the same mean pose (within ``still_position``
        and ``still_angle``): eq. 1 wants the robot standing. Always true with ``robot_world="camera"``."""
        c = self.config
        if c.robot_world == "camera" or len(self._samples) < 4:
            return True
        keep = self._robust_mean()[2]  # an outlier in a half would move its mean by centimetres
        half = len(self._samples) // 2
        first = [self._samples[i] for i in keep if i < half]
        second = [self._samples[i] for i in keep if i >= half]
        if not first or not second:
            return False
        p1 = np.mean([p for p, _ in first], axis=0)
        p2 = np.mean([p for p, _ in second], axis=0)
        r1 = project_to_so3(np.mean([r for _, r in first], axis=0))
        r2 = project_to_so3(np.mean([r for _, r in second], axis=0))
        return bool(np.linalg.norm(p1 - p2) <= c.still_position and angle_between(r1, r2) <= c.still_angle)

    def _calibrate(self) -> list[int]:
        """Eq. (1) from the calibration window; returns the indices of its inlier poses."""
        p_raw, r_raw, keep = self._robust_mean()
        if self.config.robot_world == "initial_base":
            p_cb, r_cb = self.base_in_camera(p_raw, r_raw)
            r_rb, p_rb = self._initial_base_in_robot_world(r_cb, p_cb)
            self._solve_eq1(r_cb, p_cb, r_rb, p_rb)
        self.calibrated = True
        return keep

    def recalibrate(self) -> tuple[float, float]:
        """Eq. (1) again at the last raw pose, ``T_rb,0`` := the base pose last published (moved to that
        pose's stamp with its twist): the output goes on without a jump. Returns how far ``T_cr`` moved
        (m, rad). Raises ``RuntimeError`` before the first published pose."""
        if not self.calibrated or self.last_state is None or self.last_raw is None:
            raise RuntimeError("no base pose published yet (calibrating or no rigid-body pose received)")
        old_r, old_p = self.camera_from_robot
        stamp, position, rotation = self.last_raw
        held = self.last_state.predicted(stamp) if stamp >= self.last_state.stamp_ns else self.last_state
        p_cb, r_cb = self.base_in_camera(position, rotation)
        self._solve_eq1(r_cb, p_cb, held.rotation, held.position)
        new_r, new_p = self.camera_from_robot
        self.restart_velocity()
        self._history.append(held)  # the held pose is the new reference: the next twist continues from it
        self.last_state = self._predictor = held
        return float(np.linalg.norm(new_p - old_p)), angle_between(old_r, new_r)

    # ------------------------------------------------------------------ samples
    def _gate(self, reference: BaseState, stamp_ns: int, p: np.ndarray, r: np.ndarray) -> bool:
        """Whether ``(p, r)`` at ``stamp_ns`` is within the gate of ``reference`` moved at constant twist."""
        c = self.config
        dt = max(0.0, (stamp_ns - reference.stamp_ns) * 1e-9)
        pred = reference.predicted(stamp_ns)
        position_gate = c.gate_position + 0.5 * c.max_acceleration * dt * dt
        angle_gate = c.gate_angle + 0.5 * c.max_angular_acceleration * dt * dt
        return bool(
            np.linalg.norm(p - pred.position) <= position_gate
            and angle_between(pred.rotation, r) <= angle_gate
        )

    def update(
        self, stamp_ns: int, position: np.ndarray, rotation: np.ndarray
    ) -> tuple[str, BaseState | None]:
        """Feed one rigid-body pose (camera frame). Returns ``(verdict, state)``: ``CALIBRATING`` (None),
        ``OUTLIER`` (refused, None), ``ACCEPTED`` or ``JUMP`` (a confirmed jump, twist restarted)."""
        position, rotation = np.asarray(position, float), np.asarray(rotation, float)
        self.last_raw = (stamp_ns, position, rotation)
        if not self.calibrated:
            self._samples.append((position, rotation))
            self._stamps.append(stamp_ns)
            if len(self._samples) < self.config.calibration_samples:
                return CALIBRATING, None
            if not self._still():  # the robot moves (settling in a harness, walking): slide the window
                half = len(self._samples) // 2 or 1
                self._samples, self._stamps = self._samples[half:], self._stamps[half:]
                self.calibration_restarts += 1
                return CALIBRATING, None
            keep = self._calibrate()
            last = len(self._samples) - 1
            if last not in keep:  # the window's last pose is an outlier: the last inlier is the reference
                p_w, r_w = self.to_robot_world(*self._samples[keep[-1]])
                self._history.append(BaseState(self._stamps[keep[-1]], p_w, r_w, np.zeros(3), np.zeros(3)))
                self.last_state = self._predictor = self._history[-1]
                self.outliers += 1
                self._samples, self._stamps = [], []
                return OUTLIER, None
            self._samples, self._stamps = [], []
        p_w, r_w = self.to_robot_world(position, rotation)
        verdict = ACCEPTED
        # the gate predicts with the unfiltered finite difference: the low-pass lags at the start of a motion
        reference = self._predictor if self._history else None
        if reference is not None and not self._gate(reference, stamp_ns, p_w, r_w):
            candidate = BaseState(stamp_ns, p_w, r_w, np.zeros(3), np.zeros(3))
            if self._refused and not self._gate(self._refused[-1], stamp_ns, p_w, r_w):
                self._refused = []  # does not agree with the previous refused pose: a new candidate run
            self._refused.append(candidate)
            if len(self._refused) < self.config.confirm:
                self.outliers += 1
                return OUTLIER, None
            self.jumps += 1
            verdict = JUMP
            self.restart_velocity()
        self._refused = []
        state = self._with_twist(stamp_ns, p_w, r_w)
        self.last_state = state
        return verdict, state

    def _with_twist(self, stamp_ns: int, p_w: np.ndarray, r_w: np.ndarray) -> BaseState:
        c, history = self.config, self._history
        if history and (stamp_ns - history[-1].stamp_ns) * 1e-9 > c.max_dt:
            history.clear()  # a long gap: no velocity information across it
            self._filtered = False
        if history:
            start = history[-1]
            for old in history:  # the oldest pose inside the window (at least the previous one)
                if (stamp_ns - old.stamp_ns) * 1e-9 <= c.velocity_window:
                    start = old
                    break
            dt = (stamp_ns - start.stamp_ns) * 1e-9
            lin_w = (p_w - start.position) / dt
            ang_b = pin.log3(start.rotation.T @ r_w) / dt
            raw = (r_w.T @ lin_w, ang_b)
            if c.cutoff_hz > 0 and self._filtered:
                step = (stamp_ns - history[-1].stamp_ns) * 1e-9
                alpha = step / (step + 1.0 / (2.0 * math.pi * c.cutoff_hz))
                lin_w = self._lin_w + alpha * (lin_w - self._lin_w)
                ang_b = self._ang_b + alpha * (ang_b - self._ang_b)
            self._lin_w, self._ang_b, self._filtered = lin_w, ang_b, True
        else:
            self._lin_w, self._ang_b, self._filtered = np.zeros(3), np.zeros(3), False
            raw = (np.zeros(3), np.zeros(3))
        self._predictor = BaseState(stamp_ns, p_w, r_w, *raw)
        state = BaseState(stamp_ns, p_w, r_w, r_w.T @ self._lin_w, self._ang_b.copy())
        history.append(state)
        while history and (stamp_ns - history[0].stamp_ns) * 1e-9 > c.velocity_window and len(history) > 1:
            history.popleft()
        return state


class GapMonitor:
    """Occlusions from the capture stamps: a gap longer than ``timeout`` between consecutive poses is one
    occlusion; the captures it lost are counted from the nominal period (the mean of recent gaps: a
    750 Hz system sampled on a 1 kHz grid alternates 1 and 2 ms)."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.occlusions = 0
        self.missed = 0
        self.longest = 0.0
        self._last_ns: int | None = None
        self._gaps: deque[float] = deque(maxlen=64)

    @property
    def period(self) -> float:
        return float(np.mean(self._gaps)) if self._gaps else math.nan

    def add(self, stamp_ns: int) -> float:
        """Record a pose's capture stamp; returns the gap before it if it was an occlusion, else 0."""
        last, self._last_ns = self._last_ns, stamp_ns
        if last is None:
            return 0.0
        gap = (stamp_ns - last) * 1e-9
        if gap <= self.timeout:
            self._gaps.append(gap)
            return 0.0
        self.occlusions += 1
        self.longest = max(self.longest, gap)
        period = self.period
        self.missed += max(0, round(gap / period) - 1) if period > 0 else 0
        return gap
