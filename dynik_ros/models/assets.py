"""Locating the package's installed files and the standard human tracking target set."""

from __future__ import annotations

from pathlib import Path

from dynik_ros.core.targets import FrameTarget, TargetSet

SOURCE_ROOT = Path(__file__).resolve().parents[2]


def share_path(*parts: str) -> Path:
    """A file of ``share/dynik_ros`` (``config``, ``urdf``, ``launch``): the source tree first, then the
    installed share directory found through the ament index."""
    local = SOURCE_ROOT.joinpath(*parts)
    if local.exists():
        return local
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("dynik_ros")).joinpath(*parts)


def urdf_path(name: str) -> Path:
    """Path of ``urdf/<name>.urdf`` (e.g. ``human66``)."""
    return share_path("urdf", f"{name}.urdf")


def human_tracking_targets(gain: float = 10.0) -> TargetSet:
    """The paper's human tracking set (sec. 4.2): an orientation target per physical link (23 Xsens
    segments) plus the pelvis position."""
    from dynik_ros.models.human import XSENS_SEGMENTS

    return TargetSet(
        [
            FrameTarget(link, position=(link == "Pelvis"), position_gain=gain, orientation_gain=gain)
            for link in XSENS_SEGMENTS
        ]
    )
