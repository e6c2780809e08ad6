"""``dynik-bench``: the Figure 7 table (models x scenarios x methods) plus a steady-memory check.

``dynik-bench --quick`` is the short smoke run that CI executes; figures from it are indicative only.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from dynik_ros.bench.figure7 import METHODS, Row, format_table, run_case, steady_memory
from dynik_ros.bench.setups import MODELS, load_setup
from dynik_ros.motion.synthetic import SCENARIOS, synthesize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dynik-bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short smoke run (CI)")
    parser.add_argument("--models", nargs="+", default=None, choices=MODELS)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--duration", type=float, default=None, help="seconds of motion per case")
    parser.add_argument("--rate", type=float, default=60.0, help="sample rate, Hz (paper: 60 Hz suit data)")
    parser.add_argument("--memory-steps", type=int, default=None, help="steps of the steady-memory check")
    args = parser.parse_args(argv)
    duration = args.duration or (3.0 if args.quick else 12.0)
    memory_steps = args.memory_steps if args.memory_steps is not None else (5_000 if args.quick else 100_000)
    models = args.models or (["human66"] if args.quick else list(MODELS))
    print(
        f"dynik-bench: {platform.processor() or platform.machine()}, python {platform.python_version()}, "
        f"{duration:g} s per case at {args.rate:g} Hz, 2 s transient discarded"
    )
    rows: list[Row] = []
    for model_name in models:
        setup = load_setup(model_name)
        for scenario in args.scenarios:
            motion = synthesize(
                setup.motion_robot,
                scenario,
                duration=duration + 2.0,
                rate=args.rate,
                links=setup.links,
                standing_height=setup.standing_height,
            )
            motion = setup.adapt(motion)
            for method in args.methods:
                start = time.perf_counter()
                rows.append(run_case(model_name, setup.robot, setup.targets, motion, method, setup.q0))
                print(
                    f"  {model_name:<8} {scenario:<8} {method:<11} {time.perf_counter() - start:5.1f} s",
                    file=sys.stderr,
                )
    print(format_table(rows))
    if memory_steps:
        setup = load_setup(models[0])
        motion = setup.adapt(
            synthesize(
                setup.motion_robot,
                "walking",
                duration=10.0,
                rate=args.rate,
                links=setup.links,
                standing_height=setup.standing_height,
            )
        )
        from dynik_ros.core.dynamical_ik import DynamicalIK

        ik = DynamicalIK(setup.robot, setup.targets, q0=setup.q0)
        measurements = motion.measurements(setup.targets)
        counter = iter(range(10**12))

        def step() -> None:
            ik.step(measurements[next(counter) % len(measurements)], 1.0 / args.rate)

        first, last = steady_memory(step, memory_steps)
        print(
            f"steady memory ({models[0]}, dynamical, {memory_steps} steps): "
            f"RSS {first:.0f} KiB -> {last:.0f} KiB (growth {last - first:+.0f} KiB)"
        )
    walking = [r for r in rows if r.scenario == "walking"]
    for r in walking:
        if r.method == "dynamical":
            s = r.stats
            print(
                f"target check {r.model} walking dynamical: p50 {s['p50']:.3f} ms (<= 0.6), "
                f"p99 {s['p99']:.3f} ms (<= 1.5)"
            )
    return 0 if all(np.isfinite(r.mnte) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
