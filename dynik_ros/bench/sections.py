"""Thread CPU time per section of ik_node's sample path, without a profiler (``node_cpu.py --sections``).

cProfile charges its own overhead to every Python call, which inflates code made of many small calls (the
IK step is mostly numpy calls on small arrays) several times over. Here a few chosen callables are wrapped
instead, each adding two ``time.thread_time()`` reads: the figures are what the sections cost, give or take
a microsecond per call. Sections nest (the IK step contains the QP), so they do not add up to the total.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# (label, path from the node to the owner of the callable, attribute); the step's parts are indented
IK_NODE_SECTIONS = (
    ("link-state decode", "", "_decode"),
    ("stamp guard", "stamps", "check"),
    ("plausibility guard", "plausible", "check"),
    ("targets from the links", "", "_measurements"),
    ("IK step", "ik", "step"),
    ("  measurement checks", "<Measurements>", "validate"),
    ("  forward kinematics h(q)", "ik.kinematics", "poses"),
    ("  residual (eq. 5)", "<dynamical_ik>", "pose_residual"),
    ("  predicted configuration", "ik", "_predicted_configuration"),
    ("  joint Jacobians at it", "ik.kinematics", "update_jacobian"),
    ("  stacked Jacobian J(q)", "ik.kinematics", "stacked_jacobian"),
    ("  bounds (eq. 12-13b)", "ik", "_velocity_bounds"),
    ("  QP (eq. 10)", "ik.qp", "solve"),
    ("    its Cholesky shortcut", "ik.qp", "_unconstrained"),
    ("  integration (eq. 14)", "ik", "_integrate"),
    ("  base quaternions (q)", "ik.robot", "join"),
    ("outputs (joint states, odometry)", "", "_publish_state"),
    ("metrics (eq. 15-16)", "_evaluator", "evaluate"),
    ("markers", "", "_on_marker_timer"),
)


class SectionTimer:
    """Thread CPU and calls per label of the callables it wrapped; :meth:`undo` puts the originals back."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        """Replace ``owner.name`` (an instance, a class or a module) by a timed wrapper."""
        original = getattr(owner, name)
        had_own = name in getattr(owner, "__dict__", {})
        cpu, calls, clock = self.cpu, self.calls, time.thread_time

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                cpu[label] += clock() - start
                calls[label] += 1

        raw = owner.__dict__[name] if had_own and isinstance(owner, type) else original
        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, raw) if had_own else delattr(owner, name))

    def clear(self) -> None:
        """Forget what was counted so far (e.g. the warm-up samples)."""
        self.cpu.clear()
        self.calls.clear()

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()

    def table(self, samples: int, labels: list[str]) -> str:
        """One line per label: us of thread CPU and calls per sample."""
        lines = [f"    {'section':36s} {'us/sample':>9s} {'calls/sample':>12s}"]
        for label in labels:
            lines.append(
                f"    {label:36s} {self.cpu.get(label, 0.0) / samples * 1e6:9.1f} "
                f"{self.calls.get(label, 0) / samples:12.2f}"
            )
        return "\n".join(lines) + "\n"


def instrument_ik_node(node: Any, timer: SectionTimer) -> list[str]:
    """Wrap the sections of :data:`IK_NODE_SECTIONS` on a configured ik_node; returns their labels."""
    import dynik_ros.core.dynamical_ik as dynamical_ik
    from dynik_ros.core.targets import Measurements

    special = {"<Measurements>": Measurements, "<dynamical_ik>": dynamical_ik}
    labels = []
    for label, path, name in IK_NODE_SECTIONS:
        owner = special.get(path, node)
        if path and path not in special:
            for part in path.split("."):
                owner = getattr(owner, part)
        timer.wrap(owner, name, label)
        labels.append(label)
    return labels
