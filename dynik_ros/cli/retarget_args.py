"""``dynik-retarget``'s command line: every option, its default and its help (:mod:`dynik_ros.cli.retarget`
runs them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dynik_ros.cli.arguments import finite

PLANTED = "planted_walk"  # the slow walk with planted stance feet (motion/planted_walk.py)


def build_parser() -> argparse.ArgumentParser:
    from dynik_ros.core.velocity_qp import SOLVERS, QPSettings
    from dynik_ros.motion.synthetic import SCENARIOS

    parser = argparse.ArgumentParser(
        prog="dynik-retarget",
        description="Retarget a human motion onto a humanoid robot with the dynamical IK (offline).",
        epilog="Robots: the maps in config/ (see 'dynik-retarget --list') or a path to a YAML map.",
    )
    parser.add_argument(
        "input",
        nargs="?",
        type=Path,
        help="capture file: Xsens .mvnx, .bvh, .npz (format detected from the content)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--motion", choices=(*SCENARIOS, PLANTED), help="synthetic human motion (default: walking)"
    )
    source.add_argument("--bag", type=Path, help="rosbag2 with MultiDOFJointState link states")
    source.add_argument("--npz", type=Path, help="motion file (.npz)")
    parser.add_argument("--robot", default="g1", help="robot name or YAML map path (default: g1)")
    parser.add_argument("--out", type=Path, default=Path("retarget_out"), help="output directory")
    parser.add_argument(
        "--duration", type=finite(positive=True), default=10.0, help="synthetic motion length, s"
    )
    parser.add_argument("--rate", type=finite(positive=True), default=100.0, help="synthetic motion rate, Hz")
    parser.add_argument("--heading", type=finite(), default=0.0, help="synthetic motion heading, deg")
    parser.add_argument("--topic", default="/human/link_states", help="link-state topic of --bag")
    parser.add_argument("--calibration", type=Path, help="calibration YAML to use (default: the map's/auto)")
    parser.add_argument(
        "--calibration-frame", type=int, help="calibrate from this input sample (the subject in T-pose)"
    )
    parser.add_argument(
        "--skeleton",
        help="BVH skeleton map: cmu, cmu_max, lafan1, mixamo, mvn or a YAML path (default: detected)",
    )
    parser.add_argument(
        "--unit", choices=("m", "cmu", "cm", "inch", "mm"), help="BVH length unit (default: detected)"
    )
    parser.add_argument("--tpose-frame", type=int, help="BVH frame where the subject stands in T-pose")
    parser.add_argument(
        "--floor",
        choices=("apply", "report"),
        default="apply",
        help="floor height from the feet: shift or only report",
    )
    parser.add_argument(
        "--force-calibration", action="store_true", help="calibrate even on a frame far from a T-pose"
    )
    parser.add_argument(
        "--subject",
        choices=("capture", "model"),
        default="capture",
        help="a recorded motion without a calibration frame is scaled from the capture's own subject in "
        "T-pose (its rigid segments; io/skeleton_tpose.py; the default) or from the human model at the map's "
        "human.height",
    )
    parser.add_argument(
        "--time-scale",
        type=finite(positive=True),
        default=1.0,
        help="play the capture this many times slower (2: half speed, stamps x2, velocities /2), so a robot "
        "with lower velocity limits can follow (default 1)",
    )
    parser.add_argument(
        "--ik-rate",
        type=finite(positive=True),
        help="step the IK at this rate, Hz: every n-th sample of the take (after --time-scale) where its "
        "rate is n times this one (a 120 Hz take at 60 Hz: every second sample, as captured), else the take "
        "resampled onto a uniform grid; the trajectory is written on those steps (default: every sample)",
    )
    parser.add_argument(
        "--stance",
        choices=("weighted", "hard"),
        help="feet flat in contact: weighted targets or hard QP rows (the maps' default) (stance_rows.py)",
    )
    parser.add_argument(
        "--anchor",
        choices=("human", "robot"),
        help="where a held foot stays once its contact is flat: where the human-derived target landed or "
        "where the robot's own sole is then (the maps' default) (retarget/robot_anchor.py)",
    )
    parser.add_argument(
        "--heel-off",
        type=finite(minimum=0.0),
        metavar="M",
        help="end a contact when the human heel rises this much (m) more than the toe above their lowest in "
        "that contact (toe-off; 0: off, the contact held to lift-off; default: the map's contact.heel_off, "
        "0.005)",
    )
    parser.add_argument(
        "--heel-off-noise",
        type=finite(minimum=0.0),
        metavar="K",
        help="toe-off only once the heel has risen heel_off plus K times the measured noise of the human "
        "heel-over-toe height (against a noisy stream; 0: off; default: the map's contact.heel_off_noise, 4)",
    )
    parser.add_argument(
        "--reach",
        choices=("on", "off"),
        help="a foot landing farther beside its hip than its ankle roll lets a level sole stand: held nearer "
        "the hip (on: the maps' default) or where it landed (off) (retarget/leg_reach.py)",
    )
    parser.add_argument(
        "--pelvis-reach",
        choices=("on", "off"),
        help="feet held in contact whose legs lean past their ankle roll's reach: the pelvis target moves up "
        "and across until they do not (on) or stays the human's (off: the maps' default) "
        "(retarget/pelvis_reach.py)",
    )
    parser.add_argument(
        "--floor-rows",
        choices=("on", "off"),
        help="the feet's sole points kept on or above the ground by inequality rows of the IK's QP (on) or "
        "by the foot targets alone (off) (default: the map's contact.floor_rows, on; core/floor_rows.py)",
    )
    parser.add_argument(
        "--swing-weight",
        type=finite(positive=True),
        metavar="W",
        help="factor on a foot's position weight while it is in the air, back to 1 as it comes down "
        "(default: the map's contact.swing_weight, 0.1) (retarget/swing_weight.py)",
    )
    parser.add_argument(
        "--held-gain",
        type=finite(minimum=0.0),
        metavar="K",
        help="while a foot is held in contact, the IK gain K of eq. (9) on its height is at least K 1/s (0: "
        "off, its targets' gains as configured; default: the map's contact.held_gain, 40) "
        "(retarget/held_gain.py)",
    )
    parser.add_argument(
        "--held-tilt-gain",
        type=finite(minimum=0.0),
        metavar="K",
        help="while a foot is held in contact, the IK gain K of eq. (9) on its tilt (the world x, y of its "
        "orientation target) is at least K 1/s (0: off; default: the map's contact.held_tilt_gain, 20) "
        "(retarget/held_gain.py)",
    )
    parser.add_argument(
        "--blend-shape",
        choices=("smooth", "linear"),
        help="how the sole turns level after touch-down: smoothstep, no rate left at the end (smooth, the "
        "maps' default), or at a constant rate (linear) (retarget/foot_contact.py)",
    )
    parser.add_argument(
        "--toe",
        choices=("pitch", "flat"),
        help="a contact with the human heel up: flat keeps the sole level, the ankle taking the pitch up "
        "(the maps' default); pitch turns the sole about its toe line (retarget/foot_contact.py)",
    )
    parser.add_argument(
        "--integration",
        choices=("trapezoidal", "adams", "euler"),
        default="trapezoidal",
        help="how the IK integrates its velocity (DynamicalIKConfig.integration; default trapezoidal, the "
        "smoother joints on real captures at the same accuracy: README, 'Smooth joint accelerations')",
    )
    parser.add_argument(
        "--qp-solver",
        choices=SOLVERS,
        default=QPSettings.solver,
        help="QP solver of each IK step (QPSettings.solver): daqp (the default: dense active set, exact on "
        "the rows; OSQP where it finds no optimum) or osqp (the paper's one OSQP QP per step)",
    )
    parser.add_argument(
        "--settle", type=finite(minimum=0.0), default=1.0, help="IK seconds spent on the first frame first"
    )
    parser.add_argument("--gain", type=finite(minimum=0.0), help="set every target gain K of eq. (9), 1/s")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="output bag storage")
    parser.add_argument("--no-bag", action="store_true", help="do not write the rosbag2")
    parser.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    parser.add_argument(
        "--balance",
        action="store_true",
        help="keep the CoM over the feet in contact (quasi-static; the map's balance: section switched on): "
        "summary line and com_track.png",
    )
    parser.add_argument(
        "--balance-plan",
        choices=("quasi_static", "zmp"),
        help="with balance: the CoM plan, quasi-static (the map's default) or dynamic (ZMP in the support, "
        "retarget/zmp_plan.py; implies --balance; summary line 'zmp:')",
    )
    parser.add_argument(
        "--video",
        type=Path,
        help="also render the human and the robot side by side: .png (a strip of --frames), .gif or .mp4",
    )
    parser.add_argument("--frames", type=int, default=8, help="frames in a --video .png strip (default 8)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--list", action="store_true", help="list the robots with a map and exit")
    return parser
