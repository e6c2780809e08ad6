"""``dynik-ros run --processes per-node|source-ik+bridge``: a pipeline's nodes in separate processes.

The one-process runner (:class:`dynik_ros.cli.run.PipelineRunner`) spins every node on one executor; under
load that one thread falls behind at 240 Hz (``benchmarks/deployments.py``). Here each node, or the
source and the IK together with the bridge apart, runs in its own child process, the same one ``ros2
run`` / ``ros2 launch`` start (``python -m dynik_ros.nodes.<node>``; several nodes:
``python -m dynik_ros.nodes.node_process``), with the pipeline's parameters in a ROS parameters file.
This process then does what ``ros2 launch`` does, through the standard lifecycle services
(:mod:`dynik_ros.nodes.lifecycle_client`): configure every node in the pipeline's order (consumers
first), record the chosen topics, activate, wait until the source is exhausted and the IK answered it,
then stop the children producers first with SIGINT (each deactivates, writes its counters and message
timings to a summary file, shuts down and exits 0). The metrics are the one-process runner's, computed
from those summaries; latencies use each process's CLOCK_MONOTONIC, one clock on one machine.

No orphans: the children share this process's group (a terminal's Ctrl-C reaches them too and they stop
cleanly), every exit path of this process stops them (SIGINT, then SIGKILL after ``STOP_TIMEOUT``), and on
Linux each child gets SIGTERM if this process dies without cleaning up (``PR_SET_PDEATHSIG``); a child that
cannot act on it (its main thread blocked in the middleware) is killed by the guard
(:mod:`dynik_ros.cli.orphan_guard`) after its grace.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from dynik_ros.cli.run import (
    COMMANDS_TOKEN,
    NodeEntry,
    Pipeline,
    PipelineError,
    PipelineRunner,
    RunInterrupted,
    _absolute,
    _topic_type,
    typed_parameters,
)
from dynik_ros.cli.run_end_watch import EndWatcher

PROCESS_LAYOUTS = ("single", "per-node", "source-ik+bridge")
"""single: every node in this process (PipelineRunner); per-node: one process per node; source-ik+bridge:
wearable_node, ik_node (and mocap_node) in one process, every other node (bridge, sim) in its own."""
SOURCE_AND_IK = ("wearable_node", "ik_node", "mocap_node")
LINK_STATE_CONSUMERS = ("ik_node",)  # executables subscribing to /human/link_states
IK_OUTPUT_TOPIC = "/dynik/joint_states"
SOURCES = ("wearable_node",)  # activated last, once the IK's readers are matched
STOP_TIMEOUT = 60.0  # [s] a child still running this long after SIGINT is killed
START_TIMEOUT = 120.0  # [s] for a child's lifecycle services to answer (imports, DDS discovery)


def process_groups(pipeline: Pipeline, layout: str) -> list[list[NodeEntry]]:
    """The pipeline's nodes split into processes, in the pipeline's order (consumers first)."""
    if layout not in PROCESS_LAYOUTS[1:]:
        raise PipelineError(f"processes must be one of {PROCESS_LAYOUTS}, got '{layout}'")
    if layout == "per-node":
        return [[entry] for entry in pipeline.nodes]
    together = [e for e in pipeline.nodes if e.executable in SOURCE_AND_IK]
    groups: list[list[NodeEntry]] = []
    for entry in pipeline.nodes:
        if entry.executable not in SOURCE_AND_IK:
            groups.append([entry])
        elif entry is together[0]:
            groups.append(together)
    return groups


def parameters_file(pipeline: Pipeline, path: Path) -> Path:
    """A ROS 2 parameters file with every node's typed parameters under its name."""
    data = {}
    for entry in pipeline.nodes:
        values = {p.name: _yaml_value(p.value) for p in typed_parameters(entry)}
        data[entry.name] = {"ros__parameters": values}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _yaml_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        return [_yaml_value(v) for v in list(value)]
    return value


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux), default SIGINT handling."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Child:
    """One child process hosting ``entries``, its output in ``log`` and its summary in ``summary``."""

    def __init__(self, entries: list[NodeEntry], workdir: Path, params: Path, env: Mapping[str, str]):
        self.entries = entries
        label = "+".join(e.name for e in entries)
        self.log = workdir / f"{label}.log"
        self.summary = workdir / f"{label}.summary.json"
        if len(entries) == 1:
            entry = entries[0]
            cmd = [sys.executable, "-m", f"dynik_ros.nodes.{entry.executable}"]
            cmd += ["--summary", str(self.summary), "--ros-args", "-r", f"__node:={entry.name}"]
            cmd += ["--params-file", str(params)]
        else:
            cmd = [sys.executable, "-m", "dynik_ros.nodes.node_process"]
            cmd += [f"{e.executable}:{e.name}" for e in entries]
            cmd += ["--summary", str(self.summary), "--ros-args", "--params-file", str(params)]
        self.cmd = cmd
        with open(self.log, "w", encoding="utf-8") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env), preexec_fn=_die_with_parent
            )

    @property
    def label(self) -> str:
        return "+".join(e.name for e in self.entries)

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join("    " + line for line in text[-lines:])

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGINT (a clean stop through the lifecycle), SIGKILL if it is still running after ``timeout``."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGINT)
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


class _Interrupted(Exception):
    """SIGINT / SIGTERM received by the runner."""


class MultiProcessRunner(PipelineRunner):
    """Runs a :class:`Pipeline` with its nodes in child processes; see the module docstring."""

    def __init__(self, pipeline: Pipeline, layout: str, *args: Any, **kwargs: Any):
        super().__init__(pipeline, *args, **kwargs)
        self.layout = layout
        self.groups = process_groups(pipeline, layout)
        self.children: list[Child] = []
        self.guard: subprocess.Popen | None = None  # orphan_guard.py, once the children are started
        self.interrupted = ""

    # ----------------------------------------------------------------- set-up
    def _prepare_parameters(self) -> None:
        """The one-process runner's mode settings, plus: the source waits for every consumer."""
        for entry in self.pipeline.nodes:
            if entry.executable == "bridge_node" and self.offline:
                entry.parameters.setdefault("clock", "message")
                entry.parameters.setdefault("input_depth", 0)  # keep all: a bridge process behind loses none
            if entry.executable == "ik_node" and self.offline:
                entry.parameters.setdefault("max_future_stamp", 0.0)
                entry.parameters.setdefault("link_states_reliable", True)  # no sample lost between processes
                entry.parameters.setdefault("output_depth", 0)  # nor between the IK and a bridge process
            if entry.executable == "wearable_node":
                entry.parameters["realtime"] = not self.offline
                entry.parameters.setdefault("link_states_reliable", self.offline)
                if entry.parameters.get("loop"):
                    raise PipelineError(
                        "wearable_node.loop:=true never ends: the runner needs a finite source"
                    )
        consumers = sum(e.executable in LINK_STATE_CONSUMERS for e in self.pipeline.nodes)
        consumers += int(self._records() and "/human/link_states" in self.pipeline.record)
        consumers += 1  # this runner's end watcher (EndWatcher)
        for entry in self.pipeline.nodes:
            if entry.executable == "wearable_node":
                entry.parameters.setdefault("min_subscribers", consumers)

    def _records(self) -> bool:
        return self.out_dir is not None and bool(self.pipeline.record)

    def _ik_output_readers(self) -> int:
        """Readers of ``/dynik/joint_states`` the pipeline makes: bridges, the offline source's
        acknowledgement, lockstep sims, the recorder and this runner's end watcher. Every one must be matched
        by the IK's writer before the first sample: a reliable, volatile writer never sends a reader what it
        published before it matched it (a bridge in another process discovered late missed every command of
        a 1 s run under load)."""
        topic = IK_OUTPUT_TOPIC
        readers = 1  # EndWatcher
        readers += int(self._records() and topic in self.pipeline.record)
        for entry in self.pipeline.nodes:
            p = entry.parameters
            if entry.executable == "bridge_node":
                readers += _absolute(str(p.get("input_topic", topic))) == topic
            elif entry.executable == "wearable_node" and not p.get("realtime", True):
                readers += _absolute(str(p.get("ack_topic", topic))) == topic
            elif entry.executable == "sim_node" and p.get("lockstep_topic"):
                readers += _absolute(str(p["lockstep_topic"])) == topic
        return readers

    def _record_topics(self) -> list[tuple[str, type, bool]]:
        topics = []
        for topic in self.pipeline.record:
            if topic != COMMANDS_TOKEN:
                topics.append((topic, *_topic_type(topic)))
            else:
                topics += [(t, kind, False) for t, kind in self._command_topics()]
        return topics

    def _command_topics(self) -> list[tuple[str, type]]:
        """Each bridge's command topic and type (from its parameters: the bridge lives in a child)."""
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        topics = []
        for entry in self.pipeline.nodes:
            if entry.executable == "bridge_node":
                p = entry.parameters
                controller = str(p.get("controller", "joint_trajectory_controller")).rstrip("/")
                if p.get("interface", "joint_trajectory") == "joint_trajectory":
                    topics.append((_absolute(f"{controller}/joint_trajectory"), JointTrajectory))
                else:
                    topics.append((_absolute(f"{controller}/commands"), Float64MultiArray))
        return topics

    def _start_children(self, workdir: Path) -> None:
        params = parameters_file(self.pipeline, workdir / "parameters.yaml")
        env = dict(os.environ, PYTHONUNBUFFERED="1", RCUTILS_LOGGING_BUFFERED_STREAM="0")
        if self.domain_id is not None:
            env["ROS_DOMAIN_ID"] = str(self.domain_id)
        for group in self.groups:
            child = Child(group, workdir, params, env)
            self.children.append(child)
            self.log(f"  started {child.label} (pid {child.proc.pid})")
        from dynik_ros.cli.orphan_guard import start_time

        pids = [f"{c.proc.pid}:{start_time(c.proc.pid)}" for c in self.children if start_time(c.proc.pid)]
        self.guard = subprocess.Popen(  # no PR_SET_PDEATHSIG: it outlives this process by design
            [sys.executable, "-m", "dynik_ros.cli.orphan_guard", str(os.getpid()), *pids],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C is this process's to handle, not the guard's
        )

    def _child_of(self, name: str) -> Child:
        return next(c for c in self.children if any(e.name == name for e in c.entries))

    def _check_alive(self) -> None:
        for child in self.children:
            if child.proc.poll() is not None:
                raise PipelineError(
                    f"process {child.label} exited ({child.proc.returncode}) early; its log {child.log}:\n"
                    + child.tail()
                )

    # ----------------------------------------------------------------- run
    def run(self) -> dict[str, Any]:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self._prepare_parameters()
        workdir = Path(tempfile.mkdtemp(prefix=f"dynik-run-{self.pipeline.name}-"))
        previous = self._install_signal_handlers()
        context = node = executor = recorder = None
        clients: dict[str, Any] = {}
        metrics: dict[str, Any] | None = None
        wall_start = time.monotonic()
        loop_time = 0.0
        timed_out = False
        try:
            self._start_children(workdir)  # before rclpy starts threads here (the children fork)
            context = Context()
            kwargs: dict[str, Any] = {"context": context}
            if self.domain_id is not None:
                kwargs["domain_id"] = self.domain_id
            _init_without_signals(kwargs)
            node = rclpy.create_node("dynik_runner", context=context)
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            clients = self._lifecycle_clients(node, executor)
            self._drive(clients, "configure")
            if self._records():
                recorder = self._start_recorder_on(node)
                self._wait_for_publishers(node, executor, [t for t, _, _ in self._record_topics()])
            bridges = sum(1 for e in self.pipeline.nodes if e.executable == "bridge_node")
            watcher = EndWatcher(node, self._wearable_name(), self._command_topics(), bridges)
            sources = {e.name for e in self.pipeline.nodes if e.executable in SOURCES}
            self._drive(clients, "activate", skip=sources)
            self._wait_for_ik_readers(executor, watcher)
            self._drive(clients, "activate", only=sources)
            self.log(f"  every node active ({len(self.children)} processes)")
            loop_start = time.monotonic()
            timed_out = not self._spin_until_done(executor, watcher)
            loop_time = time.monotonic() - loop_start
        except _Interrupted:
            self.log(f"  {self.interrupted}: stopping the node processes")
        finally:
            codes = self._stop_children()
            if recorder is not None:
                recorder.close()
            for client in clients.values():
                client.destroy()
            if executor is not None:
                executor.shutdown()
            if node is not None:
                node.destroy_node()
            if context is not None and context.ok():
                rclpy.shutdown(context=context)
            self._restore_signal_handlers(previous)
        try:
            proxies = self._read_summaries(codes)
            if not self.interrupted:
                metrics = self._metrics(proxies, loop_time, time.monotonic() - wall_start, timed_out)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if metrics is None:
            raise RunInterrupted(f"interrupted by {self.interrupted}: the node processes were stopped")
        metrics["processes"] = self.layout
        metrics["process_count"] = len(self.children)
        metrics["executor"] = f"{self.layout} ({len(self.children)} processes)"
        if recorder is not None:
            metrics["bag"] = str(recorder.path)
            metrics["bag_counts"] = dict(recorder.counts)
        self._print(metrics)
        return metrics

    def _wearable_name(self) -> str:
        return next(e.name for e in self.pipeline.nodes if e.executable == "wearable_node")

    def _lifecycle_clients(self, node: Any, executor: Any) -> dict[str, Any]:
        from dynik_ros.nodes.lifecycle_client import LifecycleClient

        return {e.name: LifecycleClient(node, executor, e.name) for e in self.pipeline.nodes}

    def _drive(
        self,
        clients: Mapping[str, Any],
        transition: str,
        skip: Collection[str] = (),
        only: Collection[str] | None = None,
    ) -> None:
        """``transition`` for every node in the pipeline's order (but ``skip``; or ``only`` those); a
        refusal names the node and its log."""
        from dynik_ros.nodes.lifecycle_client import LifecycleError

        for entry in self.pipeline.nodes:
            if entry.name in skip or (only is not None and entry.name not in only):
                continue
            self._check_alive()
            child = self._child_of(entry.name)
            try:
                clients[entry.name].change(transition, timeout=START_TIMEOUT)
            except LifecycleError as exc:
                time.sleep(0.2)  # let the refusing node's log line reach its file
                raise PipelineError(f"{exc}; log {child.log}:\n{child.tail()}") from None
            self._check_interrupt()

    def _start_recorder_on(self, node: Any) -> Any:
        from datetime import datetime

        from dynik_ros.nodes.topic_recorder import TopicRecorder

        self.out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = self.out_dir / f"{self.pipeline.name}_{stamp}"
        suffix = 1
        while path.exists():
            path = self.out_dir / f"{self.pipeline.name}_{stamp}_{suffix}"
            suffix += 1
        return TopicRecorder(node, path, self._record_topics())

    def _wait_for_publishers(self, node: Any, executor: Any, topics: Sequence[str]) -> None:
        """Until the recorder's subscriptions are matched with the (configured) publishers of each topic."""
        subs = [s for s in node.subscriptions if _absolute(s.topic_name) in set(topics)]
        deadline = time.monotonic() + START_TIMEOUT
        while not all(s.get_publisher_count() >= 1 for s in subs):
            self._check_alive()
            self._check_interrupt()
            if time.monotonic() > deadline:
                missing = sorted(s.topic_name for s in subs if s.get_publisher_count() < 1)
                raise PipelineError(f"no publisher matched for {missing} after {START_TIMEOUT:g} s")
            executor.spin_once(timeout_sec=0.05)

    def _wait_for_ik_readers(self, executor: Any, watcher: EndWatcher) -> None:
        """Until every active ik_node reports (its /diagnostics ``output_subscribers``) that its writer
        matched the pipeline's readers of its output; after ``START_TIMEOUT`` the run goes on with a
        notice (a reader this runner does not know of must not block it)."""
        iks = [e.name for e in self.pipeline.nodes if e.executable == "ik_node"]
        expected = self._ik_output_readers()
        deadline = time.monotonic() + START_TIMEOUT
        while not all(watcher.ik_readers.get(name, -1) >= expected for name in iks):
            self._check_alive()
            self._check_interrupt()
            if time.monotonic() > deadline:
                seen = {name: watcher.ik_readers.get(name) for name in iks}
                self.log(f"  notice: {IK_OUTPUT_TOPIC} readers matched {seen}, expected {expected}; going on")
                return
            executor.spin_once(timeout_sec=0.05)

    def _spin_until_done(self, executor: Any, watcher: EndWatcher) -> bool:
        """As the one-process runner: the source exhausted and its last sample answered by the IK (or a
        quiet 0.5 s); then every IK output commanded by the bridges (a bridge in another process may be
        behind on a loaded machine: a fixed 0.2 s lost the last commands of a run once) or no command
        for 2 s, and 0.2 s more for the recordings. False on timeout."""
        deadline = time.monotonic() + self.timeout
        drained = math.inf
        answered_at = math.inf
        while time.monotonic() < deadline:
            self._check_interrupt()
            self._check_alive()
            executor.spin_once(timeout_sec=0.02)
            now = time.monotonic()
            if watcher.finished_at is not None and answered_at == math.inf:
                answered = watcher.last_input is None or watcher.last_output >= watcher.last_input
                quiet = now - max(watcher.finished_at, watcher.output_at) > 0.5
                if answered or quiet:
                    answered_at = now
            if answered_at < math.inf and drained == math.inf and watcher.commanded(now, answered_at):
                drained = now + 0.2
            if now >= drained:
                return True
        return False

    # ----------------------------------------------------------------- stop
    def _stop_children(self) -> dict[str, int]:
        """SIGINT to each child, producers first (the reverse of the start order); the exit codes."""
        codes = {}
        for child in reversed(self.children):
            codes[child.label] = child.stop()
            if codes[child.label] != 0:
                self.log(f"  {child.label} exited {codes[child.label]}; log:\n{child.tail()}")
        if self.guard is not None:  # every child stopped here: nothing left to guard
            self.guard.terminate()
            self.guard.wait()
        return codes

    def _read_summaries(self, codes: Mapping[str, int]) -> dict[str, Any]:
        proxies: dict[str, Any] = {}
        for child in self.children:
            try:
                data = json.loads(child.summary.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                if self.interrupted:
                    continue
                raise PipelineError(
                    f"process {child.label} (exit {codes.get(child.label)}) wrote no summary; log "
                    f"{child.log}:\n{child.tail()}"
                ) from None
            self.tracer.merge(data.get("trace", {}))
            for summary in data.get("nodes", []):
                proxies[summary["name"]] = _proxy(summary)
        return {e.name: proxies[e.name] for e in self.pipeline.nodes if e.name in proxies}

    # ----------------------------------------------------------------- signals
    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    @staticmethod
    def _restore_signal_handlers(previous: Mapping[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self.interrupted:
            self.interrupted = signal.Signals(signum).name

    def _check_interrupt(self) -> None:
        if self.interrupted:
            raise _Interrupted()


def _proxy(summary: Mapping[str, Any]) -> SimpleNamespace:
    """A node's summary with the attributes :meth:`PipelineRunner._metrics` reads from a live node."""
    values = dict(summary)
    if "rejections" in values:
        counts = dict(values["rejections"])
        values["rejections"] = SimpleNamespace(counts=counts, total=sum(counts.values()))
    if "tracking_summary" in values:
        tracking = values["tracking_summary"]
        values["tracking_summary"] = lambda *a, **k: tracking
    return SimpleNamespace(**values)


def _init_without_signals(kwargs: dict[str, Any]) -> None:
    """rclpy.init for the runner's context without rclpy's SIGINT handler (ours stops the children)."""
    import rclpy

    try:
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO, **kwargs)
    except ImportError:
        rclpy.init(args=[], **kwargs)
