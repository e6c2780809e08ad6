"""Samples ik_node loses around the first sample's settle on a live-rate best-effort stream (README *The
start*).

    .venv/bin/python benchmarks/settle_stream.py [--settle 0 1 2] [--rate 120] [--robot g1]

ik_node (G1, real rclpy) in this process; in a child process (its own interpreter) a publisher sends the
synthetic walk (3 s) at ``--rate`` on ``/human/link_states`` with the sensor QoS (best effort, 10 deep), paced
by the wall clock as a suit streams. Printed per ``settle``: samples published, stepped, lost, and how many
of the lost ones were stamped within the settle's wall time (+0.1 s) after the first: those the settle
cost. Losses after it are the node falling behind the stream on a loaded machine (the same with ``settle``
0). A machine-load figure: run it several times.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))


def publish(rate: float) -> None:
    """The child: the synthetic walk at ``rate``, paced, once a reader is matched; prints the count."""
    import rclpy
    from node_harness import motion_link_msg
    from sensor_msgs.msg import MultiDOFJointState

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.retarget.human import synthetic_human_motion

    rclpy.init()
    node = rclpy.create_node("settle_stream_publisher")
    pub = node.create_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
    while pub.get_subscription_count() < 1:
        time.sleep(0.01)
    time.sleep(0.5)
    motion = synthetic_human_motion("walking", 3.0, rate)
    stamp0 = time.time_ns()
    msgs = [motion_link_msg(motion, k, stamp0 + round(1e9 * k / rate)) for k in range(len(motion.times))]
    start = time.monotonic()
    for k, msg in enumerate(msgs):
        while time.monotonic() < start + k / rate:
            time.sleep(0.0002)
        pub.publish(msg)
    print(len(msgs), flush=True)
    time.sleep(0.5)
    rclpy.shutdown()


def run(settle: float, rate: float, robot: str) -> str:
    import numpy as np
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.ik_node import IKNode

    stepped: list[int] = []

    class Counted(IKNode):
        def _process(self, data: bytes) -> None:
            before = self._last_ns
            super()._process(data)
            if self._last_ns != before:
                stepped.append(self._last_ns)

    values = dict(model="", robot=robot, settle=settle, publish_markers=False, max_future_stamp=0.0)
    node = Counted(parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    node.trigger_configure()
    node.trigger_activate()
    child = subprocess.Popen(
        [sys.executable, __file__, "--publish", "--rate", str(rate)], stdout=subprocess.PIPE, text=True
    )
    while child.poll() is None:
        executor.spin_once(timeout_sec=0.01)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.01)
    count = int(child.stdout.read().strip())
    index = np.round((np.array(stepped) - min(stepped)) * rate * 1e-9).astype(int)
    lost = sorted(set(range(count)) - set(index.tolist()))
    during = [k for k in lost if k / rate <= node.settle_time + 0.1]
    node.trigger_deactivate()
    node.destroy_node()
    executor.shutdown()
    return (
        f"settle {settle:g} s at {rate:g} Hz ({robot}): published {count}, stepped {len(stepped)}, lost "
        f"{len(lost)}, {len(during)} of them during the settle ({1e3 * node.settle_time:.0f} ms wall)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, nargs="+", default=[0.0, 1.0, 2.0])
    parser.add_argument("--rate", type=float, default=120.0)
    parser.add_argument("--robot", default="g1")
    parser.add_argument("--publish", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.publish:
        publish(args.rate)
        return 0
    import rclpy

    rclpy.init()
    try:
        for settle in args.settle:
            print(run(settle, args.rate, args.robot), flush=True)
    finally:
        rclpy.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
