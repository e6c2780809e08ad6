"""Is a rolled sole the targets' lean or the robot's? Every flat contact whose written sole rolls past 3 deg.

    .venv/bin/python benchmarks/lean_diagnosis.py DIR [--robots g1 icub talos talos:3] [-- options]
    .venv/bin/python benchmarks/lean_diagnosis.py FILE.bvh [--robots g1] [-- options]

For the full CMU 131 takes found in ``DIR`` (``cmu_131_0{1,2,3}.bvh``, as ``real_captures.CAPTURES`` names
them; or one capture file), each robot (``options``: dynik-retarget's contact options): the targets the
retargeter computes and the IK's written trajectory, then per flat contact (``FootContact.flat``) whose sole
tilts more than 3 deg, the leg's lean ``atan2(y, z)`` across the level sole's heading (``y``, ``z`` the foot
beside and below its hip) twice: from the targets (the foot's position target against the hip from the pelvis
target and the robot's hip offset, what ``contact.reach`` and ``contact.pelvis_reach`` act on) and on the
written robot (hip frame to foot frame), with the ankle roll's lean bounds
(:func:`dynik_ros.retarget.leg_reach.ankle_roll_lean`). A contact beyond the bounds only on the robot is one
the targets do not ask for (README, *The pelvis gives way*).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TAKES = ("cmu_131_01.bvh", "cmu_131_02.bvh", "cmu_131_03.bvh")
TILT_DEG = 3.0


def _options(retargeter, extra: list[str]):
    """``extra``'s contact options (``--reach on`` etc., read as dynik-retarget does) on ``retargeter``."""
    from dynik_ros.cli.retarget import build_parser

    args = build_parser().parse_args(["--robot", "g1"] + extra)
    changes = {
        "stance": args.stance,
        "anchor": args.anchor,
        "reach": None if args.reach is None else args.reach == "on",
        "pelvis_reach": None if args.pelvis_reach is None else args.pelvis_reach == "on",
        "swing_weight": args.swing_weight,
        "floor_rows": None if args.floor_rows is None else args.floor_rows == "on",
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if changes:
        retargeter.config = replace(retargeter.config, contact=replace(retargeter.config.contact, **changes))
        retargeter.set_calibration(retargeter.calibration)


def diagnose(path: Path, entry: str, extra: list[str]) -> tuple[int, int, int]:
    """Print the rolled flat contacts of ``path`` on robot ``entry`` (``talos:3``: 3x slower); returns
    (contacts, with the targets' lean beyond the bounds, with the robot's beyond them)."""
    from dynik_ros.core.dynamical_ik import DynamicalIKConfig
    from dynik_ros.io.human_motion import time_scaled
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget import Retargeter
    from dynik_ros.retarget.ik_steps import on_ik_steps
    from dynik_ros.retarget.retargeter import MAX_IK_STEP, ROBOT_INTEGRATION

    robot, _, scale = entry.partition(":")
    motion = read_motion_file(path)
    rt = Retargeter.from_config(robot)
    _options(rt, extra)
    if scale:
        motion = time_scaled(motion, float(scale))
        rt.time_scale_contact(float(scale))
    rt.reset()
    arrays, samples = on_ik_steps(*rt.motion_arrays(motion), MAX_IK_STEP)
    measurements, flags = rt.compute(*arrays, samples=samples)
    run = rt.run(arrays[0], measurements, ik=rt.make_ik(DynamicalIKConfig(integration=ROBOT_INTEGRATION)),
                 settle=1.0, contacts=flags, evaluate=False)  # fmt: skip
    t, p, r = arrays[0], arrays[1], arrays[2]
    a = rt.alignment.rotation
    shift = np.zeros(3)
    shift[:2] = rt.alignment.human_origin
    hips = rt.scaling.limb_roots((p - shift) @ a.T, a @ r)[:, rt._foot_rows]
    positions = np.array([m.positions for m in measurements])
    flat, heading = rt.contact.flat, rt.contact.leg_heading
    counts = [0, 0, 0]
    for f, foot in enumerate(rt.config.feet):
        anchor = next(x for x in rt.config.targets if x.frame == foot.frame).anchor.frame
        bounds = rt.contact.lean_bounds[f]
        if bounds is None:
            continue
        lo, hi = (math.degrees(b) for b in bounds)
        k = 0
        while k < len(t):
            if not flat[k, f]:
                k += 1
                continue
            e = k
            while e + 1 < len(t) and flat[e + 1, f]:
                e += 1
            tilt, target, written = [], [], []
            for j in range(k, e + 1):
                lateral = np.array((-math.sin(heading[j, f]), math.cos(heading[j, f]), 0.0))
                sole, rotation = rt.robot.frame_pose(run.q[j], foot.frame)
                hip, _ = rt.robot.frame_pose(run.q[j], anchor)
                tilt.append(math.degrees(math.acos(min(1.0, rotation[2, 2]))))
                d = sole - hip
                written.append(math.degrees(math.atan2(d @ lateral, -d[2])))
                d = positions[j, rt._foot_rows[f]] - hips[j, f]
                target.append(math.degrees(math.atan2(d @ lateral, -d[2])))
            if max(tilt) > TILT_DEG:
                target_out = any(x < lo or x > hi for x in target)
                robot_out = any(x < lo - 1.0 or x > hi + 1.0 for x in written)  # past the joint limit itself
                counts[0] += 1
                counts[1] += target_out
                counts[2] += robot_out
                print(
                    f"{path.name} {entry:8s} {foot.side:5s} {t[k]:6.2f}-{t[e]:6.2f} s  "
                    f"tilt {max(tilt):4.1f} deg  targets' lean {min(target):6.1f}..{max(target):6.1f}  "
                    f"robot's {min(written):6.1f}..{max(written):6.1f}  bounds {lo:.0f}..{hi:.0f} deg",
                    flush=True,
                )
            k = e + 1
    return counts[0], counts[1], counts[2]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a directory with the CMU 131 takes, or one capture file")
    parser.add_argument("--robots", nargs="+", default=["g1", "icub", "talos", "talos:3"])
    args = parser.parse_args(argv)
    files = [args.source] if args.source.is_file() else [args.source / n for n in TAKES]
    files = [f for f in files if f.exists()]
    if not files:
        print(f"no capture found at {args.source}", file=sys.stderr)
        return 2
    total = np.zeros(3, dtype=int)
    for path in files:
        for entry in args.robots:
            total += diagnose(path, entry, extra)
    print(
        f"flat contacts with a sole rolled past {TILT_DEG:g} deg: {total[0]}; the targets' lean beyond the "
        f"ankle roll's bounds in {total[1]}, the written robot's beyond its joint limits in {total[2]}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
