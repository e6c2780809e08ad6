"""The ``ffmpeg`` program for MP4 output (ROS-free): the one on ``PATH``, else the static binary of the
``imageio-ffmpeg`` wheel (a requirement of the package, so a fresh ``./dynik bootstrap`` writes MP4 without a
system ffmpeg), else none. Used by both renderers (``dynik-ros run --video``, ``dynik-retarget --video``)."""

from __future__ import annotations

import shutil

MISSING = "MP4 needs the ffmpeg program (not on PATH, and the imageio-ffmpeg wheel is not installed)"


def ffmpeg_program() -> str | None:
    """Path of an ``ffmpeg`` executable, or None."""
    found = shutil.which("ffmpeg")
    if found:
        return found
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError:  # the wheel without its binary (an unsupported platform)
        return None
