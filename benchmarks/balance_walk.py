"""Quasi-static balance over whole retargeted walks (issue 12 item 4): G1 and TALOS, the synthetic walk,
the real CMU excerpt and the planted walk (``motion/planted_walk.py``: real double supports), each
retargeted as the map is and with ``balance`` on; the fraction of samples (with a foot in contact) whose
CoM ground projection is at least 1 cm inside the support polygon of the output, the upper-body MNTE of
both runs, and a PNG of the CoM ground tracks against the support polygons.

    .venv/bin/python benchmarks/balance_walk.py [--quick] [--out DIR]
    .venv/bin/python benchmarks/balance_walk.py --time-scale 1 2 4 8   # the CMU walk played F times slower

``--time-scale F ...`` retargets only the CMU excerpt, played F times slower (``dynik-retarget --time-scale``:
the same samples on a stretched clock, the contact thresholds following it), once per factor: what slowing
the capture does to the share of contact samples with the CoM inside the support. ``--resample`` brings
each slowed take back to the capture's rate first (interpolated), so the IK's step does not grow with F.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="G1 only, 3 s of synthetic walk (smoke run)")
    parser.add_argument("--out", type=Path, default=Path("out/balance"), help="directory of the PNG plots")
    parser.add_argument("--duration", type=float, default=8.0, help="synthetic walk length [s]")
    parser.add_argument(
        "--time-scale", type=float, nargs="+", default=None, help="CMU excerpt only, at these slow-downs"
    )
    parser.add_argument(
        "--resample", action="store_true", help="with --time-scale: the slowed take back at its capture rate"
    )
    args = parser.parse_args(argv)
    if args.time_scale:
        return slowed(args.time_scale, args.out, ["g1"] if args.quick else ["g1", "talos"], args.resample)
    from dynik_ros.io.bvh import read_bvh
    from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
    from dynik_ros.retarget.balance import compare, format_comparisons, plot_support
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter

    robots = ["g1"] if args.quick else ["g1", "talos"]
    duration = 3.0 if args.quick else args.duration
    args.out.mkdir(parents=True, exist_ok=True)
    rows, plots = [], []
    for name in robots:
        retargeter = Retargeter.from_config(name)
        human = retargeter.config.human
        walk = synthetic_human_motion("walking", duration, 100.0, height=human.height, mass=human.mass)
        motions = [("synthetic", f"synthetic walk {duration:g} s", walk)]
        if not args.quick:
            cmu = read_bvh(ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh")
            motions.append(("cmu", "CMU 131_01 excerpt (BVH)", cmu))
            planted = planted_walk(PlantedWalkSpec(), 100.0, height=human.height, mass=human.mass)
            motions.append(("planted", "planted walk, 4 steps", planted))
        for tag, label, motion in motions:
            retargeter = Retargeter.from_config(name)
            row = compare(retargeter, motion, label=label)
            rows.append(row)
            print(f"  {name} {label}: done", file=sys.stderr)
            path = plot_support(args.out / f"com_track_{name}_{tag}.png", row.figures, f"{name}: {label}")
            if path is None:
                print("balance_walk: matplotlib not installed, no plot", file=sys.stderr)
            else:
                plots.append(path)
    print("CoM ground projection vs the support polygon of the feet in contact (output q), 1 cm margin:")
    print(format_comparisons(rows))
    if plots:
        print("plots: " + ", ".join(map(str, plots)))
    return 0 if all(r.held == 0 for r in rows) else 1


def slowed(factors: list[float], out: Path, robots: list[str], resample: bool = False) -> int:
    """The CMU excerpt retargeted plain and balanced at each slow-down factor (module docstring)."""
    from dynik_ros.io.bvh import read_bvh
    from dynik_ros.io.human_motion import resampled, time_scaled
    from dynik_ros.retarget.balance import compare, format_comparisons, plot_support
    from dynik_ros.retarget.retargeter import Retargeter

    out.mkdir(parents=True, exist_ok=True)
    cmu = read_bvh(ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh")
    rate = 1.0 / float(np.median(np.diff(cmu.times)))
    rows = []
    for name in robots:
        for factor in factors:
            if not factor > 0:
                raise SystemExit(f"balance_walk: --time-scale {factor}: must be positive")
            retargeter = Retargeter.from_config(name)
            if factor != 1.0:
                retargeter.time_scale_contact(factor)
            motion = time_scaled(cmu, factor)
            if resample:  # the IK steps at the capture's rate, not rate / factor
                motion = resampled(motion, rate)
            label = f"CMU x{factor:g} slower" + (f" at {rate:.0f} Hz" if resample else "")
            row = compare(retargeter, motion, label=label)
            rows.append(row)
            print(f"  {name} x{factor:g}: done", file=sys.stderr)
            plot_support(out / f"com_track_{name}_cmu_x{factor:g}.png", row.figures, f"{name}: x{factor:g}")
    print("CMU excerpt played F times slower, CoM vs the support of the feet in contact (output q), 1 cm:")
    print(format_comparisons(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
