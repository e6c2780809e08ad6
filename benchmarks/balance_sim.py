"""The balanced G1 walk played in the MuJoCo sim with a free base (issue 12 item 4, an experiment): does a
quasi-statically balanced retarget stand up to physics with position servos and no balance controller?

The synthetic walk is retargeted with the map's balance on (the look-ahead plan of ``retarget/balance.py``).
The sim starts standing; a transition first moves the CoM over the stance foot of the start frame with both
feet down (a dynamical-IK run with the support rows), then blends the joints to the start frame; from there
the output is played ``--slow`` times slower than recorded. The run reports when the base fell (pelvis
below 0.45 m or tilted more than 45 deg) and which phase of the gait that was.

    .venv/bin/python benchmarks/balance_sim.py [--slow 4] [--start 30] [--kp-scale 4] [--hold]

``--planted`` plays instead the planted walk (``motion/planted_walk.py``: real double supports, 4 steps)
retargeted onto the G1 with ``--balance``, from standing, ``--slow`` times slower, with the ground contact's
time constant ``--contact`` (MuJoCo's default 0.02 s), open loop (``sim/walk_playback.py``); one line per
``--slow`` value:

    .venv/bin/python benchmarks/balance_sim.py --planted --slow 4 8 12 16 --contact 0.005

``--plan zmp quasi_static`` plays the walk retargeted with each balance plan (``retarget/zmp_plan.py``: the
dynamic plan); ``--retime`` retargets the walk itself ``--slow`` times slower (its supports stretched, the
contact thresholds following the clock) and plays it as written, since a dynamic plan only holds at the
speed it was planned for; ``--steps`` sets the walk's steps (default 4). Each line also gives the share of
contact samples whose whole-body ZMP (``retarget/zmp_figures.py``) is >= 1 cm inside the support.

    .venv/bin/python benchmarks/balance_sim.py --planted --retime --plan zmp quasi_static --slow 1 2 \
        --steps 3 --kp-scale 4 --contact 0.005

``--stabilizer off on`` plays each case open loop and with the walking stabilizer (``control/stabilizer.py``:
foot damping at the ankles, DCM feedback to a desired ZMP distributed between the feet, foot force difference;
measured and applied by ``sim/walk_stabilizer.py``), one line each; ``--gain NAME=VALUE`` overrides its
gains (``StabilizerConfig``):

    .venv/bin/python benchmarks/balance_sim.py --planted --retime --plan zmp --slow 1 --steps 3 \
        --stabilizer off on [--gain dcm_gain=3 --gain force_gain=1e-4]

``--walk synthetic`` / ``--walk cmu`` plays the 6 s synthetic walk or the committed CMU 131_01 excerpt instead
(retargeted at each ``--slow`` speed, resampled to its own rate); both start mid-stride, so a start from
standing is prepended (``start_sequence``: the CoM moved over the first frame's stance foot, then a blend to
the first frame; a fall there is reported at a negative sample):

    .venv/bin/python benchmarks/balance_sim.py --planted --walk cmu --plan zmp --slow 1 2 4 \
        --stabilizer off on
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import numpy as np


def com_shift(retargeter, flags: np.ndarray, start: int, seconds: float = 3.0) -> np.ndarray:
    """Standing pose with the CoM over the stance foot of frame ``start``, both feet kept down."""
    from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
    from dynik_ros.core.sole import sole_polygon
    from dynik_ros.core.targets import FrameTarget, Measurements
    from dynik_ros.retarget.balance import ik_config

    robot, feet = retargeter.robot, retargeter.config.feet
    q_stand = retargeter.initial_configuration()
    down = np.flatnonzero(flags[start] >= 0)
    stance = int(down[0]) if len(down) else 0
    frames = [f.frame for f in feet]
    weight = (10.0,) * 3
    targets = [
        FrameTarget(f, position=True, orientation=True, position_weight=weight, orientation_weight=weight)
        for f in frames
    ]
    targets.append(FrameTarget(retargeter.config.root.frame, position=False, orientation=True))
    config = ik_config(replace(retargeter.config.balance, enabled=True), feet, DynamicalIKConfig())
    ik = DynamicalIK(robot, targets, config, q_stand)
    poses = [robot.frame_pose(q_stand, f) for f in [*frames, retargeter.config.root.frame]]
    sole_centre = np.mean(np.array(sole_polygon(feet[stance].sole, 0.0)), axis=0)
    centre = poses[stance][0] + poses[stance][1] @ sole_centre
    sample = Measurements(
        np.array([p for p, _ in poses[: len(frames)]]),
        np.array([r for _, r in poses]),
        com_position=np.array([centre[0], centre[1], 0.0]),
        com_velocity=np.zeros(3),
        contacts=np.ones(len(frames), dtype=bool),
    )
    q = q_stand
    for _ in range(int(round(seconds / 0.01))):
        q, _ = ik.step(sample, 0.01)
    return np.array(q)


def configuration_blend(qa: np.ndarray, qb: np.ndarray, a: float) -> np.ndarray:
    """Pinocchio free-flyer configuration a of the way from ``qa`` to ``qb`` (base position and joints
    linear, the base quaternion normalised linear, on the short arc)."""
    quat_b = qb[3:7] if float(qa[3:7] @ qb[3:7]) >= 0 else -qb[3:7]
    q = (1.0 - a) * qa + a * np.concatenate([qb[:3], quat_b, qb[7:]])
    q[3:7] /= np.linalg.norm(q[3:7])
    return q


def start_sequence(retargeter, flags: np.ndarray, times: np.ndarray, q: np.ndarray, rate: float = 100.0):
    """``(times, q, n)``: the trajectory with a start from standing prepended (``n`` samples): 1 s standing
    in the IK's start pose, 2 s moving the CoM over the stance foot of the first frame with both feet down
    (``com_shift``), 2 s blending to the first frame (minimum jerk each), so a walk that starts mid-stride
    (one foot up) can be played from standing and the stabilizer has a plan for the start too."""
    from dynik_ros.motion.planted_walk import min_jerk

    stand = retargeter.initial_configuration()
    shifted = com_shift(retargeter, flags, 0)
    pieces = [np.repeat(stand[None], int(rate), axis=0)]
    for a, b in ((stand, shifted), (shifted, q[0])):
        ramp = min_jerk(np.arange(int(2 * rate)) / (2 * rate))
        pieces.append(np.array([configuration_blend(a, b, float(x)) for x in ramp]))
    prefix = np.vstack(pieces)
    n = len(prefix)
    before = times[0] - (n - np.arange(n)) / rate
    return np.concatenate([before, times]), np.vstack([prefix, q]), n


def planted_trajectory(plan: str, factor: float = 1.0, steps: int = 4, walk: str = "planted"):
    """``(retargeter, motion, flags, q)``: the planted walk ``factor`` times slower (its double and single
    supports stretched, the contact thresholds following the clock, 100 Hz) retargeted onto the G1 with
    the balance ``plan``. ``walk`` "synthetic" (the 6 s synthetic walk, 100 Hz) or "cmu" (the committed CMU
    131_01 excerpt, 120 Hz) instead: that motion played ``factor`` times slower, resampled to its rate."""
    from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
    from dynik_ros.retarget.retargeter import Retargeter

    retargeter = Retargeter.from_config("g1")
    human = retargeter.config.human
    if walk == "planted":
        base = PlantedWalkSpec(steps=steps)
        spec = replace(
            base, double_support=factor * base.double_support, single_support=factor * base.single_support
        )
        motion = planted_walk(spec, 100.0, height=human.height, mass=human.mass)
    else:
        from pathlib import Path

        from dynik_ros.io.bvh import read_bvh
        from dynik_ros.io.human_motion import resampled, time_scaled
        from dynik_ros.retarget.human import synthetic_human_motion

        if walk == "synthetic":
            motion = synthetic_human_motion("walking", 6.0, 100.0, height=human.height, mass=human.mass)
        else:
            root = Path(__file__).resolve().parents[1]
            motion = read_bvh(root / "test" / "data" / "cmu_131_01_walk_excerpt.bvh")
        if factor != 1.0:
            rate = 1.0 / float(np.median(np.diff(motion.times)))
            motion = resampled(time_scaled(motion, factor), rate)
    if factor != 1.0:
        retargeter.time_scale_contact(factor)
    balance = replace(retargeter.config.balance, enabled=True, plan=plan)
    retargeter.config = replace(retargeter.config, balance=balance)
    measurements, flags = retargeter.motion_measurements(motion)
    balanced = retargeter.balanced(motion.times, measurements, flags)
    q = np.asarray(retargeter.run(motion.times, balanced, settle=1.0, contacts=flags).q)
    return retargeter, motion, flags, q


def planted(
    factors: list[float],
    kp_scale: float,
    contact: float,
    kv_scale: float = 1.0,
    plans: tuple = ("quasi_static",),
    retime: bool = False,
    steps: int = 4,
    stabilizer: tuple = ("off",),
    gains: dict | None = None,
    walk: str = "planted",
) -> int:
    """The planted walk retargeted onto the G1 with balance (each of ``plans``), played open loop at each
    slow-down: the 1x output played slower, or with ``retime`` the walk retargeted at that speed and
    played as written (a dynamic plan holds only at the speed it was planned for)."""
    from dynik_ros.control.stabilizer import StabilizerConfig
    from dynik_ros.retarget.zmp_figures import zmp_figures
    from dynik_ros.sim.simulator import SimConfig, Simulator
    from dynik_ros.sim.walk_playback import play
    from dynik_ros.sim.walk_stabilizer import SimWalkStabilizer

    print(
        (f"planted walk ({steps} steps, 100 Hz), " if walk == "planted" else f"{walk} walk, ")
        + f"{'retargeted at' if retime else 'the 1x output played at'} each "
        f"speed; sim: kp_scale {kp_scale:g}, kv_scale {kv_scale:g}, contact time constant {contact:g} s"
    )
    print(
        f"  {'plan':<12} {'slower':>6} {'stab.':<5} {'result':<28} {'min height':>10} {'max tilt':>8} "
        f"{'|tilt - plan|':>13} {'walked':>13} {'ZMP >= 1 cm in':>14}"
    )
    cache: dict = {}
    for name, factor, mode in ((p, f, m) for p in plans for f in factors for m in stabilizer):
        key = (name, factor if retime else 1.0)
        if key not in cache:
            retargeter, motion, flags, q = planted_trajectory(name, key[1], steps, walk)
            figures = zmp_figures(
                retargeter.robot, motion.times, q, flags, retargeter.config.feet,
                retargeter.config.balance.sole_half_width, retargeter.contact.robot_ground,
            )  # fmt: skip
            cache[key] = (retargeter, motion, flags, q, figures.fraction_inside(0.01))
        retargeter, motion, flags, q, inside = cache[key]
        motion_times, prefix = motion.times, 0
        if walk != "planted":  # these start mid-stride: from standing through a CoM shift (start_sequence)
            motion_times, q, prefix = start_sequence(retargeter, flags, np.asarray(motion.times), q)
        config = SimConfig(
            base_mode="free", kp_scale=kp_scale, kv_scale=kv_scale, contact_time_constant=contact
        )
        sim = Simulator.from_robot("g1", config)
        scale = 1.0 if retime else factor
        joints = retargeter.robot.joint_names
        times = motion_times[0] + (motion_times - motion_times[0]) * scale
        stab = (
            SimWalkStabilizer(sim, joints, times, q, StabilizerConfig(**(gains or {})))
            if mode == "on"
            else None
        )
        blend = 0.5 if prefix else 2.0  # the prefix starts in the standing pose already
        f = play(sim, joints, motion_times, q, time_scale=scale, stabilizer=stab, blend=blend)
        result = (
            "stands" if f.fell_at is None else f"falls at sample {f.fell_sample - prefix} ({f.fell_at:.1f} s)"
        )
        print(
            f"  {name:<12} {factor:>5g}x {mode:<5} {result:<28} {f.min_height:>8.3f} m "
            f"{f.max_tilt:>6.1f} deg "
            f"{f.max_tilt_error:>9.1f} deg "
            f"{f.travelled:>5.2f} / {f.planned_travel:.2f} m {100 * inside:>12.1f} %",
            flush=True,
        )
    return 0


def stabilizer_gains(items: list[str], parser: argparse.ArgumentParser) -> dict:
    """``NAME=VALUE`` overrides of StabilizerConfig fields (an unknown name or a bad value: usage error)."""
    from dataclasses import fields

    from dynik_ros.control.stabilizer import StabilizerConfig

    known = {f.name for f in fields(StabilizerConfig)}
    gains = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in known:
            parser.error(f"--gain {item}: not a StabilizerConfig field ({', '.join(sorted(known))})")
        try:
            gains[name] = float(value)
        except ValueError:
            parser.error(f"--gain {item}: the value must be a number")
    try:
        StabilizerConfig(**gains).validate()
    except ValueError as exc:
        parser.error(f"--gain: {exc}")
    return gains


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--slow", type=float, nargs="+", default=[4.0], help="playback this many times slower"
    )
    parser.add_argument("--start", type=int, default=30, help="first frame played (100 Hz samples)")
    parser.add_argument("--transition", type=float, default=4.0, help="standing -> start frame [s]")
    parser.add_argument("--kp-scale", type=float, default=1.0, help="servo stiffness scale (SimConfig)")
    parser.add_argument("--hold", action="store_true", help="only shift the CoM over the stance foot, hold")
    parser.add_argument("--planted", action="store_true", help="the planted walk, open loop (docstring)")
    parser.add_argument("--contact", type=float, default=0.02, help="ground contact time constant [s]")
    parser.add_argument("--kv-scale", type=float, default=1.0, help="servo damping scale (SimConfig)")
    parser.add_argument(
        "--plan",
        nargs="+",
        choices=("quasi_static", "zmp"),
        default=["quasi_static"],
        help="--planted: the balance plan(s) (retarget/balance.py, retarget/zmp_plan.py), each played",
    )
    parser.add_argument(
        "--retime",
        action="store_true",
        help="--planted: retarget the walk at each --slow speed and play it as written",
    )
    parser.add_argument("--steps", type=int, default=4, help="--planted: steps of the walk (>= 2)")
    parser.add_argument(
        "--stabilizer",
        nargs="+",
        choices=("off", "on"),
        default=["off"],
        help="--planted: play open loop (off) and/or with the walking stabilizer (on: control/stabilizer.py, "
        "sim/walk_stabilizer.py), each a line",
    )
    parser.add_argument(
        "--gain",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="--stabilizer on: override a StabilizerConfig field (e.g. --gain dcm_gain=3), repeatable",
    )
    parser.add_argument(
        "--walk",
        choices=("planted", "synthetic", "cmu"),
        default="planted",
        help="--planted: the motion: the planted walk, the 6 s synthetic walk or the CMU 131_01 excerpt "
        "(these two always retargeted at each --slow speed, resampled to their rate)",
    )
    args = parser.parse_args(argv)
    if args.walk != "planted":
        args.retime = True
    if args.walk == "synthetic" and any(f != 1.0 for f in args.slow):
        parser.error("--walk synthetic: only --slow 1 (the synthetic walk is generated at its own speed)")
    if args.planted:
        plans = tuple(args.plan)
        gains = stabilizer_gains(args.gain, parser)
        return planted(
            args.slow, args.kp_scale, args.contact, args.kv_scale, plans, args.retime, args.steps,
            tuple(args.stabilizer), gains, args.walk,
        )  # fmt: skip
    args.slow = args.slow[0]
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.sim.simulator import SimConfig, Simulator

    retargeter = Retargeter.from_config("g1")
    retargeter.config = replace(retargeter.config, balance=replace(retargeter.config.balance, enabled=True))
    human = retargeter.config.human
    motion = synthetic_human_motion("walking", 6.0, 100.0, height=human.height, mass=human.mass)
    measurements, flags = retargeter.motion_measurements(motion)
    measurements = retargeter.balanced(motion.times, measurements, flags)
    q = np.asarray(retargeter.run(motion.times, measurements, settle=1.0, contacts=flags).q)
    shifted = com_shift(retargeter, flags, args.start)
    sim = Simulator.from_robot("g1", SimConfig(base_mode="free", kp_scale=args.kp_scale))
    index = [retargeter.robot.joint_names.index(j) for j in sim.joint_names]
    standing = sim.controlled_positions().copy()
    half, period = args.transition / 2, 0.01 * args.slow
    last = len(q) - 1
    end = args.transition + (last - args.start) * period + 1.0
    t0, fell, worst_tilt = sim.time, None, 0.0
    while sim.time - t0 < end:
        t = sim.time - t0
        if t < half:
            a = 0.5 - 0.5 * math.cos(math.pi * t / half)
            target = (1 - a) * standing + a * shifted[7:][index]
        elif args.hold:
            target = shifted[7:][index]
        elif t < args.transition:
            a = 0.5 - 0.5 * math.cos(math.pi * (t - half) / half)
            target = (1 - a) * shifted[7:][index] + a * q[args.start, 7:][index]
        else:
            f = args.start + min((t - args.transition) / period, last - args.start)
            k = int(f)
            w = f - k
            target = ((1 - w) * q[k, 7:] + w * q[min(k + 1, last), 7:])[index]
        sim.follower.set_positions(target, sim.time)
        sim.step(5)
        position, rotation = sim.base_pose()
        tilt = math.degrees(math.acos(float(np.clip(rotation[2, 2], -1.0, 1.0))))
        worst_tilt = max(worst_tilt, tilt)
        if fell is None and (position[2] < 0.45 or tilt > 45.0):
            fell = t
            break
    if fell is None:
        print(f"standing after {end:.1f} s (largest tilt {worst_tilt:.1f} deg)")
        return 0
    if fell < half:
        phase = "while shifting the CoM over the stance foot (both feet down)"
    elif fell < args.transition:
        phase = "holding the CoM over the stance foot" if args.hold else "while blending to the start frame"
    else:
        frame = args.start + int((fell - args.transition) / period)
        down = ["left" if flags[frame, 0] >= 0 else "", "right" if flags[frame, 1] >= 0 else ""]
        phase = f"at frame {frame} (feet in contact: {' '.join(d for d in down if d) or 'none'})"
    print(f"fell at {fell:.2f} s {phase}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
