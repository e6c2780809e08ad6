"""``dynik-ros run --rt-priority P``: parsed and range-checked; refused scheduling (EPERM) exits with status 2
and says what is missing before anything runs; where permitted (root here) the run is SCHED_FIFO at ``P``
and normal scheduling is back afterwards."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dynik_ros.cli.run_command import build_parser, main

needs_policies = pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")


def test_rt_priority_is_parsed_and_range_checked(capsys):
    parser = build_parser()
    assert parser.parse_args(["run", "g1_retargeting"]).rt_priority == 0
    assert parser.parse_args(["run", "g1_retargeting", "--rt-priority", "20"]).rt_priority == 20
    for bad in ("100", "-1"):
        with pytest.raises(SystemExit) as exit_info:
            main(["run", "g1_retargeting", "--rt-priority", bad])
        assert exit_info.value.code == 2
        assert "--rt-priority must be 0 (off) or a SCHED_FIFO priority 1-99" in capsys.readouterr().err


def _drop_rt_privilege() -> None:
    """In the child before exec: no rtprio limit, and as root no CAP_SYS_NICE after the exec (dropped from
    the capability bounding set: prctl PR_CAPBSET_DROP, needs CAP_SETPCAP), so SCHED_FIFO is refused."""
    import ctypes
    import resource

    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(24, 23, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_SYS_NICE
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP CAP_SYS_NICE")


@needs_policies
def test_refused_rt_priority_exits_with_the_reason_before_running(tmp_path):
    """A real EPERM (the child has neither CAP_SYS_NICE nor an rtprio limit): status 2, the message names
    the privilege to get, and no pipeline ran (nothing recorded into --out)."""
    out = tmp_path / "out"
    code = (
        "import sys; from dynik_ros.cli.run import main; "
        f"sys.exit(main(['run', 'human66_tracking', '--rt-priority', '20', '--out', {str(out)!r}]))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            preexec_fn=_drop_rt_privilege,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.SubprocessError as exc:  # the preexec function failed
        pytest.skip(f"cannot drop the real-time privilege here: {exc}")
    assert done.returncode == 2, done.stderr
    assert "--rt-priority: SCHED_FIFO priority 20 refused" in done.stderr
    assert "CAP_SYS_NICE" in done.stderr and "ulimit -r" in done.stderr
    assert not out.exists()


def _policy_during_run(priority: int) -> tuple[int, int, int, int]:
    """In a child process (the test's own threads never run real-time): ``main`` with ``run_pipeline``
    replaced by a probe; (exit status, policy and priority seen by the run, policy after)."""
    from dynik_ros.cli import run_command

    seen: list[int] = []

    def probe(*args, **kwargs):
        seen.extend((os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))
        return {}

    run_command.run_pipeline = probe
    status = main(["run", "g1_retargeting", "--no-record", "--rt-priority", str(priority)])
    if not seen:  # refused: main returned 2 before the run
        return status, -1, -1, os.sched_getscheduler(0)
    return status, seen[0], seen[1], os.sched_getscheduler(0)


@needs_policies
def test_run_is_sched_fifo_at_the_priority_when_permitted():
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        status, policy, priority, after = pool.apply(_policy_during_run, (20,))
        if status == 2:
            pytest.skip("SCHED_FIFO not permitted here (no root, CAP_SYS_NICE or rtprio limit)")
        assert (status, policy, priority) == (0, os.SCHED_FIFO, 20)
        assert after == os.SCHED_OTHER
        assert pool.apply(_policy_during_run, (0,)) == (0, os.SCHED_OTHER, 0, os.SCHED_OTHER)
