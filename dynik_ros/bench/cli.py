"""``dynik-bench``: the Figure 7 table (models x scenarios x methods) plus a steady-memory check.

``dynik-bench --quick`` is the short smoke run that CI executes; figures from it are indicative only.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from dynik_ros.bench.figure7 import METHODS, Row, available_methods, format_table, run_case, steady_memory
from dynik_ros.bench.setups import HUMANS, MODELS, load_case
from dynik_ros.motion.synthetic import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dynik-bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--models", nargs="+", default=None, choices=MODELS)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        choices=METHODS,
        help="default: all whose dependencies are installed (whole-body-ipopt needs casadi)",
    )
    parser.add_argument("--duration", type=float, default=None, help="seconds of motion per case")
    parser.add_argument("--rate", type=float, default=60.0, help="sample rate, Hz (paper: 60 Hz suit data)")
    parser.add_argument("--memory-steps", type=int, default=None, help="steps of the steady-memory check")
    parser.add_argument(
        "--recovery",
        nargs="*",
        default=None,
        metavar="MODEL",
        help="recovery scenario (start far from the motion) for these models; no name: all of "
        "g1 icub talos romeo human66 human48; --quick runs g1 only",
    )
    parser.add_argument(
        "--objectives",
        action="store_true",
        help="only the cost per step of the second seed's objectives (CoM, support, regularizers) vs the "
        "plain step, and the singularity case (bench/objectives.py); --quick runs it too, shorter",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="--objectives: replays of the walk in the one run (default 5; --quick 1); ratios per replay too",
    )
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.objectives or args.quick:
        from dynik_ros.bench.objectives import format_costs, singularity_table, step_costs, target_line

        repeats = args.repeats or (1 if args.quick else 5)
        print(
            f"objectives: CPU time per step on the G1 walk at 240 Hz, variants interleaved in one run, "
            f"{repeats} replay(s)"
        )
        costs = step_costs(duration=1.5 if args.quick else 6.0, rate=240.0, repeats=repeats)
        print(format_costs(costs))
        print(target_line(costs))
        print("singularity (pan-tilt shoulder passing 5 mm from its singular pose, 240 Hz):")
        print(singularity_table())
        if args.objectives:
            return 0
    duration = args.duration or (3.0 if args.quick else 12.0)
    memory_steps = args.memory_steps if args.memory_steps is not None else (5_000 if args.quick else 100_000)
    models = args.models or (["human66", "g1"] if args.quick else list(MODELS))
    methods = args.methods or available_methods()
    print(
        f"dynik-bench: {platform.processor() or platform.machine()}, python {platform.python_version()}, "
        f"{duration:g} s per case at {args.rate:g} Hz, 2 s transient discarded"
    )
    rows: list[Row] = []
    for model_name in models:
        for scenario in args.scenarios:
            case = load_case(model_name, scenario, duration + 2.0, args.rate)
            for method in methods:
                start = time.perf_counter()
                rows.append(
                    run_case(model_name, scenario, case.robot, case.targets, case.measurements, case.times,
                             method, case.q0)
                )  # fmt: skip
                print(
                    f"  {model_name:<8} {scenario:<8} {method:<17} {time.perf_counter() - start:5.1f} s",
                    file=sys.stderr,
                )
    print(format_table(rows))
    if memory_steps:
        from dynik_ros.core.dynamical_ik import DynamicalIK

        case = load_case(models[0], "walking", 10.0, args.rate)
        ik = DynamicalIK(case.robot, case.targets, q0=case.q0)
        counter = iter(range(10**12))

        def step() -> None:
            ik.step(case.measurements[next(counter) % len(case.measurements)], 1.0 / args.rate)

        first, last = steady_memory(step, memory_steps)
        print(
            f"steady memory ({models[0]}, dynamical, {memory_steps} steps): "
            f"RSS {first:.0f} KiB -> {last:.0f} KiB (growth {last - first:+.0f} KiB)"
        )
    recovery_ok = True
    if args.recovery is not None or args.quick:
        from dynik_ros.bench.recovery import RECOVERY_MODELS, recovery_table

        names = args.recovery or (["g1"] if args.quick else list(RECOVERY_MODELS))
        table, results = recovery_table(names, duration=4.0 if args.quick else 8.0)
        print("recovery: the robot's own joint sinusoids at 100 Hz (K = 20), the IK started elsewhere")
        print(table)
        print("  targets: converged <= 2 s at 100 Hz, 0 position / speed violations on the output")
        recovery_ok = all(
            r.position_violations == 0 and r.velocity_violations == 0 and np.isfinite(r.converge_time)
            for _, r in results
        )
    print("issue targets (dynamical IK; machine-dependent, compare ratios):")
    for r in rows:
        if r.method != "dynamical" or (r.model in HUMANS and r.scenario == "tpose"):
            continue
        s = r.stats
        p50 = f"p50 {s['p50']:.3f} ms (<= 0.6), " if r.model in HUMANS else ""
        print(f"  {r.model:<8} {r.scenario:<8} {p50}p99 {s['p99']:.3f} ms (<= 1.5), MNTE {r.mnte:.1e}")
        for w in rows:
            if (w.model, w.scenario) != (r.model, r.scenario) or not w.method.startswith("whole-body"):
                continue
            print(
                f"    vs {w.method:<17} p99 ratio {w.stats['p99'] / s['p99']:5.1f} (>= 5), "
                f"its MNTE {w.mnte:.1e} ({'dynamical lower' if r.mnte <= w.mnte else 'dynamical higher'})"
            )
    return 0 if all(np.isfinite(r.mnte) for r in rows) and recovery_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
