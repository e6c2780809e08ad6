"""Motion capture files by content: MVNX, BVH, ``.npz`` motion files, rosbag2 (ROS-free).

:func:`detect_format` looks at the first bytes (not only the extension): ``HIERARCHY`` starts a BVH,
an XML document whose root is ``<mvnx`` an MVNX file, ``PK`` a zip (``.npz``), a directory or an mcap /
SQLite header a rosbag2. :func:`read_motion_file` reads MVNX, BVH and ``.npz`` into a
:class:`~dynik_ros.io.human_motion.HumanMotion` (bags need the CLI's topic reader).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FORMATS = {"mvnx": "an Xsens MVNX file", "bvh": "a BVH file", "npz": "a .npz motion file", "bag": "a rosbag2"}


def detect_format(path: str | Path) -> str | None:
    """``"mvnx"``, ``"bvh"``, ``"npz"``, ``"bag"`` or None (unknown) from the file's content."""
    path = Path(path)
    if path.is_dir():
        return (
            "bag"
            if any(path.glob("*.mcap")) or any(path.glob("*.db3")) or (path / "metadata.yaml").exists()
            else None
        )
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if head.startswith(b"\x89MCAP") or head.startswith(b"SQLite format 3"):
        return "bag"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:9].upper() == b"HIERARCHY":
        return "bvh"
    if text.startswith(b"<") and b"<mvnx" in head:
        return "mvnx"
    return None


def describe(fmt: str | None) -> str:
    return FORMATS.get(fmt or "", "not a motion file this tool reads (MVNX, BVH, .npz, rosbag2)")


def read_motion_file(path: str | Path, fmt: str | None = None, **options: Any):
    """Read an MVNX, BVH or ``.npz`` file (``fmt`` default: :func:`detect_format`). ``options`` go to the
    reader: ``check``/``floor`` for all, ``skeleton``, ``unit``, ``up``, ``tpose_frame`` for BVH."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    fmt = fmt or detect_format(path)
    floor = options.pop("floor", "apply")
    check = options.pop("check", True)
    if fmt == "mvnx":
        from dynik_ros.io.mvnx import read_mvnx

        motion = read_mvnx(path, check=False)
    elif fmt == "bvh":
        from dynik_ros.io.bvh import read_bvh

        motion = read_bvh(path, check=False, **options)
    elif fmt == "npz":
        from dynik_ros.io.human_motion import read_npz_motion

        motion = read_npz_motion(path)
    else:
        raise ValueError(f"{path}: {describe(fmt)}")
    if check:
        from dynik_ros.io.capture_checks import check_motion

        check_motion(motion, str(path), floor=floor)
    return motion
