"""Can a robot stand on these feet? Sole figures measured on the output trajectory (forward kinematics).

Per foot, from the robot configurations actually written (not the targets):

* contact phases: runs of samples the retargeter counted as in contact (its hysteresis state);
* tilt: angle between the foot frame's z axis and the world vertical, over the *flat* part of each phase
  (after the ``blend_time`` that turns a heel-striking foot level, until lift-off), and separately its
  largest value during those blends, so nothing is hidden;
* penetration: how far the lowest corner of the sole goes below the ground, over every sample (in contact or
  not): the sole points widened by the sole's half width across the foot (:func:`~dynik_ros.core.sole.
  sole_polygon`), so a sole rolled onto its edge counts (the centre line alone missed it: 25 mm half width,
  10 deg of roll, 4.3 mm under);
* above the ground: how high the lowest corner of the sole is over the flat part of each phase, largest over
  the phases: a held foot that does not come down to the floor is not standing on it (with the robot's
  pelvis target higher than its legs reach, held soles stayed 10-47 mm up while counted as standing:
  :mod:`dynik_ros.io.skeleton_tpose`);
* slide: horizontal drift of the sole's centre from where it was when the phase turned flat, largest per
  phase, then mean and max over the phases, and the times of the phase with the largest (where to look);
* on the toes (``toe``: the retargeter's toe class, :mod:`.foot_contact`): those samples are not part of the
  flat parts (a flat part resumes, and its slide restarts, where they end) and get figures of their own: the
  toe point's horizontal drift per run (slide), the sole's roll (angle of its lateral axis to the floor: the
  toe line level across), their share of the contact; penetration counts every sample as before. Without
  ``toe`` every contact sample after the blend is flat (the figures before the toe class).

The foot frame's z is taken as the sole normal (true for the registry robots' ankle-roll frames). ROS-free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.sole import sole_polygon


@dataclass
class FootFigures:
    side: str
    contact_share: float  # fraction of samples in contact
    phases: int  # contact phases with a flat part
    tilt_flat_max_deg: float  # over the flat parts of the phases (NaN without one)
    tilt_blend_max_deg: float  # during the touch-down blends
    penetration_max_mm: float  # deepest sole corner below the ground, any sample (0 if never below)
    above_flat_max_mm: float  # highest the lowest sole corner is above the ground while flat (NaN without)
    slide_mean_mm: float  # mean over phases of the largest drift of the sole centre
    slide_max_mm: float
    worst_phase: tuple[float, float] | None = None  # (start, end) s from the first sample: the largest slide
    toe_runs: int = 0  # runs of samples on the toes (toe class)
    toe_share: float = 0.0  # fraction of the contact samples on the toes
    toe_slide_max_mm: float = math.nan  # largest horizontal drift of the toe point in a run
    toe_roll_max_deg: float = math.nan  # largest roll of the sole (lateral axis against the floor)

    def line(self) -> str:
        below = f"below ground max {self.penetration_max_mm:.1f} mm"
        if not self.phases:
            return f"contact {100 * self.contact_share:.0f} %, no flat phase; {below}"
        where = f" (t {self.worst_phase[0]:.2f}-{self.worst_phase[1]:.2f} s)" if self.worst_phase else ""
        toes = (
            f"; on the toes {100 * self.toe_share:.0f} % of the contact ({self.toe_runs} runs): toe slide "
            f"max {self.toe_slide_max_mm:.1f} mm, roll max {self.toe_roll_max_deg:.1f} deg"
            if self.toe_runs
            else ""
        )
        return (
            f"contact {100 * self.contact_share:.0f} % ({self.phases} phases); flat: tilt max "
            f"{self.tilt_flat_max_deg:.1f} deg, slide mean/max {self.slide_mean_mm:.1f}/"
            f"{self.slide_max_mm:.1f} mm{where}, above ground max {self.above_flat_max_mm:.1f} mm; "
            f"touch-down tilt max {self.tilt_blend_max_deg:.1f} deg; "
            f"{below}{toes}"
        )


def toe_flags(retargeter: object, result: object) -> np.ndarray:
    """``(N, n_feet)`` booleans: the samples of ``result`` (a ``RetargetResult``) whose foot was on its toes,
    the toe class of the retargeter's last ``compute`` (:mod:`.foot_contact`); all False if that computed
    another take (a different shape)."""
    toe = getattr(getattr(retargeter, "contact", None), "toe", None)
    contacts = np.asarray(result.contacts)
    return toe.copy() if toe is not None and toe.shape == contacts.shape else np.zeros(contacts.shape, bool)


def frame_poses(robot: object, q: np.ndarray, frames: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """World positions ``(N, F, 3)`` and rotations ``(N, F, 3, 3)`` of ``frames`` at configurations ``q``
    ``(N, nq)``, pinocchio's ``framesForwardKinematics`` poses: the joints placed, then only these frames
    (``updateFramePlacement``; the model's other frames are not needed). Each pose is read as one 4x4
    ``homogeneous`` (one accessor call, ~2 us, instead of ``translation`` and ``rotation``: a quarter less
    CPU time over a take, the same numbers)."""
    model = robot.model
    data = model.createData()
    frame_ids = [robot.frame_id(f) for f in frames]
    poses = np.empty((len(q), len(frame_ids), 4, 4))
    forward, update = pin.forwardKinematics, pin.updateFramePlacement
    for k in range(len(q)):
        forward(model, data, q[k])
        for f, fid in enumerate(frame_ids):
            poses[k, f] = update(model, data, fid).homogeneous
    return poses[:, :, :3, 3], poses[:, :, :3, :3]


def _phases(states: np.ndarray) -> list[tuple[int, int]]:
    """``[start, end)`` runs of ``states >= 0``."""
    inside = np.concatenate(([False], states >= 0, [False]))
    edges = np.flatnonzero(np.diff(inside.astype(int)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def foot_figures(
    robot: object,
    q: np.ndarray,
    times: np.ndarray,
    contacts: np.ndarray,
    feet: Sequence[object],
    blend_time: float,
    ground: float = 0.0,
    toe: np.ndarray | None = None,
    *,
    half_width: float,
    poses: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[FootFigures]:
    """:class:`FootFigures` of each foot (``feet``: the map's ``FootSpec``s: ``side``, ``frame``, ``sole``)
    for configurations ``q`` ``(N, nq)`` at ``times``, with the retargeter's ``contacts`` ``(N, n_feet)`` and
    its toe class ``toe`` ``(N, n_feet)`` booleans (``None``: no sample on the toes); ``half_width``: the
    sole's half width across the foot (the map's ``balance.sole_half_width``; 0: the centre line only);
    ``poses``: :func:`frame_poses` of the feet at ``q`` if already placed (the summary's second figures)."""
    n = len(q)
    positions, rotations = poses if poses is not None else frame_poses(robot, q, [f.frame for f in feet])
    times = np.asarray(times, dtype=float)
    out = []
    for f, foot in enumerate(feet):
        sole = np.array(foot.sole, dtype=float).reshape(-1, 3)
        corners = np.array(sole_polygon(sole, half_width))
        heights = positions[:, f, None, 2] + np.einsum("nj,mj->nm", rotations[:, f, 2], corners)
        depth = ground - heights.min(axis=1)
        centre = positions[:, f] + rotations[:, f] @ sole.mean(axis=0)
        tilt = np.degrees(np.arccos(np.clip(rotations[:, f, 2, 2], -1.0, 1.0)))
        on_toes = np.zeros(n, dtype=bool) if toe is None else np.asarray(toe[:, f], dtype=bool)
        inside = contacts[:, f] >= 0 if contacts.size else np.zeros(n, dtype=bool)
        tip = positions[:, f] + rotations[:, f] @ sole[int(sole[:, 0].argmax())]  # the toe point
        roll = np.degrees(np.abs(np.arcsin(np.clip(rotations[:, f, 2, 1], -1.0, 1.0))))
        flat_tilts, blend_tilts, slides, spans, toe_slides, toe_rolls, above = [], [], [], [], [], [], []
        for start, end in _phases(contacts[:, f]) if contacts.size else []:
            flat = start + int(np.searchsorted(times[start:end], times[start] + blend_time - 1e-9))
            if flat > start:
                blend_tilts.append(tilt[start:flat].max())
            for a, b in _phases(np.where(on_toes[start:end], 0, -1)):
                toe_slides.append(
                    np.linalg.norm(tip[start + a : start + b, :2] - tip[start + a, :2], axis=1).max()
                )
                toe_rolls.append(roll[start + a : start + b].max())
            if flat >= end:
                continue
            for a, b in _phases(np.where(on_toes[flat:end], -1, 0)):  # the flat runs between toe runs
                a, b = flat + a, flat + b
                flat_tilts.append(tilt[a:b].max())
                above.append(-depth[a:b].min())
                drift = np.linalg.norm(centre[a:b, :2] - centre[a, :2], axis=1)
                slides.append(drift.max())
                spans.append((float(times[start] - times[0]), float(times[end - 1] - times[0])))
        out.append(
            FootFigures(
                side=str(foot.side),
                contact_share=float((contacts[:, f] >= 0).mean()) if contacts.size else 0.0,
                phases=len(slides),
                tilt_flat_max_deg=float(max(flat_tilts)) if flat_tilts else math.nan,
                tilt_blend_max_deg=float(max(blend_tilts)) if blend_tilts else 0.0,
                penetration_max_mm=1e3 * max(0.0, float(depth.max())) if n else 0.0,
                above_flat_max_mm=1e3 * max(0.0, float(max(above))) if above else math.nan,
                slide_mean_mm=1e3 * float(np.mean(slides)) if slides else math.nan,
                slide_max_mm=1e3 * float(np.max(slides)) if slides else math.nan,
                worst_phase=spans[int(np.argmax(slides))] if slides else None,
                toe_runs=len(toe_slides),
                toe_share=float(on_toes[inside].mean()) if inside.any() else 0.0,
                toe_slide_max_mm=1e3 * float(np.max(toe_slides)) if toe_slides else math.nan,
                toe_roll_max_deg=float(np.max(toe_rolls)) if toe_slides else math.nan,
            )
        )
    return out
