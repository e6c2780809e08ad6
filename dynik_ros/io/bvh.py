"""BVH motion files: parser, forward kinematics, mapping onto the 23 Xsens segments, writer (ROS-free).

Parsing: any hierarchy (``ROOT``/``JOINT``/``End Site``, ``OFFSET``, ``CHANNELS`` in any order, 3- or
6-channel joints), ``MOTION`` with ``Frames:`` and ``Frame Time:``. A joint's local transform is its
translation -- its position channels when it has them (they replace the ``OFFSET``, as exporters of
6-channel joints write them), its ``OFFSET`` otherwise -- followed by its rotation channels composed in
the listed order (``Zrotation Xrotation Yrotation`` is ``Rz Rx Ry``), degrees.

World frame: BVH is Y-up; the poses are turned to REP 103 Z-up with ``x_new = z, y_new = x, z_new = y``
(a file whose rest skeleton already stands along z is taken as Z-up and left as it is). Units: the
stature from the legs (:func:`dynik_ros.io.capture_checks.leg_stature`) picks metres, centimetres,
inches, millimetres or CMU's ASF unit (inches / 0.45) -- a human is 1.4-2.1 m, and no two of these
ratios are close enough to be confused -- ``unit=`` overrides.

Mapping (``config/skeletons/*.yaml``, or a YAML path of the same form): ``segments: {Xsens segment: BVH
joint}``. The skeleton is detected from the joint names (most mapped joints present; a ``prefix:`` such
as ``mixamorig:`` is ignored). Segment poses: the segment's origin is its joint's world position; its
orientation is the joint's world rotation relative to the reference pose, times the segment's orientation
in the reference pose, ``S_j(t) = W_j(t) W_j(ref)^T A_j``. The reference is the rest pose (all channels
zero), or the frame given as ``tpose_frame`` when the rest pose is not a T-pose. In a T-pose every Xsens
segment frame is aligned with the world (x forward, z up) turned to the subject's heading, so
``A_j = Rz(heading)``. When the reference is not a T-pose (a limb more than 15 deg off), ``A_j`` also
carries the shortest rotation taking the reference bone direction onto its T-pose direction (twist about
the bone left as in the reference) with a notice: pass a T-pose frame for exact frames.

Segments the skeleton lacks are derived, with one notice listing them: a segment between two mapped ones
of its chain (spine L3/T12, a clavicle, a neck) is interpolated, position by the Human66 proportions of
the chain, orientation by slerp; a segment past the last mapped one (toes, hands, head) sits at the Human66
offset from it, scaled by the stature, with its orientation (a toe along the foot's forward axis).

Velocities: linear by a Savitzky-Golay filter (cubic, 0.2 s window) differentiated; angular from the
SO(3) log of ``R_{k+1} R_{k-1}^T`` (world frame), then smoothed by the same filter: noise is not amplified
the way a raw finite difference does.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.io.exact_products import identity_times, turned_matrices, turned_vectors
from dynik_ros.io.human_motion import HumanMotion, Pose, savgol, smoothed_twists  # noqa: F401 - re-exported
from dynik_ros.io.skeleton_map import (
    XSENS_PARENT,
    SkeletonMap,
    SkeletonMapError,
    _heading,
    _human66_tpose,
    _mapped_descendant,
    _resolve,
    _rz,
    _shortest_rotation,
    builtin_skeleton_maps,
    complete_segments,
    detect_skeleton,
    load_skeleton_map,
)
from dynik_ros.models.segments import XSENS_SEGMENTS

Y_UP_TO_Z_UP = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
Y_UP_ORDER = (2, 0, 1)  # Y_UP_TO_Z_UP as a permutation: (turn v)_a = v[Y_UP_ORDER[a]]
UNITS = {"m": 1.0, "cmu": 0.0254 / 0.45, "cm": 0.01, "inch": 0.0254, "mm": 0.001}  # cmu: CMU's ASF unit


class BvhError(ValueError):
    """A BVH file that cannot be read: the file, the line or frame and the reason, on one line."""


__all__ = [
    "BvhError", "SkeletonMap", "SkeletonMapError", "builtin_skeleton_maps", "detect_skeleton",
    "forward_kinematics", "load_skeleton_map", "parse_bvh", "read_bvh", "smoothed_twists", "write_bvh",
]  # fmt: skip


@dataclass
class BvhJoint:
    name: str
    parent: int  # -1 for a root
    offset: np.ndarray
    channels: list[str] = field(default_factory=list)
    end_site: np.ndarray | None = None  # offset of the End Site, if any
    first_channel: int = 0  # column of the joint's first channel in a frame line


@dataclass
class BvhData:
    """A parsed BVH file: joints in file order (parents first), channel values ``(N, C)``, frame time."""

    joints: list[BvhJoint]
    values: np.ndarray
    frame_time: float
    path: str = ""

    @property
    def names(self) -> list[str]:
        return [j.name for j in self.joints]


# ---------------------------------------------------------------------------- parsing
def parse_bvh(path: str | Path) -> BvhData:
    """Parse a BVH file (see the module docstring). Raises :class:`BvhError` naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BvhError(f"{path}: cannot read: {exc}") from None
    lines = text.splitlines()
    end = next((n for n, line in enumerate(lines) if line.strip().upper() == "MOTION"), len(lines) - 1)
    hierarchy = enumerate(lines[: end + 1])
    tokens: list[tuple[str, int]] = [(tok, n + 1) for n, line in hierarchy for tok in line.split()]
    pos = 0

    def fail(message: str, line: int | None = None) -> BvhError:
        return BvhError(f"{path}: line {line}: {message}" if line else f"{path}: {message}")

    def take() -> tuple[str, int]:
        nonlocal pos
        if pos >= len(tokens):
            raise fail("unexpected end of file in the HIERARCHY section (truncated?)")
        pos += 1
        return tokens[pos - 1]

    def number(what: str) -> float:
        tok, line = take()
        try:
            value = float(tok)
        except ValueError:
            raise fail(f"{what}: '{tok}' is not a number", line) from None
        return value

    if not tokens or tokens[0][0].upper() != "HIERARCHY":
        first = tokens[0][0] if tokens else "(empty file)"
        raise fail(f"not a BVH file: starts with '{first[:40]}', expected HIERARCHY")
    pos = 1
    joints: list[BvhJoint] = []
    defined: dict[str, int] = {}  # joint name -> line (a skeleton map names joints: one name, one joint)
    n_channels = 0
    stack: list[int] = []
    while True:
        tok, line = take()
        upper = tok.upper()
        if upper in ("ROOT", "JOINT"):
            name, _ = take()
            if upper == "JOINT" and not stack:
                raise fail(f"JOINT {name} outside any ROOT", line)
            if name in defined:
                raise fail(
                    f"joint '{name}' is defined twice (line {defined[name]} and line {line}): a skeleton "
                    "map could not tell them apart",
                    line,
                )
            defined[name] = line
            brace, bline = take()
            if brace != "{":
                raise fail(f"expected '{{' after {upper} {name}, got '{brace}'", bline)
            joints.append(BvhJoint(name, stack[-1] if stack else -1, np.zeros(3)))
            stack.append(len(joints) - 1)
        elif upper == "END":
            take()  # "Site"
            brace, bline = take()
            if brace != "{" or not stack:
                raise fail("malformed End Site", bline)
            tok2, l2 = take()
            if tok2.upper() != "OFFSET":
                raise fail(f"End Site without OFFSET (got '{tok2}')", l2)
            joints[stack[-1]].end_site = np.array([number("End Site OFFSET") for _ in range(3)])
            close, cline = take()
            if close != "}":
                raise fail(f"expected '}}' closing End Site, got '{close}'", cline)
        elif upper == "OFFSET":
            if not stack:
                raise fail("OFFSET outside a joint", line)
            joints[stack[-1]].offset = np.array([number("OFFSET") for _ in range(3)])
        elif upper == "CHANNELS":
            if not stack:
                raise fail("CHANNELS outside a joint", line)
            count = int(number("CHANNELS count"))
            if not 0 <= count <= 6:
                raise fail(f"CHANNELS count {count} (0..6 expected)", line)
            channels = []
            for _ in range(count):
                ch, cl = take()
                key = ch.lower()
                if key not in {f"{a}{k}" for a in "xyz" for k in ("position", "rotation")}:
                    raise fail(f"unknown channel '{ch}' of joint {joints[stack[-1]].name}", cl)
                channels.append(key)
            joint = joints[stack[-1]]
            joint.channels, joint.first_channel = channels, n_channels
            n_channels += count
        elif tok == "}":
            if not stack:
                raise fail("unbalanced '}'", line)
            stack.pop()
        elif upper == "MOTION":
            if stack:
                raise fail(f"MOTION inside joint {joints[stack[-1]].name} (unbalanced braces)", line)
            break
        else:
            raise fail(f"unexpected '{tok}' in the HIERARCHY section", line)
    if not joints:
        raise fail("no ROOT joint")

    # MOTION: "Frames: N" and "Frame Time: dt", then N lines of n_channels numbers
    motion_line = line
    header = {}
    body_start = None
    for n in range(motion_line, min(motion_line + 6, len(lines))):
        m = re.match(r"\s*(Frames|Frame Time)\s*:\s*(\S+)", lines[n], re.IGNORECASE)
        if m:
            header[m.group(1).lower()] = (m.group(2), n + 1)
            body_start = n + 1
    if "frames" not in header or "frame time" not in header:
        raise fail("MOTION lacks 'Frames:' or 'Frame Time:'", motion_line)
    try:
        n_frames = int(header["frames"][0])
        frame_time = float(header["frame time"][0])
    except ValueError:
        raise fail("bad 'Frames:' or 'Frame Time:' value", header["frames"][1]) from None
    if not (frame_time > 0 and math.isfinite(frame_time)):
        raise fail(f"Frame Time {frame_time} must be positive", header["frame time"][1])
    values = _frame_values(lines[body_start:], n_frames, n_channels)
    if values is not None:
        return BvhData(joints, values, frame_time, str(path))
    rows = []  # (a file the fast path does not read: line by line, naming the first fault)
    for n in range(body_start, len(lines)):
        if not lines[n].strip():
            continue
        try:
            row = np.array(lines[n].split(), dtype=float)
        except ValueError:
            raise fail(f"frame {len(rows)}: a value is not a number", n + 1) from None
        if row.size != n_channels:
            raise fail(
                f"frame {len(rows)}: {row.size} values, the hierarchy has {n_channels} channels"
                + (" (truncated?)" if n == len(lines) - 1 and row.size < n_channels else ""),
                n + 1,
            )
        rows.append(row)
    if len(rows) != n_frames:
        raise fail(
            f"'Frames: {n_frames}' but {len(rows)} frame lines"
            + (" (truncated?)" if len(rows) < n_frames else "")
        )
    if not rows:
        raise fail("no frames")
    values = np.array(rows).reshape(len(rows), n_channels)
    return BvhData(joints, values, frame_time, str(path))


def _frame_values(body: list[str], n_frames: int, n_channels: int) -> np.ndarray | None:
    """The frame lines' values read at once by numpy's C ``loadtxt`` (half the CPU of an array per line),
    or ``None`` (any error or warning, another shape, a non-finite value): :func:`parse_bvh` then reads line
    by line and names the fault. Both round a decimal to its nearest double (``test_io_bvh``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # ("input contained no data" is a warning)
            values = np.loadtxt(body, dtype=float, comments=None, ndmin=2)
    except Exception:  # noqa: BLE001 - whatever it is, the line-by-line reader reads it and says why
        return None
    return values if values.shape == (n_frames, n_channels) and np.isfinite(values).all() else None


# ---------------------------------------------------------------------------- kinematics
def _axis_rotations(axis: str, angles_deg: np.ndarray) -> np.ndarray:
    a = np.radians(angles_deg)
    c, s = np.cos(a), np.sin(a)
    r = np.zeros(a.shape + (3, 3))
    i = "xyz".index(axis)
    j, k = (i + 1) % 3, (i + 2) % 3
    r[..., i, i] = 1.0
    r[..., j, j], r[..., j, k], r[..., k, j], r[..., k, k] = c, -s, s, c
    return r


def forward_kinematics(data: BvhData, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """World positions ``(N, J, 3)`` and rotations ``(N, J, 3, 3)`` of every joint, in the file's frame and
    units. ``values`` default to the file's frames; ``np.zeros((1, C))`` gives the rest pose."""
    values = data.values if values is None else np.atleast_2d(values)
    n = len(values)
    nj = len(data.joints)
    pos = np.zeros((n, nj, 3))
    rot = np.zeros((n, nj, 3, 3))
    for j, joint in enumerate(data.joints):
        translation = np.broadcast_to(joint.offset, (n, 3)).copy()
        local = None  # the identity: its product with the first rotation is that rotation (identity_times)
        for c, ch in enumerate(joint.channels):
            column = values[:, joint.first_channel + c]
            if ch.endswith("position"):
                translation[:, "xyz".index(ch[0])] = column
            elif local is None:
                local = identity_times(_axis_rotations(ch[0], column))
            else:
                local = local @ _axis_rotations(ch[0], column)
        if local is None:
            local = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
        if joint.parent < 0:
            pos[:, j], rot[:, j] = translation, local
        else:
            rp = rot[:, joint.parent]
            pos[:, j] = pos[:, joint.parent] + np.einsum("nij,nj->ni", rp, translation)
            rot[:, j] = rp @ local
    return pos, rot


def _rest_values(data: BvhData) -> np.ndarray:
    """Channel values of the rest pose: rotations zero, position channels at the joints' OFFSET."""
    values = np.zeros((1, data.values.shape[1]))
    for joint in data.joints:
        for c, ch in enumerate(joint.channels):
            if ch.endswith("position"):
                values[0, joint.first_channel + c] = joint.offset["xyz".index(ch[0])]
    return values


def segment_rotations(world: np.ndarray, reference: np.ndarray, align: np.ndarray) -> np.ndarray:
    """``S_j(t) = W_j(t) W_j(ref)^T A_j`` of every frame (:func:`read_bvh`): ``world`` ``(N, L, 3, 3)``,
    ``reference`` and ``align`` ``(L, 3, 3)``. ``np.einsum("nlij,lkj,lkm->nlim", ...)``'s sums bit for bit
    (``test_io_bvh``): its terms ``(W_ij R_kj) A_km`` summed over ``j`` for each ``k``, then over ``k``, from
    +0 (a -0 term gives +0 as in einsum), as whole-array products over the frames (einsum's loop runs three
    elements at a time: 0.3 of 0.4 s on 60 s at 120 Hz).

    A reference and alignment that are all identities (a T-pose rest pose facing +x, most files) give
    ``W + 0``: each sum is ``W_im`` plus zeros, or zeros from +0, so the products are skipped (0.04 s)."""
    eye = np.eye(3)
    if (reference == eye).all() and (align == eye).all() and np.isfinite(world).all():
        return np.asarray(world, dtype=float) + 0.0
    frames = np.ascontiguousarray(np.transpose(world, (3, 2, 1, 0)), dtype=float)  # (j, i, L, N)
    ref = np.transpose(reference, (1, 2, 0))[..., None]  # (k, j, L, 1)
    columns = np.transpose(align, (1, 2, 0))[:, :, None, :, None]  # (k, m, 1, L, 1)
    out = np.zeros((3,) + frames.shape[1:])  # (m, i, L, N)
    for k in range(3):
        part = np.zeros(out.shape)
        for j in range(3):
            part += (frames[j] * ref[k, j]) * columns[k]
        out += part
    return np.ascontiguousarray(np.transpose(out, (3, 2, 1, 0)))


# ---------------------------------------------------------------------------- to the 23 segments
def read_bvh(
    path: str | Path,
    skeleton: str | Path | None = None,
    unit: str | None = None,
    up: str | None = None,
    tpose_frame: int | None = None,
    check: bool = True,
    smoothing_window: float = 0.2,
) -> HumanMotion:
    """Read a BVH file into a :class:`HumanMotion` of the 23 Xsens segments (module docstring).

    ``skeleton``: a map name (``cmu``, ``lafan1``, ``mixamo``, ``mvn``) or YAML path (default: detected);
    ``unit``: ``m``/``cmu``/``cm``/``inch``/``mm`` (default: detected from the stature); ``up``: ``y`` or
    ``z`` (default: detected from the rest skeleton); ``tpose_frame``: a frame where the subject stands
    in T-pose: ``motion.calibration["tpose"]``, and the reference of the segment frames when the rest pose
    is not a T-pose; frame 0 (where MVN's BVH export writes its T-pose) is then left out of the take.
    """
    data = parse_bvh(path)
    name = str(path)
    names = data.names
    if skeleton is None:
        skel, resolved = detect_skeleton(names)
    else:
        known = {s.name: s for s in builtin_skeleton_maps()}
        if str(skeleton) not in known and not Path(skeleton).is_file():
            raise SkeletonMapError(
                f"unknown skeleton map '{skeleton}': a built-in name ({', '.join(sorted(known))}) "
                "or a YAML file"
            )
        skel = known[str(skeleton)] if str(skeleton) in known else load_skeleton_map(skeleton)
        resolved = _resolve(skel, names)
        if "Pelvis" not in resolved:
            raise BvhError(f"{name}: skeleton map '{skel.name}' maps Pelvis to a joint the file lacks")
    notices: list[str] = []
    index = {n: i for i, n in enumerate(names)}
    mapped = [s for s in XSENS_SEGMENTS if s in resolved]
    cols = [index[resolved[s]] for s in mapped]

    from dynik_ros.io.capture_checks import CaptureError, require_finite

    require_finite(name, "channel value", data.values)
    pos_b, rot_b = forward_kinematics(data)
    rest_pos, rest_rot = forward_kinematics(data, _rest_values(data))
    if tpose_frame is not None and not 0 <= tpose_frame < len(data.values):
        raise BvhError(f"{name}: tpose_frame {tpose_frame} outside 0..{len(data.values) - 1}")

    # up axis and the turn to REP 103
    if up is None:
        pelvis_j = index[resolved["Pelvis"]]
        top = max(cols, key=lambda c: np.linalg.norm(rest_pos[0, c] - rest_pos[0, pelvis_j]))
        feet = [index[resolved[s]] for s in ("RightFoot", "LeftFoot") if s in resolved]
        span = np.abs(rest_pos[0, feet].mean(axis=0) - rest_pos[0, pelvis_j]) if feet else rest_pos[0, top]
        up = "z" if int(np.argmax(span)) == 2 else "y"
    order = Y_UP_ORDER if up == "y" else (0, 1, 2)

    def to_world(p: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``p @ turn.T, turn @ r @ turn.T`` with the axis turn a permutation: gathers, bit for bit."""
        return turned_vectors(p, order), turned_matrices(r, order)

    pos_w, rot_w = to_world(pos_b[:, cols], rot_b[:, cols])
    # the reference of the segment frames: the rest pose when it is a T-pose, else the T-pose frame if given
    from dynik_ros.io.capture_checks import POSE_WARN_DEG, pose_angles

    rest_p, rest_r = to_world(rest_pos[:, cols], rest_rot[:, cols])

    def t_pose_error(p: np.ndarray) -> dict[str, float]:
        positions = {s: p[i] for i, s in enumerate(mapped)}
        angles = pose_angles({s: (positions[s], _rz(_heading(positions))) for s in mapped})
        return {k: v for k, v in angles.items() if v > POSE_WARN_DEG}

    rest_off = t_pose_error(rest_p[0])
    if rest_off and tpose_frame is not None:
        ref_p, ref_r = pos_w[tpose_frame : tpose_frame + 1], rot_w[tpose_frame : tpose_frame + 1]
        which = f"frame {tpose_frame}"
    elif rest_off and _lying({s: rest_p[0, i] for i, s in enumerate(mapped)}):
        # a rest pose that is no standing posture at all (LAFAN1's: the root rotation stands it up, the legs
        # fold along the spine): the first frame, where the subject stands, is the reference instead
        ref_p, ref_r = pos_w[:1], rot_w[:1]
        which = "first frame (the rest pose lies: its trunk is more than 45 deg from the vertical)"
    else:
        ref_p, ref_r = rest_p, rest_r
        which = "rest pose"

    # units from the stature
    from dynik_ros.io.capture_checks import STATURE_RANGE, leg_stature

    stature_raw = leg_stature(pos_w, mapped)
    if unit is None:
        unit = _unit_from_stature(stature_raw, name)
    elif unit not in UNITS:
        raise BvhError(f"{name}: unit '{unit}' not one of {sorted(UNITS)}")
    scale = UNITS[unit]
    pos_w = pos_w * scale
    ref_p = ref_p * scale
    stature = stature_raw * scale if stature_raw is not None else 1.75
    if not STATURE_RANGE[0] <= stature <= STATURE_RANGE[1]:
        raise CaptureError(f"{name}: stature {stature:.2f} m from the legs in {unit}: not a human's")

    # segment frames: S_j(t) = W_j(t) W_j(ref)^T A_j
    ref_positions = {s: ref_p[0, i] for i, s in enumerate(mapped)}
    yaw = _heading(ref_positions)
    unturn = _rz(-yaw)
    tpose = _human66_tpose()
    off = t_pose_error(ref_p[0])
    align = {s: _rz(yaw) for s in mapped}
    if off:
        notices.append(
            f"{name}: the {which} is not a T-pose ({', '.join(f'{k} {v:.0f} deg' for k, v in off.items())}): "
            "segment frames turned by the shortest rotation onto the T-pose directions; pass a T-pose frame "
            "(tpose_frame) for exact frames"
        )
        for s in mapped:
            child = _mapped_descendant(s, resolved)
            if child is None:
                continue
            d = unturn @ (ref_positions[child] - ref_positions[s])
            e = tpose[child] - tpose[s]
            if np.linalg.norm(d) > 1e-9:
                q = _shortest_rotation(d, e)
                align[s] = _rz(yaw) @ q.T
        for s in mapped:  # leaves follow their parent's correction
            if _mapped_descendant(s, resolved) is None and XSENS_PARENT[s] in align:
                align[s] = align[XSENS_PARENT[s]]
    rot_seg = segment_rotations(rot_w, ref_r[0], np.array([align[s] for s in mapped]))

    positions, rotations = complete_segments(pos_w, rot_seg, mapped, stature, notices, name)
    calibration = {}
    if tpose_frame is not None:
        calibration["tpose"] = {s: (positions[tpose_frame, i].copy(), rotations[tpose_frame, i].copy())
                                for i, s in enumerate(XSENS_SEGMENTS)}  # fmt: skip
        if tpose_frame == 0 and len(positions) > 1:  # MVN's BVH export puts its T-pose first: not the take
            positions, rotations = positions[1:], rotations[1:]
            notices.append(f"{name}: frame 0 (the T-pose) is for calibration only; the take starts at 1")
    times = np.arange(len(positions)) * data.frame_time
    linear, angular = smoothed_twists(times, positions, rotations, smoothing_window)
    motion = HumanMotion(
        name=Path(path).stem,
        times=times,
        links=list(XSENS_SEGMENTS),
        positions=positions,
        rotations=rotations,
        linear_velocities=linear,
        angular_velocities=angular,
        source=f"bvh {path} (skeleton {skel.name}, {unit}, {up}-up, {1 / data.frame_time:.4g} Hz)",
        calibration=calibration,
        notices=notices,
    )
    if check:
        from dynik_ros.io.capture_checks import check_motion

        check_motion(motion, name)
    return motion


LYING_DEG = 45.0  # a rest pose whose trunk is further than this from the vertical is no reference


def _lying(positions: dict[str, np.ndarray]) -> bool:
    """Whether the trunk (pelvis to neck, else T8) is more than :data:`LYING_DEG` from the vertical."""
    pelvis, top = positions.get("Pelvis"), positions.get("Neck", positions.get("T8"))
    if pelvis is None or top is None or np.linalg.norm(top - pelvis) < 1e-9:
        return False
    return bool((top - pelvis)[2] < math.cos(math.radians(LYING_DEG)) * np.linalg.norm(top - pelvis))


def _unit_from_stature(stature: float | None, name: str) -> str:
    from dynik_ros.io.capture_checks import STATURE_RANGE

    if stature is None:
        raise BvhError(f"{name}: cannot tell the units (no legs mapped): pass unit=")
    lo, hi = STATURE_RANGE
    for unit, factor in sorted(UNITS.items(), key=lambda kv: kv[1], reverse=True):
        if lo * 0.85 <= stature * factor <= hi * 1.15:
            return unit
    raise BvhError(
        f"{name}: the legs give a stature of {stature:.4g} file units: no unit (m, cmu, cm, inch, mm) "
        "makes it a human's 1.4-2.1 m; pass unit="
    )


# ---------------------------------------------------------------------------- writer
def write_bvh(
    motion: Any,
    path: str | Path,
    names: dict[str, str] | None = None,
    unit: str = "cm",
    reference: dict[str, Pose] | None = None,
) -> Path:
    """Write the segments of ``motion`` named in ``names`` (``{segment: joint}``, default all 23 under
    their own names) as a Y-up BVH: each joint's parent is its nearest written Xsens ancestor, the rest
    pose is ``reference`` (default: the Human66 T-pose, whose segment frames are aligned with the world,
    so the rest pose is the T-pose), root with 6 channels, others ``Zrotation Xrotation Yrotation``."""
    from scipy.spatial.transform import Rotation

    path = Path(path)
    names = names or {s: s for s in XSENS_SEGMENTS}
    links = list(motion.links)
    written = [s for s in XSENS_SEGMENTS if s in names]
    if "Pelvis" not in written:
        raise ValueError("write_bvh: Pelvis must be written")
    if reference is None:
        from dynik_ros.retarget.human import human_tpose

        reference = human_tpose(1.75, 75.0)
    factor = 1.0 / UNITS[unit]
    turn = Y_UP_TO_Z_UP.T  # Z-up world -> BVH Y-up

    def parent(s: str) -> str | None:
        p = XSENS_PARENT[s]
        while p is not None and p not in names:
            p = XSENS_PARENT[p]
        return p

    children: dict[str | None, list[str]] = {}
    for s in written:
        children.setdefault(parent(s), []).append(s)
    pos = np.asarray(motion.positions)[:, [links.index(s) for s in written]] @ turn.T * factor
    # joint frames W = S R_ref^T: identity in the rest pose, whatever the segment frames are there
    ref_rot = np.array([reference[s][1] for s in written])
    seg_rot = np.asarray(motion.rotations)[:, [links.index(s) for s in written]]
    rot = turn @ (seg_rot @ np.swapaxes(ref_rot, -1, -2)) @ turn.T
    col = {s: i for i, s in enumerate(written)}
    n = len(motion.times)
    columns = []
    out = ["HIERARCHY"]

    def emit(s: str, depth: int) -> None:
        pad = "  " * depth
        p = parent(s)
        offset = np.zeros(3) if p is None else turn @ (reference[s][0] - reference[p][0]) * factor
        out.append(f"{pad}{'ROOT' if p is None else 'JOINT'} {names[s]}")
        out.append(pad + "{")
        out.append(f"{pad}  OFFSET {offset[0]:.6f} {offset[1]:.6f} {offset[2]:.6f}")
        if p is None:
            out.append(f"{pad}  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation")
            columns.append(pos[:, col[s]])
            local = rot[:, col[s]]
        else:
            out.append(f"{pad}  CHANNELS 3 Zrotation Xrotation Yrotation")
            local = np.swapaxes(rot[:, col[p]], -1, -2) @ rot[:, col[s]]
        columns.append(Rotation.from_matrix(local).as_euler("ZXY", degrees=True))
        kids = children.get(s, [])
        for k in kids:
            emit(k, depth + 1)
        if not kids:
            out.append(f"{pad}  End Site")
            out.append(pad + "  {")
            out.append(f"{pad}    OFFSET 0.000000 {5.0 * 0.01 * factor:.6f} 0.000000")
            out.append(pad + "  }")
        out.append(pad + "}")

    emit("Pelvis", 0)
    times = np.asarray(motion.times, dtype=float)
    frame_time = float(np.median(np.diff(times))) if n > 1 else 1.0 / 60.0
    out += ["MOTION", f"Frames: {n}", f"Frame Time: {frame_time:.9f}"]
    table = np.concatenate(columns, axis=1)
    out += [" ".join(f"{v:.6f}" for v in row) for row in table]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path
