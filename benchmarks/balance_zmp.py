"""Dynamic balance on whole retargeted walks (issue 12 item 4): the whole-body ZMP of the written trajectory
(``retarget/zmp_figures.py``) for the plain run, the quasi-static plan and the ZMP plan
(``retarget/zmp_plan.py``), and how far the output departs from the plan's cart-table model.

    .venv/bin/python benchmarks/balance_zmp.py [--robot g1] [--cmu-scale 1 2 4] [--quick]

Motions: the planted walk (4 steps of 1.25 s, 0.25 s double supports) and a faster one (0.5 s single,
0.1 s double supports, 4 steps), the synthetic walk (6 s, its 0.27 s gaps without a foot down get no ZMP
row) and the CMU 131_01 excerpt played ``--cmu-scale`` times slower (resampled to its 120 Hz). Columns:
the margin the plan solved with (the map's 15 mm, or less: ``relaxed_plan``), the share of contact
samples whose whole-body ZMP is >= 1 cm inside the support of the feet in contact at the output ``q``
(plain / quasi-static / zmp), the same share away from the detection's contact switches (> 0.1 s from
any), the output CoM against the plan (largest horizontal distance) and the whole-body ZMP against the
planned one (median and 90th percentile distance: what swing legs, pelvis tilt and the contact switches
add to the cart-table model).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def motions(robot: str, cmu_scales: list[float], quick: bool = False):
    """``(label, motion, contact time scale)`` of each walk (``quick``: a 2-step planted walk only)."""
    from dynik_ros.io.bvh import read_bvh
    from dynik_ros.io.human_motion import resampled, time_scaled
    from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter

    human = Retargeter.from_config(robot).config.human
    size = {"height": human.height, "mass": human.mass}
    if quick:
        yield "planted walk 2 steps", planted_walk(PlantedWalkSpec(steps=2), 100.0, **size), 1.0
        return
    yield "planted walk 1.25 s steps", planted_walk(PlantedWalkSpec(), 100.0, **size), 1.0
    fast = PlantedWalkSpec(double_support=0.1, single_support=0.5)
    yield "planted walk 0.6 s steps", planted_walk(fast, 100.0, **size), 1.0
    yield "synthetic walk 6 s", synthetic_human_motion("walking", 6.0, 100.0, **size), 1.0
    cmu = read_bvh(ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh")
    rate = 1.0 / float(np.median(np.diff(cmu.times)))
    for factor in cmu_scales:
        motion = cmu if factor == 1.0 else resampled(time_scaled(cmu, factor), rate)
        yield f"CMU 131_01 x{factor:g}", motion, factor


def switches_far(flags: np.ndarray, times: np.ndarray, window: float = 0.1) -> np.ndarray:
    """Samples more than ``window`` seconds from any change of the detection's contact flags."""
    change = np.flatnonzero(np.any(np.diff(flags >= 0, axis=0), axis=1)) + 1
    if not len(change):
        return np.ones(len(times), dtype=bool)
    return np.min(np.abs(times[:, None] - times[change][None, :]), axis=1) > window


def run(robot: str, label: str, motion, factor: float) -> dict:
    from dynik_ros.retarget.balance import support_figures
    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.retarget.zmp_figures import zmp_figures

    row: dict = {"label": label, "samples": len(motion.times)}
    for name in ("plain", "quasi_static", "zmp"):
        retargeter = Retargeter.from_config(robot)
        if factor != 1.0:
            retargeter.time_scale_contact(factor)
        plan = "quasi_static" if name == "plain" else name
        spec = replace(retargeter.config.balance, enabled=name != "plain", plan=plan)
        retargeter.config = replace(retargeter.config, balance=spec)
        measurements, flags = retargeter.motion_measurements(motion)
        balanced = retargeter.balanced(motion.times, measurements, flags)
        result = retargeter.run(motion.times, balanced, settle=1.0, contacts=flags)
        feet, half = retargeter.config.feet, spec.sole_half_width
        figures = zmp_figures(
            retargeter.robot, motion.times, result.q, flags, feet, half, retargeter.contact.robot_ground
        )
        far = switches_far(flags, np.asarray(motion.times))
        distance = figures.distance
        counted = np.isfinite(distance)
        row[name] = (
            100 * figures.fraction_inside(0.01),
            100 * float(np.mean(distance[counted & far] >= 0.01)),
            int((~result.solved).sum()),
        )
        if name == "zmp":
            plan = retargeter.zmp_plan
            com = support_figures(retargeter.robot, result.q, flags, feet, half).com[:, :2]
            error = np.linalg.norm(figures.zmp - plan.zmp, axis=1)
            row["plan"] = f"{1e3 * plan.margin:.0f} mm"  # the margin it solved with (relaxed_plan)
            row["com_error"] = float(np.abs(com - plan.com).max())
            row["zmp_error"] = (float(np.nanmedian(error)), float(np.nanpercentile(error, 90)))
            row["zmp_error_far"] = float(np.nanmedian(error[far]))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--robot", default="g1")
    parser.add_argument("--cmu-scale", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--quick", action="store_true", help="a 2-step planted walk only (smoke run)")
    args = parser.parse_args(argv)
    rows = []
    for label, motion, factor in motions(args.robot, args.cmu_scale, args.quick):
        rows.append(run(args.robot, label, motion, factor))
        print(f"  {label}: done", file=sys.stderr)
    print(f"{args.robot}: whole-body ZMP of the output >= 1 cm inside the support of the feet in contact")
    print(
        f"  {'motion':<26} {'samples':>7} {'plan':>9} {'all contact samples':>24} "
        f"{'> 0.1 s from a switch':>24} {'CoM-plan':>9} {'ZMP-plan med/p90':>17} {'far':>6}"
    )
    both = "plain / q-static / zmp %"
    print(f"  {'':<44} {both:>24} {both:>24} {'[mm]':>9} {'[mm]':>17}")
    for r in rows:
        both = [r[n] for n in ("plain", "quasi_static", "zmp")]
        print(
            f"  {r['label']:<26} {r['samples']:>7} {r['plan']:>9} "
            f"{both[0][0]:6.1f} / {both[1][0]:5.1f} / {both[2][0]:5.1f}   "
            f"{both[0][1]:6.1f} / {both[1][1]:5.1f} / {both[2][1]:5.1f}   "
            f"{1e3 * r['com_error']:7.1f} {1e3 * r['zmp_error'][0]:8.1f} / {1e3 * r['zmp_error'][1]:6.0f} "
            f"{1e3 * r['zmp_error_far']:6.1f}"
            + ("" if not any(b[2] for b in both) else f"  held {[b[2] for b in both]}")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
