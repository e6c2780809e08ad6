"""The in-process pipeline that ``benchmarks/latency.py`` and ``benchmarks/node_cpu.py`` time, set up once.

One rclpy context: wearable_node (synthetic Human66 walk, real time, starting after 0.5 s) -> ik_node
(Human66) -> bridge_node (``forward_command``, all 66 joints, to a named controller) -> a probe node
subscribed to that controller's commands, all on one executor. The benchmarks wrap what they time (trace
hooks, callback timers) between :func:`start` and :func:`configure`; :func:`shut_down` takes it all down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EXECUTOR_KINDS = ("events", "single", "multi")


@dataclass
class WalkingPipeline:
    """The context, the three nodes, the command probe and the executor once :func:`configure` made it."""

    context: Any
    wearable: Any
    ik: Any
    bridge: Any
    probe: Any
    executor: Any = None

    @property
    def nodes(self) -> list[Any]:
        """The lifecycle nodes, consumers first (the order to configure and activate them in)."""
        return [self.bridge, self.ik, self.wearable]


def start(
    domain_id: int,
    rate: float,
    duration: float,
    *,
    controller: str,
    probe_name: str,
    on_command: Callable[[Any], None],
    markers: bool = True,
) -> WalkingPipeline:
    """A new context in ``domain_id`` with the three nodes (unconfigured) and the probe calling
    ``on_command`` for every command the bridge sends to ``controller``."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from dynik_ros.nodes import bridge_node, ik_node, wearable_node
    from dynik_ros.nodes.common import COMMAND_QOS

    context = Context()
    rclpy.init(args=[], context=context, domain_id=domain_id)

    def params(**values: Any) -> list[Parameter]:
        return [Parameter(k, value=v) for k, v in values.items()]

    wearable = wearable_node.WearableNode(
        context=context,
        parameter_overrides=params(
            source="synthetic", model="human66", scenario="walking", rate=rate, duration=duration,
            realtime=True, start_delay=0.5,
        ),
    )  # fmt: skip
    ik = ik_node.IKNode(context=context, parameter_overrides=params(model="human66", publish_markers=markers))
    bridge = bridge_node.BridgeNode(
        context=context,
        parameter_overrides=params(model="human66", interface="forward_command", controller=controller),
    )
    probe = rclpy.create_node(probe_name, context=context)
    probe.create_subscription(Float64MultiArray, f"/{controller}/commands", on_command, COMMAND_QOS)
    return WalkingPipeline(context, wearable, ik, bridge, probe)


def make_executor(kind: str, context: Any) -> Any:
    """rclpy's executor of ``kind`` (:data:`EXECUTOR_KINDS`; ``multi``: two threads) in ``context``."""
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    if kind not in EXECUTOR_KINDS:
        raise ValueError(f"executor must be one of {EXECUTOR_KINDS}, got '{kind}'")
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=2, context=context)
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    return SingleThreadedExecutor(context=context)


def configure(pipeline: WalkingPipeline, executor_kind: str) -> None:
    """The executor (with every node and the probe) and the nodes configured; ``RuntimeError`` naming the
    node whose configuration failed."""
    pipeline.executor = make_executor(executor_kind, pipeline.context)
    for node in [*pipeline.nodes, pipeline.probe]:
        pipeline.executor.add_node(node)
    for node in pipeline.nodes:
        node.trigger_configure()
    for node in pipeline.nodes:
        if node.lifecycle_state != "inactive":
            raise RuntimeError(f"{node.get_name()}: configure failed: {node.last_error}")


def shut_down(pipeline: WalkingPipeline) -> None:
    """Nodes and probe destroyed, the executor and the context shut down (also after a failed start)."""
    import rclpy

    executor = pipeline.executor
    for node in [*pipeline.nodes, pipeline.probe]:
        if executor is not None:
            executor.remove_node(node)
        node.destroy_node()
    if executor is not None:
        executor.shutdown()
    rclpy.shutdown(context=pipeline.context)
