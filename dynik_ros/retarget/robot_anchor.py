"""Held feet anchored where the robot's own soles are (``contact.anchor: robot``, issue 9).

The feet's targets are computed from the human alone, ahead of the IK (:meth:`Retargeter.compute`,
:class:`~dynik_ros.retarget.foot_contact.FootContact`): a contact holds the foot where the human-derived
target landed. A robot leg that lags (a joint at its velocity limit, a roll at its position limit) puts its
sole down late and elsewhere, and the stance rows (``v* = v_ref + K e``, weighted or hard) then pull the
standing foot onto that footprint during the contact: a slide, and overshooting it, depth.

With ``anchor: robot`` the hold is moved, once per contact, at the sample its sole turns flat (``blend_time``
after touch-down, when :attr:`FootContact.flat` starts and the slide is counted): the held sole point
(``FootContact.point``, the heel that struck first or the point the foot rolled onto) goes to the robot's
own sole point, horizontally, on the ground plane; the level orientation takes the robot sole's heading
``psi = atan2(x_y, x_x)`` of its frame's x axis. The hold then starts with no horizontal error and the
rows keep the foot still. Why the flat sample, not the touch-down: at touch-down the lagging foot is still
travelling towards the human footprint (measured: 19 mm above it on TALOS's left turn), and anchoring it
there would stop the step short and leave the touch-down blend's tilt to pull it about the anchor; by the
flat sample it has had ``blend_time`` to get there, and the slide figures start then.

Offline the targets are computed before the IK runs (the balance plans need the whole take), so
:meth:`Retargeter.run` replays the feet's contact rules step by step (:class:`RobotAnchoredFeet`) from the
state and the raw inputs :meth:`Retargeter.compute` kept; the contact flags do not change (they are the
human's), only the held feet's targets. Online (``Retargeter.stream_measurements(..., robot_q=ik.q)``,
``ik_node``) the same rule runs in the one pass.

Which configuration: the IK's as it was when the last measured sample was reached, for every IK step up to
and including the next sample. A stream can know no other: a sparse stream's steps between two samples
(:mod:`.ik_steps`) are computed together when the later sample arrives, all with the configuration the IK
has then. Offline uses the same one, so a stream and the offline run of a take write the same path
(``test_stream_steps``); on a dense take (no steps between samples) it is the previous step's.

A take stepped at a fraction of its rate (``dynik-retarget --ik-rate``: ``DynamicalIKConfig.sample_period``
shorter than the step) reads the configuration one ``sample_period`` before the sample instead, as the full
rate's previous step does: :meth:`Retargeter.run` snapshots the rules (:meth:`RobotAnchoredFeet.snapshot`)
where one may anchor, steps, and where one did, replays the sample again with the configuration that far
along the step (:meth:`RobotAnchoredFeet.restore`). With the configuration of the step's start, 1/60 s
before the sample at 60 Hz on the 120 Hz captures, the foot still travelling towards its human-derived
hold when the rule anchored it went on for that whole step (the residual compares with the last sample's
targets, :mod:`dynik_ros.core.dynamical_ik`) and came back over the contact: held soles slid up to 4.5 mm
against 1.7 mm at the full rate; read half-way along the step, 2.2 mm (capture table, six 120 Hz walks).
The targets so replaced only enter the next step's residual; the step itself is not solved again.
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np
import pinocchio as pin

from dynik_ros.core.targets import Measurements, plainly_valid_rows
from dynik_ros.retarget.foot_contact import FootContact


def robot_sole_reader(robot, frames, q: np.ndarray, data: pin.Data | None = None):
    """``f -> (position, rotation)`` of the robot's foot frame ``frames[f]`` at configuration ``q``
    (``robot.frame_pose``); ``data``: a ``pin.Data`` of ``robot.model`` the reader computes in, instead of
    a new one per read (``createData`` costs most of a read; the kinematics are computed anew each read)."""
    return lambda f: robot.frame_pose(q, frames[f], data)


class RobotAnchoredFeet:
    """The feet's targets of one :meth:`Retargeter.compute` call, replayed with the robot's soles.

    Built from the contact machine as it was before that call (copied) and the raw (human-derived, before
    any hold) foot rows of the call; :meth:`measurement` gives sample ``k``'s measurement with the feet's
    rows as the rule gives them with the robot at ``q`` (samples in order, each once)."""

    def __init__(
        self,
        contact: FootContact,
        times: np.ndarray,
        p: np.ndarray,
        v: np.ndarray | None,
        positions: np.ndarray,
        velocities: np.ndarray,
        rotations: np.ndarray,
        omegas: np.ndarray,
        orientation_rows: np.ndarray,
        orientation_feet: np.ndarray,
        hips: np.ndarray | None = None,
        samples: np.ndarray | None = None,
    ):
        self._initial = deepcopy(contact)
        self._initial.keep_every_reanchor()  # RetargetResult.anchor_shifts: every contact of the take
        self.contact = deepcopy(contact)
        self.times = np.array(times, dtype=float)
        self.human = contact.prepare(self.times, p, v, hips, samples)
        self.rows = list(contact.rows)
        self._rows = np.asarray(self.rows, dtype=np.intp)  # (an index array: a list is converted per use)
        self.positions = positions[:, self.rows].copy()  # (N, n_feet, 3) before any hold
        self.velocities = velocities[:, self.rows].copy()
        self.rotations = rotations.copy()  # (N, n_feet, 3, 3) the human feet, before levelling
        self.omegas = omegas.copy()
        self.orientation_rows = np.asarray(orientation_rows, dtype=np.intp)
        self.orientation_feet = np.asarray(orientation_feet, dtype=np.intp)
        n, n_feet = len(self.times), len(self.rows)
        self._q_at_sample: np.ndarray | None = None  # the configuration the rule reads (module docstring)
        self._data: tuple | None = None  # (robot, pin.Data) the robot's soles are read in (robot_sole_reader)
        self.flags = np.full((n, n_feet), -1, dtype=int)
        self.flat = np.zeros((n, n_feet), dtype=bool)
        self.on_toe = np.zeros((n, n_feet), dtype=bool)
        # (N, n_feet) whether each foot is in contact, as compute's pass decided (its flags >= 0): the
        # decisions read the human alone (FootContact._decide), so the replay takes them instead of
        # deciding again (None: decided again); _decided: the same as lists of bools, read per sample
        self.decided: np.ndarray | None = None
        self._frames: list[str] = []  # the robot's foot frames of the sample being replayed (_robot_sole)
        # the rows measurement() writes, as slices where they follow each other (a fancy index costs 3x)
        self._rows_at, self._ori_rows_at = _index(self._rows), _index(self.orientation_rows)
        self._feet_at = _index(self.orientation_feet)  # (every foot in order: all of them, no copy)
        # the orientation rows that do not follow each other as (row, foot's place) pairs, set one by one
        # (a fancy-index assignment of two rows costs twice two plain ones); None: a slice
        self._ori_pairs = (
            None if isinstance(self._ori_rows_at, slice) else list(enumerate(self.orientation_rows.tolist()))
        )
        self._work: tuple[np.ndarray, ...] = ()
        self._new_run()

    @property
    def decided(self) -> np.ndarray | None:
        """Whether each foot is in contact at each sample (``(N, n_feet)`` booleans; ``None``: decided again
        by the replay), as compute's pass decided."""
        return self._decided_array

    @decided.setter
    def decided(self, decided: np.ndarray | None) -> None:
        self._decided_array = decided
        self._decided = None if decided is None else np.asarray(decided).tolist()

    def _robot_sole(self, f: int) -> tuple[np.ndarray, np.ndarray]:
        """The robot's foot frame ``f`` (position, rotation) at the configuration the rule reads
        (:func:`robot_sole_reader` of :meth:`_replayed`'s robot and frames, one bound method for the run
        instead of a reader made per sample: the rule reads it once per contact)."""
        robot, data = self._data
        return robot.frame_pose(self._q_at_sample, self._frames[f], data)

    def start(self) -> None:
        """Back to the contact states before the take (a new run of the same targets)."""
        self.contact = deepcopy(self._initial)
        self._new_run()

    def _new_run(self) -> None:
        """The raw rows copied once for a run, which the rules then change in place sample by sample (each
        sample once: a copy per sample cost as much as the copy of the take)."""
        self._q_at_sample = None
        self._work = tuple(a.copy() for a in (self.positions, self.velocities, self.rotations, self.omegas))

    def may_anchor(self, k: int) -> bool:
        """Whether the rule may move a hold at sample ``k`` (:meth:`FootContact.advance`: a foot in contact,
        its hold not yet moved, in contact since ``blend_time`` at ``t_k``); no false negatives."""
        contact, t = self.contact, self.times[k]
        flat_from = contact.rules.flat_from
        if flat_from <= 0.0:  # (a contact starting at k is flat at once)
            return not all(contact.anchored)
        feet = zip(contact.in_contact, contact.anchored, contact.contact_at, strict=True)
        return any(held and not anchored and t - since >= flat_from for held, anchored, since in feet)

    def snapshot(self, k: int) -> tuple:
        """What replaying sample ``k`` changes (the rules' state, sample ``k``'s rows and flags), to replay it
        again from there with another configuration (:meth:`restore`, module docstring). The rules' settings
        and the feet are not copied (the rules only read them), nor the moved holds' log (cut back instead):
        0.14 ms a copy instead of 0.57."""
        c = self.contact
        shared = (c.feet, c.spec, c.rules, c.sensor_links, c.clearance, c.soles, c.lean_bounds, c.reanchors)
        contact = deepcopy(c, {id(x): x for x in shared})
        rows = tuple(w[k].copy() for w in self._work)
        flags = (self.flags[k].copy(), self.flat[k].copy(), self.on_toe[k].copy())
        return contact, rows, flags, len(c.reanchors), self._q_at_sample

    def anchored_since(self, snapshot: tuple) -> bool:
        """Whether a hold moved onto the robot's sole since ``snapshot``."""
        return len(self.contact.reanchors) > snapshot[3]

    def restore(self, snapshot: tuple, k: int) -> None:
        """Back to ``snapshot`` of sample ``k``, to replay it again."""
        contact, rows, flags, logged, self._q_at_sample = snapshot
        while len(contact.reanchors) > logged:  # (the log the copy shares)
            contact.reanchors.pop()
        self.contact = contact
        for work, row in zip(self._work, rows, strict=True):
            work[k] = row
        self.flags[k], self.flat[k], self.on_toe[k] = flags

    def matches(self, times: np.ndarray) -> bool:
        """Whether ``times`` are this call's samples (``run`` was given the targets it computed)."""
        times = np.asarray(times, dtype=float)
        return times.shape == self.times.shape and bool(np.array_equal(times, self.times))

    def checked_measurement(
        self, k: int, m: Measurements, robot, frames, q: np.ndarray, plain: bool, tolerance: float
    ) -> tuple[Measurements, bool]:
        """:meth:`measurement` and whether it passes the fast path of ``Measurements.validate`` (rotation
        tolerance ``tolerance``) given that ``m`` does (``plain``): its feet's rows checked when replaced,
        the others are ``m``'s (``Retargeter.run`` then steps it ``checked``)."""
        out, rows = self._replayed(k, m, robot, frames, q)
        if rows is None or not plain:
            return out, plain
        return out, plainly_valid_rows(*rows, tolerance)

    def measurement(self, k: int, m: Measurements, robot, frames, q: np.ndarray) -> Measurements:
        """Row ``k`` of the take: ``m`` (its measurement from ``compute``, balance added) with the feet's
        rows from the contact rules run with the robot's soles; ``q``: the IK's configuration now (before
        row ``k``'s step), read when row ``k - 1`` is a measured sample, else the one read then (module
        docstring). A new object when the rows differ."""
        return self._replayed(k, m, robot, frames, q)[0]

    def _replayed(
        self, k: int, m: Measurements, robot, frames, q: np.ndarray
    ) -> tuple[Measurements, tuple[np.ndarray, ...] | None]:
        """:meth:`measurement` and, when it is a new object, the rows it replaced (positions, rotations,
        linear and angular velocities or ``None``, for :func:`plainly_valid_rows`)."""
        if self._q_at_sample is None or self.human.measured[k - 1]:
            self._q_at_sample = np.array(q, dtype=float)
        # sample k's raw rows (views of this run's copy), changed in place by the rules
        work = self._work
        position, velocity, rotation, omega = work[0][k], work[1][k], work[2][k], work[3][k]
        if self._data is None or self._data[0] is not robot:
            self._data = robot, robot.model.createData()
        self._frames = frames
        decided = self._decided[k] if self._decided is not None else [None] * len(self.rows)
        flags, flat, on_toe = self.flags[k], self.flat[k], self.on_toe[k]
        advance, human, robot_sole = self.contact.advance, self.human, self._robot_sole
        for f in range(len(self.rows)):
            advance(f, k, human, position[f], velocity[f], rotation, omega, flags, flat, on_toe, robot_sole,
                    decided[f])  # fmt: skip
        rows, ori_rows = self._rows_at, self._ori_rows_at
        feet_rotations = rotation[self._feet_at]
        # nothing moved: no contact re-anchored so far, or out of its reach; compared only until the first
        # hold moved (after it nearly every sample differs: 7187 of 7200 on the 60 s walk, iCub; a sample
        # that does not is then copied with its equal rows, checked on them as any other)
        # (compared as floats: numpy's == and .all() on a few rows cost more than their lists; the same
        # answer: equal values, NaN equal to nothing)
        if (
            not self.contact.reanchors
            and m.positions[rows].tolist() == position.tolist()
            and m.rotations[ori_rows].tolist() == feet_rotations.tolist()
        ):
            return m, None
        positions = np.array(m.positions, dtype=float)
        positions[rows] = position
        rotations = np.array(m.rotations, dtype=float)
        pairs = self._ori_pairs
        if pairs is None:
            rotations[ori_rows] = feet_rotations
        else:
            for i, row in pairs:
                rotations[row] = feet_rotations[i]
        linear, angular = m.linear_velocities, m.angular_velocities
        feet_omegas = None
        if linear is not None:
            linear = np.array(linear, dtype=float)
            linear[rows] = velocity
        if angular is not None:
            feet_omegas = omega[self._feet_at]
            angular = np.array(angular, dtype=float)
            if pairs is None:
                angular[ori_rows] = feet_omegas
            else:
                for i, row in pairs:
                    angular[row] = feet_omegas[i]
        out = with_rows(m, positions, rotations, linear, angular)
        # the replaced rows, for plainly_valid_rows: the values just written (float64, their shapes)
        return out, (position, feet_rotations, None if linear is None else velocity, feet_omegas)


def with_rows(
    m: Measurements,
    positions: np.ndarray,
    rotations: np.ndarray,
    linear: np.ndarray | None,
    angular: np.ndarray | None,
) -> Measurements:
    """``dataclasses.replace(m, positions=..., rotations=..., linear_velocities=..., angular_velocities=...)``
    without its walk over the fields and call of ``__init__`` (``Measurements`` has no ``__post_init__``;
    ``test_feet_fast_paths``): a copy of ``m``'s attributes with these four set, once per replayed sample."""
    out = object.__new__(Measurements)
    out.__dict__.update(m.__dict__)
    out.positions, out.rotations = positions, rotations
    out.linear_velocities, out.angular_velocities = linear, angular
    return out


def _index(rows: np.ndarray) -> slice | np.ndarray:
    """``rows`` (indices) as the slice they are when they follow each other one by one, else themselves."""
    if len(rows) and np.array_equal(rows, np.arange(rows[0], rows[0] + len(rows))):
        return slice(int(rows[0]), int(rows[0]) + len(rows))
    return rows
