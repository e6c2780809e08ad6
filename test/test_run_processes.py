"""``dynik-ros run --processes``: the pipeline's nodes in child processes on real DDS, driven through their
lifecycle services; the same commands as in one process, and no process left behind however it ends.

Waits are on conditions (a line printed, a process gone); their timeouts only bound a failure.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("private_domain")


def _messages(bag, topic: str) -> list:
    from dynik_ros.io.bags import read_messages

    return list(read_messages(bag, [topic]))


def test_process_layouts_keep_the_pipeline_order():
    from dynik_ros.cli.run import load_pipeline
    from dynik_ros.cli.run_processes import process_groups

    pipeline = load_pipeline("g1_sim")
    order = [e.name for e in pipeline.nodes]
    per_node = process_groups(pipeline, "per-node")
    assert [[e.name for e in g] for g in per_node] == [[name] for name in order]
    split = [[e.name for e in g] for g in process_groups(pipeline, "source-ik+bridge")]
    assert sorted(sum(split, [])) == sorted(order)
    together = next(g for g in split if "ik_node" in g)
    assert set(together) == {"ik_node", "wearable_node"}  # the bridge and the sim each apart
    assert all(len(g) == 1 for g in split if g is not together)


def test_per_node_processes_command_what_one_process_commands(tmp_path):
    """Offline, the bridge commands on the input stamps: one process per node commands what every node in
    one process commands, bit for bit. Between processes the runner makes the link states reliable
    (best-effort, one was lost once in a full suite on the loaded machine) and the source waits until
    every consumer is matched, so no sample is lost."""
    from dynik_ros.cli.run import run_pipeline

    runs = {
        layout: run_pipeline(
            "g1_retargeting", None, tmp_path / layout, duration=1.5, quiet=True, processes=layout
        )
        for layout in ("single", "per-node")
    }
    assert runs["per-node"]["process_count"] == 3
    commands = {}
    for layout, m in runs.items():
        assert m["samples_published"] == m["ik_received"] == 90 and m["dropped_link_states"] == 0, layout
        assert not m["timed_out"] and not m["rejected"], layout
        # IK -> bridge is reliable: every IK output is commanded, once
        assert m["fresh_commands"] == m["commands_sent"] == m["ik_received"], layout
        assert np.isfinite(m["latency_p50_ms"]) and m["latency_p50_ms"] > 0, layout
        msgs = _messages(m["bag"], "/joint_trajectory_controller/joint_trajectory")
        assert len(msgs) == m["commands_sent"], layout
        commands[layout] = np.array([c.msg.points[0].positions for c in msgs])  # in order of sending
    np.testing.assert_array_equal(commands["single"], commands["per-node"])
    assert np.abs(np.diff(commands["single"], axis=0)).max() > 0  # the robot moves (a frozen run matches)
    assert runs["per-node"]["mnte"] == runs["single"]["mnte"]


@pytest.mark.parametrize(
    ("offline", "out_dir", "expected"),
    [(True, "out", 4), (True, None, 3), (False, "out", 3), (False, None, 2)],
)
def test_the_source_starts_once_the_ik_writer_matched_every_reader_of_its_output(offline, out_dir, expected):
    """A reliable, volatile writer never sends a reader what it published before it matched it: with the
    source and the IK in one process (matched at once) and the bridge apart, a bridge discovered late missed
    all 60 commands of a run under load. The runner now waits for ik_node's own count of matched readers
    (its /diagnostics ``output_subscribers``): the bridge, the offline source's acknowledgement, the
    recorder, its end watcher."""
    from dynik_ros.cli.run import load_pipeline
    from dynik_ros.cli.run_processes import MultiProcessRunner

    pipeline = load_pipeline("g1_retargeting")
    runner = MultiProcessRunner(pipeline, "source-ik+bridge", out_dir, offline, quiet=True)
    runner._prepare_parameters()
    assert runner._ik_output_readers() == expected
    # offline, the IK's output and the bridge's input keep every sample (reliable, KEEP_ALL): a bridge
    # process behind by more than 10 samples lost the oldest (22 of 60 fresh once); live, the nodes' own 10
    depths = {
        (e.executable, key): e.parameters.get(key)
        for e in pipeline.nodes
        for key in ("output_depth", "input_depth")
        if e.executable in ("ik_node", "bridge_node")
    }
    keep_all = 0 if offline else None
    assert depths[("ik_node", "output_depth")] == keep_all
    assert depths[("bridge_node", "input_depth")] == keep_all


def test_source_and_ik_together_with_the_bridge_apart(tmp_path):
    from dynik_ros.cli.run import run_pipeline

    m = run_pipeline("g1_retargeting", None, tmp_path, duration=1.0, quiet=True, processes="source-ik+bridge")
    assert m["process_count"] == 2 and m["processes"] == "source-ik+bridge"
    counts = {key: m[key] for key in ("samples_published", "ik_received", "fresh_commands")}
    assert counts == dict.fromkeys(counts, 60), counts  # which one fell short, if any
    assert m["solve_time_p50_ms"] > 0 and np.isfinite(m["mnte"])


def test_a_node_that_refuses_configure_is_named_with_its_log(tmp_path):
    from dynik_ros.cli.run import PipelineError, run_pipeline

    with pytest.raises(PipelineError, match=r"(?s)/wearable_node: configure refused.*bag_path"):
        run_pipeline(
            "replay",
            {"bag_path": str(tmp_path / "missing_bag")},
            None,
            quiet=True,
            processes="per-node",
        )


class Runner:
    """``dynik-ros run`` in its own process group (as a terminal runs it), its output read line by line."""

    def __init__(self, *args: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dynik_ros.cli.run", "run", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._eof = False
        threading.Thread(target=self._read, daemon=True).start()

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
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 300.0) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: text in "\n".join(self.lines) or self._eof, timeout)
            return text in "\n".join(self.lines)

    def child_pids(self) -> list[int]:
        return [int(p) for p in re.findall(r"started \S+ \(pid (\d+)\)", self.output)]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (exited, waiting for whoever adopted it to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids: list[int], timeout: float = 120.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if not _gone(p)]


@pytest.fixture
def runner():
    started: list[Runner] = []
    yield lambda *args: started.append(Runner(*args)) or started[-1]
    for r in started:
        pids = r.child_pids()
        r.kill()
        for pid in pids:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


ENDLESS = ("human66_tracking", "--processes", "per-node", "--realtime", "--duration", "600", "--no-record")


def test_ctrl_c_stops_every_node_process_cleanly(runner):
    """A terminal's Ctrl-C (SIGINT to the whole group) mid-run: every child stops through its lifecycle,
    the runner exits 130 and no node process is left."""
    run = runner(*ENDLESS)
    assert run.wait_for("every node active"), run.output
    pids = run.child_pids()
    assert len(pids) == 2
    os.killpg(run.proc.pid, signal.SIGINT)
    code = run.proc.wait(180)
    assert code == 130, run.output
    assert "interrupted by SIGINT" in run.output and " exited " not in run.output, run.output
    assert _wait_gone(pids) == [], run.output


def test_a_killed_runner_leaves_no_node_process(runner):
    """The runner killed outright (no clean-up possible): the children get SIGTERM from the kernel
    (PR_SET_PDEATHSIG) and end."""
    run = runner(*ENDLESS)
    assert run.wait_for("every node active"), run.output
    pids = run.child_pids()
    run.proc.send_signal(signal.SIGKILL)  # the runner only, not its group
    run.proc.wait(60)
    assert _wait_gone(pids) == [], [open(f"/proc/{p}/cmdline").read() for p in pids if not _gone(p)]


def test_a_killed_runner_leaves_no_node_process_even_one_that_cannot_stop(runner):
    """A child that cannot act on the kernel's SIGTERM: once in a full suite on the loaded machine
    wearable_node, its main thread blocked in the middleware, logged nothing after the runner's death and was
    still running 120 s later (ik_node had stopped at once). Stopped here with SIGSTOP, it cannot run its
    handler either; the runner's guard (cli/orphan_guard.py) kills it after its grace, while ik_node still
    stops cleanly by itself."""
    from dynik_ros.cli.orphan_guard import GRACE

    run = runner(*ENDLESS)
    assert run.wait_for("every node active"), run.output
    pids = run.child_pids()
    wedged = int(re.search(r"started wearable_node \(pid (\d+)\)", run.output).group(1))
    os.kill(wedged, signal.SIGSTOP)
    run.proc.send_signal(signal.SIGKILL)  # the runner only, not its group
    run.proc.wait(60)
    assert _wait_gone([p for p in pids if p != wedged]) == []  # its own SIGTERM, no guard needed
    assert _wait_gone([wedged], timeout=GRACE + 60.0) == [], "the wedged child outlived the guard's grace"


def test_the_runner_waits_for_the_bridges_own_count_not_the_commands_on_the_wire(ros):
    """A bridge repeats its last command between inputs (100 Hz against 60 Hz): counting commands on the
    wire ended a run while a bridge in another process still had IK outputs queued (54 of 60 fresh)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from trajectory_msgs.msg import JointTrajectory

    from dynik_ros.cli.run_end_watch import BRIDGE_QUIET, EndWatcher, bridges_caught_up
    from dynik_ros.nodes.common import diagnostic_status

    node = rclpy.create_node("end_watcher_probe")
    try:
        topic = "/joint_trajectory_controller/joint_trajectory"
        watcher = EndWatcher(node, "wearable_node", [(topic, JointTrajectory)], bridges=1)
        for _ in range(60):
            watcher._on_output(_stamped_joint_state())

        def report(fresh: int, **rejected: int) -> None:
            values = {"fresh_commands": fresh, **{f"rejected_{k}": v for k, v in rejected.items()}}
            msg = DiagnosticArray()
            msg.status = [diagnostic_status("bridge_node: command bridge", "x", 0, "commanding", values)]
            watcher._on_diagnostics(msg)

        now = time.monotonic()
        assert not watcher.commanded(now, now)  # no bridge has reported yet
        report(54)
        assert not watcher.commanded(time.monotonic(), now)  # 6 inputs still queued in the bridge
        report(58, wrong_lengths=2)  # refused inputs are answered too
        assert watcher.commanded(time.monotonic(), now)
        # one more IK output the bridge does not answer
        watcher._on_output(_stamped_joint_state())
        later = watcher.answered_progress_at
        # a bridge process that sends nothing is starved, not holding: the wait goes on however long it is
        # quiet (a quiet time alone ended a loaded run with 22 of 60 fresh commands)
        assert not watcher.commanded(later + 10 * BRIDGE_QUIET, later)
        report(58, wrong_lengths=2)  # it runs and does not answer: once, then twice since that output
        assert not watcher.commanded(later + BRIDGE_QUIET + 0.1, later)
        report(58, wrong_lengths=2)
        # a bridge that holds ends the wait after BRIDGE_QUIET s, not before
        assert not watcher.commanded(later + BRIDGE_QUIET - 0.1, later)
        assert watcher.commanded(later + BRIDGE_QUIET + 0.1, later)
        # a further IK output: the reports before it no longer count
        watcher._on_output(_stamped_joint_state())
        assert not watcher.commanded(later + 10 * BRIDGE_QUIET, later)
    finally:
        node.destroy_node()
    assert bridges_caught_up(60, {"a": 60, "b": 61}, 2)
    assert not bridges_caught_up(60, {"a": 60}, 2) and not bridges_caught_up(60, {"a": 60, "b": 59}, 2)


def _stamped_joint_state():
    """What ``EndWatcher._on_output`` reads of a message: its header stamp."""
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp.sec = 1
    return msg
