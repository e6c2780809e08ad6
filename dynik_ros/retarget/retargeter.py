"""The :class:`Retargeter`: human link poses and twists in, robot :class:`Measurements` out.

It is the one object the ROS ik node and ``dynik-retarget`` share. Per sample it applies, in order:

1. world yaw alignment, fixed at the first sample (:func:`.calibration.yaw_alignment`): human data is
   turned about world z and shifted so that its heading and root position start on the robot's;
2. rotation offsets: orientation target of robot frame ``j`` = ``R_human_link R_off`` (eq. 2), angular
   velocity target = the human link's world angular velocity (offsets are constant);
3. position scaling (root height ratio, limb ratios) with velocity feed-forward (:mod:`.scaling`);
4. foot contact: held, grounded foot targets while the human foot is in contact.

The dynamical IK (:meth:`make_ik`) then tracks these targets on the robot model (eq. 9-14); a whole take
at once: :meth:`run` (:mod:`.offline_run`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.floor_rows import FloorConfig, points_of_feet
from dynik_ros.core.targets import (
    FrameTarget,
    InvalidMeasurementError,
    Measurements,
    TargetSet,
)
from dynik_ros.retarget.calibration import Calibration, calibrate, check_calibration, yaw_alignment
from dynik_ros.retarget.fixed_products import each_times_fixed, fixed_times, times_fixed
from dynik_ros.retarget.foot_contact import FootContact
from dynik_ros.retarget.held_gain import held_min_gains
from dynik_ros.retarget.hinge_alignment import HingeAlignment, find_hinge
from dynik_ros.retarget.ik_steps import on_ik_steps
from dynik_ros.retarget.leg_reach import ankle_roll_lean, leg_orientation_rows, turn_legs
from dynik_ros.retarget.offline_run import MAX_IK_STEP, OfflineRun
from dynik_ros.retarget.pelvis_reach import PelvisReach
from dynik_ros.retarget.registry import RobotSpec, load_robot
from dynik_ros.retarget.robot_anchor import RobotAnchoredFeet, robot_sole_reader
from dynik_ros.retarget.scaling import PositionScaling
from dynik_ros.retarget.stream_input import Pose, StreamInput
from dynik_ros.retarget.swing_weight import swing_factors

# The IK's integration for a robot (DynamicalIKConfig.integration; the solver's default, Adams, stays for
# human models): on 33 real-capture x robot rows and 18 synthetic walk/run rows (60-240 Hz) the trapezoid
# wrote the smoother joints (chatter share <= 0.44 %, Adams <= 2.6 % with its history restarted on a
# bound, 26 % without) at the same MNTE (median ratio 0.997, worst 1.027); Adams' fourth order only shows
# on targets the model reaches exactly, which a robot following a human never does (README, "Smooth
# joint accelerations").
ROBOT_INTEGRATION = "trapezoidal"


@dataclass
class Alignment:
    """World alignment fixed at the first sample: ``p' = A (p - o_human)`` (horizontal shift only), then
    the robot root starts at ``o_robot``."""

    rotation: np.ndarray
    human_origin: np.ndarray  # (2,)
    robot_origin: np.ndarray  # (2,)

    @property
    def yaw(self) -> float:
        return float(np.arctan2(self.rotation[1, 0], self.rotation[0, 0]))


class Retargeter(StreamInput, OfflineRun):
    """Human-to-robot retargeting for one robot map; see the module docstring.

    Attributes: ``robot`` (:class:`RobotModel`), ``targets`` (:class:`TargetSet`), ``spec``
    (:class:`RobotSpec`), ``config``, ``calibration``, ``links`` (the human links it reads).
    """

    def __init__(self, spec: RobotSpec, calibration: Calibration | None = None):
        self.spec = spec
        self.config = spec.config
        self.robot = spec.robot
        self.targets = TargetSet(
            [
                FrameTarget(
                    frame=t.frame,
                    link=t.link,
                    position=t.position,
                    orientation=t.orientation,
                    position_gain=t.position_gain,
                    orientation_gain=t.orientation_gain,
                    position_weight=t.position_weight,
                    orientation_weight=t.orientation_weight,
                )
                for t in self.config.targets
            ]
        )
        links = [self.config.root.link] + [t.link for t in self.config.targets]
        links += [t.anchor.link for t in self.config.targets if t.anchor is not None]
        links += [f.link for f in self.config.feet] + [f.toe for f in self.config.feet if f.toe]
        self.links: list[str] = list(dict.fromkeys(links))
        self._q0 = spec.initial_configuration()
        self.zmp_plan = None  # the last balanced() take's ZmpPlan (balance.plan: zmp; zmp_balance.py)
        self.robot_anchor: RobotAnchoredFeet | None = None  # the last compute()'s feet (anchor: robot)
        if calibration is None:
            if self.config.calibration_file is not None:
                calibration = Calibration.load(self.config.calibration_file)
            else:
                calibration = calibrate(spec)
        self.set_calibration(calibration)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls, name_or_path: str | Path, calibration: Calibration | str | Path | None = None
    ) -> Retargeter:
        """Load a robot by name or YAML path (:func:`.registry.load_robot`); ``calibration`` may be a
        :class:`Calibration` or a calibration YAML file (default: the map's, else auto from the model)."""
        if isinstance(calibration, (str, Path)):
            calibration = Calibration.load(calibration)
        return cls(load_robot(name_or_path), calibration)

    def set_calibration(self, calibration: Calibration) -> None:
        """Use ``calibration`` from now on (and :meth:`reset`)."""
        check_calibration(self.spec, calibration)
        self.calibration = calibration
        config = self.config
        index = {name: i for i, name in enumerate(self.links)}
        self._root = index[config.root.link]
        by_frame = {t.frame: t for t in config.targets}
        pos_specs = [by_frame[t.frame] for t in self.targets.position_targets]
        ori_specs = [by_frame[t.frame] for t in self.targets.orientation_targets]
        self._ori_links = np.array([index[t.link] for t in ori_specs], dtype=int)
        self._ori_offsets = np.array([calibration.offsets[t.frame] for t in ori_specs]).reshape(-1, 3, 3)
        self._root_offset = calibration.offsets[config.root.frame]
        self.scaling = PositionScaling(self.links, config.root.link, pos_specs, calibration)
        pos_rows = {t.frame: i for i, t in enumerate(pos_specs)}
        self._foot_links = np.array([index[f.link] for f in config.feet], dtype=int)
        self._foot_offsets = np.array([calibration.offsets[f.frame] for f in config.feet]).reshape(-1, 3, 3)
        ori_rows = {t.frame: i for i, t in enumerate(ori_specs)}
        calibration_q = self.spec.calibration_configuration()
        self.hinges = HingeAlignment(
            [
                find_hinge(self.robot, calibration_q, parent, child, ori_rows[parent], ori_rows[child])
                for parent, child in config.hinges
            ]
        )
        feet_with_ori = [(ori_rows[f.frame], k) for k, f in enumerate(config.feet) if f.frame in ori_rows]
        self._foot_ori_rows = np.array([row for row, _ in feet_with_ori], dtype=int)
        self._foot_ori_feet = np.array([k for _, k in feet_with_ori], dtype=int)
        self._foot_tilt_rows = [ori_rows.get(f.frame) for f in config.feet]  # contact.held_tilt_gain
        self.contact = FootContact(
            config.feet, config.contact, calibration, self.links, [pos_rows[f.frame] for f in config.feet]
        )
        self.contact.lean_bounds = [ankle_roll_lean(self.robot, calibration_q, f.frame) for f in config.feet]
        self._foot_rows = np.array([pos_rows[f.frame] for f in config.feet], dtype=int)
        self._leg_rows = [leg_orientation_rows(self.robot, config, f.frame, ori_rows) for f in config.feet]
        self._pelvis_row = pos_rows.get(config.root.frame)
        self._standing = np.array([-min(p[2] for p in f.sole) for f in config.feet])  # foot frame standing
        self.pelvis_reach = PelvisReach.for_map(
            self.robot, config, calibration_q, self.contact.lean_bounds, self._leg_rows, list(ori_rows)
        )
        self.last_contacts = np.full(len(config.feet), -1)  # of the last measurements() call
        self.reset()

    def time_scale_contact(self, factor: float) -> None:
        """For a take played ``factor`` times slower (``dynik-retarget --time-scale``): the contact speed
        thresholds divided by ``factor`` and its blend and release times multiplied by it, so the feet land
        and lift on the same samples and blend over the same share of the motion as at the capture's speed
        (the human's speeds are divided by ``factor`` too; unscaled thresholds would start contacts while
        the foot still moves)."""
        c = self.config.contact
        contact = replace(
            c,
            speed_on=c.speed_on / factor,
            speed_off=c.speed_off / factor,
            blend_time=c.blend_time * factor,
            release_time=c.release_time * factor,
        )
        self.config = replace(self.config, contact=contact)
        self.set_calibration(self.calibration)

    def calibrate(
        self,
        poses: Mapping[str, Pose] | None = None,
        ground_height: float | None = None,
        source: str | None = None,
    ) -> Calibration:
        """Recompute offsets and ratios from a human calibration frame ``{link: (p, R)}`` in T-pose (default:
        the human model's zero configuration; a capture's own subject:
        :func:`dynik_ros.io.skeleton_tpose.skeleton_tpose`) and use them; returns the new
        :class:`Calibration` (``source``: :func:`calibrate`)."""
        calibration = calibrate(self.spec, poses, ground_height, source)
        self.set_calibration(calibration)
        return calibration

    def save_calibration(self, path: str | Path) -> Path:
        return self.calibration.save(path)

    def load_calibration(self, path: str | Path) -> Calibration:
        calibration = Calibration.load(path)
        self.set_calibration(calibration)
        return calibration

    def reset(self, robot_configuration: np.ndarray | None = None) -> None:
        """Forget the world alignment and the contact states (a new take starts). The next sample is
        aligned onto ``robot_configuration`` (the IK's current ``q``; default: the initial one)."""
        self.alignment: Alignment | None = None
        self._align_to = self._q0 if robot_configuration is None else np.asarray(robot_configuration, float)
        self.contact.reset()
        if self.pelvis_reach is not None:
            self.pelvis_reach.reset()
        self._clock = 0.0
        self._previous = None  # the last streamed sample (stream_input.py)

    def save_state(self) -> dict:
        """A copy of what the retargeter carries from sample to sample (world alignment, contact states,
        clock); :meth:`restore_state` returns to it."""
        names = ("alignment", "_align_to", "contact", "pelvis_reach", "_clock", "_previous")
        return deepcopy({k: getattr(self, k) for k in names})

    def restore_state(self, state: dict) -> None:
        for name, value in deepcopy(state).items():
            setattr(self, name, value)

    def initial_configuration(self) -> np.ndarray:
        """The IK's start ``q0``: the map's initial pose standing on the ground, facing +x."""
        return self._q0.copy()

    def ik_config(self, base: DynamicalIKConfig | None = None) -> DynamicalIKConfig:
        """``base`` (default: the default config with ``ROBOT_INTEGRATION``) with the map's ``regularizers``
        and ``balance`` sections where ``base`` leaves them off."""
        from dynik_ros.retarget.balance import ik_config as balance_config

        config = base or DynamicalIKConfig(integration=ROBOT_INTEGRATION)
        if self.config.regularizers.enabled and not config.regularizers.enabled:
            config = replace(config, regularizers=self.config.regularizers)
        if self.config.balance.enabled and not config.balance.enabled:
            config = balance_config(self.config.balance, self.config.feet, config)
        if self.config.contact.stance == "hard" and not config.stance_frames:  # core/stance_rows.py
            config = replace(config, stance_frames=tuple(f.frame for f in self.config.feet))
        if self.config.contact.floor_rows and self.config.feet and not config.floor.enabled:
            # the corners of the feet's soles kept above the ground (core/floor_rows.py, core/sole.py)
            corners = points_of_feet(self.config.feet, self.config.balance.sole_half_width)
            floor = FloorConfig(corners, height=self.contact.robot_ground)
            config = replace(config, floor=floor)
        return config

    def balanced(
        self, times: np.ndarray, measurements: Sequence[Measurements], flags: np.ndarray
    ) -> list[Measurements]:
        """With the map's ``balance`` on: the CoM targets and look-ahead support of a whole motion added to
        ``measurements`` (:class:`.balance.BalancedTargets`); otherwise ``measurements`` unchanged."""
        if not self.config.balance.enabled:
            return list(measurements)
        from dynik_ros.retarget.balance import BalancedTargets

        balanced = BalancedTargets(self, self.config.balance)
        out = balanced.apply(times, measurements, flags)
        self.zmp_plan = balanced.zmp_plan
        # no swing weight under a balance plan (it leads the CoM to where the swing foot's target lands,
        # swing_weight.py): measurements computed without the plan carry its factors
        return [m if m.weight_scale is None else replace(m, weight_scale=None) for m in out]

    def make_ik(self, config: DynamicalIKConfig | None = None, q0: np.ndarray | None = None) -> DynamicalIK:
        """A :class:`DynamicalIK` for the robot and these targets, from :meth:`initial_configuration` (also
        its home posture for branch recovery); the map's regularizers and balance apply
        (:meth:`ik_config`)."""
        config = self.ik_config(config)
        targets = self.targets
        if config.balance.enabled and self.config.balance.enabled:  # weights shifted to the legs
            from dynik_ros.retarget.balance import weighted_targets

            targets = weighted_targets(self.targets, self.config.balance, self.config.root.link)
        return DynamicalIK(
            self.robot,
            targets,
            config,
            self.initial_configuration() if q0 is None else q0,
            home=self.initial_configuration(),
        )

    # ------------------------------------------------------------------ targets
    def _align(self, p0_root: np.ndarray, r0_root: np.ndarray) -> Alignment:
        if self.config.alignment == "none":
            return Alignment(np.eye(3), np.zeros(2), np.zeros(2))
        robot_root, robot_rotation = self.robot.frame_pose(self._align_to, self.config.root.frame)
        rotation = yaw_alignment(r0_root, robot_rotation, self._root_offset)
        return Alignment(rotation, np.array(p0_root[:2], dtype=float), np.array(robot_root[:2], dtype=float))

    def compute(
        self,
        times: np.ndarray,
        positions: np.ndarray,
        rotations: np.ndarray,
        linear_velocities: np.ndarray | None = None,
        angular_velocities: np.ndarray | None = None,
        robot_q: np.ndarray | None = None,
        replay: bool = True,
        samples: np.ndarray | None = None,
    ) -> tuple[list[Measurements], np.ndarray]:
        """Targets for ``N`` samples of the human links in the order of :attr:`links`.

        Arrays: ``positions`` ``(N, L, 3)``, ``rotations`` ``(N, L, 3, 3)``, world velocities ``(N, L, 3)``
        (``None``: not measured, no feed-forward). Samples must follow the previous call's in time (the
        alignment and the contact states carry over). Returns the measurements and the contact states
        ``(N, n_feet)`` (index of the robot sole point in contact, -1 for none).

        With ``contact.anchor: robot`` a held foot is moved onto the robot's own sole when its contact
        turns flat (:mod:`.robot_anchor`): at ``robot_q`` (the IK's configuration now: one sample at a time,
        online), else, with ``replay``, in :meth:`run` of these targets (:attr:`robot_anchor`). ``samples``:
        the measured rows, the others being IK steps between them (:mod:`.ik_steps`; ``None``: all rows).
        """
        p = np.asarray(positions, dtype=float)
        r = np.asarray(rotations, dtype=float)
        n, n_links = p.shape[:2]
        if p.shape != (n, len(self.links), 3) or r.shape != (n, n_links, 3, 3):
            raise InvalidMeasurementError(
                f"expected positions (N, {len(self.links)}, 3) and rotations (N, {len(self.links)}, 3, 3) "
                f"for links {self.links}, got {p.shape} and {r.shape}"
            )
        bad = ~(np.isfinite(p).all(axis=2) & np.isfinite(r).all(axis=(2, 3)))
        if bad.any():
            samples, links = np.nonzero(bad)
            raise InvalidMeasurementError(
                f"human link poses not finite in {int(bad.any(axis=1).sum())} sample(s), first: sample "
                f"{int(samples[0])}, links {sorted({self.links[i] for i in links[samples == samples[0]]})}"
            )
        measured = linear_velocities is not None and angular_velocities is not None
        v = np.asarray(linear_velocities, dtype=float) if measured else np.zeros_like(p)
        w = np.asarray(angular_velocities, dtype=float) if measured else np.zeros_like(p)
        if self.alignment is None:
            self.alignment = self._align(p[0, self._root], r[0, self._root])
        a = self.alignment.rotation
        shift = np.zeros(3)
        shift[:2] = self.alignment.human_origin
        # (the stacked products as flat ones: fixed_products.py, the same floats)
        p = times_fixed(p - shift, a.T)
        r = fixed_times(a, r)
        v = times_fixed(v, a.T)
        w = times_fixed(w, a.T)
        self.scaling.origin = self.alignment.robot_origin
        target_rotations = self.hinges.apply(each_times_fixed(r[:, self._ori_links], self._ori_offsets))
        target_omegas = w[:, self._ori_links]
        target_positions, target_velocities = self.scaling.targets(p, r, v, w)
        foot_rotations = each_times_fixed(r[:, self._foot_links], self._foot_offsets)
        foot_omegas = w[:, self._foot_links].copy()
        hips = None  # the robot hip targets of the feet's legs, read by contact.reach and pelvis_reach only
        if (self.config.contact.reach or self.pelvis_reach is not None) and len(self._foot_rows):
            hips = self.scaling.limb_roots(p, r)[:, self._foot_rows]
        reach_hips = hips if self.config.contact.reach else None
        self.robot_anchor = None
        robot_sole = None
        robot_anchor = self.config.contact.anchor == "robot" and len(self.config.feet) > 0
        if robot_anchor and robot_q is not None:
            frames = [f.frame for f in self.config.feet]
            robot_sole = robot_sole_reader(self.robot, frames, np.array(robot_q, dtype=float))
        elif robot_anchor and replay:
            self.robot_anchor = RobotAnchoredFeet(
                self.contact,
                times,
                p,
                v if measured else None,
                target_positions,
                target_velocities,
                foot_rotations,
                foot_omegas,
                self._foot_ori_rows,
                self._foot_ori_feet,
                reach_hips,
                samples,
            )
        flags = self.contact.apply(
            np.asarray(times, dtype=float),
            p,
            v if measured else None,
            target_positions,
            target_velocities,
            foot_rotations,
            foot_omegas,
            reach_hips,
            robot_sole,
            samples,
            # the replay prepared the same human feet from the same arrays (read only): not made twice
            None if self.robot_anchor is None else self.robot_anchor.human,
        )
        if self.robot_anchor is not None:  # the replay takes this pass's contact decisions (robot_anchor.py)
            self.robot_anchor.decided = flags >= 0
        if self.contact.leg_turn is not None and self.contact.leg_turn.any():  # contact.reach moved a foot
            turn_legs(target_rotations, self._leg_rows, self.contact.leg_turn, self.contact.leg_heading)
        if self.pelvis_reach is not None and hips is not None and self._pelvis_row is not None:
            rows, held = (self._pelvis_row, list(self._foot_rows)), (flags >= 0) & self.config.contact.hold
            self.pelvis_reach.apply(
                times, target_positions, target_velocities, rows, hips, held, foot_rotations, target_rotations
            )
        # the feet's orientation targets as the contact left them (level in contact, blended in and out)
        target_rotations[:, self._foot_ori_rows] = foot_rotations[:, self._foot_ori_feet]
        target_omegas[:, self._foot_ori_rows] = foot_omegas[:, self._foot_ori_feet]
        stance = self.contact.flat  # the feet flat in contact: rows of the QP with contact.stance = hard
        held = (flags >= 0) & self.config.contact.hold  # contact.swing_weight: feet in the air weigh less
        # (not with a balance plan: it leads the CoM to where the swing foot lands, swing_weight.py)
        swing = 1.0 if self.config.balance.enabled else self.config.contact.swing_weight
        scales = swing_factors(swing, self.targets, self._foot_rows, held,
                               target_positions[:, self._foot_rows, 2], self._standing)  # fmt: skip
        # contact.held_gain, held_tilt_gain: a held foot's height comes down, its tilt levels faster
        # (retarget/held_gain.py)
        contact = self.config.contact
        tilt = (contact.held_tilt_gain, self._foot_tilt_rows)
        min_gains = held_min_gains(contact.held_gain, self.targets, self._foot_rows, held, *tilt)
        out = [
            Measurements(
                target_positions[k],
                target_rotations[k],
                target_velocities[k] if measured else None,
                target_omegas[k] if measured else None,
                stance=stance[k],
                weight_scale=scales[k],
                min_gain=min_gains[k],
            )
            for k in range(n)
        ]
        return out, flags

    def motion_arrays(self, motion) -> tuple[np.ndarray, ...]:
        """``(times, positions, rotations, linear, angular)`` of a :class:`Motion`-like object (``times``,
        ``links``, ``positions``, ``rotations``, ``linear_velocities``, ``angular_velocities``) in the
        order of :attr:`links`."""
        missing = [k for k in self.links if k not in motion.links]
        if missing:
            raise InvalidMeasurementError(f"motion lacks human links {missing}")
        idx = [list(motion.links).index(k) for k in self.links]
        lin = getattr(motion, "linear_velocities", None)
        ang = getattr(motion, "angular_velocities", None)
        return (
            np.asarray(motion.times, dtype=float),
            np.asarray(motion.positions)[:, idx],
            np.asarray(motion.rotations)[:, idx],
            None if lin is None else np.asarray(lin)[:, idx],
            None if ang is None else np.asarray(ang)[:, idx],
        )

    def motion_measurements(self, motion) -> tuple[list[Measurements], np.ndarray]:
        """:meth:`compute` for a whole motion (see :meth:`motion_arrays`)."""
        return self.compute(*self.motion_arrays(motion))

    def step_measurements(
        self, motion
    ) -> tuple[np.ndarray, list[Measurements], np.ndarray, np.ndarray | None]:
        """The targets of every IK step of a whole motion, for :meth:`run`: a sparse take's human links are
        interpolated onto the IK's step grid first (:mod:`.ik_steps`), so the contact rules see each step
        (the toe-off noise estimate reads the samples only, :mod:`.heel_noise`), and the balance plan is
        added (:meth:`balanced`). Returns the step times, their measurements, contact states and the
        samples' indices among the steps (``None``: every step is a sample; :func:`.ik_steps.at_samples`)."""
        arrays, index = on_ik_steps(*self.motion_arrays(motion), MAX_IK_STEP)
        measurements, contacts = self.compute(*arrays, samples=index)
        return arrays[0], self.balanced(arrays[0], measurements, contacts), contacts, index
