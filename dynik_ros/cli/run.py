"""``dynik-ros run <pipeline>``: run a pipeline's lifecycle nodes in one process, on one executor.

The embedded alternative to ``ros2 launch`` (which pip-only installs do not have): the pipelines in
``config/pipelines/<name>.yaml`` list the nodes with the same parameters the launch files pass. The runner
creates every node in one rclpy context, waits until the in-process publishers see their subscribers,
drives ``configure`` and ``activate`` (consumers before producers), records the chosen topics to an mcap
bag, runs until the source is exhausted, then deactivates, cleans up and prints the metrics.

Modes: offline (default for the shipped pipelines) publishes each sample once the IK answered the previous
one: faster than real time and deterministic; ``--realtime`` publishes at the sample rate.

    dynik-ros run g1_retargeting
    dynik-ros run human66_tracking --param rate:=240 --duration 5 --realtime
    dynik-ros run replay --param bag_path:=out/human66_tracking_.../ --param ik_node.model:=human48
    dynik-ros list
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from dynik_ros.cli.pipeline_file import (  # noqa: F401  (re-exported: dynik_ros.cli.run's public names)
    COMMANDS_TOKEN,
    NODE_CLASSES,
    PATH_PARAMETERS,
    NodeEntry,
    Pipeline,
    PipelineError,
    apply_overrides,
    available_pipelines,
    load_pipeline,
    node_class,
    parse_overrides,
    pipelines_dir,
    typed_parameters,
)
from dynik_ros.nodes.tracing import Tracer

SETTLE_TIME = 2.0  # s of source time left out of the accuracy means (the initial transient)
EXECUTORS = ("auto", "single", "multi", "events")


class RunInterrupted(PipelineError):
    """Ctrl-C / SIGTERM ended a run before its source did (exit status 130)."""


# --------------------------------------------------------------------------- tracing
def _pct(samples: Sequence[float] | np.ndarray, q: float, scale: float = 1e3) -> float:
    arr = np.asarray(samples, dtype=float)
    return float(np.percentile(arr, q) * scale) if arr.size else math.nan


# --------------------------------------------------------------------------- running
class PipelineRunner:
    """Runs one :class:`Pipeline`; see the module docstring."""

    def __init__(
        self,
        pipeline: Pipeline,
        out_dir: str | Path | None = "out",
        offline: bool | None = None,
        executor: str = "auto",
        timeout: float = 600.0,
        quiet: bool = False,
        domain_id: int | None = None,
    ):
        if executor not in EXECUTORS:
            raise PipelineError(f"executor must be one of {EXECUTORS}, got '{executor}'")
        self.pipeline = pipeline
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.offline = pipeline.offline if offline is None else offline
        self.executor_kind = executor
        self.timeout = timeout
        self.quiet = quiet
        self.domain_id = domain_id
        self.tracer = Tracer()

    def log(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def _make_executor(self, context: Any) -> Any:
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

        if self.executor_kind == "auto":
            self.executor_kind = "events" if events_executor_available() else "single"
        if self.executor_kind == "multi":
            return MultiThreadedExecutor(num_threads=2, context=context)
        if self.executor_kind == "events":
            try:
                from rclpy.experimental import EventsExecutor  # Jazzy and later
            except ImportError:
                raise PipelineError("the events executor needs rclpy >= Jazzy (rclpy.experimental)") from None
            return EventsExecutor(context=context)
        return SingleThreadedExecutor(context=context)

    def run(self) -> dict[str, Any]:
        import rclpy
        from rclpy.context import Context

        for entry in self.pipeline.nodes:
            if entry.executable == "bridge_node" and self.offline:
                # offline: ramp and rate limit on the stamps, one command per input (bit-identical runs)
                entry.parameters.setdefault("clock", "message")
            if entry.executable == "ik_node" and self.offline:
                # offline, the source runs ahead of the clock: ik_node checks stamps against the stream
                entry.parameters.setdefault("max_future_stamp", 0.0)
            if entry.executable == "wearable_node":
                entry.parameters["realtime"] = not self.offline
                if entry.parameters.get("loop"):
                    raise PipelineError(
                        "wearable_node.loop:=true never ends: the runner needs a finite source"
                    )
        context = Context()
        init_kwargs: dict[str, Any] = {"context": context}
        if self.domain_id is not None:
            init_kwargs["domain_id"] = self.domain_id
        rclpy.init(args=[], **init_kwargs)
        nodes: dict[str, Any] = {}
        recorder = recorder_node = helper = None
        executor = None
        try:
            for entry in self.pipeline.nodes:
                cls = node_class(entry.executable)
                node = cls(entry.name, context=context, parameter_overrides=typed_parameters(entry))
                node.trace = self.tracer.hook(entry.name)
                nodes[entry.name] = node
            executor = self._make_executor(context)
            for node in nodes.values():
                executor.add_node(node)
            helper = rclpy.create_node("dynik_runner", context=context)
            executor.add_node(helper)
            wall_start = time.perf_counter()
            for name, node in nodes.items():  # listed consumers first in the pipeline files
                if node.trigger_configure() != _success():
                    raise PipelineError(f"{name}: configure failed: {node.last_error}")
            if self.out_dir is not None and self.pipeline.record:
                recorder_node = rclpy.create_node("dynik_recorder", context=context)
                recorder = self._start_recorder(recorder_node, nodes)
                executor.add_node(recorder_node)
            self._wait_for_discovery(list(nodes.values()) + ([recorder_node] if recorder_node else []))
            for name, node in nodes.items():
                if node.trigger_activate() != _success():
                    raise PipelineError(f"{name}: activate failed: {node.last_error}")
                ready = getattr(node, "is_ready", None)  # e.g. mocap_node calibrating: before the motion
                if ready is not None and not spin_until(executor, helper, ready, 30.0):
                    print(f"warning: {name} not ready after 30 s, going on", file=sys.stderr)
            loop_start = time.perf_counter()
            timed_out = self._spin(executor, nodes, helper)
            loop_time = time.perf_counter() - loop_start
            for node in reversed(list(nodes.values())):  # producers first
                node.trigger_deactivate()
            metrics = self._metrics(nodes, loop_time, time.perf_counter() - wall_start, timed_out)
            for node in nodes.values():
                node.trigger_cleanup()
        finally:
            if recorder is not None:
                recorder.close()
            for node in nodes.values():
                if node.lifecycle_state != "finalized":
                    node.trigger_shutdown()
                if executor is not None:
                    executor.remove_node(node)
                node.destroy_node()
            for extra in (recorder_node, helper):
                if extra is not None:
                    if executor is not None:
                        executor.remove_node(extra)
                    extra.destroy_node()
            if executor is not None:
                executor.shutdown()
            rclpy.shutdown(context=context)
        if recorder is not None:
            metrics["bag"] = str(recorder.path)
            metrics["bag_counts"] = dict(recorder.counts)
        self._print(metrics)
        return metrics

    def _start_recorder(self, node: Any, nodes: Mapping[str, Any]) -> Any:
        from dynik_ros.nodes.topic_recorder import TopicRecorder

        topics = []
        for topic in self.pipeline.record:
            if topic == COMMANDS_TOKEN:
                bridges = [n for n in nodes.values() if hasattr(n, "command_topic")]
                for bridge in bridges:
                    topics.append((_absolute(bridge.command_topic), bridge.command_type, False))
                continue
            msg_type, best_effort = _topic_type(topic)
            topics.append((topic, msg_type, best_effort))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = self.out_dir / f"{self.pipeline.name}_{stamp}"
        suffix = 1
        while path.exists():
            path = self.out_dir / f"{self.pipeline.name}_{stamp}_{suffix}"
            suffix += 1
        return TopicRecorder(node, path, topics)

    @staticmethod
    def _wait_for_discovery(nodes: Sequence[Any], timeout: float = 10.0) -> None:
        """Until each in-process publisher sees the in-process subscriptions of its topic (DDS discovery
        runs in the middleware's threads: no spinning needed)."""
        skip = {"/parameter_events", "/rosout"}
        wanted: dict[str, int] = {}
        for node in nodes:
            for sub in node.subscriptions:
                if _topic_of(sub) not in skip:
                    wanted[_topic_of(sub)] = wanted.get(_topic_of(sub), 0) + 1
        publishers = [(p, _topic_of(p)) for n in nodes for p in n.publishers if _topic_of(p) in wanted]
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if all(p.get_subscription_count() >= wanted[t] for p, t in publishers):
                return
            time.sleep(0.01)
        missing = sorted({t for p, t in publishers if p.get_subscription_count() < wanted[t]})
        print(f"warning: discovery incomplete after {timeout:g} s for {missing}", file=sys.stderr)

    def _spin(self, executor: Any, nodes: Mapping[str, Any], helper: Any) -> bool:
        """Spin until the wearable's source is exhausted and the IK answered its last sample (or a quiet
        0.5 s), then 0.2 s more for the last commands and recordings; True if the timeout ended it."""
        wearable = next(n for n in nodes.values() if hasattr(n, "finished"))
        state: dict[str, float] = {}

        def done() -> bool:
            if not wearable.finished:
                return False
            now = time.perf_counter()
            state.setdefault("finished", now)
            last = self.tracer.newest.get("link_states")
            if last is None or self.tracer.seen("ik_output", last) or now - state["finished"] > 0.5:
                state.setdefault("drained", now + 0.2)
            return now >= state.get("drained", math.inf)

        return not spin_until(executor, helper, done, self.timeout)

    def _metrics(self, nodes: Mapping[str, Any], loop_time: float, wall_time: float, timed_out: bool) -> dict:
        wearable = next(n for n in nodes.values() if hasattr(n, "finished"))
        ik = next((n for n in nodes.values() if hasattr(n, "solve_times")), None)
        bridge = next((n for n in nodes.values() if hasattr(n, "command_topic")), None)
        first, last = self.tracer.oldest.get("link_states"), self.tracer.newest.get("link_states")
        span = (last - first) * 1e-9 if first is not None and last is not None else 0.0
        m: dict[str, Any] = {
            "pipeline": self.pipeline.name,
            "mode": "offline" if self.offline else "realtime",
            "executor": self.executor_kind,
            "timed_out": timed_out,
            "samples_published": wearable.published,
            "source_span_s": span,
            "run_time_s": loop_time,
            "total_time_s": wall_time,
            "realtime_factor": span / loop_time if loop_time > 0 else math.nan,
        }
        if ik is not None:
            errors = np.array([e for e in ik.errors], dtype=float).reshape(-1, 4)
            settled = errors[(errors[:, 0] - errors[0, 0]) * 1e-9 >= SETTLE_TIME] if len(errors) else errors
            if len(settled) == 0:
                settled = errors
            m.update(
                {
                    "ik_received": ik.received,
                    "ik_steps": ik.steps,
                    "dropped_link_states": max(0, wearable.published - ik.received),
                    "rejected": {k: v for k, v in ik.rejections.counts.items() if v},
                    "qp_failures": ik.qp_failures,
                    "mnte": float(np.nanmean(settled[:, 1])) if len(settled) else math.nan,
                    "angular_velocity_rmse": float(np.nanmean(settled[:, 2])) if len(settled) else math.nan,
                    "position_rmse": float(np.nanmean(settled[:, 3])) if len(settled) else math.nan,
                    "solve_time_p50_ms": _pct(ik.solve_times, 50),
                    "solve_time_p99_ms": _pct(ik.solve_times, 99),
                    "ik_latency_p50_ms": _pct(self.tracer.latencies("link_states", "ik_output"), 50),
                    "ik_latency_p99_ms": _pct(self.tracer.latencies("link_states", "ik_output"), 99),
                }
            )
        if bridge is not None:
            latency = self.tracer.latencies("link_states", "command")
            outputs = self.tracer.counts.get("ik_output", 0)
            m.update(
                {
                    "command_topic": _absolute(bridge.command_topic),
                    "commands_sent": bridge.commands_sent,
                    "fresh_commands": bridge.fresh_commands,
                    "dropped_joint_states": max(0, outputs - bridge.fresh_commands - bridge.rejections.total),
                    "latency_p50_ms": _pct(latency, 50),
                    "latency_p99_ms": _pct(latency, 99),
                }
            )
        sim = next((n for n in nodes.values() if hasattr(n, "tracking_summary")), None)
        if sim is not None:
            m["sim"] = sim.tracking_summary()
        dynamics = next((n for n in nodes.values() if hasattr(n, "torque_log")), None)
        if dynamics is not None:
            from dynik_ros.cli.dynamics_figures import dynamics_summary

            m["dynamics"] = dynamics_summary(dynamics, wearable, first)
        mocap = next((n for n in nodes.values() if hasattr(n, "published_log")), None)
        if sim is not None and mocap is not None:
            from dynik_ros.sim.loop_figures import loop_summary

            m["loop"] = loop_summary(mocap, ik, sim)
        return m

    def _print(self, m: Mapping[str, Any]) -> None:
        if self.quiet:
            return
        f = _fmt
        lines = [
            f"dynik-ros run {m['pipeline']} ({m['mode']}, "
            + (f"processes {m['executor']})" if "processes" in m else f"{m['executor']} executor)"),
            f"  samples       {m['samples_published']} published over {m['source_span_s']:.2f} s of source",
        ]
        if "ik_received" in m:
            rejected = ", ".join(f"{k} {v}" for k, v in m["rejected"].items()) or "none"
            lines += [
                f"  ik_node       {m['ik_received']} received ({m['dropped_link_states']} dropped, refused: "
                f"{rejected}), {m['ik_steps']} IK steps, {m['qp_failures']} QP failures",
                f"  accuracy      MNTE {f(m['mnte'], 'e')}, angular-velocity RMSE "
                f"{f(m['angular_velocity_rmse'])} rad/s, position RMSE {f(m['position_rmse'])} m "
                f"(after the first {SETTLE_TIME:g} s)",
                f"  solve time    p50 {f(m['solve_time_p50_ms'])} ms, p99 {f(m['solve_time_p99_ms'])} ms",
                f"  latency       link state -> IK output  p50 {f(m['ik_latency_p50_ms'])} ms, "
                f"p99 {f(m['ik_latency_p99_ms'])} ms",
            ]
        if "commands_sent" in m:
            lines += [
                f"  latency       link state -> command    p50 {f(m['latency_p50_ms'])} ms, "
                f"p99 {f(m['latency_p99_ms'])} ms",
                f"  bridge        {m['commands_sent']} commands on {m['command_topic']} "
                f"({m['fresh_commands']} fresh, {m['dropped_joint_states']} IK outputs not commanded)",
            ]
        if "sim" in m:
            s = m["sim"]
            lines.append(
                f"  sim           {s.get('commands', 0)} commands ({s.get('clipped', 0)} clipped, "
                f"{s.get('refused', 0)} refused), {f(s['real_time_factor'])}x real time"
            )
            if "delay_p50_ms" in s:
                lines.append(
                    f"  tracking      commanded -> simulated delay p50 {f(s['delay_p50_ms'])} ms, max "
                    f"{f(s['delay_max_ms'])} ms, RMS after the shift {f(s['rms_after_shift_rad'])} rad "
                    f"({s['moving_joints']} moving joints); base to IK base {f(s['base_error_mean_m'])} m"
                )
        if "dynamics" in m:
            from dynik_ros.cli.dynamics_figures import dynamics_lines

            lines += dynamics_lines(m["dynamics"])
        if "loop" in m:
            from dynik_ros.sim.loop_figures import loop_lines

            lines += loop_lines(m["loop"])
        lines.append(
            f"  wall time     {m['run_time_s']:.2f} s running ({f(m['realtime_factor'])}x real time), "
            f"{m['total_time_s']:.2f} s with set-up"
        )
        if "bag" in m:
            counts = ", ".join(f"{t} {c}" for t, c in m["bag_counts"].items())
            lines.append(f"  bag           {m['bag']} (mcap): {counts}")
        if m["timed_out"]:
            lines.append("  WARNING: the run hit its timeout before the source was exhausted")
        print("\n".join(lines), flush=True)


def spin_until(
    executor: Any, helper: Any, condition: Callable[[], bool], timeout: float, poll: float = 0.02
) -> bool:
    """Spin ``executor`` until ``condition()`` or ``timeout`` s; True if the condition was met.

    The cheapest way differs by executor (measured, rclpy 9.1.2): the classic executors block in
    ``spin_until_future_complete`` without a timeout, resolved by a ``poll`` timer on ``helper``
    (``spin_once(timeout)`` would build a timeout timer at every wake-up); the EventsExecutor is cheapest
    in a ``spin_once(timeout)`` loop (its ``spin_until_future_complete`` costs ~1 ms more per sample and,
    without a timeout, never returns).
    """
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.task import Future

    deadline = time.perf_counter() + timeout
    if not isinstance(executor, (SingleThreadedExecutor, MultiThreadedExecutor)):
        while time.perf_counter() < deadline:
            if condition():
                return True
            executor.spin_once(timeout_sec=poll)
        return condition()
    future = Future()

    def check() -> None:
        if future.done():
            return
        if condition():
            future.set_result(True)
        elif time.perf_counter() > deadline:
            future.set_result(False)

    timer = helper.create_timer(poll, check)
    try:
        executor.spin_until_future_complete(future)
    finally:
        helper.destroy_timer(timer)
    return bool(future.result())


def events_executor_available() -> bool:
    """rclpy's EventsExecutor (``rclpy.experimental``, Kilted; not in Humble)."""
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401
    except ImportError:
        return False
    return True


def _fmt(value: float, kind: str = "g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.3e}" if kind == "e" else f"{value:.3g}"


def _success() -> Any:
    from rclpy.lifecycle import TransitionCallbackReturn

    return TransitionCallbackReturn.SUCCESS


def _absolute(topic: str) -> str:
    return topic if topic.startswith("/") else "/" + topic


def _topic_of(entity: Any) -> str:
    """Resolved topic of a publisher or subscription (``topic_name`` where rclpy has it)."""
    return getattr(entity, "topic_name", None) or _absolute(entity.topic)


def _topic_type(topic: str) -> tuple[type, bool]:
    """Message class and whether its publisher is best-effort, for the pipeline's known topics."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState, MultiDOFJointState
    from std_msgs.msg import String
    from visualization_msgs.msg import MarkerArray

    known: dict[str, tuple[type, bool]] = {
        "/human/link_states": (MultiDOFJointState, True),
        "/dynik/joint_states": (JointState, False),
        "/dynik/base_odom": (Odometry, False),
        "/dynik/markers": (MarkerArray, False),
        "/diagnostics": (DiagnosticArray, False),
        "/robot/base_odom": (Odometry, False),
        "/mocap/rigid_body": (PoseStamped, True),
        "/joint_states": (JointState, False),
        "/sim/base_pose_true": (PoseStamped, False),
        "/dynik/base_target": (Odometry, False),
        "/human/joint_torques": (JointState, False),
        "/human/foot_wrench/RightFoot": (WrenchStamped, False),
        "/human/foot_wrench/LeftFoot": (WrenchStamped, False),
        "/human/shoes/right": (WrenchStamped, False),
        "/human/shoes/left": (WrenchStamped, False),
        "/human/contact_state": (String, False),
    }
    try:
        from tf2_msgs.msg import TFMessage

        known["/tf"] = (TFMessage, False)
    except ImportError:
        pass
    if topic not in known:
        raise PipelineError(f"cannot record '{topic}': known topics are {sorted(known)} and {COMMANDS_TOKEN}")
    return known[topic]


def run_pipeline(
    name: str,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    out_dir: str | Path | None = "out",
    offline: bool | None = None,
    *,
    duration: float | None = None,
    executor: str = "auto",
    timeout: float = 600.0,
    quiet: bool = False,
    domain_id: int | None = None,
    processes: str = "single",
) -> dict[str, Any]:
    """Run pipeline ``name`` (or a pipeline YAML path) and return its metrics (also printed).

    ``overrides``: ``{'rate': 240, 'ik_node.position_gain': 20}`` or ``['rate:=240', ...]``;
    ``out_dir``: where the bag directory is created (``None``: no recording); ``offline``: ``None`` keeps
    the pipeline's mode; ``duration``: length of the synthetic motion (or longest bag span) in seconds;
    ``processes``: ``single`` (every node in this process, on ``executor``), ``per-node`` or
    ``source-ik+bridge`` (child processes, :mod:`dynik_ros.cli.run_processes`).
    Raises :class:`PipelineError` naming the node and parameter when something is misconfigured.
    """
    pipeline = load_pipeline(name)
    if overrides is not None and not isinstance(overrides, Mapping):
        overrides = parse_overrides(list(overrides))
    overrides = dict(overrides or {})
    if duration is not None:
        overrides["wearable_node.duration"] = float(duration)
    apply_overrides(pipeline, overrides)
    if processes != "single":
        from dynik_ros.cli.run_processes import MultiProcessRunner

        multi = MultiProcessRunner(pipeline, processes, out_dir, offline, "auto", timeout, quiet, domain_id)
        return multi.run()
    runner = PipelineRunner(pipeline, out_dir, offline, executor, timeout, quiet, domain_id)
    return runner.run()


def main(argv: Sequence[str] | None = None) -> int:
    """``dynik-ros``'s command line (:mod:`dynik_ros.cli.run_command`; kept here for the console script)."""
    from dynik_ros.cli.run_command import main as command

    return command(argv)


if __name__ == "__main__":
    # through the imported module: run_processes raises dynik_ros.cli.run's PipelineError, not __main__'s
    from dynik_ros.cli.run import main as _main

    raise SystemExit(_main())
