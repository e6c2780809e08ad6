"""Instructions one ``dynik-retarget`` run executes, counted by valgrind (callgrind's ``Ir``): a measure of
the code's cost that does not depend on what else the machine is doing.

    .venv/bin/python benchmarks/instruction_count.py                          # the committed excerpt, G1
    .venv/bin/python benchmarks/instruction_count.py TAKE.bvh --robot talos
    .venv/bin/python benchmarks/instruction_count.py TAKE.bvh --trees OLD NEW     # two source trees in turn
    .venv/bin/python benchmarks/instruction_count.py TAKE.bvh -- --stance weighted  # more options

Why: CPU seconds on a shared VM vary by 15-20 % between two runs of the same code even with the other core
idle (issue 9's speed figures: the same tree took 8.9 and 11.8 s in one quarter of an hour), and by 1.4-1.7x
with the other core busy; callgrind's count of the same run is the same to 0.01 %, loaded or not. It is not a
time: read it as a ratio between trees or commits (issue 9's target stays CPU seconds, ``real_captures.py
--speed``). Each tree's ``dynik_ros`` is compiled first (untimed, as an installed package is), then run with
one BLAS thread under ``valgrind --tool=callgrind --trace-children=yes`` (the ROS wheels' bootstrapper starts
the interpreter again with its library path: the count is summed over both). ~50x slower than a plain run
(the 10 s CMU 131_02 take: ~2 min). Without valgrind it says so and exits 0.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from real_captures import child_environment, compile_package

ROOT = Path(__file__).resolve().parents[1]
EXCERPT = ROOT / "test" / "data" / "cmu_131_01_walk_excerpt.bvh"
_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)\s*$", re.MULTILINE)


def collected_instructions(valgrind_output: str) -> int:
    """The instructions callgrind counted, summed over every process it followed (one ``Collected`` line
    each); raises ``ValueError`` when there is none (valgrind did not run to the end)."""
    counts = [int(n) for n in _COLLECTED.findall(valgrind_output)]
    if not counts:
        raise ValueError("no 'Collected' line in valgrind's output")
    return sum(counts)


def count_run(tree: Path, capture: Path, robot: str, options: list[str]) -> int:
    """Callgrind's instruction count of ``dynik-retarget CAPTURE --robot ROBOT`` from ``tree``'s sources."""
    compile_package(tree)
    env = child_environment(tree)  # tree's sources, one BLAS thread, its compiled modules read
    with tempfile.TemporaryDirectory() as out:
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes"]
        command += [
            f"--callgrind-out-file={out}/callgrind.%p",
            sys.executable,
            "-m",
            "dynik_ros.cli.retarget",
        ]
        command += [str(capture), "--robot", robot, "--out", out, "--no-bag", "--no-plots", "--quiet"]
        command += ["--settle", "0.2", *options]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=out)
    if done.returncode not in (0, 1):  # 1: dynik-retarget's verdict said a target was missed
        raise RuntimeError(f"dynik-retarget under valgrind failed: {done.stderr.strip()[-400:]}")
    return collected_instructions(done.stderr)


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The benchmark's arguments and the ``dynik-retarget`` options after ``--`` (split by hand: an argparse
    ``REMAINDER`` after the capture took ``--trees OLD NEW`` for options)."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="after --: more dynik-retarget options"
    )
    parser.add_argument("capture", nargs="?", type=Path, default=EXCERPT)
    parser.add_argument("--robot", default="g1")
    parser.add_argument(
        "--trees", nargs="+", type=Path, default=[ROOT], help="source trees to count, in turn"
    )
    cut = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:cut]), argv[cut + 1 :]


def main(argv: list[str] | None = None) -> int:
    args, options = parse_arguments(sys.argv[1:] if argv is None else argv)
    if shutil.which("valgrind") is None:
        print("instruction_count: valgrind not found (Debian package valgrind); nothing counted")
        return 0
    print(f"== instructions of dynik-retarget {args.capture.name} --robot {args.robot} {' '.join(options)}")
    first = None
    for tree in args.trees:
        count = count_run(tree.resolve(), args.capture.resolve(), args.robot, options)
        first = first or count
        print(f"  {str(tree):<40} {count / 1e9:8.3f} G instructions ({count / first:.4f} x the first)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
