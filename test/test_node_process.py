"""The node processes stop cleanly on Ctrl-C / SIGTERM (issue 10): deactivated, shut down, exit 0.

Each node runs as its own process (``python -m dynik_ros.nodes.<node>``, what ``ros2 run`` and ``ros2
launch`` start) on this session's private ROS domain; the test waits for its "active" (or "unconfigured")
log line, sends the signal and reads what the process printed until it exits. Timeouts only bound a failure.
"""

from __future__ import annotations

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
