"""What the human foot does when the robot sole misbehaves: the worst contact of each capture x robot row.

    .venv/bin/python benchmarks/contact_diagnosis.py --table DIR [--robots g1 talos:3] [--captures NAME ...]
    .venv/bin/python benchmarks/contact_diagnosis.py FILE --robot g1 [--time-scale 3] [-- extra options]

Each row runs ``dynik-retarget`` (in this process, the captures of ``real_captures.CAPTURES`` with their
options), then per foot and contact phase measures on the written trajectory what
:mod:`dynik_ros.retarget.foot_figures` does (flat tilt, slide, depth) and prints the contact that misses its
target by the largest factor, with what the human foot did then (aligned to the robot's world, as the
retargeter reads it): heel (the foot link, the ankle) and toe heights above standing and their horizontal
speeds, the human foot's pitch (heel-to-toe line against the floor) and roll, its yaw turned since touch-down,
how far its footprint moved, the contact's length and how many contacts that foot had (flicker: contacts
shorter than 0.15 s), the robot sole there (tilt, heel/toe height) and the joints of that leg at a position
limit (within 1 deg) or at their velocity limit. One line per row, then a key to the labels it prints.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TILT, SLIDE, DEPTH = 3.0, 5.0, 2.0  # the targets (deg, mm, mm)


def _run(path: Path, robot: str, extra: list[str]):
    """``dynik-retarget`` in this process; returns the retargeter, the aligned human arrays and the npz."""
    from dynik_ros.cli import retarget as cli
    from dynik_ros.retarget import Retargeter

    seen: dict = {}
    original = Retargeter.compute

    def spy(self, times, positions, rotations, lin=None, ang=None, **options):
        out = original(self, times, positions, rotations, lin, ang, **options)
        a = self.alignment.rotation
        shift = np.zeros(3)
        shift[:2] = self.alignment.human_origin
        seen.update(
            rt=self,
            times=np.asarray(times, dtype=float),
            p=(np.asarray(positions) - shift) @ a.T,
            r=a @ np.asarray(rotations),
            v=None if lin is None else np.asarray(lin) @ a.T,
        )
        return out

    Retargeter.compute = spy
    try:
        with tempfile.TemporaryDirectory() as out:
            with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                code = cli.main(
                    [str(path), "--robot", robot, "--out", out, "--no-bag", "--no-plots", "--quiet"] + extra
                )
            data = dict(np.load(Path(out) / "retarget.npz"))
    finally:
        Retargeter.compute = original
    return code, seen, data


def _phases(states: np.ndarray) -> list[tuple[int, int]]:
    inside = np.concatenate(([False], states >= 0, [False]))
    edges = np.flatnonzero(np.diff(inside.astype(int)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _yaw(r: np.ndarray) -> np.ndarray:
    return np.arctan2(r[..., 1, 0], r[..., 0, 0])


def diagnose(path: Path, robot: str, extra: list[str]) -> list[str]:
    """Lines describing the worst contact of each foot of one row (see the module docstring)."""
    code, seen, data = _run(path, robot, extra)
    rt = seen["rt"]
    model = rt.robot.model
    fk = model.createData()
    q, times, contacts = data["q"], data["times"], data["contacts"]
    feet = rt.config.feet
    blend = rt.config.contact.blend_time
    n = len(q)
    pos = np.empty((n, len(feet), 3))
    rot = np.empty((n, len(feet), 3, 3))
    fids = [rt.robot.frame_id(f.frame) for f in feet]
    for k in range(n):
        pin.framesForwardKinematics(model, fk, q[k])
        for f, fid in enumerate(fids):
            pos[k, f] = fk.oMf[fid].translation
            rot[k, f] = fk.oMf[fid].rotation
    s = q[:, 7:]
    dt = np.diff(times)
    speed = np.abs(np.diff(s, axis=0)) / dt[:, None]
    at_vel = np.vstack([speed >= 0.98 * rt.robot.velocity_limit, np.zeros((1, s.shape[1]), bool)])
    at_pos = (s <= rt.robot.lower + np.radians(1.0)) | (s >= rt.robot.upper - np.radians(1.0))
    names = list(rt.robot.joint_names)
    # the human arrays the retargeter read (aligned); the run's samples are the input's one for one
    hp, hr, hv = seen["p"], seen["r"], seen["v"]
    contact = rt.contact
    toe = getattr(contact, "toe", np.zeros((n, len(feet)), dtype=bool))  # the toe class, if any
    heights_link = [
        hp[:, group, 2] - contact.human_ground - clear
        for group, clear in zip(contact.sensor_links, contact.clearance, strict=True)
    ]
    speeds_link = [
        np.zeros((n, len(group))) if hv is None else np.linalg.norm(hv[:, group, :2], axis=2)
        for group in contact.sensor_links
    ]
    lines = []
    for f, foot in enumerate(feet):
        side = "left" if "left" in str(foot.side).lower() or f == 0 else "right"
        sole = np.array(foot.sole, dtype=float).reshape(-1, 3)
        points = pos[:, f, None] + np.einsum("nij,mj->nmi", rot[:, f], sole)
        centre = pos[:, f] + rot[:, f] @ sole.mean(axis=0)
        tilt = np.degrees(np.arccos(np.clip(rot[:, f, 2, 2], -1.0, 1.0)))
        depth = 1e3 * np.maximum(0.0, -points[..., 2].min(axis=1))
        phases = _phases(contacts[:, f])
        short = sum(1 for a, b in phases if times[b - 1] - times[a] < 0.15)
        group = contact.sensor_links[f]
        support = model.supports[model.frames[fids[f]].parentJoint]
        leg = [model.joints[j].idx_q - 7 for j in support if model.joints[j].idx_q >= 7]
        worst = None
        for a, b in phases:
            flat = a + int(np.searchsorted(times[a:b], times[a] + blend - 1e-9))
            if flat >= b:
                continue
            level = ~toe[flat:b, f]  # the toe class's samples are not meant level (retarget/foot_contact.py)
            if not level.any():
                continue
            first = flat + int(np.argmax(level))
            drift = np.where(level, 1e3 * np.linalg.norm(centre[flat:b, :2] - centre[first, :2], axis=1), 0.0)
            level_tilt = np.where(level, tilt[flat:b], 0.0)
            scores = {
                "tilt": level_tilt.max() / TILT,
                "slide": drift.max() / SLIDE,
                "depth": depth[a:b].max() / DEPTH,
            }
            key = max(scores, key=scores.get)
            if worst is None or scores[key] > worst[0]:
                k = flat + int({"tilt": level_tilt, "slide": drift, "depth": depth[flat:b]}[key].argmax())
                worst = (scores[key], key, a, flat, b, k, drift.max())
        if worst is None:
            lines.append(f"  {side}: no flat contact ({len(phases)} contacts)")
            continue
        score, key, a, flat, b, k, slide = worst
        level_max = np.where(~toe[flat:b, f], tilt[flat:b], 0.0).max()
        hx = hp[:, group]  # (N, links, 3): foot (ankle) then toe
        heel_h, toe_h = heights_link[f][k, 0], heights_link[f][k, -1]
        heel_v, toe_v = speeds_link[f][k, 0], speeds_link[f][k, -1]
        line_vec = hx[k, -1] - hx[k, 0]
        pitch = math.degrees(math.atan2(-line_vec[2], np.linalg.norm(line_vec[:2])))  # + toe below heel
        r_foot = hr[:, rt._foot_links[f]]
        roll = math.degrees(math.atan2(r_foot[k, 2, 1], r_foot[k, 2, 2]))
        yaw_turn = math.degrees(float(np.angle(np.exp(1j * (_yaw(r_foot[k]) - _yaw(r_foot[flat]))))))
        yaw_span = np.degrees(np.unwrap(_yaw(r_foot[flat:b])))
        footprint = 1e3 * np.linalg.norm(hx[flat:b, :, :2] - hx[flat, :, :2], axis=2).min(axis=1).max()
        heel_min = 1e3 * heights_link[f][flat:b, 0].min()
        toe_range = 1e3 * np.ptp(heights_link[f][flat:b, -1])
        robot_heel, robot_toe = 1e3 * points[k, 0, 2], 1e3 * points[k, -1, 2]
        rz = rot[k, f]
        r_pitch = math.degrees(math.asin(max(-1.0, min(1.0, -rz[2, 0]))))
        r_roll = math.degrees(math.atan2(rz[2, 1], rz[2, 2]))
        vel_joints = [names[j] for j in leg if at_vel[a:b, j].any()]
        pos_joints = [names[j] for j in leg if at_pos[a:b, j].any()]
        share_vel = 100.0 * at_vel[a:b][:, leg].any(axis=1).mean() if leg else 0.0
        lines.append(
            f"  {side}: worst {key} x{score:.1f} at t {times[k] - times[0]:.2f} s in contact "
            f"{times[a] - times[0]:.2f}-{times[b - 1] - times[0]:.2f} s "
            f"({len(phases)} contacts, {short} short; on the toes {100 * toe[a:b, f].mean():.0f} %); "
            f"tilt max {level_max:.1f} deg, slide {slide:.1f} mm, depth {depth[a:b].max():.1f} mm\n"
            f"     human then: heel {1e3 * heel_h:.0f} mm / toe {1e3 * toe_h:.0f} mm above standing, speeds "
            f"{heel_v:.2f}/{toe_v:.2f} m/s, heel-up pitch {pitch:+.0f} deg, roll {roll:+.0f} deg, yaw "
            f"turned {yaw_turn:+.0f} deg since flat (span {np.ptp(yaw_span):.0f}); over the contact: heel "
            f"lowest {heel_min:.0f} mm, toe height range {toe_range:.0f} mm, "
            f"footprint moved {footprint:.0f} mm\n"
            f"     robot then: sole tilt {tilt[k]:.1f} deg (pitch {r_pitch:+.1f}, roll {r_roll:+.1f}), "
            f"heel/toe z "
            f"{robot_heel:.1f}/{robot_toe:.1f} mm; leg at vel. limit on {share_vel:.0f} % of the contact "
            f"{vel_joints[:4]}; at a position limit {pos_joints[:4]}"
        )
    return [f"exit {code}"] + lines


def split_arguments(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """This script's own arguments (before ``--``) and the ``dynik-retarget`` options after it. An
    ``argparse.REMAINDER`` positional after the optional FILE took everything behind FILE, ``--robot`` and
    ``--time-scale`` included: the header named the default robot while the run was another's."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:cut]), argv[cut + 1 :]


def main(argv: list[str] | None = None) -> int:
    from real_captures import CAPTURES, EXCERPT

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--robot", default="g1")
    parser.add_argument("--time-scale", type=float)
    parser.add_argument("--table", type=Path, metavar="DIR")
    parser.add_argument("--robots", nargs="+", default=["g1", "icub", "talos", "talos:3"])
    parser.add_argument("--captures", nargs="+", help="file names of CAPTURES to run (default all)")
    args, extra = split_arguments(parser, sys.argv[1:] if argv is None else argv)
    if args.table is None:
        scale = ["--time-scale", str(args.time_scale)] if args.time_scale else []
        print(f"== {args.file} {args.robot}: " + "\n".join(diagnose(args.file, args.robot, extra + scale)))
        return 0
    for name, label, _, options in CAPTURES:
        if args.captures and name not in args.captures:
            continue
        path = EXCERPT if name == EXCERPT.name else args.table / name
        if not path.exists():
            continue
        for entry in args.robots:
            robot, _, scale = entry.partition(":")
            opts = list(options) + (["--time-scale", scale] if scale else []) + extra
            out = diagnose(path, robot, opts)
            print(f"== {label} | {entry}: {out[0]}\n" + "\n".join(out[1:]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
