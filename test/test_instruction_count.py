"""``benchmarks/instruction_count.py``: callgrind's counts read and summed over the processes it followed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import instruction_count  # noqa: E402
from instruction_count import collected_instructions  # noqa: E402

# what valgrind 3.19 prints with --trace-children=yes when the ROS wheels' bootstrapper starts the
# interpreter again (two processes, two summaries), with the program's own stderr between them
OUTPUT = """==101== Callgrind, a call-graph generating cache profiler
==101== Command: python -m dynik_ros.cli.retarget take.bvh
==101==
==101== Events    : Ir
==101== Collected : 12345
==101==
==101== I   refs:      12,345
==102== Command: python -m dynik_ros.cli.retarget take.bvh
dynik-retarget: Collected : 999 (not valgrind's line)
==102== Events    : Ir
==102== Collected : 7697721963
==102==
==102== I   refs:      7,697,721,963
"""


def test_the_counts_of_every_followed_process_are_summed():
    assert collected_instructions(OUTPUT) == 12345 + 7697721963


def test_a_run_valgrind_did_not_finish_is_refused():
    with pytest.raises(ValueError, match="Collected"):
        collected_instructions("==7== Callgrind\nsegmentation fault\n")


def test_trees_after_the_capture_and_options_after_the_double_dash():
    """``TAKE --trees OLD NEW -- OPTIONS`` as the docstring shows it (an argparse ``REMAINDER`` took the
    trees for dynik-retarget options)."""
    args, options = instruction_count.parse_arguments(
        ["take.bvh", "--trees", "old", "new", "--robot", "talos", "--", "--stance", "weighted"]
    )
    assert args.capture == Path("take.bvh") and args.robot == "talos"
    assert args.trees == [Path("old"), Path("new")]
    assert options == ["--stance", "weighted"]
    args, options = instruction_count.parse_arguments([])
    assert args.capture == instruction_count.EXCERPT and args.trees == [instruction_count.ROOT]
    assert options == []
