"""Memory of the nodes' run logs at their cap: what a node running for hours holds for the end-of-run figures.

The logs: the runner's latency tracer (``nodes/tracing.py``: three events, ``link_states``, ``ik_output``,
``command``), ``ik_node.base_log`` (with ``use_base_odom``), ``mocap_node.published_log``,
``sim_node.base_log``, ``sim_node.command_log`` and ``sim_node.state_log`` (read by the sim loop's figures,
``sim/loop_figures.py``, and ``sim_node.tracking_summary``), ``dynamics_node.torque_log`` (Human66's torques
and contact state per estimate, read by ``dynik-ros run``'s dynamics figures). Each is taken from real
configured nodes (G1; real rclpy, a private ROS domain), filled to its cap through its own ``append`` with
rows shaped like the node's, and measured by walking the object (numpy buffers, tuples, floats, dict
entries; shared objects counted once). The script also runs on the code before the logs became numpy rings
(deques of tuples): ``fill`` appends the row form each kind takes.

    python benchmarks/log_memory.py
"""

from __future__ import annotations

import sys
from collections import deque
from typing import Any

import numpy as np
from fuzz_rig import Rig


def deep_size(obj: Any, seen: set[int] | None = None) -> int:
    """Bytes held by ``obj`` and everything it references (each object once)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)  # a numpy array owning its data includes the buffer
    if isinstance(obj, np.ndarray):
        return size if obj.base is None else size + deep_size(obj.base, seen)
    if isinstance(obj, dict):
        return size + sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, deque, set)):
        return size + sum(deep_size(v, seen) for v in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return size + deep_size(vars(obj), seen)
    return size


def capacity(log: Any) -> int:
    return log.maxlen if isinstance(log, deque) else log.capacity


def fill(log: Any, width: int, parts: tuple[int, ...] = ()) -> int:
    """Append ``capacity`` rows of ``width`` floats (a deque of the old code gets the node's tuple form:
    flat, or ``parts`` = sizes of (time, array[, float]) items); returns the rows appended."""
    rng = np.random.default_rng(0)
    n = capacity(log)
    for i in range(n):
        row = rng.standard_normal(width)
        row[0] = 1.7e9 + i * 0.01
        if not isinstance(log, deque):
            log.append(row)
        elif not parts:
            log.append(tuple(row.tolist()))
        else:  # (time, joints) or (time, joints, base error), as the old sim_node appended
            item: list[Any] = [float(row[0]), row[1 : 1 + parts[1]].copy()]
            if len(parts) == 3:
                item.append(float(row[-1]))
            log.append(tuple(item))
    return n


def fill_torques(log: Any, joints: int) -> int:
    """Fill dynamics_node's torque log to its cap with ``joints`` torques per estimate (the deque of the old
    code gets its ``(stamp, torques, state)`` tuples)."""
    rng = np.random.default_rng(0)
    n = capacity(log)
    for i in range(n):
        stamp, tau = 1_700_000_000_000_000_000 + i * 16_666_667, 50.0 * rng.standard_normal(joints)
        if isinstance(log, deque):
            log.append((stamp, tau, "double"))
        else:
            log.append(stamp, tau, 3)
    return n


def tracer_figures() -> tuple[int, int]:
    from dynik_ros.nodes.tracing import Tracer

    tracer = Tracer()
    for event in ("link_states", "ik_output", "command"):
        for i in range(tracer.capacity):
            tracer._add(event, 1_700_000_000_000_000_000 + i * 4_166_667, 1000.0 + i / 240.0)
    return tracer.capacity, deep_size(tracer.events)


def main() -> int:
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.dynamics_node import DynamicsNode
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.mocap_node import MocapNode
    from dynik_ros.nodes.sim_node import SimNode

    def node(cls: type, **values: Any) -> Any:
        overrides = [Parameter(k, value=v) for k, v in values.items()]
        return rig.add(cls(context=rig.context, parameter_overrides=overrides))

    rig = Rig()
    try:
        ik_node = node(IKNode, model="", robot="g1", use_base_odom=True)
        mocap_node = node(MocapNode)
        sim_node = node(SimNode, robot="g1")
        dynamics_node = node(DynamicsNode)
        rig.configure(ik_node, mocap_node, sim_node, dynamics_node)
        joints = len(sim_node.sim.joint_names)
        commanded = len(sim_node.sim.follower.joint_names)
        rows = [("tracer (3 events)", *tracer_figures())]
        logs = [
            ("ik_node.base_log", ik_node.base_log, 9, ()),
            ("mocap_node.published_log", mocap_node.published_log, 8, ()),
            ("sim_node.base_log", sim_node.base_log, 8, ()),
            ("sim_node.command_log", sim_node.command_log, 1 + commanded, (1, commanded)),
            ("sim_node.state_log", sim_node.state_log, 2 + joints, (1, joints, 1)),
        ]
        for name, log, width, parts in logs:
            rows.append((name, fill(log, width, parts), deep_size(log)))
        torques = dynamics_node.torque_log
        human_joints = len(dynamics_node.pipeline.robot.joint_names)
        rows.append(("dynamics_node.torque_log", fill_torques(torques, human_joints), deep_size(torques)))
    finally:
        rig.close()
    print(f"{'log':28s} {'rows at cap':>12s} {'MB at cap':>10s}")
    for name, n, size in rows:
        print(f"{name:28s} {n:12d} {size / 1e6:10.1f}")
    print(f"{'total':28s} {'':12s} {sum(r[2] for r in rows) / 1e6:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
