"""The pelvis gives way when a held foot's leg leans past the ankle roll's reach (``contact.pelvis_reach``).

A leg whose held foot is ``y`` beside its hip (across the level sole's heading, lateral unit ``l``) and
``z`` below it leans ``phi = atan2(y, z)``; a level sole needs ``phi`` within the ankle roll's bounds
``[lo, hi]`` (:func:`.leg_reach.ankle_roll_lean`), beyond them the sole rolls by the excess. At touch-down
``contact.reach`` moves the foot (:mod:`.leg_reach`); during a contact a held foot must not move (that is a
slide), but the lean still grows when the hip moves away from the foot or lowers (a crouch). What can give
way then is the pelvis target: moving it by ``d = (u, h)`` (``u`` horizontal, ``h`` up) moves every hip with
it, so foot ``i``'s lean becomes ``atan2(y_i - l_i . u, z_i + h)``, and the bounds are linear in ``d``:

    (z_i + h) tan(lo_i) <= y_i - l_i . u <= (z_i + h) tan(hi_i)        (every foot held in contact)

Raising helps both legs of a wide double stance; a lateral shift helps one and hurts the other. The shift
asked for is the smallest that meets every bound, or the best compromise when none does (a straight leg:
``h`` is capped so no hip goes farther than ``LEG_STRETCH`` of its leg's length from its foot):

    min  eps |d|^2 + sum_i s_i^2   s.t.  the bounds above, each loosened by s_i >= 0,
         u = a l_mean,  |a| <= MAX_SHIFT,  0 <= h <= h_max

a QP of 2 + n variables (OSQP; ``l_mean`` the held feet's mean lateral axis). The pelvis target follows
that shift causally (only the current and past samples: the same online, one sample at a time), at most
``SHIFT_PER_BLEND`` per ``contact.blend_time`` (a rate limit: no step in the target, its velocity
feed-forward the shift's own rate), back to zero when no held foot needs it. The body moves as a whole: a
foot in the air moves with the pelvis (fully from ``SWING_CARRY_HEIGHT`` above its standing height, not at all
on the ground, so a landing foot meets no step), else its weighted target would hold the pelvis back through
its leg (measured: a G1 standing on one leg, the pelvis target moved 10 cm, the robot's 3 cm). Each leg's
thigh and shank targets turn with the hip's move relative to its foot (:func:`bend_leg`: the hip-foot line's
turn, and the knee's bend for the new hip-foot distance), else they hold the hip where it was (measured: a
G1 wide crouch, its pelvis 6 cm under the raised target).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

LEG_STRETCH = 0.97  # the hip at most this share of the leg's straight length from its foot (a knee left bent)
MAX_SHIFT = 0.15  # m: largest horizontal pelvis shift
SHIFT_PER_BLEND = 0.05  # m: the shift moves at most this much per contact.blend_time
SWING_CARRY_HEIGHT = 0.05  # m: a foot in the air this far above its standing height moves with the pelvis
_EPS = 1e-3  # weight of |d|^2 against the bounds' shortfall (m^2): the bounds are met first
_TOL = 1e-9


def _lateral(yaw: float) -> np.ndarray:
    return np.array((-math.sin(yaw), math.cos(yaw)))


def lean(d: np.ndarray, yaw: float) -> tuple[float, float]:
    """``(y, z)`` of a foot ``d = foot - hip`` (3,) across heading ``yaw``: beside and below the hip."""
    return float(d[:2] @ _lateral(yaw)), -float(d[2])


def required_shift(
    offsets: np.ndarray, yaws: np.ndarray, bounds: list[tuple[float, float]], legs: np.ndarray
) -> np.ndarray:
    """The pelvis shift ``d`` (3,) that brings every held foot within its lean ``bounds`` (module docstring):
    ``offsets`` ``(n, 3)`` foot minus hip, ``yaws`` ``(n,)`` the soles' headings, ``legs`` ``(n,)`` the legs'
    straight lengths; zero when every foot is within them already. The horizontal part is along the feet's
    mean lateral axis ``l`` (``d = a l + h z``): a shift along the heading changes no lean, and would only
    be used to gain on the small differences between two headings."""
    n = len(offsets)
    if n == 0:
        return np.zeros(3)
    ys, zs, lats = np.zeros(n), np.zeros(n), np.zeros((n, 2))
    outside = False
    for i in range(n):
        ys[i], zs[i] = lean(offsets[i], float(yaws[i]))
        lats[i] = _lateral(float(yaws[i]))
        lo, hi = bounds[i]
        outside |= not (zs[i] * math.tan(lo) - _TOL <= ys[i] <= zs[i] * math.tan(hi) + _TOL)
    if not outside:
        return np.zeros(3)
    across = lats.sum(axis=0)
    across = across / np.linalg.norm(across) if np.linalg.norm(across) > 0.5 else lats[0]
    c = lats @ across  # how far each foot's lateral offset changes per metre of shift along ``across``
    horizontal = np.linalg.norm(offsets[:, :2], axis=1)
    reach = (LEG_STRETCH * legs) ** 2 - horizontal**2
    h_max = max(0.0, float(np.min(np.sqrt(np.maximum(reach, 0.0)) - zs)))
    import osqp  # (here: pelvis_reach is opt-in, and OSQP with scipy.sparse costs ~0.3 s to import)
    from scipy import sparse

    # x = (a, h, s_1 .. s_n); rows: 2 per foot (upper and lower bound), then the variable bounds
    m = 2 + n
    p = sparse.diags(np.concatenate(([_EPS] * 2, np.ones(n))), format="csc")
    rows, lower, upper = [], [], []
    for i in range(n):
        lo, hi = (math.tan(b) for b in bounds[i])
        rows.append(np.concatenate(([-c[i], -hi], -np.eye(n)[i])))  # y' - z' tan(hi) <= s
        lower.append(-np.inf)
        upper.append(zs[i] * hi - ys[i])
        rows.append(np.concatenate(([-c[i], -lo], np.eye(n)[i])))  # y' - z' tan(lo) >= -s
        lower.append(zs[i] * lo - ys[i])
        upper.append(np.inf)
    a = sparse.vstack((sparse.csc_matrix(np.array(rows)), sparse.eye(m, format="csc")), format="csc")
    lower += [-MAX_SHIFT, 0.0] + [0.0] * n
    upper += [MAX_SHIFT, h_max] + [np.inf] * n
    solver = osqp.OSQP()
    solver.setup(
        p, np.zeros(m), a, np.array(lower), np.array(upper),
        verbose=False, polishing=True, eps_abs=1e-8, eps_rel=1e-8, max_iter=10000,
    )  # fmt: skip
    x = solver.solve(raise_error=False).x
    if x is None or not np.all(np.isfinite(x[:2])):
        return np.zeros(3)
    shift = min(max(float(x[0]), -MAX_SHIFT), MAX_SHIFT)
    return np.array((shift * across[0], shift * across[1], min(max(float(x[1]), 0.0), h_max)))


def _rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation taking direction ``a`` to direction ``b`` (3,)."""
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s = float(np.linalg.norm(axis))
    if s < 1e-12:
        return np.eye(3)
    return pin.exp3(axis / s * math.atan2(s, float(a @ b)))


def _knee_angles(thigh: float, shank: float, reach: float) -> tuple[float, float]:
    """Angles (rad) of the thigh and of the shank from the hip-foot line of a leg ``reach`` long (law of
    cosines; 0, 0 when straight or beyond)."""
    if reach >= thigh + shank or reach <= abs(thigh - shank):
        return 0.0, 0.0
    a = math.acos(min(1.0, (thigh**2 + reach**2 - shank**2) / (2.0 * thigh * reach)))
    b = math.acos(min(1.0, (shank**2 + reach**2 - thigh**2) / (2.0 * shank * reach)))
    return a, b


@dataclass(frozen=True)
class Leg:
    """A leg of the robot map: its lean ``bounds`` (rad; ``None``: not limited), its straight ``length``
    (hip to foot frame), the foot frame's ``standing`` height (level on the ground), ``thigh`` / ``shank``
    lengths (hip to knee, knee to foot frame) and the rows of its orientation targets above and below the
    knee (empty: not bent with the shift)."""

    bounds: tuple[float, float] | None
    length: float
    standing: float = 0.0
    thigh: float = 0.0
    shank: float = 0.0
    thigh_rows: tuple[int, ...] = ()
    shank_rows: tuple[int, ...] = ()


def bend_leg(rotations: np.ndarray, leg: Leg, offset: np.ndarray, shift: np.ndarray, heading: float) -> None:
    """Turn leg ``leg``'s thigh and shank targets in ``rotations`` ``(n_o, 3, 3)`` (in place) for its hip
    moved by ``shift`` with its foot ``offset`` from the hip before: both turn with the hip-foot line
    (``R_line``, the smallest rotation from the old line to the new), then the thigh by ``a' - a`` and the
    shank by ``-(b' - b)`` about the knee's axis (the line times the heading's forward axis), ``a``, ``b`` the
    law-of-cosines angles of a leg of the robot's thigh and shank lengths (:func:`_knee_angles`)."""
    new = offset - shift
    line = _rotation_between(offset, new)
    forward = np.array((math.cos(heading), math.sin(heading), 0.0))
    axis = np.cross(new, forward)
    if not leg.thigh_rows or float(np.linalg.norm(axis)) < 1e-9:
        return
    axis /= np.linalg.norm(axis)
    a0, b0 = _knee_angles(leg.thigh, leg.shank, float(np.linalg.norm(offset)))
    a1, b1 = _knee_angles(leg.thigh, leg.shank, float(np.linalg.norm(new)))
    for rows, angle in ((leg.thigh_rows, a1 - a0), (leg.shank_rows, b0 - b1)):
        turn = pin.exp3(angle * axis) @ line
        rotations[list(rows)] = turn @ rotations[list(rows)]


class PelvisReach:
    """The causal pelvis-target shift of ``contact.pelvis_reach`` (module docstring) for one take; its state
    (the shift so far, the last sample's time) carries from one :meth:`apply` call to the next."""

    def __init__(self, legs: list[Leg], blend_time: float):
        self.legs = list(legs)
        self.blend = max(blend_time, 1e-3)
        self.speed = SHIFT_PER_BLEND / self.blend  # m/s
        self.reset()

    @classmethod
    def for_map(
        cls, robot, config, q: np.ndarray, bounds: list, leg_rows: list[list[int]], frames: list[str]
    ) -> PelvisReach | None:
        """The rule for a robot map ``config`` with ``contact.pelvis_reach`` on (``None`` otherwise, or when
        the root has no position target or no foot a lean bound): ``bounds`` per foot
        (:attr:`.foot_contact.FootContact.lean_bounds`), ``leg_rows`` per foot its leg's orientation rows
        (:func:`.leg_reach.leg_orientation_rows`), ``frames`` the orientation targets' frames; lengths from
        the hip (the foot target's anchor), the knee (the joint of the leg's lowest orientation target) and
        the foot frame at ``q`` (the straight-legged calibration pose)."""
        if not config.contact.pelvis_reach or all(b is None for b in bounds):
            return None
        if not any(t.frame == config.root.frame and t.position for t in config.targets):
            return None
        anchors = {t.frame: t.anchor for t in config.targets}
        model = robot.model
        data = model.createData()
        pin.framesForwardKinematics(model, data, q)
        legs = []
        for f, foot in enumerate(config.feet):
            anchor = anchors.get(foot.frame)
            if anchor is None or bounds[f] is None:
                legs.append(Leg(None, 0.0))  # no hip to lean from
                continue
            hip = data.oMf[robot.frame_id(anchor.frame)].translation
            sole = data.oMf[robot.frame_id(foot.frame)].translation
            standing = -float(np.min(np.asarray(foot.sole, dtype=float).reshape(-1, 3)[:, 2]))
            joints = {row: model.frames[robot.frame_id(frames[row])].parentJoint for row in leg_rows[f]}
            knee = max(joints.values(), key=lambda j: len(model.supports[j]), default=None)
            if knee is None or len(set(joints.values())) < 2:
                legs.append(Leg(bounds[f], float(np.linalg.norm(hip - sole)), standing))
                continue
            below = set(model.subtrees[knee])
            at = data.oMi[knee].translation
            legs.append(
                Leg(
                    bounds[f],
                    float(np.linalg.norm(hip - sole)),
                    standing,
                    float(np.linalg.norm(hip - at)),
                    float(np.linalg.norm(at - sole)),
                    tuple(row for row, j in joints.items() if j not in below),
                    tuple(row for row, j in joints.items() if j in below),
                )
            )
        return cls(legs, config.contact.blend_time)

    def reset(self) -> None:
        self.shift = np.zeros(3)
        self.time: float | None = None
        n = len(self.legs)
        self.held = [False] * n  # held in contact at the last sample
        self.carried = [np.zeros(3) for _ in range(n)]  # each foot target's offset at the last sample
        self.landed = [(np.zeros(3), 0.0) for _ in range(n)]  # the offset at touch-down, and when

    def apply(
        self,
        times: np.ndarray,
        positions: np.ndarray,
        velocities: np.ndarray,
        rows: tuple[int, list[int]],
        hips: np.ndarray,
        held: np.ndarray,
        foot_rotations: np.ndarray,
        rotations: np.ndarray,
    ) -> np.ndarray:
        """Shift the pelvis position targets and their rates in place (``positions``, ``velocities``
        ``(N, n_p, 3)``; ``rows``: the pelvis row and the feet's rows); returns the shifts ``(N, 3)``. A foot
        in the air moves with the pelvis, fully from ``SWING_CARRY_HEIGHT`` above its standing height, not at
        all on the ground (no step when it lands). ``hips`` ``(N, n_feet, 3)``: the hip targets (before the
        shift); ``held`` ``(N, n_feet)``: held in contact; ``foot_rotations`` ``(N, n_feet, 3, 3)`` the feet's
        orientation targets (their headings); ``rotations`` ``(N, n_o, 3, 3)`` the orientation targets, whose
        legs' thigh and shank rows are turned for the hip's move relative to the foot (:func:`bend_leg`)."""
        pelvis, feet = rows
        shifts = np.zeros((len(times), 3))
        limited = [f for f, leg in enumerate(self.legs) if leg.bounds is not None]
        lengths = np.array([leg.length for leg in self.legs])
        for k, t in enumerate(np.asarray(times, dtype=float)):
            dt = 0.0 if self.time is None else max(float(t) - self.time, 0.0)
            self.time = float(t)
            yaws = np.arctan2(foot_rotations[k, :, 1, 0], foot_rotations[k, :, 0, 0])
            offsets = positions[k, feet] - hips[k]
            active = [f for f in limited if held[k, f]]
            wanted = np.zeros(3)
            if active:
                wanted = required_shift(
                    offsets[active], yaws[active], [self.legs[f].bounds for f in active], lengths[active]
                )
            step = wanted - self.shift
            size = float(np.linalg.norm(step))
            if size > self.speed * dt:  # the rate limit (no step in the target)
                step *= self.speed * dt / size
            self.shift = self.shift + step
            shifts[k] = self.shift
            positions[k, pelvis] += self.shift
            if dt > 0.0:
                velocities[k, pelvis] += step / dt
            for f in limited:
                if held[k, f]:  # the foot carried when it landed comes back over blend_time (no step)
                    if not self.held[f]:
                        self.landed[f] = (self.carried[f].copy(), float(t))
                    offset, at = self.landed[f]
                    carried = offset * max(0.0, 1.0 - (float(t) - at) / self.blend)
                else:  # in the air: carried along with the body, less near the ground
                    above = float(positions[k, feet[f], 2]) - self.legs[f].standing
                    carried = min(1.0, max(0.0, above / SWING_CARRY_HEIGHT)) * self.shift
                self.held[f] = bool(held[k, f])
                if carried.any() or self.carried[f].any():
                    positions[k, feet[f]] += carried
                    if dt > 0.0:
                        velocities[k, feet[f]] += (carried - self.carried[f]) / dt
                self.carried[f] = carried
                moved = self.shift - carried  # the hip's move relative to the foot
                if moved.any():
                    bend_leg(rotations[k], self.legs[f], offsets[f], moved, float(yaws[f]))
        return shifts
