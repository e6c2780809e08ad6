"""dynik-retarget keeps freed memory in the process (cli/batch_memory.py): fewer page faults a run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynik_ros.cli.batch_memory import keep_freed_memory, libc_mallopt

ROOT = Path(__file__).resolve().parents[1]
EXCERPT = ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh"

# a child that runs dynik-retarget's main on the excerpt, with or without the setting, and prints the
# minor page faults the run took (getrusage counts them exactly: no timing involved)
_CHILD = """
import resource, sys
import dynik_ros.cli.retarget as cli
if sys.argv[1] == "off":
    cli.keep_freed_memory = lambda: False
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
cli.main([sys.argv[2], "--robot", "g1", "--out", sys.argv[3], "--no-bag", "--no-plots", "--quiet"])
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

linux_glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None, reason="glibc only"
)


@linux_glibc
def test_glibc_accepts_both_settings():
    """glibc (2.36 here) accepts both mallopt settings: it answers 1 for each."""
    assert keep_freed_memory() is True


@linux_glibc
def test_the_mallopt_set_is_the_libc_ones_find_library_names():
    """``keep_freed_memory`` reads ``mallopt`` among the process's own symbols (:func:`libc_mallopt`),
    without importing ``ctypes.util``: the same function as in the libc ``find_library("c")`` names."""
    import ctypes
    import ctypes.util

    def address(function) -> int | None:
        return ctypes.cast(function, ctypes.c_void_p).value

    assert address(libc_mallopt()) == address(ctypes.CDLL(ctypes.util.find_library("c")).mallopt)


@linux_glibc
def test_a_run_takes_far_fewer_page_faults(tmp_path):
    """The CMU excerpt on G1: the run's page faults without and with the setting (measured: 16 000 and
    8 000). Huge pages off in the child so that the kernel's THP setting does not change the counts."""
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    faults = {}
    for mode in ("off", "on"):
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, str(EXCERPT), str(tmp_path / mode)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        faults[mode] = int(done.stdout.strip().splitlines()[-1])
    assert faults["on"] < 0.75 * faults["off"], faults


def test_the_collector_runs_rarely_during_a_run_only_and_changes_no_output(tmp_path, monkeypatch):
    """``dynik-retarget``'s main runs with the garbage collector at ``GC_THRESHOLD`` and leaves it as it was
    (also when the run fails); the CMU excerpt on G1 writes the same bytes as with the default collector."""
    import contextlib
    import gc

    import dynik_ros.cli.retarget as cli
    from dynik_ros.cli.batch_memory import GC_THRESHOLD, rare_collections

    before = gc.get_threshold()
    with pytest.raises(RuntimeError), rare_collections():
        assert gc.get_threshold() == GC_THRESHOLD
        raise RuntimeError
    assert gc.get_threshold() == before

    seen = []
    inner = cli._main
    monkeypatch.setattr(cli, "_main", lambda argv: seen.append(gc.get_threshold()) or inner(argv))
    outputs = {}
    for mode in ("rare", "default"):
        if mode == "default":
            monkeypatch.setattr(cli, "rare_collections", contextlib.nullcontext)
        out = tmp_path / mode
        argv = [str(EXCERPT), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet"]
        assert cli.main(argv) == 0
        outputs[mode] = (out / "trajectory.csv").read_bytes(), (out / "calibration.yaml").read_bytes()
    assert seen == [GC_THRESHOLD, before] and gc.get_threshold() == before
    assert outputs["rare"] == outputs["default"]
