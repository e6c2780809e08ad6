"""The estimation chain per suit sample, ROS-free: suit kinematics -> contact state -> base velocity ->
MAP (Latella et al. 2019, sec. 3.2-3.4). What ``dynamics_node`` runs; usable offline on recordings.

Contact state: with both shoes read at a sample, :class:`OnlineContactClassifier` on their world-vertical
forces (the shoe frame is the foot frame, so ``f_z = (R_foot f)_z``); otherwise the kinematic rule shared
with the retargeter. ``base_velocity = "contacts"`` replaces the suit's pelvis twist by eq. 8-10 whenever
a foot is in contact (the seed's choice); ``"suit"`` keeps the suit's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.estimation.base_velocity import BaseVelocityFromContacts
from dynik_ros.estimation.contact_classification import (
    KinematicContactClassifier,
    OnlineContactClassifier,
    contact_flags,
)
from dynik_ros.estimation.map_dynamics import MapCovariances, MapDynamicsEstimator
from dynik_ros.estimation.suit_kinematics import SuitKinematics, SuitSample

FEET = ("RightFoot", "LeftFoot")
Shoes = np.ndarray | Callable[[SuitSample], np.ndarray | None] | None
BASE_VELOCITY_SOURCES = ("suit", "contacts")


@dataclass(frozen=True)
class PipelineConfig:
    """Options of :class:`HumanDynamicsPipeline`."""

    height: float = 1.75
    mass: float = 75.0
    ground: float = 0.0
    base_velocity: str = "suit"
    contact_on_fraction: float = 0.10
    contact_off_fraction: float = 0.05
    covariances: MapCovariances = field(default_factory=MapCovariances)

    def __post_init__(self) -> None:
        if self.base_velocity not in BASE_VELOCITY_SOURCES:
            raise ValueError(
                f"base_velocity must be one of {BASE_VELOCITY_SOURCES}, got {self.base_velocity!r}"
            )


@dataclass
class DynamicsOutput:
    """The estimate at one suit sample: its time, joint torques, foot wrenches (foot frames, right
    first), the contact state and whether it came from the shoes."""

    time: float
    stamp_ns: int
    joint_names: list[str]
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    wrenches: np.ndarray  # (2, 6)
    state: int
    from_shoes: bool


class ShoeBuffer:
    """The recent readings of each shoe, and the reading nearest a suit sample's stamp: the shoes stream
    at their own rate and stamps, the suit at its own."""

    def __init__(self, max_age: float, feet: int = 2, depth: int = 64):
        if not max_age >= 0:
            raise ValueError(f"max_age must be >= 0, got {max_age}")
        self.max_age_ns = max_age * 1e9
        self.buffers: list[deque[tuple[int, np.ndarray]]] = [deque(maxlen=depth) for _ in range(feet)]

    def clear(self) -> None:
        for buffer in self.buffers:
            buffer.clear()

    def add(self, foot: int, stamp_ns: int, wrench: np.ndarray) -> bool:
        """Store a reading; ``False`` (not stored) when it is not newer than the last one of that shoe."""
        buffer = self.buffers[foot]
        if buffer and stamp_ns <= buffer[-1][0]:
            return False
        buffer.append((int(stamp_ns), np.asarray(wrench, dtype=float).reshape(6)))
        return True

    def at(self, stamp_ns: int) -> np.ndarray:
        """``(feet, 6)``: each shoe's reading nearest ``stamp_ns`` within ``max_age``, NaN rows otherwise."""
        out = np.full((len(self.buffers), 6), np.nan)
        for f, buffer in enumerate(self.buffers):
            if buffer:
                stamp, wrench = min(buffer, key=lambda item: abs(item[0] - stamp_ns))
                if abs(stamp - stamp_ns) <= self.max_age_ns:
                    out[f] = wrench
        return out


class HumanDynamicsPipeline:
    """Suit samples (and shoe wrenches) in, :class:`DynamicsOutput` out, one sample behind (the central
    differences of :class:`SuitKinematics`)."""

    def __init__(self, robot: RobotModel, config: PipelineConfig | None = None):
        self.robot = robot
        self.config = config or PipelineConfig()
        c = self.config
        self.kinematics = SuitKinematics.for_human(robot)
        self.links = self.kinematics.links
        self.feet = [self.links.index(f) for f in FEET]
        self.map = MapDynamicsEstimator(robot, self.links, FEET, c.covariances)
        self.base = BaseVelocityFromContacts(robot, FEET)
        self.online = OnlineContactClassifier(c.contact_on_fraction, c.contact_off_fraction)
        self.kinematic = KinematicContactClassifier.for_human(self.links, c.height, c.mass, c.ground)
        self._shoes: deque[Shoes] = deque(maxlen=3)

    def reset(self) -> None:
        self.kinematics.reset()
        self.online.reset()
        self.kinematic.reset()
        self._shoes.clear()

    def push(self, sample: SuitSample, shoes: Shoes = None) -> DynamicsOutput | None:
        """Add one suit sample and the shoes' wrenches ``(2, 6)`` at its time (right, left, foot frames;
        ``None`` or a NaN row: not read), or a function giving them for a sample (called when it is
        estimated, one sample later: readings that arrive after the suit's are still used); returns the
        estimate of the previous sample, or ``None`` while the window fills."""
        state = self.kinematics.push(sample)
        self._shoes.append(shoes)
        if state is None:
            return None
        middle = state.sample
        shoes = self._shoes[-2]
        if callable(shoes):
            shoes = shoes(middle)
        if shoes is not None:
            shoes = np.asarray(shoes, dtype=float).reshape(2, 6)
        middle = state.sample
        kinematic = self.kinematic.update(middle.positions, middle.linear_velocities)
        read = shoes is not None and bool(np.isfinite(shoes).all())
        if read:
            fz = [float((middle.rotations[i] @ shoes[f, :3])[2]) for f, i in enumerate(self.feet)]
            contact = self.online.update(fz[0], fz[1])
        else:
            contact = kinematic
        flags = contact_flags(contact)
        v = state.v.copy()
        if self.config.base_velocity == "contacts" and any(flags):
            v[:6] = self.base.estimate(state.q, v[6:], flags)
        # with the shoes read their measurement decides the wrenches: no zero-wrench prior for a foot
        # the classifier calls unloaded (a 4 % load would otherwise be pulled towards zero)
        prior_flags = (True, True) if read else flags
        estimate = self.map.estimate(
            state.q, v, state.link_accelerations, state.joint_accelerations, shoes, prior_flags
        )
        return DynamicsOutput(
            middle.time,
            middle.stamp_ns,
            self.robot.joint_names,
            state.q,
            v,
            estimate.tau,
            estimate.wrenches,
            contact,
            read,
        )
