"""The guard of ``dynik-ros run --processes``: no node process outlives a killed runner, even a wedged one.

A runner killed outright (SIGKILL: no clean-up of its own) leaves its node processes to the kernel's
``PR_SET_PDEATHSIG``: each gets SIGTERM and stops through its lifecycle. That stop is Python code on the
node's main thread; a main thread blocked inside the middleware never runs it. Seen once in a full suite on
the loaded machine: the runner was killed 30 ms after activating the source, ``ik_node`` stopped at once,
``wearable_node`` logged nothing more (no "SIGTERM: stopping", no summary) and was still running 120 s later.

This process is started by the runner after its children, with their pids and start times. It does no ROS
and nothing that can block: it watches its parent (``os.getppid``), and once the runner is gone it gives the
children :data:`GRACE` seconds to end by their own SIGTERM, then SIGKILLs those still there. A pid is only
signalled while its start time is the one recorded (no reused pid is touched). The runner ends the guard
(SIGTERM) once it has stopped its children itself.

    python -m dynik_ros.cli.orphan_guard RUNNER_PID PID:START [PID:START ...]
"""

from __future__ import annotations

import os
import signal
import sys
import time

GRACE = 20.0  # [s] after the runner's death, for each child's own clean stop (about 1 s under load)
POLL = 0.2  # [s]


def start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, ``/proc/PID/stat`` field 22); ``None`` if it is
    gone or only its zombie is left."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def alive(children: dict[int, int]) -> list[int]:
    """The pids of ``children`` (pid -> start time) still running as the same process."""
    return [pid for pid, start in children.items() if start_time(pid) == start]


def guard(runner: int, children: dict[int, int], grace: float = GRACE) -> list[int]:
    """Wait while ``runner`` is this process's parent; then ``grace`` s for ``children`` to end; SIGKILL the
    rest. Returns the pids killed."""
    while os.getppid() == runner and alive(children):
        time.sleep(POLL)
    deadline = time.monotonic() + grace
    while alive(children) and time.monotonic() < deadline:
        time.sleep(POLL)
    killed = alive(children)
    for pid in killed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return killed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    children = {int(p): int(s) for p, s in (a.split(":") for a in args[1:])}
    killed = guard(int(args[0]), children)
    if killed:
        print(
            f"dynik-ros run: the runner died; killed node process(es) {killed} still running after "
            f"{GRACE:g} s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
