"""Skeleton maps from BVH joints to the 23 Xsens segments, and the segments a skeleton lacks (ROS-free).

A map (``config/skeletons/*.yaml`` or a user's YAML of the same form) is ``name`` and ``segments: {Xsens
segment: BVH joint}``. :func:`detect_skeleton` picks the built-in map that fits a file's joints best
(``prefix:`` of joint names ignored). :func:`complete_segments` derives the unmapped segments: between two
mapped ones of a chain by interpolation (position by the Human66 proportions, orientation by slerp), past
the last mapped one at the Human66 offset scaled by the stature, with that segment's orientation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynik_ros.io.rotation_vectors import rotation_matrices, rotation_vectors
from dynik_ros.io.yaml_file import YamlFileError, load_yaml
from dynik_ros.models.segments import XSENS_SEGMENTS

SKELETON_DIR = Path(__file__).resolve().parents[2] / "config" / "skeletons"


class SkeletonMapError(ValueError):
    """A skeleton map that cannot be used, or no map fits a file (one line)."""


# Xsens segment tree: parent, and the chain child used for interpolation / bone directions
XSENS_PARENT = {
    "Pelvis": None, "L5": "Pelvis", "L3": "L5", "T12": "L3", "T8": "T12", "Neck": "T8", "Head": "Neck",
    "RightShoulder": "T8", "RightUpperArm": "RightShoulder", "RightForeArm": "RightUpperArm",
    "RightHand": "RightForeArm", "LeftShoulder": "T8", "LeftUpperArm": "LeftShoulder",
    "LeftForeArm": "LeftUpperArm", "LeftHand": "LeftForeArm", "RightUpperLeg": "Pelvis",
    "RightLowerLeg": "RightUpperLeg", "RightFoot": "RightLowerLeg", "RightToe": "RightFoot",
    "LeftUpperLeg": "Pelvis", "LeftLowerLeg": "LeftUpperLeg", "LeftFoot": "LeftLowerLeg",
    "LeftToe": "LeftFoot",
}  # fmt: skip
XSENS_CHILD = {
    "Pelvis": "L5", "L5": "L3", "L3": "T12", "T12": "T8", "T8": "Neck", "Neck": "Head",
    "RightShoulder": "RightUpperArm", "RightUpperArm": "RightForeArm", "RightForeArm": "RightHand",
    "LeftShoulder": "LeftUpperArm", "LeftUpperArm": "LeftForeArm", "LeftForeArm": "LeftHand",
    "RightUpperLeg": "RightLowerLeg", "RightLowerLeg": "RightFoot", "RightFoot": "RightToe",
    "LeftUpperLeg": "LeftLowerLeg", "LeftLowerLeg": "LeftFoot", "LeftFoot": "LeftToe",
}  # fmt: skip


@dataclass
class SkeletonMap:
    name: str
    segments: dict[str, str]  # Xsens segment -> BVH joint
    source: str = ""


def load_skeleton_map(path: str | Path) -> SkeletonMap:
    """A skeleton map YAML (``name``, ``segments: {Xsens segment: BVH joint}``); errors name the file."""
    path = Path(path)
    try:
        data = load_yaml(path)
    except YamlFileError as exc:
        raise SkeletonMapError(f"skeleton map {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("segments"), dict):
        raise SkeletonMapError(f"{path}: a skeleton map needs 'segments: {{Xsens segment: BVH joint}}'")
    segments = {str(k): str(v) for k, v in data["segments"].items()}
    unknown = sorted(set(segments) - set(XSENS_SEGMENTS))
    if unknown:
        raise SkeletonMapError(
            f"{path}: segments: {unknown} are not Xsens segments (valid: {list(XSENS_SEGMENTS)})"
        )
    if "Pelvis" not in segments:
        raise SkeletonMapError(f"{path}: segments: 'Pelvis' must be mapped")
    return SkeletonMap(str(data.get("name", path.stem)), segments, str(path))


@functools.lru_cache(maxsize=1)
def builtin_skeleton_maps() -> tuple[SkeletonMap, ...]:
    """The maps shipped in ``config/skeletons/``."""
    return tuple(load_skeleton_map(p) for p in sorted(SKELETON_DIR.glob("*.yaml")))


def _strip(name: str) -> str:
    return name.rsplit(":", 1)[-1]


def detect_skeleton(names: list[str]) -> tuple[SkeletonMap, dict[str, str]]:
    """The built-in map matching most of the file's joints (prefixes like ``mixamorig:`` ignored) and its
    resolved ``{segment: joint name in the file}``. Raises :class:`SkeletonMapError` when none maps the
    pelvis and the four limbs."""
    best = None
    for skeleton in builtin_skeleton_maps():
        resolved = _resolve(skeleton, names)
        exact = sum(1 for s, j in skeleton.segments.items() if resolved.get(s) == j)
        score = (len(resolved) - len(skeleton.segments), len(resolved), exact)
        if "Pelvis" in resolved and (best is None or score > best[0]):
            best = (score, skeleton, resolved)
    needed = ("RightUpperArm", "LeftUpperArm", "RightUpperLeg", "LeftUpperLeg", "RightFoot", "LeftFoot")
    if best is None or any(s not in best[2] for s in needed):
        raise SkeletonMapError(
            f"no skeleton map fits joints {names[:12]}{'...' if len(names) > 12 else ''}: pass one "
            f"(YAML like {SKELETON_DIR}/cmu.yaml)"
        )
    return best[1], best[2]


def _resolve(skeleton: SkeletonMap, names: list[str]) -> dict[str, str]:
    exact = set(names)
    stripped = {_strip(n): n for n in names}
    out = {}
    for seg, joint in skeleton.segments.items():
        if joint in exact:
            out[seg] = joint
        elif _strip(joint) in stripped:
            out[seg] = stripped[_strip(joint)]
    return out


def _rz(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _shortest_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation taking unit vector ``a`` onto ``b`` about ``a x b``."""
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(a @ b)
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        perp = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        return rotation_matrices(math.pi * perp / np.linalg.norm(perp))[0]
    return rotation_matrices(axis / s * math.atan2(s, c))[0]


@functools.lru_cache(maxsize=1)
def _human66_tpose() -> dict[str, np.ndarray]:
    """Segment origins of Human66 in T-pose for a 1.75 m subject (proportions of the derived segments)."""
    from dynik_ros.retarget.human import human_tpose

    return {k: v[0].copy() for k, v in human_tpose(1.75, 75.0).items()}


def _heading(positions: dict[str, np.ndarray]) -> float:
    """Heading (rad about z) of a body from its hips: x forward = (left hip - right hip) x z."""
    left = positions.get("LeftUpperLeg")
    right = positions.get("RightUpperLeg")
    if left is None or right is None:
        return 0.0
    y = left - right
    x = np.cross(y, [0.0, 0.0, 1.0])
    return math.atan2(x[1], x[0])


def _slerp(r0: np.ndarray, r1: np.ndarray, f: float) -> np.ndarray:
    rel = rotation_vectors(np.swapaxes(r0, -1, -2) @ r1)  # (scipy Rotation's, bit for bit)
    return r0 @ rotation_matrices(f * rel)


def _mapped_descendant(segment: str, resolved: dict[str, str]) -> str | None:
    child = XSENS_CHILD.get(segment)
    while child is not None and child not in resolved:
        child = XSENS_CHILD.get(child)
    return child


def complete_segments(
    pos: np.ndarray, rot: np.ndarray, mapped: list[str], stature: float, notices: list[str], name: str
) -> tuple[np.ndarray, np.ndarray]:
    """All 23 segments from the mapped ones: missing ones interpolated along their chain or placed at the
    Human66 offset from their last mapped ancestor (module docstring)."""
    n = len(pos)
    tpose = _human66_tpose()
    s_ratio = stature / 1.75
    out_p = np.zeros((n, len(XSENS_SEGMENTS), 3))
    out_r = np.zeros((n, len(XSENS_SEGMENTS), 3, 3))
    have = {s: (pos[:, i], rot[:, i]) for i, s in enumerate(mapped)}
    derived = []
    for s in XSENS_SEGMENTS:  # parents first
        if s in have:
            continue
        derived.append(s)
        ancestor = XSENS_PARENT[s]
        chain = [s]
        while ancestor not in have:
            chain.append(ancestor)
            ancestor = XSENS_PARENT[ancestor]
        descendant = XSENS_CHILD.get(s)
        while descendant is not None and descendant not in have:
            descendant = XSENS_CHILD.get(descendant)
        pa, ra = have[ancestor]
        if descendant is not None:
            path = [ancestor]
            node = ancestor
            while node != descendant:
                node = XSENS_CHILD[node]
                path.append(node)
            steps = zip(path[:-1], path[1:], strict=True)
            lengths = np.array([np.linalg.norm(tpose[b] - tpose[a]) for a, b in steps])
            total = lengths.sum()
            f = float(lengths[: path.index(s)].sum() / total) if total > 0 else 0.5
            pd, rd = have[descendant]
            have[s] = (pa + f * (pd - pa), _slerp(ra, rd, f))
        else:
            have[s] = (pa + np.einsum("nij,j->ni", ra, (tpose[s] - tpose[ancestor]) * s_ratio), ra.copy())
    if derived:
        notices.append(f"{name}: segments derived from their neighbours (not in the skeleton): {derived}")
    for i, s in enumerate(XSENS_SEGMENTS):
        out_p[:, i], out_r[:, i] = have[s]
    return out_p, out_r
