"""The run logs a node keeps for the end-of-run figures hold a few MB at their cap, for a node running for
hours: the runner's latency tracer (was 43-50 MB at its cap: ordered dicts of Python ints and floats),
``ik_node.base_log``, ``mocap_node.published_log``, ``sim_node.base_log`` (~61-67 MB each: deques of 2*10^5
tuples), ``sim_node.command_log`` / ``state_log`` (43-46 MB). Now numpy rings (``core/rolling.py``); the
figures read from them are checked against ground truth after the rings wrapped. Memory is measured with
tracemalloc over the node's creation, configuration and the filling of its logs to twice their cap."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from node_harness import ik, mocap, params

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.core.so3 import exp_so3
from dynik_ros.nodes.tracing import Tracer
from dynik_ros.sim.loop_figures import loop_summary

NS = 10**9
T0 = 1_700_000_000 * NS  # an epoch stamp: beyond float64's exact integers, so the tracer keeps int64


def _capacity(log) -> int:
    return getattr(log, "capacity", None) or log.maxlen


def _fill(log, width: int, rows: int, start: float = 0.0, rate: float = 100.0, values=None) -> None:
    """Append ``rows`` rows (``values(i)`` for the sample indices ``i``, vectorized; else 0.5) with times
    ``start + i / rate`` in the first column, each a fresh array as a node appends it."""
    i = np.arange(rows)
    table = np.full((rows, width), 0.5) if values is None else values(i)
    table[:, 0] = start + i / rate
    for k in range(rows):
        log.append(table[k].copy())


def test_tracer_latencies_are_the_stamps_first_times_within_the_window():
    tracer = Tracer(capacity=1000)
    # the runner's hook stamps time.monotonic(); the test gives the times itself
    for i in range(2500):  # 2.5 windows: the figures are over the last 1000 stamps
        stamp = T0 + i * (NS // 240)
        tracer._add("link_states", stamp, 10.0 + i / 240)
        tracer._add("ik_output", stamp, 10.0 + i / 240 + 0.001 * (i % 7))
        tracer._add("ik_output", stamp, 99.0)  # a repeat (the bridge's hold): the first time is kept
    latencies = tracer.latencies("link_states", "ik_output")
    expected = 0.001 * (np.arange(1500, 2500) % 7)
    np.testing.assert_allclose(np.sort(latencies), np.sort(expected), atol=1e-9)
    assert tracer.counts == {"link_states": 2500, "ik_output": 2500}
    assert tracer.newest["ik_output"] == T0 + 2499 * (NS // 240) and tracer.oldest["link_states"] == T0
    assert tracer.seen("ik_output", T0 + 2499 * (NS // 240)) and not tracer.seen("ik_output", T0)


def test_merged_traces_keep_each_stamps_first_time():
    """Two processes' tracers (the runner's --processes mode): a stamp both saw keeps the earlier time."""
    mine, theirs = Tracer(capacity=100), Tracer(capacity=100)
    for i in range(50):
        mine._add("link_states", T0 + i, 1.0 + i)
        theirs._add("command", T0 + i, 1.5 + i)
        theirs._add("link_states", T0 + i, 0.5 + i if i % 2 else 2.0 + i)  # earlier on odd stamps
    mine.merge(theirs.dump())
    expected = np.array([1.5 + i - (0.5 + i if i % 2 else 1.0 + i) for i in range(50)])
    np.testing.assert_allclose(np.sort(mine.latencies("link_states", "command")), np.sort(expected))
    assert mine.counts["command"] == 50 and mine.newest["command"] == T0 + 49


def test_the_tracer_at_its_cap_holds_a_few_mb():
    tracemalloc.start()
    try:
        tracer = Tracer()
        for i in range(tracer.capacity + 1000):
            tracer._add("link_states", T0 + i * (NS // 240), 1000.0 + i / 240)
        held = tracemalloc.get_traced_memory()[0] / 1e6
    finally:
        tracemalloc.stop()
    assert len(tracer.latencies("link_states", "link_states")) == tracer.capacity
    assert held < 2.5, f"{held:.1f} MB for an event at the cap"


def _traced(build) -> tuple[object, float]:
    """What ``build()`` returns and the memory it left allocated [MB] (tracemalloc)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = build()
        return out, (tracemalloc.get_traced_memory()[0] - before) / 1e6
    finally:
        tracemalloc.stop()


def test_ik_node_with_its_base_log_at_the_cap_holds_a_few_mb(h):
    """ik_node (G1, ``use_base_odom``) configured and its base log filled to twice its cap, after a first
    one configured untraced (what a process loads once is not the node's)."""

    def build():
        node = h.add(ik(model="", robot="g1", use_base_odom=True))
        node.trigger_configure()
        assert node.lifecycle_state == "inactive", node.last_error
        return node

    def filled():
        node = build()
        _fill(node.base_log, 9, 2 * _capacity(node.base_log))
        return node

    build()
    node, held = _traced(filled)
    assert len(node.base_log) == _capacity(node.base_log) >= 10_000
    assert held < 12.0, f"ik_node with its base log at the cap: {held:.1f} MB"


@pytest.fixture
def loop_nodes(h):
    """mocap_node and sim_node (G1) configured, and the memory their creation and configuration left (a
    first pair configured before, untraced: what a process loads once, parsers and caches, is not theirs)."""
    from dynik_ros.nodes.sim_node import SimNode

    def build():
        nodes = h.add(mocap()), h.add(SimNode(**params(robot="g1")))
        for node in nodes:
            node.trigger_configure()
            assert node.lifecycle_state == "inactive", node.last_error
        return nodes

    build()
    return _traced(build)


def test_the_sim_loop_logs_at_their_cap_hold_a_few_mb_and_its_figures_read_the_window(loop_nodes):
    """mocap_node's published poses 2 mm off the simulated truth (and turned 1 deg), both logs filled to
    twice their cap: the loop summary reads the last window in time order (the truth interpolated at the
    mocap stamps), 2 mm and 1 deg on every pose; the joints commanded 10 ms before the simulator reached
    them give a 10 ms tracking delay."""
    (mocap_node, sim_node), configured = loop_nodes
    turn = quaternion_from_rotation(exp_so3(np.radians([0.0, 0.0, 1.0])))

    def truth(i: np.ndarray) -> np.ndarray:
        rows = np.zeros((len(i), 8))
        rows[:, 2], rows[:, 3], rows[:, 7] = 0.01 * i, 0.8, 1.0
        return rows

    def measured(i: np.ndarray) -> np.ndarray:
        rows = truth(i)
        rows[:, 1] += 0.002
        rows[:, 4:8] = turn
        return rows

    commanded = len(sim_node.sim.follower.joint_names)

    def command(i: np.ndarray) -> np.ndarray:
        wave = 0.3 * np.sin(2 * np.pi * 0.5 * i / 100.0)
        return np.column_stack((i, np.repeat(wave[:, None], commanded, axis=1)))

    def state(i: np.ndarray) -> np.ndarray:
        return np.column_stack((command(i - 1), np.zeros(len(i))))  # one 10 ms sample behind

    def fill():
        _fill(sim_node.base_log, 8, 2 * _capacity(sim_node.base_log), values=truth)
        _fill(mocap_node.published_log, 8, 2 * _capacity(mocap_node.published_log), values=measured)
        _fill(sim_node.command_log, 1 + commanded, 2 * _capacity(sim_node.command_log), values=command)
        _fill(sim_node.state_log, 2 + commanded, 2 * _capacity(sim_node.state_log), values=state)

    _, filled = _traced(fill)
    held = configured + filled
    assert held < 25.0, f"mocap_node and sim_node (G1) with their logs at the cap: {held:.1f} MB"
    loop = loop_summary(mocap_node, None, sim_node)
    assert loop["mocap"]["n"] > 0.9 * _capacity(mocap_node.published_log)
    assert loop["mocap"]["position_max_mm"] == pytest.approx(2.0, abs=1e-6)
    assert loop["mocap"]["angle_max_deg"] == pytest.approx(1.0, abs=1e-6)
    tracking = sim_node.tracking_summary()
    assert tracking["delay_p50_ms"] == pytest.approx(10.0, abs=1.5), tracking


def test_dynamics_node_torque_log_at_its_cap_holds_a_few_mb_and_the_summary_reads_the_window(h):
    """dynamics_node's torque log (a deque of 36,000 ``(stamp, torques, state)`` tuples, 26.9 MB at its cap in
    ``benchmarks/log_memory.py``) is numpy rings: filled to twice its cap, it holds under 12 MB, its stamps
    stay exact epoch nanoseconds, and ``dynik-ros run``'s dynamics figures are those of the last ``capacity``
    estimates (peak, leg RMS, contact shares computed here from the same numbers)."""
    from types import SimpleNamespace

    from dynik_ros.cli.dynamics_figures import LEG_JOINTS, dynamics_summary
    from dynik_ros.estimation.contact_classification import STATE_NAMES
    from dynik_ros.nodes.dynamics_node import DynamicsNode

    def build():
        node = h.add(DynamicsNode(**params()))
        node.trigger_configure()
        assert node.lifecycle_state == "inactive", node.last_error
        return node

    names = None
    rng = np.random.default_rng(3)

    def filled():
        nonlocal names
        node = build()
        names = list(node.pipeline.robot.joint_names)
        for i in range(2 * node.torque_log.capacity):
            node.torque_log.append(T0 + i * (NS // 60), torques[i % len(torques)] + i * 1e-3, i % 4)
        return node

    torques = 40.0 * rng.standard_normal((997, 66))
    build()
    node, held = _traced(filled)
    cap = node.torque_log.capacity
    assert len(node.torque_log) == cap >= 10_000 and len(names) == 66
    assert held < 12.0, f"dynamics_node with its torque log at the cap: {held:.1f} MB"
    stamps, tau, codes = node.torque_log.arrays()
    kept = np.arange(cap, 2 * cap)
    np.testing.assert_array_equal(stamps, T0 + kept * (NS // 60))
    expected = torques[kept % len(torques)] + kept[:, None] * 1e-3
    np.testing.assert_allclose(tau, expected, rtol=1e-6, atol=1e-4)  # float32 torques
    summary = dynamics_summary(node, SimpleNamespace(params={"source": "file"}), None)
    assert summary["peak_torque"] == pytest.approx(np.abs(expected).max(), rel=1e-6)
    assert summary["peak_joint"] == names[int(np.abs(expected).max(axis=0).argmax())]
    for joint in LEG_JOINTS:
        rms = np.sqrt(np.mean(expected[:, names.index(joint)] ** 2))
        assert summary["leg_rms"][joint] == pytest.approx(rms, rel=1e-5)
    shares = {STATE_NAMES[c]: 100.0 * np.mean(kept % 4 == c) for c in range(4)}
    assert summary["contact_states"] == pytest.approx(shares)
