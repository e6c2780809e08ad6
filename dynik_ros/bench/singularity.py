"""The seed's Boxer-style singularity case (Schumacher et al. 2021, sec. V-2, Fig. 7): an arm whose shoulder
passes near its singularity while the hand moves slowly and smoothly.

The arm (URDF built here): a pan joint about z, a tilt joint about y, a 0.5 m upper arm pointing up at zero,
so the arm straight up is singular (pan axis along the arm). The motion is made by forward kinematics of a
joint path: the hand direction ``d(phi) = R_x(-eps) (sin phi, 0, cos phi)`` sweeps at ``omega`` rad/s over
the top, passing ``eps`` from the pole; its joint solution ``pan = atan2(d_y, d_x)``, ``tilt = acos(d_z)``
turns the pan by half a turn in about ``2 eps / omega`` s (peak pan rate ``omega / eps``) while the hand
speed stays ``0.5 omega`` m/s. The IK tracks the hand position (weight 10) from the path's first
configuration, at 240 Hz with K = 10; the path's angle ``phi`` stays within +-1.2 rad (no wrap of the pan).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.targets import FrameTarget, Measurements

LENGTH = 0.5
ARM = f"""<robot name="pan_tilt_arm">
  <link name="base"/><link name="shoulder"/><link name="upper_arm"/><link name="hand"/>
  <joint name="pan" type="revolute"><parent link="base"/><child link="shoulder"/><axis xyz="0 0 1"/>
    <limit lower="-6" upper="6" velocity="1000" effort="1"/></joint>
  <joint name="tilt" type="revolute"><parent link="shoulder"/><child link="upper_arm"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" velocity="1000" effort="1"/></joint>
  <joint name="hand_fixed" type="fixed"><parent link="upper_arm"/><child link="hand"/>
    <origin xyz="0 0 {LENGTH}"/></joint>
</robot>"""


@dataclass
class SingularityRun:
    times: np.ndarray
    joints: np.ndarray  # (N, 2) pan, tilt of the output
    error: np.ndarray  # (N,) hand position error [m]
    peak_speed: float  # max |finite-difference joint speed| of the output [rad/s]
    near: np.ndarray  # (N,) samples within ``window`` s of the pole passage (a cut corner heals at 1/K)


def hand_path(times: np.ndarray, eps: float, omega: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hand positions, velocities ``(N, 3)`` and the joint path ``(N, 2)`` that makes them (FK)."""
    phi = omega * (times - times.mean())
    c, s = np.cos(eps), np.sin(eps)
    d = np.stack((np.sin(phi), s * np.cos(phi), c * np.cos(phi)), axis=1)
    d_dot = omega * np.stack((np.cos(phi), -s * np.sin(phi), -c * np.sin(phi)), axis=1)
    joints = np.stack((np.arctan2(d[:, 1], d[:, 0]), np.arccos(np.clip(d[:, 2], -1, 1))), axis=1)
    return LENGTH * d, LENGTH * d_dot, joints


def run_singularity(
    regularizers: RegularizerConfig | None = None,
    rate: float = 240.0,
    duration: float = 3.0,
    eps: float = 0.01,
    omega: float = 0.8,
    window: float = 0.75,
    weight: float = 10.0,
) -> SingularityRun:
    """Track the hand through the pole; joint speeds and hand errors of the output."""
    robot = RobotModel.from_urdf_string(ARM, floating_base=False)
    times = np.arange(int(round(duration * rate))) / rate
    positions, velocities, joints = hand_path(times, eps, omega)
    config = DynamicalIKConfig(regularizers=regularizers or RegularizerConfig())
    target = FrameTarget("hand", position=True, orientation=False, position_weight=(weight,) * 3)
    ik = DynamicalIK(robot, [target], config, q0=joints[0])
    dt = 1.0 / rate
    out = np.zeros((len(times), 2))
    error = np.zeros(len(times))
    for k in range(len(times)):
        m = Measurements(positions[k][None], np.zeros((0, 3, 3)), velocities[k][None], np.zeros((0, 3)))
        q, _ = ik.step(m, dt)
        out[k] = q
        error[k] = np.linalg.norm(robot.frame_pose(q, "hand")[0] - positions[k])
    speeds = np.abs(np.diff(np.vstack((joints[:1], out)), axis=0)) / dt
    near = np.abs(times - times.mean()) <= window
    return SingularityRun(times, out, error, float(speeds.max()), near)


def format_singularity(
    plain: SingularityRun, regularized: SingularityRun, weight: float, threshold: float
) -> str:
    far = ~plain.near
    return "\n".join(
        [
            f"  {'run':<28} {'peak joint speed':>17} {'error near pole':>16} {'mean error elsewhere':>21}",
            *(
                f"  {name:<28} {r.peak_speed:13.1f} rad/s {1e3 * r.error[r.near].max():12.2f} mm "
                f"{1e3 * r.error[far].mean():17.4f} mm"
                for name, r in (
                    ("unregularized", plain),
                    (f"w_vel {weight:g}, omega_t {threshold:g} rad/s", regularized),
                )
            ),
        ]
    )
