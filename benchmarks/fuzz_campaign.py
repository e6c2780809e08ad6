"""A fuzz campaign in resumable chunks: the 10⁶ + 10⁶ runs of ``fuzz_inputs.py`` made piece by piece.

Each chunk is one ``fuzz_inputs.py`` run in its own process (fresh nodes, fresh rig) with its own seed
(``--seed`` + chunk index) writing a JSON record into the campaign directory; chunks already recorded are
skipped, so the campaign can be stopped at any time (Ctrl-C, a session's end) and started again with the
same command to go on. The merged report (every chunk's counts, recovery histograms and breaches) is
printed at the end, or alone with ``--report``. Exit status 1 when any recorded chunk breached an
invariant (or one failed to run).

    python benchmarks/fuzz_campaign.py runs/fuzz --link-states 1000000 --datagrams 1000000   # by hand
    python benchmarks/fuzz_campaign.py runs/fuzz --report                                   # where it stands
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fuzz_inputs import print_report
from fuzz_record import merge

HERE = Path(__file__).resolve().parent
FUZZERS = {
    "link_states": ("--link-states", "messages", "link states"),
    "datagrams": ("--datagrams", "datagrams", "MVN datagrams"),
}


def chunk_path(directory: Path, fuzzer: str, seed: int, size: int) -> Path:
    return directory / f"{fuzzer}-n{size}-seed{seed}.json"


def records(directory: Path, fuzzer: str) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob(f"{fuzzer}-n*-seed*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"{path}: unreadable record ({exc}); delete it to run that chunk again", file=sys.stderr)
    return out


def run_chunk(directory: Path, fuzzer: str, seed: int, size: int) -> int:
    """One chunk in a child process; its record appears only when the run finished (atomic rename)."""
    flag, _, _ = FUZZERS[fuzzer]
    other = "--datagrams" if fuzzer == "link_states" else "--link-states"
    final = chunk_path(directory, fuzzer, seed, size)
    partial = final.with_suffix(".partial")
    log = final.with_suffix(".log")
    cmd = [sys.executable, str(HERE / "fuzz_inputs.py"), flag, str(size), other, "0", "--seed", str(seed)]
    with open(log, "w") as out:
        rc = subprocess.call([*cmd, "--json", str(partial)], stdout=out, stderr=subprocess.STDOUT)
    if partial.exists():
        partial.rename(final)  # a breach (rc 1) is a result too: recorded, reported
        return rc
    print(f"chunk {fuzzer} seed {seed} did not finish (exit {rc}); see {log}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("directory", type=Path, help="where the chunks' records are kept")
    parser.add_argument("--link-states", type=int, default=0, help="mutated link-state messages in all")
    parser.add_argument("--datagrams", type=int, default=0, help="mutated MVN datagrams in all")
    parser.add_argument("--chunk", type=int, default=20_000, help="mutated inputs per chunk")
    parser.add_argument("--seed", type=int, default=1000, help="seed of the first chunk")
    parser.add_argument("--report", action="store_true", help="only print the merged report")
    args = parser.parse_args(argv)
    if args.chunk < 1:
        parser.error("--chunk must be positive")
    args.directory.mkdir(parents=True, exist_ok=True)
    failed = 0
    if not args.report:
        plan = {
            "link_states": math.ceil(args.link_states / args.chunk),
            "datagrams": math.ceil(args.datagrams / args.chunk),
        }
        for i in range(max(plan.values())):  # the two fuzzers alternate: both advance when it is stopped
            for fuzzer, chunks in plan.items():
                seed = args.seed + i
                if i >= chunks or chunk_path(args.directory, fuzzer, seed, args.chunk).exists():
                    continue
                started = time.monotonic()
                rc = run_chunk(args.directory, fuzzer, seed, args.chunk)
                failed += rc == 2
                print(
                    f"{fuzzer} chunk {i + 1}/{chunks} (seed {seed}): exit {rc} in "
                    f"{time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                )
    ok = not failed
    for fuzzer, (_, unit, title) in FUZZERS.items():
        found = records(args.directory, fuzzer)
        if found:
            ok &= print_report(f"{title}, campaign {args.directory}", merge(found), unit)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
