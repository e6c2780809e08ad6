"""Human66 and Human48 URDF models scaled to a subject's height and mass (Rapetti et al. 2020, sec. 4.2).

Both models have the 23 physical links of the Xsens MVN model, connected by revolute joints through
zero-size massless dummy links (``<child>_f1``, ``<child>_f2``); joints are named ``<xsens joint>_rot<axis>``.

* Human66: every Xsens joint is spherical, three revolute joints ``_rotx``, ``_roty``, ``_rotz`` in that
  order, limits +-pi: 66 DoFs, 23 + 44 links.
* Human48: 48 DoFs with anatomical joint limits, ordered proximal to distal as in the clinical angle
  sequences (spine and hip: flexion, lateral bending/abduction, axial rotation; elbow: flexion, then
  pronation); the ball of the foot is fixed. See `_HUMAN48_DOFS`.

Conventions: REP 103 (x forward, y left, z up, metres). Each link frame has its origin at the link's
proximal joint; the Pelvis origin is the midpoint of the hip joints. In the zero configuration the subject
stands in T-pose (arms horizontal along +-y, palms down, legs straight, feet flat, toes forward) and every
link frame is aligned with the Pelvis frame, as Xsens segment frames are after calibration. The soles lie
at z = -pelvis_height(subject) in the Pelvis frame. Segment parameters: `dynik_ros.models.anthropometry`.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from urdf_parser_py import urdf

from dynik_ros.models.anthropometry import (
    ANKLE_FROM_HEEL,
    BALL_FROM_HEEL,
    BALL_HEIGHT,
    BODY_DIMENSIONS,
    HIP_JOINT_SEPARATION,
    STERNOCLAVICULAR_DROP,
    STERNOCLAVICULAR_SEPARATION,
    segment,
)
from dynik_ros.models.segments import XSENS_SEGMENTS

XSENS_PARENT: dict[str, str] = {
    "L5": "Pelvis", "L3": "L5", "T12": "L3", "T8": "T12", "Neck": "T8", "Head": "Neck",
    "RightShoulder": "T8", "RightUpperArm": "RightShoulder",
    "RightForeArm": "RightUpperArm", "RightHand": "RightForeArm",
    "LeftShoulder": "T8", "LeftUpperArm": "LeftShoulder",
    "LeftForeArm": "LeftUpperArm", "LeftHand": "LeftForeArm",
    "RightUpperLeg": "Pelvis", "RightLowerLeg": "RightUpperLeg",
    "RightFoot": "RightLowerLeg", "RightToe": "RightFoot",
    "LeftUpperLeg": "Pelvis", "LeftLowerLeg": "LeftUpperLeg",
    "LeftFoot": "LeftLowerLeg", "LeftToe": "LeftFoot",
}  # fmt: skip
"""Child link -> parent link."""

XSENS_JOINTS: dict[str, str] = {
    "L5": "jL5S1", "L3": "jL4L3", "T12": "jL1T12", "T8": "jT9T8", "Neck": "jT1C7", "Head": "jC1Head",
    **{
        f"{side}{child}": f"j{side}{joint}"
        for side in ("Right", "Left")
        for child, joint in (
            ("Shoulder", "T4Shoulder"), ("UpperArm", "Shoulder"), ("ForeArm", "Elbow"), ("Hand", "Wrist"),
            ("UpperLeg", "Hip"), ("LowerLeg", "Knee"), ("Foot", "Ankle"), ("Toe", "BallFoot"),
        )
    },
}  # fmt: skip
"""Child link -> Xsens joint connecting it to its parent (22 joints)."""

HUMAN_KINDS: tuple[str, ...] = ("human66", "human48")

_Dof = tuple[str, float, float]  # rotation axis, lower and upper limit

# Human48 joint limits [deg] for the midline and the Left side, in chain order; the Right side is the
# mirror image (x and z limits negated and swapped). Signs: +y tilts a segment forward (spine flexion,
# hip extension, knee flexion, ankle plantarflexion); +x bends the spine to the right, raises the left
# arm and clavicle, extends the left wrist, abducts the left hip and everts the left foot; +z turns to the
# left (spine), moves the left arm and clavicle backwards (horizontal extension, retraction), extends the
# left elbow and deviates the left wrist to the ulnar side; +y at the shoulder is internal rotation and at
# the elbow pronation.
# Sources: AAOS, Greene & Heckman (1994) The Clinical Measurement of Joint Motion, and the neutral-zero
# method (Gerhardt & Russe 1975; Ryf & Weymann 1999), rounded: shoulder flexion 135 (horizontal) /
# extension 60, abduction 180 / adduction 45 (both from the side, i.e. T-pose -90 deg), internal 70 /
# external rotation 90; clavicle elevation 40 / depression 10, protraction 30 / retraction 25; elbow
# flexion 150 / hyperextension 10, pronation 80 / supination 80; wrist flexion 80 / extension 70, ulnar
# 30 / radial deviation 20; hip flexion 120 / extension 30, abduction 45 / adduction 30, rotation 45
# each way; knee flexion 135 / hyperextension 10; ankle plantarflexion 50 / dorsiflexion 20, inversion
# 35 / eversion 15. Spine totals from AAOS, thoracolumbar (flexion 80, extension 25, lateral bending 35,
# rotation 45; cf. Moll & Wright 1971 for the lumbar spine) and cervical (flexion 45, extension 45,
# lateral bending 45, rotation 60), shared among the Xsens joints with the lumbar levels taking most
# flexion and the thoracic and upper cervical levels most rotation (White & Panjabi 1990).
_HUMAN48_DOFS: dict[str, tuple[_Dof, ...]] = {
    "jL5S1": (("y", -8, 25), ("x", -8, 8), ("z", -7, 7)),
    "jL4L3": (("y", -7, 25), ("x", -9, 9), ("z", -7, 7)),
    "jL1T12": (("y", -5, 15), ("x", -9, 9), ("z", -13, 13)),
    "jT9T8": (("y", -5, 15), ("x", -9, 9), ("z", -18, 18)),
    "jT1C7": (("y", -20, 25), ("x", -35, 35), ("z", -25, 25)),
    "jC1Head": (("y", -25, 20), ("x", -10, 10), ("z", -35, 35)),
    "jLeftT4Shoulder": (("z", -30, 25), ("x", -10, 40)),
    "jLeftShoulder": (("x", -135, 90), ("y", -90, 70), ("z", -135, 60)),
    "jLeftElbow": (("z", -150, 10), ("y", -80, 80)),
    "jLeftWrist": (("x", -80, 70), ("z", -20, 30)),
    "jLeftHip": (("y", -120, 30), ("x", -30, 45), ("z", -45, 45)),
    "jLeftKnee": (("y", -10, 135),),
    "jLeftAnkle": (("y", -20, 50), ("x", -35, 15)),
    "jLeftBallFoot": (),
}
_HUMAN66_DOFS: tuple[_Dof, ...] = tuple((axis, -math.pi, math.pi) for axis in "xyz")
_VELOCITY_LIMIT = 10.0  # rad/s
_EFFORT_LIMIT = 100.0  # N m, nominal: the models are for kinematics
_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
_SIDES = {"Right": -1.0, "Left": 1.0}
_TRUNK = ("Pelvis", "L5", "L3", "T12", "T8")
_ARM = ("Shoulder", "UpperArm", "ForeArm", "Hand")
# link axes (x, y, z) <- index into (sagittal, transverse, longitudinal) anthropometric axes
_AXIS_ORDER = {"vertical": (0, 1, 2), "arm": (1, 2, 0), "foot": (2, 1, 0)}
_MATERIALS = {"body": (0.8, 0.7, 0.6, 1.0), "right": (0.85, 0.45, 0.4, 1.0), "left": (0.4, 0.55, 0.85, 1.0)}

Vec3 = tuple[float, float, float]


@dataclass(frozen=True)
class Subject:
    """Body height [m] and mass [kg] the models are scaled to; `name` tags the generated files."""

    height: float = 1.75
    mass: float = 75.0
    name: str = "default"

    def __post_init__(self) -> None:
        for what, value, low, high, unit in (
            ("height", self.height, 0.5, 2.5, "m"),
            ("mass", self.mass, 5, 300, "kg"),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"subject {what} must be a number within {low}-{high} {unit}, got {value!r}")
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", self.name):
            raise ValueError(
                f"subject name must be letters, digits, '_' or '-' (it names files), got {self.name!r}"
            )


def pelvis_height(subject: Subject) -> float:
    """Height of the Pelvis origin (hip-joint midpoint) above the soles when standing, in metres."""
    fractions = segment("UpperLeg").length + segment("LowerLeg").length + BODY_DIMENSIONS["ankle_height"]
    return subject.height * fractions


def _side_and_type(name: str) -> tuple[float, str]:
    for side, sign in _SIDES.items():
        if name.startswith(side):
            return sign, name[len(side) :]
    return 0.0, name


def _layout(name: str) -> str:
    kind = _side_and_type(name)[1]
    return "arm" if kind in _ARM else "foot" if kind in ("Foot", "Toe") else "vertical"


def _direction(name: str) -> Vec3:
    """Unit vector from a segment's proximal joint towards its distal end, in the zero configuration."""
    side, kind = _side_and_type(name)
    if kind in ("UpperLeg", "LowerLeg"):
        return (0.0, 0.0, -1.0)
    return {"arm": (0.0, side, 0.0), "foot": (1.0, 0.0, 0.0), "vertical": (0.0, 0.0, 1.0)}[_layout(name)]


def _to_link_axes(name: str, values: Sequence[float]) -> Vec3:
    """(sagittal, transverse, longitudinal) quantities of a segment, reordered to link (x, y, z)."""
    return tuple(values[i] for i in _AXIS_ORDER[_layout(name)])


def _scaled(vector: Sequence[float], factor: float) -> Vec3:
    return tuple(round(factor * v, 9) + 0.0 for v in vector)


def _joint_origin(name: str, height: float) -> Vec3:
    """Position of a segment's proximal joint in its parent's frame."""
    side, kind = _side_and_type(name)
    if kind == "Shoulder":
        return _scaled(
            (0.0, side * STERNOCLAVICULAR_SEPARATION / 2, segment("T8").length - STERNOCLAVICULAR_DROP),
            height,
        )
    if kind == "UpperLeg":
        return _scaled((0.0, side * HIP_JOINT_SEPARATION / 2, 0.0), height)
    if kind == "Toe":
        foot_length, ankle_height = BODY_DIMENSIONS["foot_length"], BODY_DIMENSIONS["ankle_height"]
        return _scaled(
            ((BALL_FROM_HEEL - ANKLE_FROM_HEEL) * foot_length, 0.0, (BALL_HEIGHT - 1) * ankle_height), height
        )
    parent = XSENS_PARENT[name]
    return _scaled(_direction(parent), segment(parent).length * height)


def _com(name: str, height: float) -> Vec3:
    """Centre of mass in the link frame: along the segment; the foot's sits mid-way up the ankle height."""
    seg = segment(name)
    if _side_and_type(name)[1] == "Foot":
        foot_length, ankle_height = BODY_DIMENSIONS["foot_length"], BODY_DIMENSIONS["ankle_height"]
        return _scaled((seg.com * seg.length - ANKLE_FROM_HEEL * foot_length, 0.0, -ankle_height / 2), height)
    return _scaled(_direction(name), seg.com * seg.length * height)


def _shape(name: str, height: float) -> tuple[object, Vec3, Vec3]:
    """Visual and collision shape, its centre and orientation (rpy) in the link frame.

    Head: sphere touching the vertex; trunk and hands: boxes with the segment's mass spread across it
    (a uniform box of side sqrt(12) s); feet: boxes from the sole, as wide as the foot; other segments:
    cylinders (`Segment.cylinder_radius`), the neck half as thick as the head.
    """
    seg, kind = segment(name), _side_and_type(name)[1]
    length = seg.length * height
    centre = _scaled(_direction(name), length / 2)
    if kind == "Head":
        return urdf.Sphere(radius=round(length / 2, 9)), centre, (0.0, 0.0, 0.0)
    if kind in ("Foot", "Toe"):
        foot_length, ankle_height = BODY_DIMENSIONS["foot_length"], BODY_DIMENSIONS["ankle_height"]
        if kind == "Foot":
            thickness = ankle_height
            centre = _scaled((seg.length / 2 - ANKLE_FROM_HEEL * foot_length, 0.0, -ankle_height / 2), height)
        else:
            thickness = 2 * BALL_HEIGHT * ankle_height
        return (
            urdf.Box(list(_scaled((seg.length, BODY_DIMENSIONS["foot_width"], thickness), height))),
            centre,
            (0.0,) * 3,
        )
    if kind in _TRUNK or kind == "Hand":
        size = [math.sqrt(12.0) * s * length for s in _to_link_axes(name, seg.spread())]
        size[_AXIS_ORDER[_layout(name)].index(2)] = length
        return urdf.Box(list(_scaled(size, 1.0))), centre, (0.0, 0.0, 0.0)
    radius = (segment("Head").length / 4 if kind == "Neck" else seg.cylinder_radius()) * height
    rpy = (math.pi / 2, 0.0, 0.0) if kind in _ARM else (0.0, 0.0, 0.0)
    return urdf.Cylinder(radius=round(radius, 9), length=round(length, 9)), centre, rpy


def _physical_link(name: str, subject: Subject) -> urdf.Link:
    seg = segment(name)
    mass = seg.mass * subject.mass
    radii = _to_link_axes(name, seg.gyration)
    moments = _scaled([r * r for r in radii], mass * (seg.length * subject.height) ** 2)
    side = _side_and_type(name)[0]
    material = urdf.LinkMaterial(name="left" if side > 0 else "right" if side < 0 else "body")
    geometry, centre, rpy = _shape(name, subject.height)
    return urdf.Link(
        name=name,
        inertial=urdf.Inertial(
            mass=round(mass, 9),
            inertia=urdf.Inertia(ixx=moments[0], iyy=moments[1], izz=moments[2]),
            origin=urdf.Pose(xyz=list(_com(name, subject.height)), rpy=[0.0, 0.0, 0.0]),
        ),
        visual=urdf.Visual(
            geometry=geometry, material=material, origin=urdf.Pose(xyz=list(centre), rpy=list(rpy))
        ),
        collision=urdf.Collision(geometry=geometry, origin=urdf.Pose(xyz=list(centre), rpy=list(rpy))),
    )


def _mirror(dofs: tuple[_Dof, ...]) -> tuple[_Dof, ...]:
    """Limits of the other body side: rotations about x and z change sign under the y -> -y reflection."""
    return tuple(
        (axis, -upper, -lower) if axis in "xz" else (axis, lower, upper) for axis, lower, upper in dofs
    )


def _dofs(kind: str, joint: str) -> tuple[_Dof, ...]:
    """Revolute joints (axis, lower, upper [rad]) modelling an Xsens joint, proximal first."""
    if kind == "human66":
        return _HUMAN66_DOFS
    if joint.startswith("jRight"):
        return _mirror(_dofs(kind, "jLeft" + joint[len("jRight") :]))
    return tuple(
        (axis, math.radians(lower), math.radians(upper)) for axis, lower, upper in _HUMAN48_DOFS[joint]
    )


def _robot(kind: str, subject: Subject) -> urdf.Robot:
    robot = urdf.Robot(name=kind)
    for material, rgba in _MATERIALS.items():
        robot.add_aggregate("material", urdf.Material(name=material, color=urdf.Color(list(rgba))))
    robot.add_link(_physical_link("Pelvis", subject))
    for child in XSENS_SEGMENTS[1:]:
        joint, parent = XSENS_JOINTS[child], XSENS_PARENT[child]
        origin = urdf.Pose(xyz=list(_joint_origin(child, subject.height)), rpy=[0.0, 0.0, 0.0])
        dofs = _dofs(kind, joint)
        if not dofs:
            robot.add_joint(
                urdf.Joint(name=joint, parent=parent, child=child, joint_type="fixed", origin=origin)
            )
        for i, (axis, lower, upper) in enumerate(dofs):
            link = child if i == len(dofs) - 1 else f"{child}_f{i + 1}"
            robot.add_joint(
                urdf.Joint(
                    name=f"{joint}_rot{axis}",
                    parent=parent,
                    child=link,
                    joint_type="revolute",
                    axis=list(_AXES[axis]),
                    origin=origin if i == 0 else None,
                    limit=urdf.JointLimit(
                        effort=_EFFORT_LIMIT, velocity=_VELOCITY_LIMIT, lower=lower, upper=upper
                    ),
                )
            )
            if link != child:
                robot.add_link(urdf.Link(name=link))
            parent = link
        robot.add_link(_physical_link(child, subject))
    return robot


def human_urdf(kind: str, subject: Subject = Subject()) -> str:
    """URDF text of the Human66 or Human48 model scaled to `subject` (robot name = `kind`)."""
    if kind not in HUMAN_KINDS:
        raise ValueError(f"unknown human model kind {kind!r}; valid kinds: {', '.join(HUMAN_KINDS)}")
    header, body = _robot(kind, subject).to_xml_string().split("\n", 1)
    note = (
        f"<!-- Generated by dynik_ros.models.human (dynik-human-urdf) for subject '{subject.name}': "
        f"height {subject.height:g} m, mass {subject.mass:g} kg. Do not edit; regenerate. -->"
    )
    return f"{header}\n{note}\n{body.rstrip()}\n"


def write_human_urdf(kind: str, subject: Subject, path: str | Path) -> Path:
    """Write `human_urdf(kind, subject)` to `path` (parent directories are created); returns the path."""
    text = human_urdf(kind, subject)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``dynik-human-urdf``: writes ``<kind>.urdf``, or ``<kind>_<name>.urdf`` for a named
    subject, into ``--out``."""
    parser = argparse.ArgumentParser(
        prog="dynik-human-urdf",
        description="Write the Human66/Human48 URDF models (Rapetti et al. 2020, sec. 4.2) for a subject.",
    )
    parser.add_argument(
        "--kind", choices=(*HUMAN_KINDS, "all"), default="all", help="model to write (default: all)"
    )
    parser.add_argument(
        "--height", type=float, default=Subject.height, help="body height in m (default: %(default)s)"
    )
    parser.add_argument(
        "--mass", type=float, default=Subject.mass, help="body mass in kg (default: %(default)s)"
    )
    parser.add_argument(
        "--name", default=Subject.name, help="subject name, appended to file names unless 'default'"
    )
    parser.add_argument("--out", type=Path, default=Path("."), help="output directory (default: current)")
    args = parser.parse_args(argv)
    try:
        subject = Subject(height=args.height, mass=args.mass, name=args.name)
    except ValueError as exc:
        parser.error(str(exc))
    for kind in HUMAN_KINDS if args.kind == "all" else (args.kind,):
        stem = kind if subject.name == Subject.name else f"{kind}_{subject.name}"
        path = write_human_urdf(kind, subject, args.out / f"{stem}.urdf")
        print(f"wrote {path} ({kind}, {subject.height:g} m, {subject.mass:g} kg)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
