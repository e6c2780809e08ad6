"""The feet's position and orientation targets and their contact rules (:class:`FootContact`); the other
position targets are scaled in :mod:`.scaling`.

Feet (:class:`FootContact`): the human sole height is the lowest of the foot and toe link origins above
the ground, less their standing clearance; with its horizontal speed it drives a contact state with
hysteresis. While in contact the robot foot target keeps the horizontal position it had when contact
started (no sliding) and the lowest of its sole points stays on the ground plane (no floating); its
velocity feed-forward is zero. After release the held offset fades out with time constant
``release_time``. Out of contact no sole point goes below the ground.

Level soles (``contact.flatten``): the human's foot rolls (heel strike, toe-off) and a copied roll leaves
a robot sole tilted while it is counted as standing. In contact the robot foot's orientation target turns
to the level rotation with the heading it landed with, ``R_flat = R_z(psi_land)``, along the geodesic
``R(alpha) = R_h exp(alpha log(R_h^T R_flat))`` with ``alpha`` rising from 0 to 1 over ``blend_time``
after touch-down and falling back after lift-off; its angular-velocity target is scaled by
``1 - alpha``. The heel that strikes first stays the pivot until the sole is flat, then the whole sole
rests on the ground at the place it landed; the ankle takes up the human's roll within its limits.
``contact.blend_shape``: after touch-down ``alpha = h(x)``, ``x`` the share of ``blend_time`` spent in
contact and ``h`` the smoothstep ``3x^2 - 2x^3`` (``smooth``, the default), or ``alpha = x`` (``linear``).
With the linear rise the sole turns at a constant rate to the last sample of the blend and stops there: the
toe came down onto the floor at full speed, the floor rows' barrier (:mod:`dynik_ros.core.floor_rows`)
halved its approach per step and the held sole ended the blend above the floor (the Nikki medium walk on
G1: 2.4 mm; with the barrier at ``gamma`` 1 the IK's multistep history bounced it up again); ``h`` has no
rate left at the end of the blend.

Footprints left (``contact.drift_off``, ``contact.pivot_off``): once the touch-down blend is over the human
foot's footprint is its foot and toe links' horizontal positions and its heading ``psi_0``. The contact ends
when every one of those links has moved ``drift_off`` away (a slide) or the heading has turned
``|wrap(psi - psi_0)| > pivot_off`` (a pivot on the heel or the ball of the foot: the real CMU 131 takes turn
a stance foot 20-160 deg); a held, level robot foot at the landing heading cannot follow either without
slipping, so it lets go and may land again ``release_time`` later where and as the human foot then is.

Toe-off (``contact.heel_off``, m, default 0.005; 0 switches it off; only with ``toe: flat``): the contact
also ends when the human heel (foot link) has risen ``heel_off`` more above its lowest height in this contact
than the toe (toe link) rose above its own lowest: the foot rolling onto its ball, which a held,
level robot sole cannot follow (on real walks the held foot slid 5-10 mm there while the toe, still below
``height_off``, kept the contact on). No new contact starts until the foot has left the ground by the
height/speed thresholds or its heel is back within ``heel_off`` of where it stood. Against measurement
noise (``contact.heel_off_noise``, k, default 4; 0 switches it off) the rise must also exceed ``heel_off`` by
``k s_hat``, ``s_hat`` the white-noise std of the heel-over-toe height measured on the stream itself
(:mod:`.heel_noise`): near 0 on clean captures, so the rule is then the plain one, with no delay.

On the toes (``contact.toe: pitch``; the default ``flat`` levels every contact as before): the human foot's
heel-up pitch ``theta = asin(-x_z)`` of its target (0 standing, + toe down) gives the sole a pitch ``s(theta)
= theta h((theta - a) / (b - a))`` about its toe line, ``h`` the smoothstep ``3x^2 - 2x^3`` clipped to [0, 1],
``b = toe_angle``, ``a = b / 3``: none on a flat or heel-striking foot, the human's own from ``b`` on,
continuous in between (no jump, so no time ramp); the level rotation becomes ``R_toe = exp(s y_l)
R_z(psi_land)`` (``y_l`` the landing heading's lateral axis): level across, pitched about the toe line, whose
lowest point (the toe) is then the anchor and stays where it is. Samples in contact with ``s > 0`` are
:attr:`toe`, not :attr:`flat`: a robot on its toes is not standing on a level sole (the figures count them
apart, :mod:`.foot_figures`).

Anchored on the robot (``contact.anchor: robot``; a ``robot_sole`` reader given by whoever runs the IK):
once per contact, at the sample it turns flat, the held point moves to where the robot's own sole point is
(horizontally, on the ground) and the level sole takes the robot sole's heading (:mod:`.robot_anchor`).

Within the ankle roll's reach (``contact.reach``, on by default; :attr:`FootContact.lean_bounds` and the robot
hip targets given to :meth:`FootContact.apply`): at touch-down a foot farther beside its hip than a level sole
allows is held nearer the hip, the shift blended in over ``blend_time`` (:mod:`.leg_reach`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.small_arrays import dot
from dynik_ros.estimation.kinematic_contact import foot_speeds, next_contact, sole_heights
from dynik_ros.retarget.calibration import Calibration
from dynik_ros.retarget.config import ContactSpec, FootSpec
from dynik_ros.retarget.contact_floats import (
    NO_RATE,
    blended_rate,
    cross_values,
    faded,
    held,
    lowest,
    nearest,
    past_margin,
    rate_term_needed,
)
from dynik_ros.retarget.contact_shapes import blend_in, toe_pitch
from dynik_ros.retarget.heel_noise import HeelToeNoise
from dynik_ros.retarget.leg_reach import reach_shift

RECENT_REANCHORS = 100  # moved holds a streaming contact machine remembers (anchor: robot; ik_node)


class _Rules:
    """What :meth:`FootContact.advance` and :meth:`FootContact._decide` read of a :class:`ContactSpec` on
    every call, for every foot at every sample, derived once per spec (:attr:`FootContact.spec`)."""

    def __init__(self, spec: ContactSpec):
        self.blend = max(spec.blend_time, 1e-9)  # s, the level blend's and the shift into reach's time
        self.flat_from = spec.blend_time - 1e-9  # s in contact from which the contact is flat
        # the footprint follows the foot to the end of the blend, the sample that turns flat included, and a
        # release keeps the foot out for release_time: both compared with a margin, so that a sample exactly
        # on the boundary (a take on an exact grid: 50 Hz and blend_time 0.1 s) decides the same way whatever
        # the last bit of the time difference (the margin of flat_from, and of heel_noise's spacing)
        self.blend_end = spec.blend_time + 1e-9
        self.quiet_time = spec.release_time - 1e-9
        self.tau = max(spec.release_time, 1e-9)  # s, the held offset's fade after release
        self.toes = spec.toe == "pitch" and spec.flatten
        self.toe_angle = math.radians(spec.toe_angle)
        self.heel_off = spec.heel_off if spec.toe == "flat" else 0.0  # toe-off only with toe: flat
        self.pivot_off = math.radians(spec.pivot_off)
        self.footprint = spec.drift_off > 0.0 or spec.pivot_off > 0.0  # a footprint can be left


def _wrap(angle: float) -> float:
    """``angle`` (rad) in ``[-pi, pi)``."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


@dataclass
class HumanFeet:
    """What the contact rules read of the human feet, per sample (:meth:`FootContact.prepare`).

    Per foot, one flat list of floats over the samples (``heights[f][k]``; ``links_xy[f]`` sample ``k``'s
    links at ``[k w, (k + 1) w)``, ``w`` twice the foot's links): a take's few lists, not a list per sample
    and foot, which the garbage collector walked for as long as the take's targets were kept (a minute at
    120 Hz: ~70000 lists; collecting them cost 4x making them, ``prepare``)."""

    times: list[float]
    heights: list[list[float]]  # per foot, the sole height above the ground per sample (0 standing)
    speeds: list[list[float]]  # per foot, its horizontal speed per sample
    heels: list[list[float]]  # per foot, the heel (foot link) above standing per sample
    toes: list[list[float]]  # per foot, the toe (toe link) above standing per sample
    # per foot, the horizontal (x0, y0, x1, y1, ...) of its links (foot, toe) at each sample in turn: its
    # footprint
    links_xy: list[list[float]]
    measured: list[bool]  # a measured sample, not an IK step interpolated between two (heel_off_noise)
    hips: np.ndarray | None = None  # (N, n_feet, 3) the robot hip targets (contact.reach; None: no rule)


# The robot's foot frame pose (world position, rotation) for foot f, as the IK has left it (anchor: robot).
RobotSole = Callable[[int], tuple[np.ndarray, np.ndarray]]


class FootContact:
    """Contact state machine of the feet and the ground constraint on their position targets.

    With ``contact.anchor: robot`` whoever runs the IK passes a ``robot_sole`` reader to :meth:`apply` /
    :meth:`advance` (:mod:`dynik_ros.retarget.robot_anchor`, ``Retargeter.measurements``); without it the
    hold is the human-derived anchor."""

    # how many of the last holds moved onto the robot's sole :attr:`reanchors` keeps (None: all)
    reanchor_log: int | None = RECENT_REANCHORS

    @property
    def spec(self) -> ContactSpec:
        """The contact rules' settings; setting them derives :attr:`rules` anew."""
        return self._spec

    @spec.setter
    def spec(self, spec: ContactSpec) -> None:
        self._spec = spec
        self.rules = _Rules(spec)

    def __init__(
        self,
        feet: Sequence[FootSpec],
        contact: ContactSpec,
        calibration: Calibration,
        links: Sequence[str],
        target_rows: Sequence[int],
        robot_ground: float = 0.0,
    ):
        index = {name: i for i, name in enumerate(links)}
        self.feet = tuple(feet)
        self.spec = contact
        self.rows = list(target_rows)
        self.human_ground = float(calibration.human_ground)
        self.robot_ground = float(robot_ground)
        self.sensor_links = [[index[f.link]] + ([index[f.toe]] if f.toe else []) for f in self.feet]
        self.clearance = [
            np.array([calibration.foot_clearance.get(links[i], 0.0) for i in group])
            for group in self.sensor_links
        ]
        self.soles = [np.array(f.sole, dtype=float).reshape(-1, 3) for f in self.feet]
        # per foot, the leg's lean a level sole allows (rad; leg_reach.ankle_roll_lean; None: not limited)
        self.lean_bounds: list[tuple[float, float] | None] = [None] * len(self.feet)
        self.reset()

    def keep_every_reanchor(self) -> None:
        """:attr:`reanchors` keeps every moved hold from now on (one take replayed offline), not the last
        :data:`RECENT_REANCHORS` (a stream, which would grow by one per step for as long as it runs)."""
        self.reanchor_log = None
        self.reanchors = deque(self.reanchors)

    def reset(self) -> None:
        n = len(self.feet)
        self.in_contact = [False] * n
        self.point = [0] * n  # index of the sole point in contact
        self.anchor = [np.zeros(3) for _ in range(n)]  # world position of that point (z on the ground)
        self._anchor_xyz = [[0.0, 0.0, 0.0] for _ in range(n)]  # the anchor's floats (_set_anchor)
        self.last: list[tuple[float, ...]] = [(0.0, 0.0, 0.0)] * n  # last target of the foot frame, floats
        self.release_at = [0.0] * n
        # the held offset at release, last - target, as floats (None: none fading)
        self.release_delta: list[tuple[float, float, float] | None] = [None] * n
        self.contact_at = [0.0] * n
        self.stepped_at: list[float | None] = [None] * n  # time of the foot's last sample (advance)
        self.landing_yaw = [0.0] * n
        # per foot, (heading, R_z(heading)) of the last level rotation built (_level; None: none yet)
        self._levels: list[tuple[float, np.ndarray] | None] = [None] * n
        self.level = [0.0] * n  # alpha: 0 = the human's orientation, 1 = level (see the module docstring)
        self.level_at_release = [0.0] * n
        self.quiet_until = [-math.inf] * n  # after a drift release: no new contact before this time
        # the human foot links' (x, y) at touch-down, [x0, y0, x1, y1, ...] (floats, HumanFeet.links_xy)
        self.footprint = [[0.0, 0.0] * len(g) for g in self.sensor_links]
        self.footprint_yaw = [0.0] * n  # the human foot's heading there (rad)
        self.heel_low = [0.0] * n  # lowest human heel height in this contact (heel_off)
        self.toe_low = [0.0] * n  # and toe height
        self.heel_lifted = [False] * n  # released by heel_off: no new contact yet (heel_off)
        self.heel_noise = [HeelToeNoise() for _ in range(n)]  # heel-over-toe noise (heel_off_noise)
        self.anchored = [False] * n  # this contact's hold was moved onto the robot's sole (anchor: robot)
        # (foot, time, shift m, turn rad) per hold moved onto the robot's sole (anchor: robot); a stream
        # (ik_node) keeps the last RECENT_REANCHORS, an offline replay every one (keep_every_reanchor)
        self.reanchors: deque[tuple[int, float, float, float]] = deque(maxlen=self.reanchor_log)
        self.reach = [np.zeros(3) for _ in range(n)]  # this contact's shift into the leg's reach (reach)
        self._reach_xyz = [[0.0, 0.0, 0.0] for _ in range(n)]  # its floats, for held()
        self.reach_turn = [0.0] * n  # the leg's lean change of that shift (rad, about the heading)
        self.turn_at_release = [0.0] * n  # the lean change when the contact ended (fades with the hold)
        self.leg_turn: np.ndarray | None = None  # (N, n_feet) per sample (apply), the legs' lean change
        self.leg_heading: np.ndarray | None = None  # (N, n_feet) the heading it turns about (rad)

    def _blend_share(self, f: int, t: float) -> float:
        """The share of ``blend_time`` foot ``f`` has spent in contact at time ``t`` (0 to 1): how much of the
        touch-down's shift into reach (:attr:`reach`) the held target has, and ``x`` of the level blend
        (:func:`blend_in`)."""
        return min(1.0, (t - self.contact_at[f]) / max(self.spec.blend_time, 1e-9))

    def _level(self, f: int) -> np.ndarray:
        """The level rotation ``R_z(psi_land)`` of foot ``f`` (module docstring), built again only when its
        heading :attr:`landing_yaw` is another float object (set at touch-down and re-anchoring: once per
        contact, where it was built for every sample of a blend or hold). Read only: callers must not
        change it in place."""
        yaw = self.landing_yaw[f]
        cached = self._levels[f]
        if cached is not None and cached[0] is yaw:
            return cached[1]
        c, sn = math.cos(yaw), math.sin(yaw)
        level = np.array(((c, -sn, 0.0), (sn, c, 0.0), (0.0, 0.0, 1.0)))
        self._levels[f] = (yaw, level)
        return level

    def human_sole_heights(self, p: np.ndarray) -> np.ndarray:
        """Height of each human sole above the ground ``(N, n_feet)``: 0 when standing flat."""
        return sole_heights(p, self.sensor_links, self.clearance, self.human_ground)

    def human_speeds(self, v: np.ndarray) -> np.ndarray:
        """Horizontal speed of each human foot ``(N, n_feet)``: the slower of its foot and toe links."""
        return foot_speeds(v, self.sensor_links)

    def _level_weight(self, f: int, t: float) -> float:
        """``alpha`` of foot ``f`` at time ``t``: up over ``blend_time`` in contact, back down after."""
        spec = self.spec
        if not spec.flatten:
            return 0.0
        blend = max(spec.blend_time, 1e-9)
        if self.in_contact[f]:
            return blend_in(self._blend_share(f, t), spec.blend_shape)[0]
        return self.level_at_release[f] * max(0.0, 1.0 - (t - self.release_at[f]) / blend)

    def _noise_margin(self, f: int) -> float:
        """How far past ``heel_off`` the heel of foot ``f`` must rise: ``heel_off_noise`` times the measured
        noise of its heel-over-toe height (:mod:`.heel_noise`: 0 on a sparse stream, infinite before the first
        estimate)."""
        k = self.spec.heel_off_noise
        return k * self.heel_noise[f].std() if k > 0.0 else 0.0

    def prepare(
        self,
        times: np.ndarray,
        p: np.ndarray,
        v: np.ndarray | None,
        hips: np.ndarray | None = None,
        samples: np.ndarray | None = None,
    ) -> HumanFeet:
        """What the contact rules read of the human feet for samples ``times`` (:meth:`advance`);
        ``hips`` ``(N, n_feet, 3)``: the robot hip targets of the feet's legs (``contact.reach``);
        ``samples``: the rows that are measured samples (``None``: all), the others being IK steps
        interpolated between them (:mod:`.ik_steps`), which the toe-off noise estimate skips."""
        heights = self.human_sole_heights(p)
        # heel (foot link) and toe (toe link) above standing (heel_off; a foot without toe link never lets go)
        standing = self.human_ground + np.concatenate(self.clearance)
        above = p[:, np.concatenate(self.sensor_links), 2] - standing
        first = np.cumsum([0] + [len(g) for g in self.sensor_links[:-1]])
        last = first + np.array([len(g) - 1 for g in self.sensor_links])
        speeds = self.human_speeds(v) if v is not None else np.zeros_like(heights)
        measured = np.ones(len(heights), dtype=bool)
        if samples is not None:
            measured[:] = False
            measured[samples] = True
        return HumanFeet(
            times=np.asarray(times, dtype=float).tolist(),
            heights=heights.T.tolist(),
            speeds=speeds.T.tolist(),
            heels=above[:, first].T.tolist(),
            toes=above[:, last].T.tolist(),
            links_xy=[p[:, links, :2].ravel().tolist() for links in self.sensor_links],
            measured=measured.tolist(),
            hips=hips,
        )

    def apply(
        self,
        times: np.ndarray,
        p: np.ndarray,
        v: np.ndarray | None,
        positions: np.ndarray,
        velocities: np.ndarray,
        foot_rotations: np.ndarray,
        foot_omegas: np.ndarray,
        hips: np.ndarray | None = None,
        robot_sole: RobotSole | None = None,
        samples: np.ndarray | None = None,
        human: HumanFeet | None = None,
    ) -> np.ndarray:
        """Hold / clamp the feet rows of ``positions`` and ``velocities`` ``(N, n_p, 3)`` in place.

        ``foot_rotations`` ``(N, n_feet, 3, 3)`` and ``foot_omegas`` ``(N, n_feet, 3)`` are the robot foot
        frames' orientation and angular-velocity targets. In contact the sole point touching the ground
        (the lowest one) stays where it landed; when the foot rolls onto another point (heel to toe) that
        point becomes the anchor where it is, so the frame follows the rolling without sliding. Returns
        ``(N, n_feet)``: the index of the sole point in contact, -1 when not in contact; :attr:`flat` the
        samples in contact for ``blend_time`` at least (the sole level: ``stance: hard`` imposes them).
        ``robot_sole`` and ``samples``: :meth:`advance`, :meth:`prepare`; ``human``: :meth:`prepare` of these
        arguments if the caller has it already (the ``anchor: robot`` replay's, read only), else made here.
        """
        n = positions.shape[0]
        flags = np.full((n, len(self.feet)), -1, dtype=int)
        self.flat = np.zeros((n, len(self.feet)), dtype=bool)  # in contact for blend_time: level, held
        self.toe = np.zeros((n, len(self.feet)), dtype=bool)  # in contact, pitched about the toe (w > 0)
        self.leg_turn = np.zeros((n, len(self.feet)))
        self.leg_heading = np.zeros((n, len(self.feet)))
        if not self.feet:
            return flags
        if human is None:
            human = self.prepare(times, p, v, hips, samples)
        for f, row in enumerate(self.rows):
            # each sample's rows as views, taken by iterating the arrays (cheaper than indexing them per k)
            rows = zip(
                positions[:, row],
                velocities[:, row],
                foot_rotations,
                foot_omegas,
                flags,
                self.flat,
                self.toe,
                strict=True,  # (N samples each)
            )
            for k, (target, rate, rotations, omegas, flag, flat, toe) in enumerate(rows):
                self.advance(f, k, human, target, rate, rotations, omegas, flag, flat, toe, robot_sole)
        return flags

    def _decide(self, f: int, k: int, human: HumanFeet, rotations: np.ndarray) -> bool:
        """Whether foot ``f`` is in contact at sample ``k`` (:meth:`advance`): the touch-down / lift-off
        hysteresis, toe-off, footprint left. It reads the human alone (its sole heights, speeds, heel and
        toe, foot links, and ``rotations[f]`` as the human foot is, before :meth:`advance` levels it) and
        the state only this method writes (besides :attr:`in_contact` and :attr:`contact_at`, which follow
        its answers): the same samples from the same state give the same answers whatever robot the
        targets are replayed with (:mod:`.robot_anchor`)."""
        spec, rules = self._spec, self.rules
        heel_off = rules.heel_off
        t, h, s = human.times[k], human.heights[f][k], human.speeds[f][k]
        now = next_contact(self.in_contact[f], h, s, spec) and t >= self.quiet_until[f]
        heel, toe = human.heels[f][k], human.toes[f][k]
        if human.measured[k] and heel_off > 0.0:
            self.heel_noise[f].add(t, heel - toe, self.in_contact[f])
        if self.heel_lifted[f]:  # released at toe-off: no new contact until the foot leaves the
            # ground or its heel is back down where it stood (module docstring)
            down = heel - self.heel_low[f] <= heel_off
            self.heel_lifted[f] = next_contact(True, h, s, spec) and not down
            now = now and not self.heel_lifted[f]
        if now and self.in_contact[f] and heel_off > 0.0:
            # toe-off: the heel rose heel_off more than the toe above their lowest in this contact
            # (module docstring; a whole foot rising, heel and toe together, is not a toe-off)
            self.heel_low[f] = min(self.heel_low[f], heel)
            self.toe_low[f] = min(self.toe_low[f], toe)
            rise = heel - self.heel_low[f]
            if past_margin(rise - (toe - self.toe_low[f]), heel_off, lambda: self._noise_margin(f)):
                now = False
                self.heel_lifted[f] = True
        if now and self.in_contact[f] and rules.footprint:
            # the human foot left its footprint (where it was once the touch-down blend was over):
            # every point of it slid drift_off, or it turned pivot_off about the vertical; no
            # standing robot foot can follow either (module docstring)
            width = len(self.footprint[f])  # (x, y) per link
            here = human.links_xy[f][k * width : (k + 1) * width]  # (a new list)
            yaw = math.atan2(rotations[f, 1, 0], rotations[f, 0, 0])  # (the x axis' heading)
            if t - self.contact_at[f] <= rules.blend_end:
                self.footprint[f] = here
                self.footprint_yaw[f] = yaw
            elif (spec.drift_off > 0.0 and nearest(here, self.footprint[f]) > spec.drift_off) or (
                spec.pivot_off > 0.0 and abs(_wrap(yaw - self.footprint_yaw[f])) > rules.pivot_off
            ):
                now = False
                self.quiet_until[f] = t + rules.quiet_time
        if now and not self.in_contact[f]:  # touch-down: the footprint and the heel, toe lows start here
            self.heel_low[f], self.toe_low[f] = heel, toe
            width = len(self.footprint[f])
            self.footprint[f] = human.links_xy[f][k * width : (k + 1) * width]
            self.footprint_yaw[f] = math.atan2(rotations[f, 1, 0], rotations[f, 0, 0])
        return now

    def advance(
        self,
        f: int,
        k: int,
        human: HumanFeet,
        target: np.ndarray,
        rate: np.ndarray,
        rotations: np.ndarray,
        omegas: np.ndarray,
        flags: np.ndarray,
        flat: np.ndarray,
        on_toe: np.ndarray,
        robot_sole: RobotSole | None = None,
        decided: bool | None = None,
    ) -> None:
        """Foot ``f`` at sample ``k`` of ``human``: its position target ``target`` and velocity ``rate``
        (3,), and ``rotations[f]`` / ``omegas[f]`` (the feet's orientation targets of this sample), are
        changed in place; ``flags[f]``, ``flat[f]``, ``on_toe[f]`` set (:meth:`apply`). Samples of one foot
        must come in order; feet are independent. With ``robot_sole`` (``f -> (position, rotation)`` of the
        robot's foot frame now) the hold is anchored where the robot's sole is once the contact is flat
        (module docstring, ``contact.anchor: robot``). ``decided``: whether the foot is in contact at this
        sample, as :meth:`_decide` found it on an earlier pass over the same samples from the same state
        (``flags >= 0`` of :meth:`apply`; :mod:`.robot_anchor`'s replay), which then is not run again."""
        spec, rules = self._spec, self.rules
        blend = rules.blend
        sole = self.soles[f]
        t = human.times[k]
        previous_t, self.stepped_at[f] = self.stepped_at[f], t  # this foot's previous sample (a stream's too)
        now = self._decide(f, k, human, rotations) if decided is None else decided
        in_contact = self.in_contact[f]
        if in_contact:
            if not now:
                self.level_at_release[f] = self._level_weight(f, t)
                self.in_contact[f] = in_contact = False
                self.release_at[f] = t
                # last - target in floats (numpy's subtraction, element by element; last: floats)
                l0, l1, l2 = self.last[f]
                t0, t1, t2 = target.tolist()
                self.release_delta[f] = (l0 - t0, l1 - t1, l2 - t2)
                self.turn_at_release[f] = self._blend_share(f, t) * self.reach_turn[f]
                self.level[f] = 0.0
        elif now:
            self.in_contact[f] = in_contact = True
            self.contact_at[f] = t
            self.landing_yaw[f] = math.atan2(rotations[f, 1, 0], rotations[f, 0, 0])
            delta = self.release_delta[f]
            if delta is not None:  # landing again while the last release still fades
                # target += delta * e, element by element in floats (the same operations)
                e = math.exp(-(t - self.release_at[f]) / rules.tau)
                t0, t1, t2 = target.tolist()
                target[0], target[1], target[2] = t0 + delta[0] * e, t1 + delta[1] * e, t2 + delta[2] * e
            self.point[f] = -1  # anchored below, at the lowest point of this sample
            self.anchored[f] = False
            self.release_delta[f] = None
        since = t - self.contact_at[f]  # s in this contact (in contact)
        robot = None  # the robot's sole, read once per contact as it turns flat (contact.anchor: robot)
        if (
            robot_sole is not None
            and spec.hold
            and in_contact
            and not self.anchored[f]
            and since >= rules.flat_from
        ):
            self.anchored[f] = True
            robot = robot_sole(f)
            heading = robot[1][:, 0]
            turn_yaw = math.atan2(heading[1], heading[0])
            turned = _wrap(turn_yaw - self.landing_yaw[f])
            self.landing_yaw[f] = turn_yaw  # the level sole keeps the robot's own heading
        on_toes = 0.0  # s(theta), module docstring: also after lift-off while the level weight fades
        if rules.toes:
            heel_up = math.asin(max(-1.0, min(1.0, -float(rotations[f][2, 0]))))
            on_toes, slope = toe_pitch(heel_up, rules.toe_angle)
            on_toe[f] = in_contact and on_toes > 0.0
        # alpha (_level_weight) and, in contact, the blend's share of blend_time and d(alpha)/dx, once
        share = min(1.0, since / blend)  # (_blend_share)
        if not spec.flatten:
            alpha = 0.0
        elif in_contact:
            alpha, rising = blend_in(share, spec.blend_shape)
        else:
            alpha = self.level_at_release[f] * max(0.0, 1.0 - (t - self.release_at[f]) / blend)
        r_h, omega = rotations[f], omegas[f]  # (views: r_h is the new rotation once it is set below)
        if alpha > 0.0:  # towards the level sole (module docstring)
            cached = self._levels[f]  # R_z(psi_land), built once per heading (_level; read only)
            level = cached[1] if cached is not None and cached[0] is self.landing_yaw[f] else self._level(f)
            level_rate: Sequence[float] = NO_RATE
            if on_toes > 0.0:  # on the toes: level across, pitched about the toe line
                across = level[:, 1]  # the toe line's direction (the foot's y at the landing heading)
                level = pin.exp3(on_toes * across) @ level
                level_rate = (slope * float(omega @ across) * across).tolist()
            turn = pin.log3(dot(r_h.T, level))  # the whole way to level, in the human foot's frame
            # (r_h, a view of it, is the new rotation after this; 1.0 * turn is turn, bit for bit)
            r_h[...] = dot(r_h, pin.exp3(turn if alpha == 1.0 else alpha * turn))
            # feed-forward: the human's rotation fading out plus the blend's own rate d(alpha)/dt
            rate_alpha = 0.0
            closing = in_contact and previous_t is not None and since >= rules.flat_from  # (below)
            if closing and 0.0 <= (before := previous_t - self.contact_at[f]) < rules.flat_from:
                # the step that ends the blend carries the rest of its turn, the secant of alpha over the
                # step: h' at the end is 0, and what the feed-forward leaves of the turn the flat sample's
                # hard stance rows then hold (README, *The blend's last step*)
                previous = blend_in(before / blend, spec.blend_shape)[0]
                rate_alpha = (alpha - previous) / (t - previous_t)
            elif alpha < 1.0:
                rate_alpha = rising / blend if in_contact else -self.level_at_release[f] / blend
            # the blend's own rate along R turn (not computed where it changes nothing: rate_term_needed)
            along = dot(r_h, turn).tolist() if rate_term_needed(rate_alpha, level_rate) else NO_RATE
            spin = blended_rate(omega.tolist(), along, level_rate, alpha, rate_alpha)
            omega[0], omega[1], omega[2] = spin  # (element by element: half the cost of [:] = a tuple)
        else:
            spin = omega.tolist()  # omega's floats (the values the array holds)
        points = dot(sole, r_h.T)  # sole points in world orientation (m, 3)
        levers = points.tolist()  # (read in floats: contact_floats.lowest, held)
        j = lowest(levers)
        leg_turn = self.leg_turn
        if in_contact and not spec.hold:  # contact without holding: only kept above the floor
            flags[f] = j
            flat[f] = since >= rules.flat_from and on_toes == 0.0
        elif in_contact:
            if self.point[f] < 0:  # touch-down: the lowest point lands where it is
                self.reach[f], self.reach_turn[f] = np.zeros(3), 0.0
                bounds = self.lean_bounds[f]
                if spec.reach and bounds is not None and human.hips is not None:
                    # a level sole beyond the ankle roll's reach: held nearer the hip (leg_reach.py)
                    self.reach[f], self.reach_turn[f] = reach_shift(
                        target, human.hips[k][f], self.landing_yaw[f], bounds
                    )
                self._reach_xyz[f] = self.reach[f].tolist()
                self._set_anchor(f, target + points[j] + self.reach[f])
                self.point[f] = j
            elif j != self.point[f] and levers[j][2] < levers[self.point[f]][2] - 1e-9:
                # rolled onto another sole point: anchor it where it is (a flat sole ties: keep)
                self._set_anchor(f, np.array(self.last[f]) + points[j] + (1.0 - share) * self.reach[f])
                self.point[f] = j
            j = self.point[f]
            if robot is not None:  # the held point where the robot's own sole point is, on the ground
                moved = robot[0] + robot[1] @ sole[j]
                shift = float(np.linalg.norm(moved[:2] - self.anchor[f][:2]))
                self.reanchors.append((f, t, shift, turned))
                self._set_anchor(f, moved)
            # the shift into reach moves in over blend_time (beta: the share)
            position, (rate[0], rate[1], rate[2]) = held(
                self._anchor_xyz[f], levers[j], self._reach_xyz[f], spin, share, blend
            )
            target[0], target[1], target[2] = position
            if leg_turn is not None and k < len(leg_turn):  # (_turn_leg)
                leg_turn[k, f] = share * self.reach_turn[f]
                self.leg_heading[k, f] = self.landing_yaw[f]
            self.last[f] = position  # (floats: the values target holds)
            flags[f] = j
            flat[f] = since >= rules.flat_from and on_toes == 0.0
            return
        delta = self.release_delta[f]
        if delta is not None:
            tau = rules.tau
            fade = math.exp(-(t - self.release_at[f]) / tau)
            if leg_turn is not None and k < len(leg_turn):  # (_turn_leg)
                leg_turn[k, f] = fade * self.turn_at_release[f]
                self.leg_heading[k, f] = self.landing_yaw[f]
            position, (rate[0], rate[1], rate[2]) = faded(target.tolist(), rate.tolist(), delta, fade, tau)
            t0, t1, t2 = position
            target[0], target[1], target[2] = position
            if fade < 1e-4:
                self.release_delta[f] = None
        else:
            t0, t1, t2 = target.tolist()
        floor = self.robot_ground - levers[j][2]  # no sole point below the ground
        if t2 < floor:
            target[2] = t2 = floor
            # the floor's own rate as the foot turns: the lowest point's height is -(w x lever)_z
            floor_rate = -cross_values(spin, levers[j])[2]
            rate[2] = max(rate[2], floor_rate, 0.0)
        self.last[f] = (t0, t1, t2)  # (floats: the values target holds)

    def _set_anchor(self, f: int, point: np.ndarray) -> None:
        """The held point of foot ``f``: ``point`` on the ground plane, kept as an array (:attr:`anchor`) and
        as the floats :func:`.contact_floats.held` reads every held sample (one ``tolist`` per anchoring)."""
        point[2] = self.robot_ground
        self.anchor[f] = point
        self._anchor_xyz[f] = point.tolist()
