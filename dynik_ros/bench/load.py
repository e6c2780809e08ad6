"""A CPU load generator that benchmarks start themselves: busy processes pinned to chosen cores.

Issue 10 judges the latency at 240 Hz "with the other core kept busy": a lab PC also runs RViz, a recorder
and the robot's own stack. :class:`BusyLoad` starts one process per core given, each pinned there
(``sched_setaffinity``) and spinning in pure Python until stopped, so a benchmark measures under a load it
controls instead of whatever the machine happens to run. :func:`split_cores` picks the cores: the load on
the last ones, the benchmark pinned to the rest (on a 2-core machine: the pipeline on core 0, the load on
core 1). The CPU each load process used is read back at stop, to show it really ran.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


def _spin(core: int, stop: mp.synchronize.Event, used: mp.sharedctypes.Synchronized) -> None:
    """Busy loop on ``core`` until ``stop``; writes the process's CPU seconds into ``used``."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    start = time.process_time()
    x = 0
    while not stop.is_set():
        for i in range(20_000):  # ~1 ms of work between checks of the stop flag
            x ^= i * i
    used.value = time.process_time() - start


def available_cores() -> list[int]:
    """The cores this process may run on, sorted."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def split_cores(load: int) -> tuple[list[int], list[int]]:
    """``(benchmark cores, load cores)``: the load on the last ``load`` cores, the benchmark on the others
    (all of them when the load would leave none)."""
    cores = available_cores()
    load = max(0, min(load, len(cores) - 1))
    return cores[: len(cores) - load], cores[len(cores) - load :]


class BusyLoad:
    """Context manager: one busy process per core of ``cores`` while the block runs.

    ``cpu_seconds`` (after exit) is the CPU each process used; ``pids`` the processes while running.
    """

    def __init__(self, cores: list[int]):
        self.cores = list(cores)
        self.cpu_seconds: list[float] = []
        self.pids: list[int] = []
        self._context = mp.get_context("spawn")  # no fork of a process holding DDS threads
        self._stop = self._context.Event()
        self._used: list[mp.sharedctypes.Synchronized] = []
        self._processes: list[mp.process.BaseProcess] = []

    def start(self) -> BusyLoad:
        for core in self.cores:
            used = self._context.Value("d", 0.0)
            process = self._context.Process(target=_spin, args=(core, self._stop, used), daemon=True)
            process.start()
            self._used.append(used)
            self._processes.append(process)
        self.pids = [p.pid for p in self._processes if p.pid is not None]
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop and join every process (terminated if it does not end within ``timeout``)."""
        self._stop.set()
        for process in self._processes:
            process.join(timeout)
            if process.is_alive():
                process.terminate()
                process.join(timeout)
        self.cpu_seconds = [u.value for u in self._used]
        self._processes = []

    def __enter__(self) -> BusyLoad:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def pin_to(cores: list[int]) -> None:
    """Run this process (its threads created from now on, and the calling thread) on ``cores`` only."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))


@contextmanager
def fifo_priority(priority: int) -> Iterator[None]:
    """The calling thread, and the threads it starts inside the block (rclpy's executor, the DDS threads of
    a context created there), scheduled ``SCHED_FIFO`` at ``priority`` (1-99): no process of normal
    priority then takes their core while they have work, as ``chrt -f PRIORITY`` does for a whole command.
    Back to the previous policy at exit; ``priority`` 0 changes nothing. Start a load generator *before*
    the block: processes started inside inherit the policy. Needs root, ``CAP_SYS_NICE`` or an ``rtprio``
    limit (``ulimit -r``), else ``PermissionError`` with that hint. The kernel's real-time throttling
    (``/proc/sys/kernel/sched_rt_runtime_us``) keeps a runaway thread from taking all of its core."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        yield
        return
    policy, parameter = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        raise PermissionError(
            f"SCHED_FIFO priority {priority} refused: it needs root, CAP_SYS_NICE or an rtprio limit of at "
            f"least {priority} (ulimit -r; /etc/security/limits.conf)"
        ) from None
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, parameter)
