"""Foot contacts under measurement noise, ik_node's live path on sparse streams (issue 9, README *Toe-off*).

    .venv/bin/python benchmarks/toe_off_noise.py            # noisy standing subject and walk: contacts
    .venv/bin/python benchmarks/toe_off_noise.py --speeds   # the same, velocities differentiated
    .venv/bin/python benchmarks/toe_off_noise.py --live DIR # 30 Hz: ik_node's path against the offline run

Contacts are counted on the contact rules' flags (no IK): a synthetic subject standing in T-pose (6 s, white
noise ``NoiseSpec(position=sigma)`` on every link) has 2 without flicker. ``--live`` emulates ik_node without
ROS (:func:`~dynik_ros.retarget.stream_input.stream_path`: the samples one at a time, the first one's IK
step when the second comes, as ``IKNode._process`` does) against ``retarget_motion`` (contact rules and IK
on 0.02 s steps, retarget/ik_steps.py), on the synthetic walk at 30 Hz and the 30 Hz captures of
``real_captures.py``'s table found in DIR (and 120 Hz ones taken every 4th sample); figures of the written
trajectory (foot_figures.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIGMAS = (0.001, 0.002, 0.003, 0.005)


def _runs(states: np.ndarray) -> int:
    inside = np.concatenate(([False], states >= 0, [False]))
    return int(np.count_nonzero(np.diff(inside.astype(int)) == 1))


def _flags(motion, **contact) -> np.ndarray:
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    spec = dataclasses.replace(rt.config.contact, **contact)
    rt.config = dataclasses.replace(rt.config, contact=spec)
    rt.contact.spec = spec
    rt.reset()
    return rt.motion_measurements(motion)[1]


def noisy_contacts(differentiated: bool = False) -> None:
    """Contacts of the noisy standing subject and walk: plain 5 mm rule / default (heel_off_noise 4)."""
    from dynik_ros.io.human_motion import finite_difference_twists
    from dynik_ros.motion.synthetic import NoiseSpec
    from dynik_ros.retarget.human import synthetic_human_motion

    variants = (
        (dict(heel_off=0.0), dict(heel_off_noise=0.0), {})
        if differentiated
        else (dict(heel_off_noise=0.0), {})
    )
    names = "heel_off 0 / plain 5 mm / default" if differentiated else "plain 5 mm / default"
    print(f"contacts ({names}); sigma = " + ", ".join(f"{s * 1e3:g}" for s in SIGMAS) + " mm")
    for scenario in ("tpose", "walking"):
        for rate in (30.0, 60.0, 120.0):
            cells = []
            for sigma in SIGMAS:
                motion = synthetic_human_motion(scenario, 6.0, rate, noise=NoiseSpec(position=sigma), seed=1)
                if differentiated:  # velocities by central differences of the noisy positions
                    linear, _ = finite_difference_twists(motion.times, motion.positions, motion.rotations)
                    motion = dataclasses.replace(motion, linear_velocities=linear)
                counts = []
                for contact in variants:
                    flags = _flags(motion, **contact)
                    counts.append(sum(_runs(flags[:, f]) for f in range(flags.shape[1])))
                cells.append("/".join(str(c) for c in counts))
            print(f"  {scenario:8s} {rate:4.0f} Hz: " + "  ".join(f"{c:>10s}" for c in cells), flush=True)


def _live_figures(rt, motion, live: bool, max_step: float = 0.02) -> tuple[float, float, float, float]:
    """(MNTE, flat tilt max deg, slide max mm, depth max mm after 0.5 s) of ik_node's path (its ``max_step``
    parameter: 0.02 s, the default, or 0, one IK step a sample) or the offline run."""
    from dynik_ros.retarget.foot_figures import foot_figures
    from dynik_ros.retarget.stream_input import stream_path
    from dynik_ros.retarget.trajectory_errors import trajectory_errors

    feet, blend = rt.config.feet, rt.config.contact.blend_time
    if live:
        times = np.asarray(motion.times, dtype=float)
        q, v, contacts, ms = stream_path(rt, motion, max_step, 0.1)
        sole = [np.asarray(f.sole, dtype=float).reshape(-1, 3) for f in feet]
        errors = trajectory_errors(rt.robot, rt.targets, q, v, ms, [f.frame for f in feet], sole, contacts)
        mnte = float(np.mean(errors.mnte))
    else:
        result = rt.retarget_motion(motion)
        times, q, contacts, mnte = result.times, result.q, result.contacts, float(np.mean(result.mnte))
    half = rt.config.balance.sole_half_width
    figures = foot_figures(rt.robot, q, times, contacts, feet, blend, half_width=half)
    late = times - times[0] >= 0.5
    depth = foot_figures(rt.robot, q[late], times[late], contacts[late], feet, blend, half_width=half)
    return (
        mnte,
        max(f.tilt_flat_max_deg for f in figures),
        max(f.slide_max_mm for f in figures),
        max(f.penetration_max_mm for f in depth),
    )


def live_path(directory: Path | None) -> None:
    """ik_node's path at 30 Hz against the offline run, G1 and TALOS."""
    from dynik_ros.cli.retarget import synthetic_motion
    from dynik_ros.io.motion_files import detect_format, read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter

    takes = [("synthetic walk, 30 Hz", synthetic_motion("walking", 6.0, 30.0))]
    sources = (
        ("mixamo_freebvh.bvh", 1),
        ("mixamo_beta_walking.bvh", 1),
        ("lafan1_walk1_subject1_start.bvh", 1),
        ("cmu_131_01_walk_excerpt.bvh", 4),
        ("nikki_slow_walk.bvh", 4),
    )
    for name, every in sources:
        committed = name.startswith("cmu_131_01_walk")
        path = ROOT / "test" / "data" / name if committed else (directory or ROOT) / name
        if not path.exists():
            continue
        m = read_motion_file(path, detect_format(path))
        if every > 1:  # every 4th sample of a 120 Hz capture: 30 Hz
            m = dataclasses.replace(
                m,
                **{
                    k: getattr(m, k)[::every]
                    for k in ("times", "positions", "rotations", "linear_velocities", "angular_velocities")
                },
            )
        takes.append((name + (f" every {every}th sample" if every > 1 else ""), m))
    print(
        "MNTE, flat tilt max, slide max, depth max: offline (0.02 s steps) | ik_node's path (max_step 0.02, "
        "the default: the same steps) | ik_node's path with max_step 0 (a step a sample)"
    )
    for robot in ("g1", "talos"):
        for label, motion in takes:
            rt = Retargeter.from_config(robot)
            cells = [_live_figures(rt, motion, False)]
            cells += [_live_figures(rt, motion, True, max_step) for max_step in (0.02, 0.0)]
            text = " | ".join(f"{c[0]:.2e}, {c[1]:.1f} deg, {c[2]:.1f} mm, {c[3]:.1f} mm" for c in cells)
            print(f"  {robot:5s} {label:45s} {text}", flush=True)
    start_figures(takes)


def start_figures(takes: list) -> None:
    """The node's start (parameter ``settle``): wall time of the settle on the first sample (it holds the
    node's callbacks that long), and the published path's fastest joint over its first sample interval
    (the first answer is the state before the first sample's step, the second one is after that step and
    the second sample's: both in one interval) against its fastest later, as ``|dq| / (v_max dt)``."""
    import time

    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.retarget.stream_input import stream_path

    print("start: settle 0.2 / 1 s wall ms; fastest joint / v_max, first interval | later, settle 0 and 1 s")
    for robot in ("g1", "talos"):
        rt = Retargeter.from_config(robot)
        walls = []
        for settle in (0.2, 1.0):
            rt.reset()
            first = rt.motion_measurements(takes[0][1])[0][0]
            ik = rt.make_ik()
            start = time.perf_counter()
            rt.settle(ik, first, settle)
            walls.append(1e3 * (time.perf_counter() - start))
        print(f"  {robot:5s} settle {walls[0]:.0f} / {walls[1]:.0f} ms wall", flush=True)
        for label, motion in takes:
            cells = []
            for settle in (0.0, 1.0):
                q = stream_path(rt, motion, 0.02, 0.1, settle)[0][:, 7:]
                dt = np.diff(np.asarray(motion.times, dtype=float))[:, None]
                ratio = np.abs(np.diff(q, axis=0)) / (rt.robot.velocity_limit * dt)
                cells.append(f"{ratio[0].max():.2f} | {ratio[1:].max():.2f}")
            print(f"  {robot:5s} {label:45s} " + ", ".join(cells), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speeds", action="store_true", help="velocities differentiated from the positions")
    parser.add_argument("--live", nargs="?", type=Path, const=None, default=False, metavar="DIR")
    args = parser.parse_args(argv)
    if args.live is not False:
        live_path(args.live)
        return 0
    noisy_contacts(differentiated=args.speeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
