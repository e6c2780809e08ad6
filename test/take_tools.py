"""Helpers shared by tests: the 23 segments of a synthetic motion in Xsens order, an IK stepped through a
take, and ``dynik-retarget`` run as a user runs it (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from dynik_ros.models.segments import XSENS_SEGMENTS


def xsens_ordered(motion):
    """``motion`` with its links reordered (in place) to the 23 Xsens segments, as the readers return them."""
    pick = [list(motion.links).index(s) for s in XSENS_SEGMENTS]
    for name in ("positions", "rotations", "linear_velocities", "angular_velocities"):
        setattr(motion, name, getattr(motion, name)[:, pick])
    motion.links = list(XSENS_SEGMENTS)
    return motion


def step_through(ik, measurements, dt: float) -> tuple[np.ndarray, list]:
    """``ik`` stepped once per measurement: the written ``q`` per step ``(N, nq)`` and each step's info."""
    qs, infos = [], []
    for m in measurements:
        q, _ = ik.step(m, dt)
        qs.append(q.copy())
        infos.append(ik.info)
    return np.array(qs), infos


def retarget_cli(args: list[str], out: Path) -> tuple[int, list[str], str]:
    """``python -m dynik_ros.cli.retarget ARGS --quiet --no-plots --out OUT`` in a new process: its exit code,
    the non-blank lines of its stderr, and the whole stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.retarget", *args, "--quiet", "--no-plots", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, [line for line in result.stderr.splitlines() if line.strip()], result.stderr
