"""The node processes stop cleanly on Ctrl-C / SIGTERM (issue 10): deactivated, shut down, exit 0.

Each node runs as its own process (``python -m dynik_ros.nodes.<node>``, what ``ros2 run`` and ``ros2
launch`` start) on this session's private ROS domain; the test waits for its "active" (or "unconfigured")
log line, sends the signal and reads what the process printed until it exits. Timeouts only bound a failure.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

import pytest

NODES = ("wearable_node", "ik_node", "bridge_node", "mocap_node", "dynamics_node")
BAD_SIGNS = (
    "Traceback",
    "KeyboardInterrupt",
    "context is invalid",
    "Failed to complete transition",
    "wait set",
)


class NodeProcess:
    """A node in its own process with its combined output collected line by line."""

    def __init__(self, node: str, *args: str) -> None:
        env = dict(os.environ, RCUTILS_LOGGING_BUFFERED_STREAM="0", PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"dynik_ros.nodes.{node}", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip())
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 120.0) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: text in self.output or self._eof, timeout)
            return text in self.output

    def drain(self) -> str:
        """Everything the exited process printed (the reader ends at the pipe's end of file)."""
        self._reader.join(30.0)
        return self.output

    def stop(self, signum: int, timeout: float = 60.0) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"no exit {timeout} s after {signal.Signals(signum).name}:\n{self.output}")

    def wait(self, timeout: float = 60.0) -> int:
        """The exit code, waiting without sending anything (a bounded wait: a hang is a failure)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"no exit {timeout} s after the signals sent:\n{self.output}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def processes():
    """Node processes started by a test; any still running at its end (a failed test) are killed."""
    started: list[NodeProcess] = []
    yield lambda *args: started.append(NodeProcess(*args)) or started[-1]
    for process in started:
        process.kill()


@pytest.mark.parametrize("node", NODES)
def test_active_node_stops_cleanly_on_ctrl_c(private_domain, processes, node):
    process = processes(node, "--autostart")
    assert process.wait_for("]: active"), process.output
    assert process.proc.poll() is None, f"{node} exited on its own:\n{process.output}"
    code = process.stop(signal.SIGINT)
    text = process.drain()
    assert code == 0, text
    assert "SIGINT: stopping" in text and "finished cleanly" in text, text
    after = text[text.index("SIGINT: stopping") :]
    assert after.index("inactive") < after.index("shut down") < after.index("finished cleanly"), text
    assert not [sign for sign in BAD_SIGNS if sign in text], text


@pytest.mark.parametrize("node", ("bridge_node", "ik_node"))
def test_unconfigured_node_stops_cleanly_on_sigterm(private_domain, processes, node):
    process = processes(node)
    assert process.wait_for("unconfigured: waiting"), process.output
    code = process.stop(signal.SIGTERM)
    text = process.drain()
    assert code == 0, text
    assert "SIGTERM: stopping" in text and "finished cleanly" in text, text
    assert not [sign for sign in BAD_SIGNS if sign in text], text


def test_one_ctrl_c_delivered_twice_is_one_stop_request():
    """A terminal's Ctrl-C reaches every node of the foreground group, and ros2 launch forwards its own
    SIGINT: the copy is the same request. A third signal, or SIGTERM after SIGINT (launch's escalation),
    exits at once. (The copy used to exit 130 / die of SIGINT after "finished cleanly".)"""
    from dynik_ros.nodes.node_process import StopRequest

    stop = StopRequest()
    stop._on_signal(signal.SIGINT, None)
    assert stop.event.is_set() and stop.signal_name == "SIGINT"
    stop._on_signal(signal.SIGINT, None)  # the forwarded copy: no exit
    with pytest.raises(SystemExit) as third:
        stop._on_signal(signal.SIGINT, None)
    assert third.value.code == 130
    escalated = StopRequest()
    escalated._on_signal(signal.SIGINT, None)
    with pytest.raises(SystemExit):
        escalated._on_signal(signal.SIGTERM, None)


def test_ctrl_c_to_the_process_group_stops_cleanly(private_domain, processes):
    """What a terminal's Ctrl-C under ros2 launch does: SIGINT to the node, then the launch's copy once the
    node is already stopping; exit 0, one clean stop."""
    process = processes("bridge_node", "--autostart")
    assert process.wait_for("]: active"), process.output
    process.proc.send_signal(signal.SIGINT)
    assert process.wait_for("SIGINT: stopping"), process.output
    if process.proc.poll() is None:
        process.proc.send_signal(signal.SIGINT)  # the launch's copy
    code = process.wait()  # no third signal: a third one is an escalation and exits 130 by design
    text = process.drain()
    assert code == 0, text
    assert text.count("finished cleanly") == 1, text
    assert not [sign for sign in BAD_SIGNS + ("while stopping",) if sign in text], text


@contextlib.contextmanager
def lifecycle_client(domain: int, node: str):
    """A :class:`LifecycleClient` of ``node`` on a probe node in its own context on ``domain``."""
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from dynik_ros.nodes.lifecycle_client import LifecycleClient

    context = Context()
    rclpy.init(context=context, domain_id=domain)
    probe = rclpy.create_node(f"lifecycle_probe_{os.getpid()}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(probe)
    try:
        client = LifecycleClient(probe, executor, node)
        yield client
        client.destroy()
    finally:
        executor.shutdown()
        probe.destroy_node()
        rclpy.shutdown(context=context)


@pytest.mark.parametrize("node", ("wearable_node", "ik_node"))
def test_node_process_answers_standard_lifecycle_services(private_domain, processes, node):
    """`ros2 lifecycle get/set` and launch_ros talk to <node>/get_state and <node>/change_state: a node
    process must answer them, and a deactivation stays (wearable_node used to overwrite rclpy's service
    list with its calibration services, so neither lifecycle nor parameter requests were ever answered)."""
    process = processes(node)
    assert process.wait_for("unconfigured: waiting"), process.output
    with lifecycle_client(private_domain, node) as client:
        assert client.state() == "unconfigured"
        client.change("configure")
        client.change("activate")
        assert client.state() == "active"
        client.change("deactivate")
        assert client.state() == "inactive"
        assert process.wait_for("]: inactive"), process.output
        assert client.state() == "inactive"
        client.change("activate")
        assert client.state() == "active"
    code = process.stop(signal.SIGINT)
    text = process.drain()
    assert code == 0 and "finished cleanly" in text, text


def test_nodes_keep_rclpy_entity_lists(ros):
    """No node rebinds the lists rclpy's Node keeps its services and timers in (the executor only waits on
    what is in them): the lifecycle and parameter services, and a timer created before configure, stay
    registered through configure, activate, deactivate and cleanup."""
    from dynik_ros.nodes.bridge_node import BridgeNode
    from dynik_ros.nodes.dynamics_node import DynamicsNode
    from dynik_ros.nodes.ik_node import IKNode
    from dynik_ros.nodes.mocap_node import MocapNode
    from dynik_ros.nodes.wearable_node import WearableNode

    for cls in (WearableNode, IKNode, BridgeNode, MocapNode, DynamicsNode):
        node = cls(f"entities_{cls.__name__.lower()}_{os.getpid()}")
        try:
            name = node.get_name()  # services named 'name/...' or '/name/...' (root namespace)
            wanted = ("get_state", "change_state", "get_parameters", "set_parameters")
            expected = {f"{name}/{service}" for service in wanted}
            timer = node.create_timer(10.0, lambda: None)
            for step in ("configure", "activate", "deactivate", "cleanup"):
                assert getattr(node, f"trigger_{step}")() is not None
                services = {s.srv_name.lstrip("/") for s in node.services}
                assert expected <= services, f"{cls.__name__} after {step}: {sorted(expected - services)}"
                assert timer in list(node.timers), f"{cls.__name__} after {step} lost a timer"
        finally:
            node.destroy_node()


def test_no_node_module_assigns_an_attribute_rclpy_node_keeps(ros):
    """The same for every node module, present and future (sim_node included), read as source: no
    ``self.<name> =`` where ``<name>`` is one of the attributes rclpy's LifecycleNode sets on itself
    (dynamics_node, added later, rebound ``_timers`` too)."""
    import re
    from pathlib import Path

    from rclpy.lifecycle import LifecycleNode

    probe = LifecycleNode(f"attribute_probe_{os.getpid()}")
    try:
        reserved = set(vars(probe))
    finally:
        probe.destroy_node()
    assignment = re.compile(r"self\.(\w+)\s*(?::[^=]*)?=(?!=)")
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "dynik_ros" / "nodes").glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [
                f"{path.name}:{number} self.{m.group(1)}"
                for m in assignment.finditer(line)
                if m.group(1) in reserved
            ]
    assert "_services" in reserved and "_timers" in reserved  # the check looks at the right names
    assert found == []


def test_a_transition_requested_of_a_stalled_node_process_is_done_once(private_domain, processes):
    """A node process stalled (here SIGSTOP, on a loaded machine descheduled) while its ``activate`` is
    requested: the client's check after 2 s (``get_state``) queues behind it, and when the process resumes
    it answered ``get_state`` ("inactive") first, so the client resent ``activate``; the late first request
    activated the node and the resent one was refused, and ``dynik-ros run`` stopped with "activate refused"
    (found with a stopped bridge process). Now a refused resend with the node in the end state is done."""
    from dynik_ros.nodes.lifecycle_client import RESEND_S, LifecycleError

    process = processes("bridge_node", "--ros-args", "-p", "controller:=stall_ctrl")
    assert process.wait_for("unconfigured: waiting"), process.output
    resume = threading.Timer(2.5 * RESEND_S, os.kill, (process.proc.pid, signal.SIGCONT))
    try:
        with lifecycle_client(private_domain, "bridge_node") as client:
            try:
                client.change("configure")
                os.kill(process.proc.pid, signal.SIGSTOP)
                resume.start()
                client.change("activate")  # raised LifecycleError("activate refused") before
            except LifecycleError as exc:  # once "configure refused" in a loaded full suite: its log says why
                os.kill(process.proc.pid, signal.SIGCONT)
                raise AssertionError(f"{exc}\n{process.stop(signal.SIGINT)}\n{process.drain()}") from exc
            assert client.state() == "active"
    finally:
        resume.cancel()
        os.kill(process.proc.pid, signal.SIGCONT)
    code = process.stop(signal.SIGINT)
    text = process.drain()
    assert code == 0 and "finished cleanly" in text, text
