"""Simulated robot benchmark (issue 11 targets): real-time factor of the MuJoCo robot at 1 kHz physics,
and the joint tracking delay commanded -> simulated at 50 Hz commands (p50 over the joints, sim time).

    .venv/bin/python benchmarks/sim_bench.py            # G1, 10 s of physics per mode, 6 s tracking runs
    .venv/bin/python benchmarks/sim_bench.py --quick    # smoke run (a few seconds)
    .venv/bin/python benchmarks/sim_bench.py --robot icub --rate 2000

Real-time factor = sim time / wall time of the stepping loop (reference follower, harness and
``mj_step`` per step, one Python thread). Tracking: every controlled joint gets a 0.5 Hz sinusoid of up
to 0.2 rad at 50 Hz, as forward commands and as one-point trajectories reaching each command
``time_from_start`` later (bridge_node's default is 0.05 s); the robot hangs in the harness 0.3 m up so
the legs move freely. The delay is the shift of the commanded signal that best explains the simulated
joint (:mod:`dynik_ros.sim.tracking`).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from dynik_ros.sim.simulator import SimConfig, Simulator
from dynik_ros.sim.tracking import track_sinusoid


def real_time_factor(robot: str, mode: str, rate: float, seconds: float) -> tuple[float, float]:
    """(real-time factor, model build time [s])."""
    start = time.perf_counter()
    sim = Simulator.from_robot(robot, SimConfig(timestep=1.0 / rate, base_mode=mode))
    build = time.perf_counter() - start
    sim.step(int(0.2 * rate))  # warm-up
    steps = int(seconds * rate)
    start = time.perf_counter()
    sim.step(steps)
    return steps / rate / (time.perf_counter() - start), build


def tracking(
    robot: str, rate: float, interface: str, time_from_start: float, seconds: float, feedforward: bool = False
):
    sim = Simulator.from_robot(robot, SimConfig(timestep=1.0 / rate, velocity_feedforward=feedforward))
    position, rotation = sim.base_pose()
    sim.set_harness_target(position + np.array([0.0, 0.0, 0.3]), rotation)
    sim.step(int(1.0 * rate))
    return track_sinusoid(sim, duration=seconds, interface=interface, time_from_start=time_from_start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", default="g1")
    parser.add_argument("--rate", type=float, default=1000.0, help="physics rate [Hz]")
    parser.add_argument("--seconds", type=float, default=10.0, help="sim seconds per real-time-factor run")
    parser.add_argument("--quick", action="store_true", help="smoke run")
    args = parser.parse_args(argv)
    seconds = 1.0 if args.quick else args.seconds
    track_seconds = 2.0 if args.quick else 6.0
    print(f"{args.robot}, physics {args.rate:.0f} Hz")
    print(f"{'base mode':10s} {'real-time factor':>17s} {'model build [s]':>16s}")
    worst = np.inf
    for mode in ("harness", "free"):
        rtf, build = real_time_factor(args.robot, mode, args.rate, seconds)
        worst = min(worst, rtf)
        print(f"{mode:10s} {rtf:17.2f} {build:16.2f}")
    print("\ntracking at 50 Hz commands (robot hanging in the harness), delay over the joints:")
    print(f"{'interface':50s} {'p50 [ms]':>9s} {'max [ms]':>9s} {'RMS after shift max [rad]':>26s}")
    runs = [
        ("forward_command", 0.0, False),
        ("joint_trajectory", 0.02, False),
        ("joint_trajectory", 0.05, False),
    ]
    runs += [("joint_trajectory", 0.02, True), ("joint_trajectory", 0.05, True)]  # velocity feed-forward
    if args.quick:
        runs = runs[:1]
    p50 = {}
    for interface, tfs, feedforward in runs:
        result = tracking(args.robot, args.rate, interface, tfs, track_seconds, feedforward)
        label = interface if interface == "forward_command" else f"{interface} (time_from_start {tfs:.2f} s)"
        label = label.replace("joint_trajectory", "trajectory, feed-forward") if feedforward else label
        p50[label] = result.delay_p50
        print(
            f"{label:50s} {1e3 * result.delay_p50:9.1f} {1e3 * result.delay.max():9.1f} "
            f"{result.rms_after_shift.max():26.4f}"
        )
    ok = worst >= 1.0 and min(p50.values()) <= 0.06
    print(f"\ntargets: >= 1x real time ({'met' if worst >= 1.0 else 'MISSED'}), delay p50 <= 60 ms "
          f"({'met' if min(p50.values()) <= 0.06 else 'MISSED'} for forward commands)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
