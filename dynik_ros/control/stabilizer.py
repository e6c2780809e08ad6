"""Walking stabilizer for a position-controlled biped: foot damping (ankle admittance), foot force
difference control and DCM feedback (ROS-free, robot-agnostic; issue 12 item 4).

Written from the equations of Kajita et al. 2010 ("Biped walking stabilization based on linear inverted
pendulum tracking", IROS: ZMP distribution, foot damping control, foot force difference control) and
Caron et al. 2019 ("Stair climbing stabilization of the HRP-4 humanoid robot using whole-body admittance
control", ICRA: DCM feedback to a desired ZMP, wrench distribution), in this project's own form.

Each control period ``dt`` (:meth:`Stabilizer.update`):

1. **DCM feedback** (Caron 2019 eq. 11, without the integral term): with ``omega = sqrt(g / z_c)`` the
   divergent component of motion ``xi = c + c_dot / omega`` (horizontal), the desired ZMP is
   ``p_d = p_ref + k_dcm (xi - xi_ref)``, ``k_dcm = 1 + k_xi / omega``, then moved to the nearest point of
   the support polygon of the feet in contact (shrunk by ``margin``).
2. **ZMP distribution** (Kajita 2010 sec. III): in double support the load fraction of each foot comes
   from where ``p_d`` lies on the segment between the two sole centres (``alpha``), each foot's desired
   CoP is ``p_d`` clipped into its sole; in single support the stance foot takes all.
3. **Foot damping** (Kajita 2010 eq. 11): per foot, the ankle's roll/pitch offset obeys
   ``d theta/dt = A (tau_measured - tau_desired) - theta / T`` with ``tau = (cop - ankle) x f`` about the
   sole's x and y axes: the foot turns the way the ground pushes it, so an edge-loaded sole conforms and
   the CoP moves to the desired one. Without load the offset decays to 0.
4. **Foot force difference** (Kajita 2010 eq. 13): in double support the difference of the legs' lengths
   ``dz`` obeys ``d dz/dt = K_f ((f_L - f_R) - (f_L,d - f_R,d)) - dz / T_f``: the over-loaded foot rises.
5. **CoM admittance** (Caron 2019 sec. IV-B, first order): the horizontal CoM (pelvis) shift ``s`` obeys
   ``d s/dt = K_c (p_measured - p_d) - K_xi (xi - xi_ref) - s / T_c`` (``com_gain`` K_c 5/s;
   ``com_dcm_gain`` K_xi 0: on the G1 in MuJoCo every value of it tried made the walk fall earlier): when
   the feet cannot move the measured ZMP to the desired one (the sole's edge, a lag in double support),
   the body leans towards where the ZMP is, which moves it back.

Inputs are measured per foot (the contact wrench at the sole: a force/torque sensor on a real robot, the
contact forces in the sim) and the measured CoM and its velocity (low-pass filtered here: ``velocity_filter``
seconds; on the G1 walks unfiltered or 0.1 s fell more often than 0.03 s, README). Outputs are offsets to
add to the planned foot poses relative to the pelvis (:class:`Offsets`); the caller turns them into joint
offsets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dynik_ros.core.com_objective import convex_hull, halfplanes

GRAVITY = 9.81


@dataclass
class StabilizerConfig:
    """Gains (SI units). Defaults chosen on the G1 in MuJoCo (README, "Balance stabilizer")."""

    com_height: float = 0.69  # m, z_c of omega = sqrt(g / z_c)
    dcm_gain: float = 2.5  # k_dcm = 1 + k_xi / omega (>= 1: 1 is no feedback beyond the reference)
    margin: float = 0.005  # m, desired ZMP kept this far inside the support polygon
    ankle_admittance: float = 0.03  # A, rad/(N m s)
    ankle_return: float = 0.15  # T, s: offsets decay to 0 (without load: only this)
    ankle_limit: float = 0.25  # rad, largest ankle offset
    force_gain: float = 5e-5  # K_f, m/(N s)
    force_return: float = 0.5  # T_f, s
    force_limit: float = 0.03  # m, largest leg length difference
    com_gain: float = 5.0  # K_c, 1/s (m of shift per m of ZMP error per s)
    com_dcm_gain: float = 0.0  # 1/s, pelvis shift against the DCM error
    com_return: float = 1.0  # T_c, s
    com_limit: float = 0.03  # m
    velocity_filter: float = 0.03  # s, first-order low-pass on the measured CoM velocity
    contact_force: float = 0.05  # fraction of the weight above which a foot counts as in contact

    def validate(self) -> None:
        for name in ("com_height", "ankle_return", "force_return", "com_return"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be positive")
        for name in (
            "dcm_gain",
            "margin",
            "ankle_admittance",
            "ankle_limit",
            "force_gain",
            "force_limit",
            "com_limit",
            "velocity_filter",
            "contact_force",
        ):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"{name} must be >= 0")
        for name in ("com_gain", "com_dcm_gain"):  # either sign (both measured worse: README)
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite")


@dataclass
class FootState:
    """One foot, measured: the ankle point and the sole's rotation (world), the sole's corners in the sole
    frame (x forward, y left), the contact force on the foot and its CoP on the ground (world)."""

    ankle: np.ndarray  # (3,)
    rotation: np.ndarray  # (3, 3) sole frame in world
    sole: np.ndarray  # (4, 2) corners, sole frame, about the sole centre
    centre: np.ndarray  # (3,) sole centre, world
    force: np.ndarray  # (3,) ground reaction on the foot, world
    cop: np.ndarray  # (3,) centre of pressure, world (meaningless without force)


@dataclass
class PlanSample:
    """The plan at this instant, in the measured world: CoM, its velocity, its ZMP (horizontal) and which
    feet the plan has loaded (left, right)."""

    com: np.ndarray  # (3,)
    com_velocity: np.ndarray  # (3,)
    zmp: np.ndarray  # (2,)
    loaded: tuple[bool, bool]


@dataclass
class Offsets:
    """What the stabilizer adds to the plan: per foot (left, right) the sole's rotation offset about its
    own x (roll) and y (pitch) axes [rad] and its lift relative to the pelvis [m, + up]; the horizontal
    pelvis (CoM) shift [m, world]."""

    ankle: np.ndarray = field(default_factory=lambda: np.zeros((2, 2)))  # [foot, (roll, pitch)]
    lift: np.ndarray = field(default_factory=lambda: np.zeros(2))
    com_shift: np.ndarray = field(default_factory=lambda: np.zeros(2))


@dataclass
class StabilizerLog:
    """The last update's internals, for figures."""

    dcm_error: np.ndarray = field(default_factory=lambda: np.zeros(2))
    desired_zmp: np.ndarray = field(default_factory=lambda: np.zeros(2))
    measured_zmp: np.ndarray = field(default_factory=lambda: np.full(2, np.nan))
    desired_cops: np.ndarray = field(default_factory=lambda: np.zeros((2, 2)))
    load: np.ndarray = field(default_factory=lambda: np.zeros(2))


def closest_in_polygon(point: np.ndarray, polygon: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """The point of the convex polygon (counter-clockwise, shrunk by ``margin``) nearest to ``point``;
    the polygon's centroid when the shrunk polygon is empty."""
    point = np.asarray(point, dtype=float)[:2]
    polygon = np.asarray(polygon, dtype=float)
    if len(polygon) < 3:
        return polygon.mean(axis=0) if len(polygon) else point
    normals, offsets = halfplanes(polygon, margin)
    centroid = polygon.mean(axis=0)
    if np.any(normals @ centroid > offsets):
        return centroid
    p = point.copy()
    for _ in range(len(polygon) + 1):  # project on the violated half-planes (exact for <= 2 active)
        excess = normals @ p - offsets
        worst = int(np.argmax(excess))
        if excess[worst] <= 1e-12:
            return p
        p = p - excess[worst] * normals[worst]
    excess = normals @ p - offsets
    if np.all(excess <= 1e-9):
        return p
    # a corner: the intersection of the two most violated lines of the shrunk polygon
    i, j = np.argsort(excess)[-2:]
    a = np.stack([normals[i], normals[j]])
    try:
        return np.linalg.solve(a, np.array([offsets[i], offsets[j]]))
    except np.linalg.LinAlgError:
        return centroid


class Stabilizer:
    """The control law of the module docstring; one instance per run, :meth:`update` every period."""

    def __init__(self, config: StabilizerConfig, mass: float):
        config.validate()
        if not (math.isfinite(mass) and mass > 0):
            raise ValueError("mass must be positive")
        self.config = config
        self.mass = mass
        self.omega = math.sqrt(GRAVITY / config.com_height)
        self.offsets = Offsets()
        self.log = StabilizerLog()
        self._velocity: np.ndarray | None = None

    def reset(self) -> None:
        self.offsets = Offsets()
        self._velocity = None

    def filtered_velocity(self, velocity: np.ndarray, dt: float) -> np.ndarray:
        """First-order low-pass of the measured CoM velocity (time constant ``velocity_filter``)."""
        velocity = np.asarray(velocity, dtype=float)
        if self._velocity is None or self.config.velocity_filter <= 0:
            self._velocity = velocity.copy()
        else:
            a = dt / (self.config.velocity_filter + dt)
            self._velocity = self._velocity + a * (velocity - self._velocity)
        return self._velocity

    def update(
        self,
        dt: float,
        plan: PlanSample,
        com: np.ndarray,
        com_velocity: np.ndarray,
        feet: tuple[FootState, FootState],
    ) -> Offsets:
        """One control period: the new offsets from the plan and the measurements (module docstring).
        Non-finite measurements leave the offsets as they were (a safe hold)."""
        c = self.config
        values = [com, com_velocity, plan.com, plan.com_velocity, plan.zmp]
        values += [x for f in feet for x in (f.force, f.cop, f.ankle, f.centre)]
        if not (dt > 0 and all(np.all(np.isfinite(v)) for v in values)):
            return self.offsets
        velocity = self.filtered_velocity(com_velocity, dt)
        weight = self.mass * GRAVITY
        touching = [float(f.force[2]) > c.contact_force * weight for f in feet]
        xi = np.asarray(com, dtype=float)[:2] + velocity[:2] / self.omega
        xi_ref = plan.com[:2] + plan.com_velocity[:2] / self.omega
        error = xi - xi_ref
        desired = plan.zmp + c.dcm_gain * error
        in_support = [i for i in (0, 1) if touching[i]]
        if in_support:
            corners = np.vstack([self._sole_corners(feet[i]) for i in in_support])
            desired = closest_in_polygon(desired, convex_hull(corners), c.margin)
        load = self._load(desired, feet, touching, plan.loaded)
        cops = np.array(
            [closest_in_polygon(desired, convex_hull(self._sole_corners(f)), c.margin) for f in feet]
        )
        total = sum(float(f.force[2]) for f in feet)
        measured_zmp = (
            sum(float(f.force[2]) * f.cop[:2] for f in feet) / total if total > 1e-6 else np.full(2, np.nan)
        )
        off = self.offsets
        for i, foot in enumerate(feet):
            decay = off.ankle[i] / c.ankle_return
            if touching[i]:
                fz = float(foot.force[2])
                # torque error about the ankle, horizontal: (cop - cop_d) x (0, 0, fz), in the sole frame
                d = np.zeros(3)
                d[:2] = foot.cop[:2] - cops[i]
                torque = np.cross(d, np.array([0.0, 0.0, fz]))
                local = foot.rotation.T @ torque
                off.ankle[i] += dt * (c.ankle_admittance * local[:2] - decay)
            else:
                off.ankle[i] -= dt * decay
            np.clip(off.ankle[i], -c.ankle_limit, c.ankle_limit, out=off.ankle[i])
        difference = off.lift[0] - off.lift[1]
        change = -difference / c.force_return
        if all(touching):
            fl, fr = float(feet[0].force[2]), float(feet[1].force[2])
            wanted = (load[0] - load[1]) * (fl + fr)
            change += c.force_gain * ((fl - fr) - wanted)
        difference = float(np.clip(difference + dt * change, -c.force_limit, c.force_limit))
        off.lift[:] = (0.5 * difference, -0.5 * difference)
        shift = off.com_shift - dt * off.com_shift / c.com_return
        if c.com_gain != 0 and np.all(np.isfinite(measured_zmp)):
            shift = shift + dt * c.com_gain * (measured_zmp - desired)
        if c.com_dcm_gain != 0:
            shift = shift - dt * c.com_dcm_gain * error
        norm = float(np.linalg.norm(shift))
        off.com_shift = shift * (c.com_limit / norm) if norm > c.com_limit else shift
        self.log = StabilizerLog(error, desired, measured_zmp, cops, load)
        return off

    @staticmethod
    def _sole_corners(foot: FootState) -> np.ndarray:
        axes = foot.rotation[:2, :2]  # horizontal part of the sole's x and y axes
        return foot.centre[:2] + foot.sole @ axes.T

    @staticmethod
    def _load(
        desired: np.ndarray,
        feet: tuple[FootState, FootState],
        touching: list[bool],
        loaded: tuple[bool, bool],
    ) -> np.ndarray:
        """Load fraction of each foot: where ``desired`` lies between the sole centres (both down), else
        all on the one foot down (the planned one when neither or both are known)."""
        if touching[0] and touching[1]:
            a, b = feet[0].centre[:2], feet[1].centre[:2]
            span = b - a
            length2 = float(span @ span)
            t = float(np.clip((desired - a) @ span / length2, 0.0, 1.0)) if length2 > 1e-9 else 0.5
            return np.array([1.0 - t, t])
        if touching[0] != touching[1]:
            return np.array([1.0, 0.0]) if touching[0] else np.array([0.0, 1.0])
        share = np.array(loaded, dtype=float)
        return share / share.sum() if share.sum() > 0 else np.array([0.5, 0.5])
