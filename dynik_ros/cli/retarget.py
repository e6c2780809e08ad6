"""``dynik-retarget``: retarget a human motion onto a humanoid robot offline with the dynamical IK.

Input (one of):
  --motion walking|running|tpose|planted_walk   synthetic human motion (Human66), --duration, --rate
  --bag PATH                       rosbag2 with sensor_msgs/msg/MultiDOFJointState on /human/link_states
                                   (names = link names, transforms = world poses, twist = world velocities)
  --npz PATH                       motion file: times (N,), links (L,), positions (N,L,3), rotations
                                   (N,L,3,3) or quaternions (N,L,4, x y z w), optional linear_velocities and
                                   angular_velocities (N,L,3); missing velocities are finite-differenced

Output in --out DIR: ``bag/`` (rosbag2, mcap: sensor_msgs/msg/JointState on /dynik/joint_states and
nav_msgs/msg/Odometry on /dynik/base_odom, stamped with the input stamps, exact to the nanosecond;
synthetic motions start at 0), ``trajectory.csv``,
``retarget.npz``, ``calibration.yaml`` (what was used), ``summary.txt``, and PNG plots: ``joints.png``
(joint trajectories against their limits, like Figure 9 of Rapetti et al. 2020), ``phase.png`` (joint
velocity against position inside the eq. (12) bounds, like Figure 3) and ``errors.png`` (error over time).

Exit status: 0 on success; 1 if the result has NaN, leaves a joint limit by more than 1e-6 rad or moves a
joint faster than its velocity limit (finite differences of the output); 2 on bad arguments, an invalid
map or an input file that cannot be read (truncated, corrupted, wrong format: one line naming the file).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from dynik_ros.cli.batch_memory import keep_freed_memory, rare_collections
from dynik_ros.cli.retarget_args import PLANTED, build_parser  # noqa: F401 - build_parser re-exported
from dynik_ros.cli.retarget_outputs import (  # noqa: F401 - re-exported (benchmarks, tests)
    BASE_ODOM_TOPIC,
    JOINT_STATES_TOPIC,
    write_bag,
    write_csv,
    write_npz,
)
from dynik_ros.cli.retarget_plots import plot_errors, plot_joints
from dynik_ros.cli.retarget_summary import (  # noqa: F401 - re-exported (benchmarks, tests)
    LIMIT_TOLERANCE,
    LOWER_BODY,
    Summary,
    summarize,
)
from dynik_ros.io.human_motion import (  # noqa: F401 - re-exported: the CLI's motion readers live in io
    HumanMotion,
    _ordered,
    finite_difference_twists,
    read_npz_motion,
    save_npz_motion,
)


# ---------------------------------------------------------------------------- progress
class ProgressBar:
    """A plain-text progress bar on a stream (stderr): redrawn in place on a terminal, one line per 10 %
    otherwise (logs, CI)."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True, width: int = 30):
        self.label, self.width, self.enabled = label, width, enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self._last_decile = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        fraction = done / total
        elapsed = time.perf_counter() - self.start
        eta = elapsed / fraction - elapsed if fraction > 0 else float("nan")
        filled = int(round(self.width * fraction))
        text = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:5.1f}% "
            f"{done}/{total}  {elapsed:6.1f} s, {eta:5.1f} s left"
        )
        if self.tty:
            self.stream.write("\r" + text + ("\n" if done >= total else ""))
            self.stream.flush()
        else:
            decile = int(10 * fraction)
            if decile != self._last_decile or done >= total:
                self._last_decile = decile
                self.stream.write(text + "\n")
                self.stream.flush()


# ---------------------------------------------------------------------------- input


def synthetic_motion(
    scenario: str,
    duration: float,
    rate: float,
    heading_deg: float = 0.0,
    height: float = 1.75,
    mass: float = 75.0,
) -> HumanMotion:
    """A synthetic human motion (:func:`dynik_ros.retarget.human.synthetic_human_motion`), or ``planted_walk``
    (:mod:`dynik_ros.motion.planted_walk`: as many steps as fit in ``duration``, at least 2; facing +x)."""
    from dynik_ros.retarget.human import synthetic_human_motion

    if scenario == PLANTED:
        from dataclasses import replace

        from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk

        if heading_deg:
            raise ValueError("--heading is not available with --motion planted_walk (it walks along +x)")
        spec = PlantedWalkSpec()
        step = spec.double_support + spec.single_support
        steps = max(2, int((duration - 2 * spec.stand) // step))
        motion = planted_walk(replace(spec, steps=steps), rate, height, mass)
        duration = motion.times[-1]
    else:
        motion = synthetic_human_motion(scenario, duration, rate, heading_deg, height, mass)
    return HumanMotion(
        name=scenario,
        times=motion.times,
        links=list(motion.links),
        positions=motion.positions,
        rotations=motion.rotations,
        linear_velocities=motion.linear_velocities,
        angular_velocities=motion.angular_velocities,
        source=f"synthetic {scenario}, {duration:g} s at {rate:g} Hz"
        + (f", heading {heading_deg:g} deg" if heading_deg else ""),
    )


def read_bag_motion(path: str | Path, topic: str = "/human/link_states") -> HumanMotion:
    """Link states of a rosbag2 (``MultiDOFJointState``); stamps are the messages' header stamps, kept
    exact to the nanosecond (times count from the first one)."""
    from dynik_ros.io.bags import read_link_states, read_messages

    frames, twists = [], []
    for _, poses, twist in read_link_states(path, topic):
        frames.append(poses)
        twists.append(twist)
    if not frames:
        raise ValueError(f"bag '{path}' has no messages on '{topic}'")
    stamps_ns = [
        int(m.msg.header.stamp.sec) * 1_000_000_000 + int(m.msg.header.stamp.nanosec)
        for m in read_messages(path, [topic])
    ]
    origin = min(stamps_ns)
    links = list(frames[0])
    for k, poses in enumerate(frames):
        missing = [name for name in links if name not in poses]
        if missing:
            raise ValueError(f"bag '{path}': message {k} on '{topic}' lacks links {missing}")
    times = (np.array(stamps_ns, dtype=np.int64) - origin) * 1e-9
    positions = np.array([[poses[name][0] for name in links] for poses in frames])
    rotations = np.array([[poses[name][1] for name in links] for poses in frames])
    measured = all(twist and all(name in twist for name in links) for twist in twists)
    if measured:
        linear = np.array([[twist[name][0] for name in links] for twist in twists])
        angular = np.array([[twist[name][1] for name in links] for twist in twists])
    else:
        linear = angular = np.zeros_like(positions)
    motion = HumanMotion(
        Path(path).name, times, links, positions, rotations, linear, angular, f"bag {path}", origin
    )
    return _ordered(motion, differentiate=not measured)


# ---------------------------------------------------------------------------- main
class InputFileError(ValueError):
    """An input file that cannot be read: its name and the reader's reason, on one line."""


def _read_motion_file(args: argparse.Namespace) -> HumanMotion:
    """``--bag`` or ``--npz``; any failure of the reader (truncated or corrupted file, wrong format,
    missing metadata) becomes one :class:`InputFileError` naming the file (exit 2, no traceback)."""
    from dynik_ros.io.motion_files import describe, detect_format, read_motion_file

    path = args.bag if args.bag is not None else args.npz if args.npz is not None else args.input
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    found = detect_format(path)
    if args.npz is not None and path.is_file() and found != "npz":
        hint = f": pass it without --npz (dynik-retarget {path})" if found in ("mvnx", "bvh") else ""
        raise InputFileError(f"cannot read {path} as a .npz motion file: it is {describe(found)}{hint}")
    if args.input is not None and found == "bag":
        raise InputFileError(f"{path} is a rosbag2: pass it with --bag")
    if args.input is not None and found is None:
        raise InputFileError(f"cannot read {path}: {describe(found)}")
    try:
        if args.input is not None:
            options = {"floor": args.floor}
            if found == "bvh":
                options.update(skeleton=args.skeleton, unit=args.unit, tpose_frame=args.tpose_frame)
            return read_motion_file(path, found, **options)
        motion = read_bag_motion(path, args.topic) if args.bag is not None else read_npz_motion(path)
        from dynik_ros.io.capture_checks import check_motion

        return check_motion(motion, str(path), floor="report")  # taken as they are: the floor only reported
    except Exception as exc:  # noqa: BLE001 - a reader's own error types vary (rosbags, zipfile, numpy)
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = (
            "a rosbag2"
            if args.bag is not None
            else "a .npz motion file"
            if args.npz is not None
            else describe(found)
        )
        if reason.startswith(f"{path}: "):  # the capture readers name the file themselves
            reason = reason[len(f"{path}: ") :]
        raise InputFileError(f"cannot read {path} as {kind}: {reason} ({type(exc).__name__})") from exc


def _calibrate(retargeter: Any, poses: dict, where: str, force: bool) -> None:
    """Calibrate on ``poses`` after checking it is a T-pose (a warning with the angle; refused beyond
    the limit of :func:`dynik_ros.io.capture_checks.check_calibration_pose` unless ``force``)."""
    from dynik_ros.io.capture_checks import check_calibration_pose

    warning = check_calibration_pose(poses, where, force=force)
    if warning:
        print(f"dynik-retarget: warning: {warning}", file=sys.stderr)
    retargeter.calibrate(poses)


def _calibrate_on_subject(retargeter: Any, motion: Any) -> None:
    """Calibrate a recorded motion on its own subject in T-pose (:mod:`dynik_ros.io.skeleton_tpose`), with a
    notice of the root height it stands at; the human model (the map's ``human.height``) if it has no
    complete skeleton."""
    from dynik_ros.io.skeleton_tpose import skeleton_tpose

    try:
        poses = skeleton_tpose(motion)
    except ValueError as exc:
        print(f"dynik-retarget: {exc}: calibrated on the human model instead", file=sys.stderr)
        return
    model_height = retargeter.calibration.human_root_height
    calibration = retargeter.calibrate(poses, source="the capture's subject in T-pose (skeleton_tpose)")
    print(
        f"dynik-retarget: calibrated on the capture's own subject: root {calibration.human_root_height:.3f} "
        f"m above the floor (the human model's: {model_height:.3f} m), root scale "
        f"{calibration.root_scale:.3f}",
        file=sys.stderr,
    )


def ik_config_of(args: argparse.Namespace) -> Any:
    """The IK's configuration the command line asks for (``--integration``, ``--qp-solver``)."""
    from dynik_ros.core.dynamical_ik import DynamicalIKConfig
    from dynik_ros.core.velocity_qp import QPSettings

    return DynamicalIKConfig(integration=args.integration, qp=QPSettings(solver=args.qp_solver))


def calibrate_as_asked(retargeter: Any, motion: Any, args: argparse.Namespace) -> None:
    """The calibration ``args`` ask for: ``--calibration-frame``; else, with no ``--calibration`` file, the
    motion file's own calibration frame (MVNX) or the capture's own subject (``--subject capture``)."""
    if args.calibration_frame is not None:
        if not 0 <= args.calibration_frame < len(motion):
            raise ValueError(f"--calibration-frame {args.calibration_frame} outside 0..{len(motion) - 1}")
        _calibrate(
            retargeter,
            motion.sample(args.calibration_frame),
            f"{motion.name}: frame {args.calibration_frame}",
            args.force_calibration,
        )
    elif args.calibration is None and getattr(motion, "calibration", None):
        from dynik_ros.io.mvnx import calibration_frame

        kind, poses = calibration_frame(motion) or (None, None)
        if poses is not None:
            _calibrate(retargeter, poses, f"{motion.name}: the file's {kind} frame", args.force_calibration)
            print(f"dynik-retarget: calibrated on the file's {kind} frame", file=sys.stderr)
    elif args.calibration is None and args.motion is None and args.subject == "capture":
        _calibrate_on_subject(retargeter, motion)


def main(argv: list[str] | None = None) -> int:
    """``dynik-retarget`` (module docstring); the garbage collector runs rarely meanwhile (batch_memory)."""
    with rare_collections():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from dynik_ros.retarget import RetargetConfigError, Retargeter, available_robots

    if args.list:
        print("\n".join(available_robots()))
        return 0
    keep_freed_memory()  # whole-take arrays made and dropped again and again: no page faults for each
    if args.video is not None:
        from dynik_ros.retarget.render import check_video_path

        try:
            check_video_path(args.video)
        except ValueError as exc:
            print(f"dynik-retarget: error: {exc}", file=sys.stderr)
            return 2
    try:
        retargeter = Retargeter.from_config(args.robot, args.calibration)
        contact_options = {  # the map's contact settings the command line overrides (None: the map's)
            "stance": args.stance,
            "anchor": args.anchor,
            "heel_off": args.heel_off,
            "heel_off_noise": args.heel_off_noise,
            "reach": None if args.reach is None else args.reach == "on",
            "pelvis_reach": None if args.pelvis_reach is None else args.pelvis_reach == "on",
            "swing_weight": args.swing_weight,
            "held_gain": args.held_gain,
            "held_tilt_gain": args.held_tilt_gain,
            "blend_shape": args.blend_shape,
            "toe": args.toe,
            "floor_rows": None if args.floor_rows is None else args.floor_rows == "on",
        }
        changes = {k: v for k, v in contact_options.items() if v is not None}
        if changes:
            from dataclasses import replace

            contact = replace(retargeter.config.contact, **changes)
            retargeter.config = replace(retargeter.config, contact=contact)
            retargeter.set_calibration(retargeter.calibration)  # the feet's contact machine reads the spec
        if args.balance or args.balance_plan:
            from dataclasses import replace

            balance = replace(retargeter.config.balance, enabled=True)
            if args.balance_plan:
                balance = replace(balance, plan=args.balance_plan)
            retargeter.config = replace(retargeter.config, balance=balance)
        if sum(x is not None for x in (args.input, args.bag, args.npz, args.motion)) > 1:
            parser.error("give one input: a capture file, --bag, --npz or --motion")
        if args.bag is not None or args.npz is not None or args.input is not None:
            motion = _read_motion_file(args)
            for notice in getattr(motion, "notices", []):
                print(f"dynik-retarget: {notice}", file=sys.stderr)
        else:
            motion = synthetic_motion(
                args.motion or "walking",
                args.duration,
                args.rate,
                args.heading,
                retargeter.config.human.height,
                retargeter.config.human.mass,
            )
        calibrate_as_asked(retargeter, motion, args)
    except (RetargetConfigError, KeyError, ValueError, FileNotFoundError, FileExistsError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"dynik-retarget: error: {message}", file=sys.stderr)
        return 2
    if len(motion) < 2:
        print(
            f"dynik-retarget: error: {args.input or args.bag or args.npz or motion.name}: {len(motion)} "
            "sample(s); retargeting needs at least two",
            file=sys.stderr,
        )
        return 2
    from dynik_ros.io.human_motion import at_rate, time_scaled

    motion = time_scaled(motion, args.time_scale)
    if args.time_scale != 1.0:  # the same footfalls: contact speeds and blend times follow the clock
        retargeter.time_scale_contact(args.time_scale)
    period = 0.0  # the take's own IK step where the IK steps at another rate (core/step_gain.py)
    if args.ik_rate is not None:
        stepped = at_rate(motion, args.ik_rate)
        if stepped is not motion:
            from dynik_ros.retarget.offline_run import full_rate_step

            period = full_rate_step(motion.times)
        motion = stepped

    args.out.mkdir(parents=True, exist_ok=True)
    bag_path = args.out / "bag"
    if not args.no_bag and bag_path.exists():
        print(f"dynik-retarget: error: {bag_path} exists (bags are never overwritten)", file=sys.stderr)
        return 2

    from dynik_ros.retarget.ik_steps import at_samples

    ik_config = ik_config_of(args)
    if period:  # per-step gains and the robot anchor kept in seconds (core/step_gain.py, robot_anchor.py)
        from dataclasses import replace

        ik_config = replace(ik_config, sample_period=period)
    start = time.perf_counter()
    retargeter.reset()
    try:
        # a sparse take's human links on the IK's step grid: the contact rules see every step (ik_steps.py)
        times, measurements, contacts, samples = retargeter.step_measurements(motion)
        ik = retargeter.make_ik(ik_config)
        if args.gain is not None:
            ik.set_gains(args.gain, args.gain)
    except ValueError as exc:  # InvalidMeasurementError: missing links, NaN, non-rotations
        print(f"dynik-retarget: error: {exc}", file=sys.stderr)
        return 2
    progress = ProgressBar(f"retarget {retargeter.config.name}", enabled=not args.quiet)
    result = retargeter.run(
        times, measurements, ik=ik, settle=args.settle, progress=progress, contacts=contacts
    )
    result = at_samples(result, samples, retargeter.contact)
    elapsed = time.perf_counter() - start

    summary = summarize(retargeter, result, motion, args.settle, elapsed)
    floor = getattr(ik.extra, "floor", None) if ik.extra is not None else None
    if floor is not None:  # steps whose floor rows could not be met as posed (core/floor_rows.py)
        label = "floor rows softened / left out (IK steps)"
        summary.text += f"\n{label:<44} {floor.counts['softened']} / {floor.counts['dropped']}"
    priority = getattr(ik.extra, "priority", None)
    if priority is not None:  # steps whose stance rows gave way to the limits (core/stance_priority.py)
        label = "stance rows yielded / failed / nu_1 taken"
        counts = " / ".join(str(priority.counts[k]) for k in ("yielded", "failed", "taken"))
        summary.text += f"\n{label:<44} {counts} (IK steps)"
        label = "stance rows met plainly (priority 1 skipped)"  # plain_first (core/stance_priority.py)
        summary.text += f"\n{label:<44} {priority.counts['skipped']} (IK steps)"
    if retargeter.config.balance.enabled:
        from dynik_ros.retarget.balance import balance_report

        line, plot = balance_report(retargeter, result, None if args.no_plots else args.out / "com_track.png")
        summary.text += "\n" + line
        extra_plots = [plot] if plot is not None else []
    else:
        extra_plots = []
    written = [
        retargeter.save_calibration(args.out / "calibration.yaml"),
        write_csv(args.out / "trajectory.csv", retargeter.robot, result, motion.stamp_origin_ns),
        write_npz(args.out / "retarget.npz", retargeter, result, motion.stamp_origin_ns),
    ]
    if not args.no_bag:
        root = retargeter.config.root.frame
        written.append(
            write_bag(bag_path, retargeter.robot, root, result, args.storage, motion.stamp_origin_ns)
        )
    if not args.no_plots:
        written += plot_joints(args.out, retargeter.robot, result, ik_config.limit_gain)
        written.append(plot_errors(args.out, retargeter, result))
    written += extra_plots
    if args.video is not None:
        from dynik_ros.retarget.render import SideBySide, render

        scene = SideBySide(
            motion.links, motion.positions, retargeter.robot, result.q, result.times,
            retargeter.config.feet, result.contacts, retargeter.config.name,
        )  # fmt: skip
        try:
            written.append(render(args.video, scene, frames=args.frames))
        except ValueError as exc:
            print(f"dynik-retarget: error: {exc}", file=sys.stderr)
            return 2
    summary_path = args.out / "summary.txt"
    summary_path.write_text(summary.text + "\n", encoding="utf-8")
    written.append(summary_path)
    print(summary.text)
    print("\nwrote: " + ", ".join(str(p) for p in written))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
