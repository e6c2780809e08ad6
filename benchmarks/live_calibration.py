"""ik_node calibrated on the stream's own subject (``calibrate_after``, ``calibration_pose:=motion``; README
*Live streams calibrated on their own subject*).

    .venv/bin/python benchmarks/live_calibration.py DIR [--after 1 2] [--robots g1 talos]

ik_node with ``calibrate_after`` N records the stream's first N s, calibrates the retargeter on the subject
of those samples (:func:`~dynik_ros.io.skeleton_tpose.skeleton_tpose`) and starts the IK there, as at any
stream start. Its path from that sample on is :func:`~dynik_ros.retarget.stream_input.stream_path` of the
samples from there with that calibration (``test_live_calibration.py`` checks it over DDS). Per walk capture
of ``real_captures.py``'s table found in DIR and robot, on those same samples: the human model's calibration
(what ik_node does without it), the window's subject, and the whole take's subject (``dynik-retarget``'s
default); held soles' highest lowest corner above the floor while flat, flat tilt max, slide max (figures of
the written trajectory, :mod:`~dynik_ros.retarget.foot_figures`). Then the wall time of the calibration
(window stacked, T-pose, calibration) on a 5 s window at 120 Hz: it holds the node's callbacks that long.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIELDS = ("times", "positions", "rotations", "linear_velocities", "angular_velocities")


def _from(motion, k: int):
    """The samples of ``motion`` from ``k`` on."""
    return dataclasses.replace(motion, **{f: getattr(motion, f)[k:] for f in FIELDS})


def _figures(rt, motion) -> tuple[float, float, float]:
    """(above ground while flat max mm, flat tilt max deg, slide max mm) of ik_node's path on ``motion``."""
    from dynik_ros.retarget.foot_figures import foot_figures
    from dynik_ros.retarget.stream_input import stream_path

    q, _, contacts, _ = stream_path(rt, motion)
    feet, blend = rt.config.feet, rt.config.contact.blend_time
    half = rt.config.balance.sole_half_width
    figures = foot_figures(rt.robot, q, motion.times, contacts, feet, blend, half_width=half)
    return (
        float(np.nanmax([f.above_flat_max_mm for f in figures])),
        float(np.nanmax([f.tilt_flat_max_deg for f in figures])),
        float(np.nanmax([f.slide_max_mm for f in figures])),
    )


def window_of(motion, k: int, seconds: float):
    """ik_node's window at sample ``k``: the samples within ``seconds`` before it, every link."""
    from dynik_ros.io.suit_calibration import WindowSamples

    times = np.asarray(motion.times, dtype=float)
    first = int(np.searchsorted(times, times[k] - seconds - 1e-9))
    return WindowSamples(list(motion.links), motion.positions[first : k + 1], motion.rotations[first : k + 1])


def captures_table(directory: Path, afters: list[float], robots: list[str]) -> None:
    from real_captures import CAPTURES, EXCERPT, NOT_WALKS

    from dynik_ros.io.motion_files import detect_format, read_motion_file
    from dynik_ros.io.skeleton_tpose import MIN_SAMPLES, skeleton_tpose
    from dynik_ros.retarget.retargeter import Retargeter

    print(
        "held soles above ground while flat max (mm), flat tilt max (deg), slide max (mm) on the samples "
        "from calibrate_after on: human model | the window's subject (root scale) | the whole take's subject"
    )
    for name, label, _, extra in CAPTURES:
        path = EXCERPT if name == EXCERPT.name else directory / name
        if name in NOT_WALKS or extra or not path.exists():
            continue
        motion = read_motion_file(path, detect_format(path))
        whole = skeleton_tpose(motion)
        for after in afters:
            times = np.asarray(motion.times, dtype=float)
            k = int(np.searchsorted(times, times[0] + after - 1e-9))
            if k >= len(times) - 10:
                print(f"  {label[:40]:40s} after {after:g} s: too short", flush=True)
                continue
            window = window_of(motion, k, after)
            if window.samples < MIN_SAMPLES:
                print(f"  {label[:40]:40s} after {after:g} s: {window.samples} samples, refused", flush=True)
                continue
            rest = _from(motion, k)
            for robot in robots:
                cells = []
                for poses in (None, skeleton_tpose(window), whole):
                    rt = Retargeter.from_config(robot)
                    if poses is not None:
                        rt.calibrate(poses)
                    cells.append((*_figures(rt, rest), rt.calibration.root_scale))
                text = " | ".join(f"{a:.1f} mm, {t:.1f} deg, {s:.1f} mm (k {r:.3f})" for a, t, s, r in cells)
                print(f"  {label[:40]:40s} {robot:5s} after {after:g} s: {text}", flush=True)


def calibration_time(robots: list[str], repeats: int = 5) -> None:
    """Wall time of ik_node's calibration on a 5 s window at 120 Hz (a 1.95 m subject's planted walk): the
    window stacked, its subject's T-pose, the calibration computed, checked and applied."""
    from dynik_ros.io.skeleton_tpose import MIN_SAMPLES, skeleton_tpose
    from dynik_ros.io.suit_calibration import PoseWindow
    from dynik_ros.models.segments import XSENS_SEGMENTS
    from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
    from dynik_ros.retarget.calibration import calibrate, check_calibration
    from dynik_ros.retarget.retargeter import Retargeter

    motion = planted_walk(PlantedWalkSpec(steps=4), 120.0, 1.95, 75.0)
    pick = [list(motion.links).index(s) for s in XSENS_SEGMENTS]
    window = PoseWindow(5.0)
    for k, t in enumerate(motion.times):
        window.append(
            10**18 + round(t * 1e9), XSENS_SEGMENTS, motion.positions[k, pick], motion.rotations[k, pick]
        )
    for robot in robots:
        rt = Retargeter.from_config(robot)
        walls = []
        for _ in range(repeats):  # what IKNode._calibrate_retargeting does
            start = time.perf_counter()
            samples = window.samples()
            calibration = calibrate(rt.spec, skeleton_tpose(samples, min_samples=MIN_SAMPLES))
            check_calibration(rt.spec, calibration)
            rt.set_calibration(calibration)
            walls.append(1e3 * (time.perf_counter() - start))
        print(
            f"calibration on a {samples.samples}-sample window (5 s at 120 Hz), {robot}: median "
            f"{np.median(walls):.1f} ms, max {max(walls):.1f} ms wall ({repeats} runs)",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, nargs="?", help="the real captures (real_captures.py names)")
    parser.add_argument("--after", type=float, nargs="+", default=[1.0, 2.0], help="calibrate_after [s]")
    parser.add_argument("--robots", nargs="+", default=["g1", "talos"])
    parser.add_argument("--quick", action="store_true", help="only the calibration's wall time")
    args = parser.parse_args(argv)
    if args.directory is not None and not args.quick:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        captures_table(args.directory, args.after, args.robots)
    calibration_time(args.robots)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
