"""Joint-angle programmes for the synthetic scenarios of sec. 4.1: T-pose, walking at 4 km/h and running at
10 km/h, as smooth periodic functions with analytic derivatives.

Angles are given per Xsens joint and axis (joint names ``<joint>_rot<axis>`` of the human models, whose
zero configuration is the T-pose with every segment frame aligned to the pelvis; x forward, y left, z up).
Each angle is a truncated Fourier series in the gait phase. Sagittal amplitudes follow typical gait
curves (e.g. Winter, *Biomechanics and Motor Control of Human Movement*): hip flexion about 30 deg to
extension about 10 deg, knee flexion up to about 60 deg in walking and about 100 deg in running, and
cadences of about 108 (walking, 4 km/h) and 166 (running, 10 km/h) steps per minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEG = np.pi / 180.0


@dataclass(frozen=True)
class Harmonic:
    """``offset + sum_k amplitude_k cos(k w t + phase_k)``, phase in cycles (0..1)."""

    offset: float = 0.0
    terms: tuple[tuple[int, float, float], ...] = ()  # (k, amplitude [rad], phase [cycles])

    def value(self, omega: float, t: np.ndarray, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Value and time derivative at times ``t``; ``shift`` adds a phase in cycles (left/right legs)."""
        angle = np.full_like(t, self.offset, dtype=float)
        rate = np.zeros_like(t, dtype=float)
        for k, amplitude, phase in self.terms:
            arg = k * omega * t + 2.0 * np.pi * k * (phase + shift)
            angle += amplitude * np.cos(arg)
            rate -= amplitude * k * omega * np.sin(arg)
        return angle, rate


@dataclass(frozen=True)
class GaitProgramme:
    """Everything needed to synthesise one scenario."""

    name: str
    speed: float  # forward speed of the pelvis, m/s
    cycle_time: float  # duration of one gait cycle (two steps), s
    bounce: float  # vertical pelvis oscillation amplitude, m (twice per cycle)
    pelvis_yaw: float  # rad, once per cycle
    pelvis_roll: float  # rad, once per cycle
    joints: dict[str, Harmonic] = field(default_factory=dict)  # right side and midline joints
    mirrored: dict[str, float] = field(default_factory=dict)  # left = sign * right, half a cycle later

    @property
    def omega(self) -> float:
        return 2.0 * np.pi / self.cycle_time


def _h(offset_deg: float, *terms: tuple[int, float, float]) -> Harmonic:
    return Harmonic(offset_deg * DEG, tuple((k, a * DEG, p) for k, a, p in terms))


# Sign conventions (right side, x forward, y left, z up, arms hanging after the shoulder roll):
#   hip/ankle flexion forward is a negative rotation about y; knee flexion positive about y;
#   right arm lowered by +rotx at the shoulder, swing about the arm's local z; elbow flexion about z.
_ARMS_DOWN = 75.0

WALKING = GaitProgramme(
    name="walking",
    speed=4.0 / 3.6,
    cycle_time=1.1,
    bounce=0.02,
    pelvis_yaw=4.0 * DEG,
    pelvis_roll=3.0 * DEG,
    joints={
        "jRightHip_roty": _h(-10.0, (1, 20.0, 0.0), (2, 2.0, 0.1)),
        "jRightHip_rotx": _h(0.0, (1, 3.0, 0.2)),
        "jRightKnee_roty": _h(22.0, (1, 20.0, 0.45), (2, 8.0, 0.1)),
        "jRightAnkle_roty": _h(0.0, (1, 8.0, 0.3), (2, 4.0, 0.0)),
        "jRightShoulder_rotx": _h(_ARMS_DOWN),
        "jRightShoulder_rotz": _h(0.0, (1, 18.0, 0.0)),
        "jRightElbow_rotz": _h(20.0, (1, 10.0, 0.5)),
        "jL5S1_roty": _h(4.0, (2, 2.0, 0.1)),
        "jL5S1_rotz": _h(0.0, (1, 3.0, 0.5)),
        "jT9T8_rotz": _h(0.0, (1, 4.0, 0.5)),
        "jT1C7_roty": _h(-3.0),
        "jC1Head_rotz": _h(0.0, (1, 3.0, 0.0)),
    },
    mirrored={
        "jRightHip_roty": 1.0,
        "jRightHip_rotx": -1.0,
        "jRightKnee_roty": 1.0,
        "jRightAnkle_roty": 1.0,
        "jRightShoulder_rotx": -1.0,
        "jRightShoulder_rotz": -1.0,
        "jRightElbow_rotz": -1.0,
    },
)

RUNNING = GaitProgramme(
    name="running",
    speed=10.0 / 3.6,
    cycle_time=0.72,
    bounce=0.05,
    pelvis_yaw=7.0 * DEG,
    pelvis_roll=4.0 * DEG,
    joints={
        "jRightHip_roty": _h(-15.0, (1, 32.0, 0.0), (2, 4.0, 0.1)),
        "jRightHip_rotx": _h(0.0, (1, 5.0, 0.2)),
        "jRightKnee_roty": _h(55.0, (1, 40.0, 0.45), (2, 12.0, 0.1)),
        "jRightAnkle_roty": _h(0.0, (1, 15.0, 0.3), (2, 5.0, 0.0)),
        "jRightShoulder_rotx": _h(_ARMS_DOWN - 5.0),
        "jRightShoulder_rotz": _h(0.0, (1, 35.0, 0.0)),
        "jRightElbow_rotz": _h(80.0, (1, 15.0, 0.5)),
        "jL5S1_roty": _h(10.0, (2, 3.0, 0.1)),
        "jL5S1_rotz": _h(0.0, (1, 6.0, 0.5)),
        "jT9T8_rotz": _h(0.0, (1, 8.0, 0.5)),
        "jT1C7_roty": _h(-5.0),
        "jC1Head_rotz": _h(0.0, (1, 4.0, 0.0)),
    },
    mirrored=WALKING.mirrored,
)

TPOSE = GaitProgramme(
    name="tpose",
    speed=0.0,
    cycle_time=4.0,  # slow breathing-like sway
    bounce=0.003,
    pelvis_yaw=1.0 * DEG,
    pelvis_roll=0.5 * DEG,
    joints={
        "jL5S1_roty": _h(2.0, (1, 1.0, 0.0)),
        "jT9T8_roty": _h(1.0, (1, 1.0, 0.25)),
        "jT1C7_roty": _h(-4.0, (1, 1.5, 0.1)),
        "jRightShoulder_rotx": _h(3.0, (1, 1.0, 0.3)),
        "jRightElbow_rotz": _h(5.0, (1, 1.0, 0.6)),
        "jRightHip_rotx": _h(4.0),
        "jRightKnee_roty": _h(3.0, (1, 0.5, 0.0)),
    },
    mirrored={
        "jRightShoulder_rotx": -1.0,
        "jRightElbow_rotz": -1.0,
        "jRightHip_rotx": -1.0,
        "jRightKnee_roty": 1.0,
    },
)

PROGRAMMES = {p.name: p for p in (TPOSE, WALKING, RUNNING)}
