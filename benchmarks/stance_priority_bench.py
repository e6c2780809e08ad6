"""What prioritized hard stance costs and gives (``contact.stance: hard``, core/stance_priority.py).

    .venv/bin/python benchmarks/stance_priority_bench.py                  # the committed CMU excerpt, TALOS
    .venv/bin/python benchmarks/stance_priority_bench.py FILE [FILE ...] --robots g1 icub talos

Per capture and robot, the same targets (``dynik-retarget``'s: the IK's step grid, contact rules, settle
1 s, the trapezoid, the map's floor rows) are tracked by three IKs stepped alternately sample by sample
(:func:`floor_rows_bench.step_alternately`): the weighted feet (the maps' default), the plain hard stance
rows ``v*_s +- tol`` and the prioritized ones (``y* +- tol``). Printed per IK: the IK step's thread CPU time
(mean / p99 in ms; ratio of the means to the weighted IK), the steps OSQP ended at its iteration limit or
"solved inaccurate", the steps whose floor rows were softened or left out, and for the prioritized IK the
steps whose stance rows yielded / whose priority 1 failed / that took its solution.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from floor_rows_bench import EXCERPT, step_alternately  # noqa: E402

KINDS = ("weighted", "plain hard", "prioritized")
UNCONVERGED = ("maximum iterations reached", "solved inaccurate")


def compare(path: Path, robot: str) -> str:
    from dynik_ros.core.dynamical_ik import DynamicalIKConfig
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.ik_steps import on_ik_steps
    from dynik_ros.retarget.retargeter import MAX_IK_STEP, ROBOT_INTEGRATION, Retargeter

    motion = read_motion_file(path)
    rt = Retargeter.from_config(robot)
    contact = dataclasses.replace(rt.config.contact, stance="hard")  # the flat flags come with any stance
    rt.config = dataclasses.replace(rt.config, contact=contact)
    rt.contact.spec = contact
    rt.reset()
    arrays, _ = on_ik_steps(*rt.motion_arrays(motion), MAX_IK_STEP)
    measurements, _ = rt.compute(*arrays)
    configs = {
        "weighted": None,
        "plain hard": DynamicalIKConfig(integration=ROBOT_INTEGRATION, stance_priority=False),
        "prioritized": None,
    }
    iks = {}
    weighted = dataclasses.replace(contact, stance="weighted")
    for kind, config in configs.items():
        if kind == "weighted":  # the map's stance back to weighted: no stance rows
            rt.config = dataclasses.replace(rt.config, contact=weighted)
        iks[kind] = rt.make_ik(config)
        rt.config = dataclasses.replace(rt.config, contact=contact)
        rt.settle(iks[kind], measurements[0], 1.0)
    cpu, _, infos = step_alternately(iks, arrays[0], measurements, rt.robot.nq)
    cells = []
    for kind in KINDS:
        ms = 1e3 * cpu[kind][1:]
        unconverged = sum(info.status in UNCONVERGED for info in infos[kind])
        relaxed = sum(info.floor not in ("hard", "") for info in infos[kind])
        ratio = cpu[kind][1:].mean() / cpu["weighted"][1:].mean()
        figures = f"{ms.mean():.3f} / {np.percentile(ms, 99):.3f} ms x{ratio:.2f}"
        cells.append(f"{figures}, {unconverged:>3}, {relaxed:>3}")
    counts = " / ".join(str(n) for n in iks["prioritized"].extra.priority.counts.values())
    return f"{path.name:<36} {robot:<6} {len(arrays[0]):>5} | " + " | ".join(cells) + f" | {counts}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", type=Path, help="capture files (default: the committed excerpt)")
    parser.add_argument("--robots", nargs="+", default=["talos"], help="robots (default: talos)")
    args = parser.parse_args(argv)
    cell = "step CPU mean / p99, ratio; unconverged, floor relaxed"
    print(
        f"{'capture':<36} {'robot':<6} {'steps':>5} | "
        + " | ".join(f"{kind}: {cell}" for kind in KINDS)
        + " | yielded / failed / nu_1 taken / priority 1 skipped"
    )
    for path in args.files or [EXCERPT]:
        for robot in args.robots:
            print(compare(path, robot), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
