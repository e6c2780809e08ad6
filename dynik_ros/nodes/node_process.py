"""The process around one lifecycle node: ``main()`` of every console script, with an orderly stop.

Ctrl-C (SIGINT, what ``ros2 launch`` and ``ros2 run`` send) and SIGTERM do not tear rclpy's context down
under the node. rclpy's own signal handler is turned off; ours only records the signal, the spin loop
notices it within ``_POLL_S``, and the node is then taken down through its lifecycle while the context is
still valid: an active node is deactivated first (the bridge stops commanding, the source stops
publishing), then shut down, destroyed, and rclpy shut down last. The process exits 0 and logs
``finished cleanly``. A second signal during that stop ends the process at once (exit 130).
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
    """Set by SIGINT/SIGTERM; a second signal while set exits the process immediately."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ""

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.event.is_set():
            sys.stderr.write(f"second {signal.Signals(signum).name}: exiting without a clean stop\n")
            sys.stderr.flush()
            raise SystemExit(130)
        self.signal_name = signal.Signals(signum).name
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
    return code
