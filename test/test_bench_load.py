"""The benchmarks' load generator (``dynik_ros/bench/load.py``): pinned busy processes that end with it."""

from __future__ import annotations

import os
import time

import pytest

from dynik_ros.bench import load


def test_split_cores_leaves_the_benchmark_at_least_one_core(monkeypatch):
    monkeypatch.setattr(load, "available_cores", lambda: [0, 1])
    assert load.split_cores(1) == ([0], [1])
    assert load.split_cores(0) == ([0, 1], [])
    assert load.split_cores(5) == ([0], [1])  # never every core
    monkeypatch.setattr(load, "available_cores", lambda: [0, 1, 2, 3])
    assert load.split_cores(2) == ([0, 1], [2, 3])
    monkeypatch.setattr(load, "available_cores", lambda: [3])
    assert load.split_cores(1) == ([3], [])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux CPU affinity")
def test_busy_processes_are_pinned_and_end_with_the_block():
    core = load.available_cores()[-1]
    with load.BusyLoad([core]) as busy:
        assert len(busy.pids) == 1
        pid = busy.pids[0]
        deadline = time.monotonic() + 60.0  # only bounds a failure: the child pins itself once started
        while os.sched_getaffinity(pid) != {core} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.sched_getaffinity(pid) == {core}
    with pytest.raises(ProcessLookupError):  # joined: gone, not a zombie
        os.kill(pid, 0)
    assert len(busy.cpu_seconds) == 1 and busy.cpu_seconds[0] >= 0.0
