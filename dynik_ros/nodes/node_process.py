"""The process around one lifecycle node: ``main()`` of every console script, with an orderly stop.

Ctrl-C (SIGINT, what ``ros2 launch`` and ``ros2 run`` send) and SIGTERM do not tear rclpy's context down
under the node. rclpy's own signal handler is turned off; ours only records the signal, the spin loop
notices it within ``_POLL_S``, and the node is then taken down through its lifecycle while the context is
still valid: an active node is deactivated first (the bridge stops commanding, the source stops
publishing), then shut down, destroyed, and rclpy shut down last. The process exits 0 and logs
``finished cleanly``.

One Ctrl-C usually arrives twice: the terminal sends SIGINT to the whole foreground process group (``ros2
launch`` and every node it started), and ``ros2 launch`` then forwards its own SIGINT to each node. One
repeat of the first signal is therefore the same request; a third signal, or a different one (``ros2
launch`` escalates to SIGTERM when a node takes too long), ends the process at once (exit 130). Once the
node is stopped, further signals are ignored so that a late duplicate cannot kill the exiting interpreter.
(Before, the forwarded copy counted as a second Ctrl-C: under ``ros2 launch`` every node printed "finished
cleanly" and was then reported as "process has died [exit code -2]" or 130.)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.utilities import remove_ros_args

from dynik_ros.nodes.common import SUCCESS, DynikLifecycleNode

_POLL_S = 0.1  # longest wait inside the executor before the stop flag is looked at


class StopRequest:
    """Set by SIGINT/SIGTERM; one repeat of that signal is the same request, anything more exits (130)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ""
        self.repeats = 0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    @staticmethod
    def ignore_further() -> None:
        """After the stop: the process is exiting, a late duplicate signal must not kill it."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)

    def _on_signal(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            if name == self.signal_name and self.repeats == 0:
                self.repeats = 1  # the same Ctrl-C, delivered by the terminal and by ros2 launch
                return
            sys.stderr.write(f"another {name} while stopping: exiting without a clean stop\n")
            sys.stderr.flush()
            raise SystemExit(130)
        self.signal_name = name
        self.event.set()


def _init_without_rclpy_signals(args: list[str]) -> None:
    try:
        from rclpy.signals import SignalHandlerOptions
    except ImportError:  # very old rclpy: its handler stays, the stop below still runs
        rclpy.init(args=args)
        return
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)


def stop_node(node: DynikLifecycleNode) -> None:
    """Take the node down through its lifecycle (deactivate, shutdown) while the context is valid."""
    if not rclpy.ok():  # context gone (external shutdown): no transition possible, free everything
        node._release_all()
        return
    if node.lifecycle_state == "active" and node.trigger_deactivate() != SUCCESS:
        node.get_logger().error(f"deactivate on stop failed: {node.last_error}")
    if node.lifecycle_state in ("unconfigured", "inactive", "active"):
        node.trigger_shutdown()
    else:
        node._release_all()


def run_node(node_class: type[DynikLifecycleNode], argv: Sequence[str] | None = None) -> int:
    """Console-script body: spin one lifecycle node until SIGINT/SIGTERM, then stop it cleanly.

    The node starts unconfigured (launch files or ``ros2 lifecycle set`` drive it); ``--autostart``
    configures and activates it right away (exit 1 if that fails). ``--summary FILE`` writes the node's
    counters and message timings (:func:`node_summary`) to FILE once it is deactivated on the stop (what
    ``dynik-ros run --processes`` reads back).
    """
    return run_nodes([(node_class, None)], argv)


def run_nodes(
    nodes: Sequence[tuple[type[DynikLifecycleNode], str | None]], argv: Sequence[str] | None = None
) -> int:
    """:func:`run_node` for several nodes in one process, on one executor (the events executor where
    rclpy has it), each ``(class, name)`` (``None``: the class's default name). On the stop, active nodes
    are deactivated last-listed first (the producers of a pipeline), then shut down."""
    args = list(sys.argv if argv is None else argv)
    _init_without_rclpy_signals(args)
    plain = remove_ros_args(args)[1:]
    autostart = "--autostart" in plain
    summary_path = plain[plain.index("--summary") + 1] if "--summary" in plain[:-1] else None
    stop = StopRequest()
    stop.install()
    instances = [cls() if name is None else cls(name) for cls, name in nodes]
    tracer = None
    if summary_path:
        from dynik_ros.nodes.tracing import Tracer

        tracer = Tracer()
        for node in instances:
            node.trace = tracer.hook(node.get_name())
    executor = _executor(len(instances))
    for node in instances:
        executor.add_node(node)
    code = 0
    try:
        for node in instances:
            if autostart and (node.trigger_configure() != SUCCESS or node.trigger_activate() != SUCCESS):
                node.get_logger().fatal(f"autostart failed: {node.last_error}")
                code = 1
            if not autostart:
                name = node.get_name()
                node.get_logger().info(f"unconfigured: waiting for 'ros2 lifecycle set {name} configure'")
        while code == 0 and not stop.event.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=_POLL_S)
    except Exception as exc:  # ExternalShutdownException (Iron+) ends the spin; anything else is a bug
        if type(exc).__name__ != "ExternalShutdownException":
            instances[0].get_logger().fatal(f"spin ended by {type(exc).__name__}: {exc}")
            code = 3
    finally:
        for node in reversed(instances):
            if stop.signal_name:
                node.get_logger().info(f"{stop.signal_name}: stopping")
            if rclpy.ok() and node.lifecycle_state == "active" and node.trigger_deactivate() != SUCCESS:
                node.get_logger().error(f"deactivate on stop failed: {node.last_error}")
        if summary_path:
            _write_summary(summary_path, instances, tracer)
        for node in reversed(instances):
            stop_node(node)
            if code == 0:
                node.get_logger().info("finished cleanly")
            executor.remove_node(node)
        executor.shutdown(timeout_sec=1.0)
        for node in instances:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        if stop.signal_name:
            stop.ignore_further()
    return code


def _executor(count: int):
    """One node: the single-threaded executor; several: the events executor where rclpy has it."""
    if count > 1:
        try:
            from rclpy.experimental import EventsExecutor

            return EventsExecutor()
        except ImportError:
            pass
    return SingleThreadedExecutor()


def node_summary(node: DynikLifecycleNode) -> dict[str, Any]:
    """The counters a run reports, for whichever of them ``node`` has (wearable, IK, bridge, sim)."""
    out: dict[str, Any] = {"name": node.get_name()}
    for attr in (
        "published",
        "finished",
        "received",
        "steps",
        "qp_failures",
        "commands_sent",
        "fresh_commands",
        "command_topic",
    ):
        if hasattr(node, attr):
            value = getattr(node, attr)
            out[attr] = value if isinstance(value, (bool, str)) else int(value)
    rejections = getattr(node, "rejections", None)
    if rejections is not None:
        out["rejections"] = {k: int(v) for k, v in rejections.counts.items()}
    for attr in ("solve_times", "errors"):
        if hasattr(node, attr):
            out[attr] = [_plain(row) for row in getattr(node, attr)]
    if hasattr(node, "tracking_summary"):
        out["tracking_summary"] = _plain(node.tracking_summary())
    return out


def _plain(value: Any) -> Any:
    """numpy scalars and arrays (nested in dicts / lists) as JSON values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _write_summary(path: str, nodes: Sequence[DynikLifecycleNode], tracer: Any) -> None:
    import json

    data = {"nodes": [node_summary(node) for node in nodes], "trace": tracer.dump() if tracer else {}}
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # the reader never sees half a file


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dynik_ros.nodes.node_process EXECUTABLE[:NAME] ... [--autostart] [--summary FILE]
    [--ros-args ...]``: several dynik_ros nodes in one process (``dynik-ros run --processes``)."""
    args = list(sys.argv if argv is None else argv)
    plain = remove_ros_args(args)[1:]
    specs = []
    for item in plain:
        if item.startswith("--"):
            break
        executable, _, name = item.partition(":")
        specs.append((_node_class(executable), name or None))
    if not specs:
        sys.stderr.write("usage: python -m dynik_ros.nodes.node_process EXECUTABLE[:NAME] ... [--ros-args]\n")
        return 2
    return run_nodes(specs, args)


def _node_class(executable: str) -> type[DynikLifecycleNode]:
    """The lifecycle node class of ``dynik_ros.nodes.<executable>`` (the one its ``main`` runs)."""
    import importlib

    module = importlib.import_module(f"dynik_ros.nodes.{executable}")
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, DynikLifecycleNode)
            and value.__module__ == module.__name__
        ):
            return value
    raise SystemExit(f"dynik_ros.nodes.{executable} has no lifecycle node")


if __name__ == "__main__":
    raise SystemExit(main())
