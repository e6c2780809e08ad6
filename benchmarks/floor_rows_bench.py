"""What the floor rows cost and give (``contact.floor_rows``, core/floor_rows.py), both IKs in one run.

    .venv/bin/python benchmarks/floor_rows_bench.py                     # the committed CMU excerpt, G1
    .venv/bin/python benchmarks/floor_rows_bench.py FILE [FILE ...] --robots g1 icub talos
    .venv/bin/python benchmarks/floor_rows_bench.py FILE [FILE ...] --against centre   # vs centre-line rows

Per capture and robot, the same targets (``dynik-retarget``'s: the IK's step grid, contact rules, settle
1 s, the trapezoid) are tracked by two IKs, without and with floor rows (``--against centre``: with the
rows on the soles' centre line only, half width 0, the rows before they took the corners, against the map's
rows on the corners), stepped alternately sample by sample so that a shared machine's load falls on both
alike. Printed: the IK step's thread CPU time (mean,
p50, p99 in ms) of each and the ratio of the means, the deepest sole corner under the floor of each written
trajectory (forward kinematics), and the steps whose floor rows were softened or left out.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXCERPT = ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh"


def deepest_mm(retargeter, qs: np.ndarray) -> float:
    """Largest depth of a sole corner under the floor over ``qs`` (mm; 0 if never under): the foot
    figures' (``retarget/foot_figures.py``, the map's sole half width)."""
    from dynik_ros.retarget.foot_figures import foot_figures

    feet = retargeter.config.feet
    figures = foot_figures(
        retargeter.robot, qs, np.arange(len(qs), dtype=float), np.full((len(qs), len(feet)), -1), feet, 0.0,
        retargeter.contact.robot_ground, half_width=retargeter.config.balance.sole_half_width,
    )  # fmt: skip
    return max(f.penetration_max_mm for f in figures)


def step_alternately(iks: dict, times: np.ndarray, measurements, nq: int):
    """Every IK of ``iks`` stepped through ``measurements`` at ``times``, alternately sample by sample (a
    shared machine's load falls on all alike): per IK the step's thread CPU time (s), the written ``q`` and
    each step's ``StepInfo``."""
    dts = np.diff(times, prepend=times[0] - (times[1] - times[0]))
    cpu = {key: np.empty(len(times)) for key in iks}
    qs = {key: np.empty((len(times), nq)) for key in iks}
    infos: dict = {key: [] for key in iks}
    for k, m in enumerate(measurements):
        for key, ik in iks.items():
            start = time.thread_time()
            ik.step(m, float(dts[k]))
            cpu[key][k] = time.thread_time() - start
            qs[key][k] = ik.q
            infos[key].append(ik.info)
    return cpu, qs, infos


def compare(path: Path, robot: str, against: str = "none") -> str:
    from dynik_ros.core.floor_rows import points_of_feet
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.ik_steps import on_ik_steps
    from dynik_ros.retarget.retargeter import MAX_IK_STEP, Retargeter

    motion = read_motion_file(path)
    rt = Retargeter.from_config(robot)
    rt.reset()
    arrays, _ = on_ik_steps(*rt.motion_arrays(motion), MAX_IK_STEP)
    measurements, _ = rt.compute(*arrays)
    times = arrays[0]
    corners = rt.make_ik()  # the map's: floor rows on the soles' corners
    if against == "centre":
        floor = dataclasses.replace(corners.config.floor, points=points_of_feet(rt.config.feet, 0.0))
        baseline = rt.make_ik(dataclasses.replace(corners.config, floor=floor))
    else:
        rows_on = rt.config
        off = dataclasses.replace(rows_on.contact, floor_rows=False)
        rt.config = dataclasses.replace(rows_on, contact=off)
        baseline = rt.make_ik()
        rt.config = rows_on
    iks = {False: baseline, True: corners}
    for ik in iks.values():
        rt.settle(ik, measurements[0], 1.0)
    cpu, qs, _ = step_alternately(iks, times, measurements, rt.robot.nq)
    floor = iks[True].extra.floor
    cells = []
    for on in (False, True):
        ms = 1e3 * cpu[on][1:]
        cells.append(
            f"{ms.mean():.3f} / {np.percentile(ms, 50):.3f} / {np.percentile(ms, 99):.3f} ms, "
            f"{deepest_mm(rt, qs[on]):.1f} mm"
        )
    ratio = cpu[True][1:].mean() / cpu[False][1:].mean()
    return (
        f"{path.name:<36} {robot:<6} {len(times):>5} | {cells[0]:<34} | {cells[1]:<34} | {ratio:5.2f} | "
        f"{floor.counts['softened']} / {floor.counts['dropped']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="*", type=Path, help="capture files (default: the committed excerpt)")
    parser.add_argument("--robots", nargs="+", default=["g1"], help="robots (default: g1)")
    parser.add_argument(
        "--against", choices=("none", "centre"), default="none",
        help="the first IK: without floor rows (none) or with them on the soles' centre line (centre)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    files = args.files or [EXCERPT]
    print(
        f"{'capture':<36} {'robot':<6} {'steps':>5} | {args.against + ': CPU mean/p50/p99, deepest':<34} | "
        f"{'with floor rows':<34} | ratio | softened / left out"
    )
    for path in files:
        for robot in args.robots:
            print(compare(path, robot, args.against), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
