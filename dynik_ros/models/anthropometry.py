"""Anthropometric tables for the 23-segment Xsens human model (Rapetti et al. 2020, sec. 4.2).

Every value is a fraction: lengths of body height, masses of body mass, centre-of-mass (COM) positions
and radii of gyration of the segment's own length.

Sources
-------
* de Leva, P. (1996). Adjustments to Zatsiorsky-Seluyanov's segment inertia parameters. J. Biomech.
  29(9), 1223-1230, Table 4, male values (reference subject 1741 mm, 73.0 kg). Its radii of gyration
  are read as: sagittal = about the antero-posterior axis, transverse = about the medio-lateral axis,
  longitudinal = about the segment's long axis; for the foot, whose long axis is antero-posterior, the
  sagittal radius is taken about the vertical axis.
* Drillis, R., Contini, R. (1966). Body segment parameters. Tech. Rep. 1166-03, New York University; the
  height proportions as reproduced in Winter, D.A. (2009), Biomechanics and Motor Control of Human
  Movement, 4th ed., Fig. 4.1: hip width, shoulder width, foot width and ankle height.

From de Leva's segments to the Xsens segments (modelling choices: no published data exist for them)
---------------------------------------------------------------------------------------------------
* Pelvis + L5 = lower trunk (hip-joint midpoint to omphalion) cut at 60 % (L5/S1 about 9 cm above the
  hips); L3 + T12 = middle trunk (omphalion to xiphion) cut at 50 %; T8 = upper trunk (xiphion to C7)
  less 10 % of its mass for each Shoulder; Neck + Head = head (C7 to vertex) cut at the gonion level
  (de Leva's alternative head, vertex to gonion, 203.3 mm); Foot + Toe = foot cut at the ball.
* A cut segment's parts have their COM at their midpoints and share its mass so that their combined
  COM is the published one; they keep its cross-sectional mass spread, while the spread along the long
  axis scales with their length (see `Segment.spread`).
* A Shoulder (clavicle and scapula) is a solid cylinder of diameter half its length, from the
  sternoclavicular joint to the shoulder joint.
* Joint centres lie one limb radius inside the body outline: hip-joint separation = hip width - 2 thigh
  radii, shoulder-joint separation = shoulder width - 2 upper-arm radii (`Segment.cylinder_radius`).
* De Leva's vertical chain (ankle to vertex) plus the Drillis-Contini ankle height is 1.017 statures;
  every published length is divided by that factor, so the model stands exactly as tall as the subject.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Segment:
    """Inertial parameters of one segment, as fractions (de Leva's convention)."""

    length: float  # proximal joint to distal joint (or end), of body height
    mass: float  # of body mass
    com: float  # COM distance from the proximal end, of the length
    gyration: tuple[float, float, float]  # about the COM: (sagittal, transverse, longitudinal), of the length

    def spread(self) -> tuple[float, float, float]:
        """Standard deviations of the mass along the sagittal, transverse and long axes, of the length.

        For principal axes through the COM, r_sag^2 = s_trans^2 + s_long^2 and so on; solved for s.
        """
        sag, trans, long_ = (r * r for r in self.gyration)
        squares = ((trans + long_ - sag) / 2.0, (sag + long_ - trans) / 2.0, (sag + trans - long_) / 2.0)
        if min(squares) <= 0.0:
            raise ValueError(f"radii of gyration {self.gyration} violate the triangle inequality")
        return tuple(math.sqrt(s) for s in squares)

    def cylinder_radius(self) -> float:
        """Radius of the solid cylinder with this segment's cross-sectional spread, of body height."""
        sag, trans, _ = self.spread()
        return 2.0 * math.sqrt((sag * sag + trans * trans) / 2.0) * self.length


_DE_LEVA_STATURE_MM = 1741.0
# de Leva (1996) Table 4, males: landmarks (COM measured from the first one), length [mm], mass [%],
# COM [% of length], radii of gyration (sagittal, transverse, longitudinal) [% of length].
_DE_LEVA_MALE: dict[str, tuple[str, float, float, float, tuple[float, float, float]]] = {
    "head": ("VERT-CERV", 242.9, 6.94, 50.02, (30.3, 31.5, 26.1)),
    "upper_trunk": ("CERV-XYPH", 242.1, 15.96, 50.66, (50.5, 32.0, 46.5)),
    "middle_trunk": ("XYPH-OMPH", 215.5, 16.33, 45.02, (48.2, 38.3, 46.8)),
    "lower_trunk": ("OMPH-MIDH", 145.7, 11.17, 61.15, (61.5, 55.1, 58.7)),
    "upper_arm": ("SJC-EJC", 281.7, 2.71, 57.72, (28.5, 26.9, 15.8)),
    "forearm": ("EJC-WJC", 268.9, 1.62, 45.74, (27.6, 26.5, 12.1)),
    "hand": ("WJC-DAC3", 187.9, 0.61, 36.24, (28.8, 23.5, 18.4)),
    "thigh": ("HJC-KJC", 422.2, 14.16, 40.95, (32.9, 32.9, 14.9)),
    "shank": ("KJC-LMAL", 434.0, 4.33, 44.59, (25.5, 24.9, 10.3)),
    "foot": ("HEEL-TTIP", 258.1, 1.37, 44.15, (25.7, 24.5, 12.4)),
}
_HEAD_VERT_TO_GONION_MM = 203.3  # de Leva's alternative head segment
_CERV_TO_SUPR_MM = 603.3 - 531.9  # de Leva's trunk measured from C7 and from the suprasternale

# Drillis & Contini (1966), fractions of body height.
_HIP_WIDTH, _SHOULDER_WIDTH, _FOOT_WIDTH, _ANKLE_HEIGHT = 0.191, 0.259, 0.055, 0.039

_CLOSURE = 1.0 / (
    sum(_DE_LEVA_MALE[s][1] for s in ("head", "upper_trunk", "middle_trunk", "lower_trunk", "thigh", "shank"))
    / _DE_LEVA_STATURE_MM
    + _ANKLE_HEIGHT
)

# Modelling choices (see the module docstring).
_PELVIS_CUT, _LUMBAR_CUT = 0.6, 0.5
_SHOULDER_SHARE = 0.10  # of the upper-trunk mass, per side
STERNOCLAVICULAR_SEPARATION = 0.03  # distance between the two sternoclavicular joints, of body height
ANKLE_FROM_HEEL = 0.20  # ankle joint above this point of the heel-to-toe-tip line, of foot length
BALL_FROM_HEEL = 0.73  # ball of the foot (metatarsophalangeal joints), of foot length
BALL_HEIGHT = 0.35  # height of the ball joint above the sole, of the ankle height


def _de_leva(name: str, from_top: bool = False) -> Segment:
    """A de Leva segment; `from_top` flips the COM for segments whose proximal end is the lower one."""
    _, length_mm, mass_pct, com_pct, radii_pct = _DE_LEVA_MALE[name]
    com = com_pct / 100.0
    return Segment(
        length=length_mm / _DE_LEVA_STATURE_MM * _CLOSURE,
        mass=mass_pct / 100.0,
        com=1.0 - com if from_top else com,
        gyration=tuple(r / 100.0 for r in radii_pct),
    )


def _split(segment: Segment, cut: float) -> tuple[Segment, Segment]:
    """Cut a segment at `cut` (of its length, from the proximal end) into a proximal and a distal part."""
    fractions = (cut, 1.0 - cut)
    midpoints = (cut / 2.0, (1.0 + cut) / 2.0)
    distal_share = (segment.com - midpoints[0]) / (midpoints[1] - midpoints[0])
    if not 0.0 < distal_share < 1.0:
        raise ValueError(f"cannot cut at {cut}: the COM at {segment.com} lies outside the part midpoints")
    sag, trans, long_ = segment.spread()
    parts = []
    for fraction, share in zip(fractions, (1.0 - distal_share, distal_share), strict=True):
        # cross-sectional spreads keep their absolute size; the longitudinal one scales with the part
        s_sag, s_trans = sag / fraction, trans / fraction
        gyration = (math.hypot(s_trans, long_), math.hypot(s_sag, long_), math.hypot(s_sag, s_trans))
        parts.append(Segment(segment.length * fraction, segment.mass * share, 0.5, gyration))
    return parts[0], parts[1]


def _cylinder(length: float, mass: float, diameter_over_length: float) -> Segment:
    """A solid cylinder with its COM at mid-length."""
    radius = diameter_over_length / 2.0
    across = math.sqrt((3.0 * radius * radius + 1.0) / 12.0)
    return Segment(length, mass, 0.5, (across, across, radius / math.sqrt(2.0)))


def _xsens_segments() -> dict[str, Segment]:
    pelvis, l5 = _split(_de_leva("lower_trunk", from_top=True), _PELVIS_CUT)
    l3, t12 = _split(_de_leva("middle_trunk", from_top=True), _LUMBAR_CUT)
    upper_trunk = _de_leva("upper_trunk", from_top=True)
    neck_cut = 1.0 - _HEAD_VERT_TO_GONION_MM / _DE_LEVA_MALE["head"][1]
    neck, head = _split(_de_leva("head", from_top=True), neck_cut)
    foot, toe = _split(_de_leva("foot"), BALL_FROM_HEEL)
    upper_arm = _de_leva("upper_arm")
    shoulder_separation = _SHOULDER_WIDTH * _CLOSURE - 2.0 * upper_arm.cylinder_radius()
    shoulder_mass = _SHOULDER_SHARE * upper_trunk.mass
    return {
        "Pelvis": pelvis,
        "L5": l5,
        "L3": l3,
        "T12": t12,
        "T8": replace(upper_trunk, mass=upper_trunk.mass - 2.0 * shoulder_mass),
        "Neck": neck,
        "Head": head,
        "Shoulder": _cylinder((shoulder_separation - STERNOCLAVICULAR_SEPARATION) / 2.0, shoulder_mass, 0.5),
        "UpperArm": upper_arm,
        "ForeArm": _de_leva("forearm"),
        "Hand": _de_leva("hand"),
        "UpperLeg": _de_leva("thigh"),
        "LowerLeg": _de_leva("shank"),
        "Foot": foot,
        "Toe": toe,
    }


SEGMENTS: dict[str, Segment] = _xsens_segments()
"""Parameters per Xsens segment type (side-less names: "Shoulder" stands for RightShoulder and
LeftShoulder). Foot and Toe lengths run along the sole from the heel and from the ball."""

BODY_DIMENSIONS: dict[str, float] = {
    "hip_width": _HIP_WIDTH * _CLOSURE,
    "shoulder_width": _SHOULDER_WIDTH * _CLOSURE,
    "foot_length": _de_leva("foot").length,  # Drillis & Contini give 0.152
    "foot_width": _FOOT_WIDTH * _CLOSURE,
    "ankle_height": _ANKLE_HEIGHT * _CLOSURE,
}
"""Body dimensions as fractions of body height, after the stature closure."""

HIP_JOINT_SEPARATION = BODY_DIMENSIONS["hip_width"] - 2.0 * SEGMENTS["UpperLeg"].cylinder_radius()
STERNOCLAVICULAR_DROP = _CERV_TO_SUPR_MM / _DE_LEVA_STATURE_MM * _CLOSURE
"""Height of C7 above the sternoclavicular joints (suprasternale level), of body height."""


def segment(name: str) -> Segment:
    """Parameters of an Xsens segment by full name (``RightUpperArm``) or side-less type (``UpperArm``)."""
    for side in ("Right", "Left"):
        if name.startswith(side) and name[len(side) :] in SEGMENTS:
            return SEGMENTS[name[len(side) :]]
    try:
        return SEGMENTS[name]
    except KeyError:
        raise ValueError(f"unknown Xsens segment {name!r}; types are {', '.join(SEGMENTS)}") from None
