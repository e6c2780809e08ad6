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


def _policies_inside(priority: int) -> tuple[int, int, int, int]:
    """(policy in the block, of a thread started in it, its priority, policy after the block): run in a
    child process, so the test's own threads never run real-time."""
    import threading

    seen: list[int] = []
    with load.fifo_priority(priority):
        inside = os.sched_getscheduler(0)
        thread = threading.Thread(
            target=lambda: seen.extend((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))
        )
        thread.start()
        thread.join()
    return inside, seen[0], seen[1], os.sched_getscheduler(0)


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling policies")
def test_fifo_priority_covers_the_threads_started_inside_and_is_undone():
    """What latency.py --rt-priority relies on: the DDS threads rclpy starts inside the block inherit
    SCHED_FIFO; after it the process is back to normal scheduling. Without the privilege: a clear error."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        try:
            inside, thread, priority, after = pool.apply(_policies_inside, (3,))
        except PermissionError as exc:  # not root, no CAP_SYS_NICE, no rtprio limit
            assert "CAP_SYS_NICE" in str(exc) and "ulimit -r" in str(exc)
            return
        assert (inside, thread, priority) == (os.SCHED_FIFO, os.SCHED_FIFO, 3)
        assert after == os.SCHED_OTHER
        assert pool.apply(_policies_inside, (0,)) == (os.SCHED_OTHER, os.SCHED_OTHER, 0, os.SCHED_OTHER)
