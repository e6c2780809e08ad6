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

import signal
import sys
import threading
from collections.abc import Sequence

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
    configures and activates it right away (exit 1 if that fails).
    """
    args = list(sys.argv if argv is None else argv)
    _init_without_rclpy_signals(args)
    autostart = "--autostart" in remove_ros_args(args)[1:]
    stop = StopRequest()
    stop.install()
    node = node_class()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    code = 0
    try:
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
            node.get_logger().fatal(f"spin ended by {type(exc).__name__}: {exc}")
            code = 3
    finally:
        if stop.signal_name:
            node.get_logger().info(f"{stop.signal_name}: stopping")
        stop_node(node)
        if code == 0:
            node.get_logger().info("finished cleanly")
        executor.remove_node(node)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        if stop.signal_name:
            stop.ignore_further()
    return code
