"""The pipeline set-up shared by benchmarks/latency.py and benchmarks/node_cpu.py (dynik_ros/bench/
walking_pipeline.py), with real rclpy nodes on real DDS: configured, it carries the walk from wearable_node
through ik_node and the bridge to the probe; shut down, its context is gone."""

from __future__ import annotations

import pytest

from dynik_ros.bench import walking_pipeline


def test_walking_pipeline_reaches_the_probe_and_shuts_down(private_domain):
    from dynik_ros.cli.run import spin_until

    commands: list[object] = []
    pipeline = walking_pipeline.start(
        private_domain,
        60.0,
        0.5,
        controller="pipeline_test",
        probe_name="pipeline_test_probe",
        on_command=commands.append,
        markers=False,
    )
    assert [n.get_name() for n in pipeline.nodes] == ["bridge_node", "ik_node", "wearable_node"]
    try:
        walking_pipeline.configure(pipeline, "single")
        assert all(n.lifecycle_state == "inactive" for n in pipeline.nodes)
        publishers = (pipeline.wearable._pub, pipeline.ik._pub_js, pipeline.bridge._pub)
        spin_until(  # discovery: every link of the chain matched (the bound only ends a failed run)
            pipeline.executor,
            pipeline.probe,
            lambda: all(p.get_subscription_count() >= 1 for p in publishers),
            60.0,
        )
        for node in pipeline.nodes:
            node.trigger_activate()
        # (the bound only ends a failed run: the walk lasts 0.5 s after a 0.5 s start delay)
        spin_until(pipeline.executor, pipeline.probe, lambda: pipeline.wearable.finished, 60.0)
        for node in reversed(pipeline.nodes):  # no command after this
            node.trigger_deactivate()
        # the last command sent reaches the probe (reliable, and the newest in a KEEP_LAST history; with the
        # probe in the nodes' executor a loaded machine may drop older ones: 28 of 38 arrived once in a full
        # suite beside four others; the bound only ends a failed run)
        spin_until(pipeline.executor, pipeline.probe, lambda: _last_arrived(commands, pipeline.bridge), 60.0)
    finally:
        walking_pipeline.shut_down(pipeline)
    assert pipeline.wearable.published == 30
    assert _last_arrived(commands, pipeline.bridge)
    assert 1 <= len(commands) <= pipeline.bridge.commands_sent
    assert len(commands[0].data) == 66  # forward_command: every Human66 joint
    assert not pipeline.context.ok()


def _last_arrived(commands: list, bridge) -> bool:
    last = bridge.last_command
    return bool(commands) and last is not None and list(commands[-1].data) == list(last)


def test_unknown_executor_is_refused():
    with pytest.raises(ValueError, match="executor must be one of"):
        walking_pipeline.make_executor("threads", None)
