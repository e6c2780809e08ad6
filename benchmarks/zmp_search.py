"""Time of the ZMP plan's relaxed search (``retarget/zmp_plan.py`` ``relaxed_plan``: one LP for the largest
margin with a plan, then one QP just below it) against the bisection it replaced (to 1 mm over OSQP solves
from 0.3 m past the soles, each try's verdict taken as OSQP gives it), on the same polygons in one run.

    .venv/bin/python benchmarks/zmp_search.py [--robots g1 talos] [--cmu-scale 1 2 4] [--quick]

Per take: the margin each search returns, its time, the ratio, and how many OSQP solves the bisection made.
The polygons and references are those ``dynik-retarget --balance-plan zmp`` plans with (the default
contact detection). ``--quick``: the CMU 131_01 excerpt on the G1 only (smoke run).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def plan_arguments(robot: str, motion, factor: float) -> tuple:
    """The arguments the retargeter passes to ``relaxed_plan`` for ``motion`` (recorded, not re-derived)."""
    from dynik_ros.retarget import zmp_balance
    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.retarget.zmp_plan import ZmpPlanError

    retargeter = Retargeter.from_config(robot)
    if factor != 1.0:
        retargeter.time_scale_contact(factor)
    balance = replace(retargeter.config.balance, enabled=True, plan="zmp")
    retargeter.config = replace(retargeter.config, balance=balance)
    measurements, flags = retargeter.motion_measurements(motion)
    with mock.patch.object(zmp_balance, "relaxed_plan", wraps=zmp_balance.relaxed_plan) as spy:
        try:
            retargeter.balanced(motion.times, measurements, flags)
        except ZmpPlanError:  # no plan down to 0.3 m past the soles: the searches below say so
            pass
    return spy.call_args.args


def bisection(args: tuple, widest: float = 0.3) -> tuple[float | None, int]:
    """The old search: ``(margin, OSQP solves)`` by bisection to 1 mm (None: none down to ``widest``)."""
    from dynik_ros.retarget.zmp_plan import ZmpPlanError, solve_zmp_plan

    spec = args[5]

    def solves(margin: float) -> bool:
        try:
            solve_zmp_plan(*args[:5], replace(spec, margin=margin))
        except ZmpPlanError:
            return False
        return True

    if solves(spec.margin):
        return spec.margin, 1
    low, high, tries = spec.margin - widest, spec.margin, 2
    if not solves(low):
        return None, tries
    while high - low > 1e-3:
        middle = 0.5 * (low + high)
        low, high = (middle, high) if solves(middle) else (low, middle)
        tries += 1
    return low, tries


def main(argv: list[str] | None = None) -> int:
    from balance_zmp import motions

    from dynik_ros.retarget.zmp_plan import ZmpPlanError, relaxed_plan

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--robots", nargs="+", default=["g1", "talos"])
    parser.add_argument("--cmu-scale", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--quick", action="store_true", help="the CMU excerpt on the G1 only (smoke run)")
    args = parser.parse_args(argv)
    robots, scales = (["g1"], [1.0]) if args.quick else (args.robots, args.cmu_scale)

    def mm(margin: float | None) -> str:
        return "none" if margin is None else f"{1e3 * margin:.1f}"

    print("ZMP plan's relaxed search: margin [mm] (none: not down to 0.3 m past the soles) and time [s]")
    head = f"{'bisection':>10} {'tries':>5} {'[s]':>7} {'LP + QP':>10} {'[s]':>7} {'ratio':>6}"
    print(f"  {'robot':<6} {'take':<26} {head}")
    for robot in robots:
        for label, motion, factor in motions(robot, scales):
            if args.quick and not label.startswith("CMU"):
                continue
            plan_args = plan_arguments(robot, motion, factor)
            start = time.perf_counter()
            old, tries = bisection(plan_args)
            old_time = time.perf_counter() - start
            start = time.perf_counter()
            try:
                new = relaxed_plan(*plan_args).margin
            except ZmpPlanError:
                new = None
            new_time = time.perf_counter() - start
            print(
                f"  {robot:<6} {label:<26} {mm(old):>10} {tries:>5} {old_time:7.2f} {mm(new):>10} "
                f"{new_time:7.2f} {old_time / new_time:6.1f}"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
