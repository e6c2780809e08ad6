"""Xsens MVNX files (MVN Analyze/Animate XML export, version 4): reader and writer (ROS-free).

Layout read: ``<mvnx><subject frameRate=.. segmentCount=..><segments><segment label=.. id=..>`` then
``<frames><frame type=.. index=.. time=.. ms=..>`` with per-segment vectors concatenated in segment-id
order: ``orientation`` (quaternion ``w x y z``, segment frame to world), ``position`` (m), ``velocity``
(m/s), ``angularVelocity`` (rad/s). Frames of type ``identity``, ``tpose`` and ``tpose-isb`` (no index)
are the file's calibration frames; ``normal`` frames are the take.

Conventions (checked on a real MVN 2018 export, see ``benchmarks/real_captures.py``):

* World frame: MVN's Z-up, x forward at the reset heading (REP 103 axes), metres.
* Segment frames: MVN's default (not ISB) segment frames, aligned with the world in the identity frame,
  as the Human66 model's links are in its zero configuration: no re-orientation is needed.
* ``angularVelocity`` is expressed in the **world** frame (MVN manual: "global frame"), like the stream's
  type-21 datagram. The test suite checks it against ``log(R_{k+1} R_{k-1}^T) / 2dt`` of the orientations
  (a body-frame reading would differ by ``R``), and the real-file benchmark prints both.
* Times: ``index / frameRate`` (the ``time`` attribute is rounded to whole ms: 0, 17, 33 at 60 Hz); the
  first normal frame's ``ms`` (Unix epoch, ms) gives ``stamp_origin_ns``.

The file is parsed with :func:`xml.etree.ElementTree.iterparse` and every frame is dropped once read, so a
long take costs its arrays only. Files without ``velocity`` / ``angularVelocity`` get Savitzky-Golay
derivatives (:func:`dynik_ros.io.human_motion.smoothed_twists`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.io.human_motion import HumanMotion, Pose, smoothed_twists
from dynik_ros.models.segments import XSENS_SEGMENTS

MVNX_NAMESPACE = "http://www.xsens.com/mvn/mvnx"
CALIBRATION_TYPES = ("identity", "tpose", "tpose-isb")
_VECTORS = {"orientation": 4, "position": 3, "velocity": 3, "angularVelocity": 3}


class MvnxError(ValueError):
    """An MVNX file that cannot be read: the file, the frame and the reason, on one line."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _vector(path: Path, where: str, name: str, text: str | None, count: int) -> np.ndarray:
    try:
        values = np.array((text or "").split(), dtype=float)
    except ValueError:
        raise MvnxError(f"{path}: {where}: <{name}> has a value that is not a number") from None
    if values.size != count:
        raise MvnxError(f"{path}: {where}: <{name}> has {values.size} values, expected {count}")
    return values


def _frame_vectors(children: dict[str, str | None], count: int) -> list[np.ndarray | None] | None:
    """A normal frame's vectors in :data:`_VECTORS` order (None where an optional one is absent) by one
    ``np.array`` of all their numbers (one call per frame, not four: 0.05 s on a 60 s, 120 Hz take), each
    number converted as :func:`_vector` converts it; None when a vector is missing, empty, of the wrong
    size or not numbers, for :func:`read_mvnx` to name the first fault vector by vector."""
    tokens: list[str] = []
    sizes: list[int | None] = []
    for name, width in _VECTORS.items():
        text = children.get(name)
        if text is None:
            if name in ("orientation", "position") or name in children:  # (missing, or present but empty)
                return None
            sizes.append(None)
            continue
        part = text.split()
        if len(part) != width * count:
            return None
        tokens += part
        sizes.append(len(part))
    try:
        flat = np.array(tokens, dtype=float)
    except ValueError:
        return None
    out: list[np.ndarray | None] = []
    start = 0
    for size in sizes:
        out.append(None if size is None else flat[start : start + size])
        start += size or 0
    return out


def read_mvnx(path: str | Path, check: bool = True) -> HumanMotion:
    """Read an MVNX file into a :class:`HumanMotion` of the 23 Xsens segments (file order mapped by label).

    ``motion.calibration`` holds the file's calibration frames by type (``identity``, ``tpose``,
    ``tpose-isb``: ``{segment: (p, R)}``). With ``check`` the input checks of
    :mod:`dynik_ros.io.capture_checks` run on the result (errors raise, warnings go to ``motion.notices``).

    Raises:
        MvnxError: not an MVNX file, truncated or malformed XML, a frame with the wrong number of values,
            no normal frame, missing segments.
        FileNotFoundError: no such file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    labels: list[str] = []
    ids: list[int] = []
    frame_rate = 0.0
    configuration = ""
    frames: dict[str, list[Any]] = {k: [] for k in ("index", "time", "ms", *_VECTORS)}
    calibration_raw: dict[str, dict[str, np.ndarray]] = {}
    frames_element = None
    root_seen = False
    n_normal = 0
    names: dict[str, str] = {}  # namespaced tag -> local name: a look-up per event, not a split (72k events)
    try:
        for event, elem in ET.iterparse(str(path), events=("start", "end")):
            tag = names.get(elem.tag)
            if tag is None:
                tag = names[elem.tag] = _local(elem.tag)
            if event == "start":
                if not root_seen:
                    root_seen = True
                    if tag != "mvnx":
                        raise MvnxError(f"{path}: not an MVNX file (root element <{tag}>, expected <mvnx>)")
                elif tag == "subject":
                    frame_rate = float(elem.get("frameRate") or 0.0)
                    configuration = elem.get("configuration", "")
                elif tag == "frames":
                    frames_element = elem
                continue
            if tag == "segment" and frames_element is None:
                labels.append(elem.get("label", ""))
                ids.append(int(elem.get("id") or len(ids) + 1))
                elem.clear()
            elif tag == "frame":
                kind = elem.get("type", "normal")
                where = f"frame {elem.get('index', kind)}"
                count = len(labels)
                if count == 0:
                    raise MvnxError(f"{path}: {where} comes before any <segment> definition")
                children = {}
                for child in elem:
                    name = names.get(child.tag)
                    if name is None:
                        name = names[child.tag] = _local(child.tag)
                    children[name] = child.text
                if kind in CALIBRATION_TYPES:
                    calibration_raw[kind] = {
                        name: _vector(path, where, name, children[name], n * count)
                        for name, n in _VECTORS.items()
                        if name in ("orientation", "position") and name in children
                    }
                elif kind == "normal":
                    vectors = _frame_vectors(children, count)
                    if vectors is None:  # a fault: named vector by vector, in this order
                        vectors = []
                        for name, n in _VECTORS.items():
                            if name in ("orientation", "position") and name not in children:
                                raise MvnxError(f"{path}: {where} has no <{name}>")
                            text = children.get(name)
                            vectors.append(
                                _vector(path, where, name, text, n * count) if name in children else None
                            )
                    for name, values in zip(_VECTORS, vectors, strict=True):
                        frames[name].append(values)
                    frames["index"].append(elem.get("index"))
                    frames["time"].append(elem.get("time"))
                    frames["ms"].append(elem.get("ms"))
                    n_normal += 1
                elem.clear()
                if frames_element is not None and len(frames_element):
                    frames_element.remove(elem)
    except ET.ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else "?"
        raise MvnxError(
            f"{path}: malformed or truncated XML at line {line} after {n_normal} frames ({exc.msg})"
            if hasattr(exc, "msg")
            else f"{path}: malformed or truncated XML at line {line} after {n_normal} frames"
        ) from None
    if not root_seen:
        raise MvnxError(f"{path}: empty file")
    if n_normal == 0:
        raise MvnxError(f"{path}: no frame of type 'normal' (nothing to replay)")

    order = np.argsort(ids, kind="stable")
    labels = [labels[i] for i in order]
    missing = [s for s in XSENS_SEGMENTS if s not in labels]
    if missing:
        raise MvnxError(f"{path}: segments {missing} missing (file has {labels})")
    notices = []
    extra = [s for s in labels if s not in XSENS_SEGMENTS]
    if extra:
        notices.append(f"{path}: ignored {len(extra)} segments outside the 23 Xsens ones: {extra}")
    if configuration and "upper" in configuration.lower():
        notices.append(
            f"{path}: MVN configuration '{configuration}': the legs are not measured (the pelvis is held, "
            "typically at z = 0)"
        )
    pick = np.array([labels.index(s) for s in XSENS_SEGMENTS])
    n, count = n_normal, len(labels)

    def stack(name: str, width: int) -> np.ndarray | None:
        rows = frames[name]
        if any(r is None for r in rows):
            return None
        # file order is segment-id order; the arrays' vectors follow the sorted labels (one gather)
        return np.concatenate(rows).reshape(n, count, width)[:, order[pick]]

    quats_wxyz = stack("orientation", 4)
    positions = stack("position", 3)
    from dynik_ros.io.capture_checks import require_finite, rotations_from_wxyz

    require_finite(path, "position", positions)
    rotations = rotations_from_wxyz(path, quats_wxyz)
    linear, angular = stack("velocity", 3), stack("angularVelocity", 3)

    times, origin_ns = _times(path, frames, frame_rate)
    if linear is None or angular is None:
        notices.append(f"{path}: no velocity/angularVelocity in the file: smoothed derivatives used")
        fd_lin, fd_ang = smoothed_twists(times, positions, rotations)
        linear = fd_lin if linear is None else linear
        angular = fd_ang if angular is None else angular
    else:
        require_finite(path, "velocity", linear)
        require_finite(path, "angularVelocity", angular)

    calibration: dict[str, dict[str, Pose]] = {}
    for kind, raw in calibration_raw.items():
        if "orientation" not in raw or "position" not in raw:
            continue
        q = raw["orientation"].reshape(count, 4)[order][pick]
        p = raw["position"].reshape(count, 3)[order][pick]
        r = rotations_from_wxyz(path, q[None], f"{kind} frame")[0]
        calibration[kind] = {s: (p[i].copy(), r[i].copy()) for i, s in enumerate(XSENS_SEGMENTS)}

    motion = HumanMotion(
        name=path.stem,
        times=times,
        links=list(XSENS_SEGMENTS),
        positions=positions,
        rotations=rotations,
        linear_velocities=linear,
        angular_velocities=angular,
        source=f"mvnx {path} ({configuration or 'unknown configuration'}, {frame_rate:g} Hz)",
        stamp_origin_ns=origin_ns,
        calibration=calibration,
        notices=notices,
    )
    if check:
        from dynik_ros.io.capture_checks import check_motion

        check_motion(motion, str(path))
    return motion


def _times(path: Path, frames: dict[str, list[Any]], frame_rate: float) -> tuple[np.ndarray, int]:
    """Sample times from the frame indices and the frame rate (``time`` in ms when either is missing)."""
    n = len(frames["orientation"])
    indices = frames["index"]
    if frame_rate > 0 and all(i not in (None, "") for i in indices):
        idx = np.array([int(i) for i in indices], dtype=np.int64)
        times = (idx - idx[0]) / frame_rate
    else:
        try:
            ms = np.array([float(t) for t in frames["time"]], dtype=float)
        except (TypeError, ValueError):
            raise MvnxError(f"{path}: frames lack both index (with frameRate) and time") from None
        times = (ms - ms[0]) * 1e-3
    origin_ns = 0
    first_ms = frames["ms"][0] if n else None
    if first_ms not in (None, ""):
        try:
            origin_ns = int(round(float(first_ms))) * 1_000_000
        except ValueError:
            origin_ns = 0
    return times, origin_ns


# ---------------------------------------------------------------------------- writer
def _join(values: np.ndarray) -> str:
    return " ".join(f"{v:.9g}" for v in np.ravel(values))


def write_mvnx(
    motion: Any,
    path: str | Path,
    frame_rate: float | None = None,
    calibration: dict[str, dict[str, Pose]] | None = None,
    stamp_origin_ms: int = 0,
    configuration: str = "FullBody",
) -> Path:
    """Write a motion of the 23 Xsens segments as MVNX 4 (round-trip tests, tools).

    ``frame_rate`` defaults to ``1 / mean(dt)``; frame indices are ``round(t * frame_rate)``.
    ``calibration`` frames (``{type: {segment: (p, R)}}``) are written before the normal frames.
    """
    path = Path(path)
    links = list(motion.links)
    missing = [s for s in XSENS_SEGMENTS if s not in links]
    if missing:
        raise ValueError(f"write_mvnx: motion lacks segments {missing}")
    pick = [links.index(s) for s in XSENS_SEGMENTS]
    times = np.asarray(motion.times, dtype=float)
    if frame_rate is None:
        frame_rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 60.0
    pos = np.asarray(motion.positions)[:, pick]
    rot = np.asarray(motion.rotations)[:, pick]
    quat = np.roll(quaternion_from_rotation(rot), 1, axis=-1)  # x y z w -> w x y z
    lin = np.asarray(motion.linear_velocities)[:, pick]
    ang = np.asarray(motion.angular_velocities)[:, pick]
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write(f'<mvnx xmlns="{MVNX_NAMESPACE}" version="4">\n')
        f.write('<mvn version="dynik_ros" build="write_mvnx"/>\n<comment></comment>\n')
        f.write(
            f'<subject label="dynik_ros" frameRate="{frame_rate:g}" segmentCount="{len(XSENS_SEGMENTS)}" '
            f'configuration="{configuration}">\n<segments>\n'
        )
        for i, s in enumerate(XSENS_SEGMENTS):
            f.write(f'<segment label="{s}" id="{i + 1}"/>\n')
        f.write(f'</segments>\n<frames segmentCount="{len(XSENS_SEGMENTS)}">\n')
        for kind, poses in (calibration or {}).items():
            p = np.array([poses[s][0] for s in XSENS_SEGMENTS])
            q = np.roll(quaternion_from_rotation(np.array([poses[s][1] for s in XSENS_SEGMENTS])), 1, axis=-1)
            f.write(f'<frame time="0" ms="0" type="{kind}">\n')
            f.write(f"<orientation>{_join(q)}</orientation>\n<position>{_join(p)}</position>\n</frame>\n")
        t0 = times[0] if len(times) else 0.0
        for k in range(len(times)):
            index = int(round((times[k] - t0) * frame_rate))
            ms = int(round((times[k] - t0) * 1e3))
            f.write(
                f'<frame time="{ms}" index="{index}" ms="{stamp_origin_ms + ms}" type="normal">\n'
                f"<orientation>{_join(quat[k])}</orientation>\n<position>{_join(pos[k])}</position>\n"
                f"<velocity>{_join(lin[k])}</velocity>\n<angularVelocity>{_join(ang[k])}</angularVelocity>\n"
                "</frame>\n"
            )
        f.write("</frames>\n</subject>\n</mvnx>\n")
    return path


def calibration_frame(motion: HumanMotion) -> tuple[str, dict[str, Pose]] | None:
    """The file's calibration frame to calibrate on: ``tpose`` when present, else ``identity``."""
    for kind in ("tpose", "identity"):
        if kind in motion.calibration:
            return kind, motion.calibration[kind]
    return None
