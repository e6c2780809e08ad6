"""A simulated optical motion-capture system tracking one rigid body on the robot (ROS-free).

Modelled on the RH5 set-up of the mocap seed (sec. 2.2: Qualisys rigid-body tracking streamed at 750 Hz
with a variable latency of 2-4 ms): a rigid body fixed on a robot link (``marker_offset`` from the link
frame) is seen by cameras whose frame is offset from the simulated world by ``camera_from_world``
(``T_cw``: the world frame expressed in the camera frame). Each capture at time ``t`` gives

    T_cm = T_cw T_wl(t) T_lm        (then noise, dropouts and outliers)

stamped with ``t`` (the capture time, what the system reports) and delivered ``t + latency`` later, with
the latency drawn uniformly in ``[latency_min, latency_max]`` (deliveries keep their order).

* noise: Gaussian, ``position_noise`` [m] per axis and ``rotation_noise`` [rad] per axis of a rotation
  vector applied in the rigid-body frame;
* dropouts (occlusions): runs of missing captures, mean length ``dropout_mean_length`` captures, a
  fraction ``dropout_fraction`` of all captures in the long run (two-state Markov chain);
* outliers: a fraction ``outlier_fraction`` of the delivered captures is displaced by a random
  ``outlier_distance`` range [m] and turned by up to ``outlier_angle`` [rad] (a mislabelled marker).

Captures happen at the physics step at or after each ``k / rate`` of sim time (``k`` integer: the grid
is anchored at sim time 0, so two streams at commensurate rates share their common instants whenever
they start); the stamp is that step's time, the instant the reported pose was true.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

OK, OUTLIER = "ok", "outlier"


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF convention)."""
    cr, sr, cp, sp, cy, sy = (
        math.cos(roll),
        math.sin(roll),
        math.cos(pitch),
        math.sin(pitch),
        math.cos(yaw),
        math.sin(yaw),
    )
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def rotation_exp(w: np.ndarray) -> np.ndarray:
    """Rotation matrix of a rotation vector (Rodrigues; scalar arithmetic, called per capture)."""
    x, y, z = (float(v) for v in w)
    angle = math.sqrt(x * x + y * y + z * z)
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = x / angle, y / angle, z / angle
    s, c = math.sin(angle), math.cos(angle)
    v = 1.0 - c
    return np.array(
        [
            [c + x * x * v, x * y * v - z * s, x * z * v + y * s],
            [y * x * v + z * s, c + y * y * v, y * z * v - x * s],
            [z * x * v - y * s, z * y * v + x * s, c + z * z * v],
        ]
    )


def quaternion_xyzw(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion ``[x, y, z, w]`` (w >= 0) of a rotation matrix."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = rotation.tolist()
    trace = m00 + m11 + m22
    if trace > 0:
        s = 2.0 * math.sqrt(trace + 1.0)
        q = ((m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s)
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        q = (0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s)
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        q = ((m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        q = ((m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s)
    norm = math.sqrt(sum(v * v for v in q))
    sign = -1.0 if q[3] < 0 else 1.0
    return np.array([sign * v / norm for v in q])


@dataclass
class MocapConfig:
    """Rate, latency, errors and frames of the simulated mocap system (SI units, angles in rad)."""

    rate: float = 750.0
    latency_min: float = 0.002
    latency_max: float = 0.004
    position_noise: float = 0.0005
    rotation_noise: float = math.radians(0.1)
    dropout_fraction: float = 0.05
    dropout_mean_length: float = 10.0
    outlier_fraction: float = 0.001
    outlier_distance: tuple[float, float] = (0.05, 0.3)
    outlier_angle: float = math.radians(20.0)
    camera_from_world: tuple[float, ...] = (0.5, -1.0, 0.2, 0.0, 0.0, math.radians(30.0))  # x y z r p y
    marker_offset: tuple[float, ...] = (0.0, 0.0, 0.1, 0.0, 0.0, 0.0)  # rigid body in the link frame
    seed: int = 0

    def validate(self) -> None:
        if not 1.0 <= self.rate <= 10000.0:
            raise ValueError(f"mocap rate {self.rate} Hz is outside [1, 10000]")
        if not 0.0 <= self.latency_min <= self.latency_max <= 1.0:
            raise ValueError("mocap latency: need 0 <= latency_min <= latency_max <= 1 s")
        if self.position_noise < 0 or self.rotation_noise < 0:
            raise ValueError("mocap noise must be >= 0")
        if not 0.0 <= self.dropout_fraction < 1.0 or self.dropout_mean_length < 1.0:
            raise ValueError("mocap dropouts: need 0 <= dropout_fraction < 1 and dropout_mean_length >= 1")
        if not 0.0 <= self.outlier_fraction <= 1.0:
            raise ValueError("mocap outlier_fraction must be in [0, 1]")
        if len(self.camera_from_world) != 6 or len(self.marker_offset) != 6:
            raise ValueError("camera_from_world and marker_offset are x, y, z, roll, pitch, yaw")


class MocapSample(NamedTuple):
    """One delivered capture: pose of the rigid body in the camera frame, stamped with the capture time."""

    frame: int  # capture number, counting dropped captures too (like a mocap system's frame number)
    stamp: float
    delivery: float
    position: np.ndarray
    quaternion: np.ndarray  # x y z w
    kind: str  # OK or OUTLIER
    true_position: np.ndarray  # the noise-free camera-frame pose
    true_rotation: np.ndarray


class MocapSimulator:
    """Captures, delays and corrupts rigid-body poses; see the module docstring."""

    def __init__(self, config: MocapConfig | None = None):
        self.config = config or MocapConfig()
        self.config.validate()
        c = self.config
        self.rng = np.random.default_rng(c.seed)
        self.camera_rotation = rpy_matrix(*c.camera_from_world[3:])
        self.camera_position = np.array(c.camera_from_world[:3], dtype=float)
        self.marker_rotation = rpy_matrix(*c.marker_offset[3:])
        self.marker_position = np.array(c.marker_offset[:3], dtype=float)
        self.period = 1.0 / c.rate
        self._next_capture: float | None = None
        self._occluded = False
        # occlusion chain: P(start) per visible capture, P(end) = 1 / mean length per occluded capture
        f, length = c.dropout_fraction, c.dropout_mean_length
        self._p_end = 1.0 / length
        self._p_start = f * self._p_end / (1.0 - f) if f > 0 else 0.0
        self._queue: list[MocapSample] = []
        self._uniform: list[list[float]] = []
        self._position_noise = self._rotation_noise = None
        self._draw_index = 0
        self._last_delivery = -math.inf
        self.captures = self.delivered = self.dropped = self.outliers = 0

    def camera_pose(
        self, link_position: np.ndarray, link_rotation: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Noise-free ``T_cm = T_cw T_wl T_lm`` of a link's world pose."""
        world_rotation = link_rotation @ self.marker_rotation
        world_position = link_position + link_rotation @ self.marker_position
        return (
            self.camera_position + self.camera_rotation @ world_position,
            self.camera_rotation @ world_rotation,
        )

    def due(self, t: float) -> bool:
        """Whether a capture falls at or before time ``t``."""
        return self._next_capture is None or t >= self._next_capture - 1e-9

    def _draws(self) -> tuple[float, float, float, np.ndarray, np.ndarray]:
        """The next capture's random numbers, drawn 1024 captures at a time (a generator call per number
        cost more than the physics step): occlusion, outlier and latency uniforms, position and rotation
        noise."""
        if self._draw_index >= len(self._uniform):
            n, c, rng = 1024, self.config, self.rng
            self._uniform = rng.random((n, 3)).tolist()
            self._position_noise = rng.normal(0.0, c.position_noise, (n, 3)) if c.position_noise else None
            self._rotation_noise = rng.normal(0.0, c.rotation_noise, (n, 3)) if c.rotation_noise else None
            self._draw_index = 0
        k = self._draw_index
        self._draw_index += 1
        u_occlusion, u_outlier, u_latency = self._uniform[k]
        position = self._position_noise[k] if self._position_noise is not None else None
        rotation = self._rotation_noise[k] if self._rotation_noise is not None else None
        return u_occlusion, u_outlier, u_latency, position, rotation

    def capture(self, t: float, link_position: np.ndarray, link_rotation: np.ndarray) -> None:
        """Capture the link pose true at ``t`` if a capture is due (call every physics step)."""
        if not self.due(t):
            return
        c, rng = self.config, self.rng
        k = math.floor(t * self.config.rate + 1e-6) + 1  # the next grid instant k / rate after t
        self._next_capture = k / self.config.rate
        self.captures += 1
        u_occlusion, u_outlier, u_latency, position_noise, rotation_noise = self._draws()
        if self._occluded:
            self._occluded = u_occlusion >= self._p_end
        else:
            self._occluded = u_occlusion < self._p_start
        if self._occluded:
            self.dropped += 1
            return
        true_p, true_r = self.camera_pose(link_position, link_rotation)
        rotation = true_r @ rotation_exp(rotation_noise) if rotation_noise is not None else true_r
        position = true_p + position_noise if position_noise is not None else true_p.copy()
        kind = OK
        if c.outlier_fraction and u_outlier < c.outlier_fraction:
            direction = rng.normal(size=3)
            direction /= np.linalg.norm(direction)
            position = position + direction * rng.uniform(*c.outlier_distance)
            axis = rng.normal(size=3)
            rotation = rotation @ rotation_exp(
                axis / np.linalg.norm(axis) * rng.uniform(0.0, c.outlier_angle)
            )
            kind = OUTLIER
            self.outliers += 1
        latency = c.latency_min + u_latency * (c.latency_max - c.latency_min)
        delivery = max(t + latency, self._last_delivery)
        self._last_delivery = delivery
        self._queue.append(
            MocapSample(
                self.captures - 1, t, delivery, position, quaternion_xyzw(rotation), kind, true_p, true_r
            )
        )

    @property
    def pending(self) -> int:
        """Captures taken but not delivered yet (in flight)."""
        return len(self._queue)

    def deliver(self, t: float) -> list[MocapSample]:
        """The captures delivered by time ``t``, oldest first."""
        n = 0
        while n < len(self._queue) and self._queue[n].delivery <= t + 1e-12:
            n += 1
        out, self._queue = self._queue[:n], self._queue[n:]
        self.delivered += len(out)
        return out
