"""A fuzz run's results as plain JSON, and the merge of many runs into one report.

``fuzz_inputs.py --json PATH`` writes :func:`to_record` of its results; ``fuzz_campaign.py`` runs many
seeds in chunks and prints :func:`merge` of their records with ``fuzz_inputs.print_report``, so a
campaign of 10⁶ inputs can be made in pieces (and resumed) on a machine that cannot give it 6 hours at
once. Counts add up; recovery-time histograms add bin by bin (exact merged percentiles); maxima take the
maximum; the first examples of each breach are kept.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace
from typing import Any

import numpy as np

from dynik_ros.testing.invariants import DurationHistogram, RecoveryTracker


def _histogram_record(h: DurationHistogram) -> dict[str, Any]:
    nonzero = np.flatnonzero(h.bins)
    return {"bins": {str(int(i)): int(h.bins[i]) for i in nonzero}, "count": h.count, "max_ms": h.max_ms}


def _histogram(rec: dict[str, Any], into: DurationHistogram | None = None) -> DurationHistogram:
    h = into if into is not None else DurationHistogram()
    for i, n in rec["bins"].items():
        h.bins[int(i)] += int(n)
    h.count += int(rec["count"])
    m = float(rec["max_ms"])
    if np.isfinite(m):
        h.max_ms = m if not h.max_ms >= m else h.max_ms
    return h


def source_version() -> str:
    """The git commit of the code under test (``unknown`` outside a git checkout)."""
    import subprocess
    from pathlib import Path

    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=Path(__file__).resolve().parent,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def to_record(r: dict[str, Any], seed: int, fuzzer: str) -> dict[str, Any]:
    """The JSON-able part of one run's results (``fuzz_link_states`` / ``fuzz_datagrams``)."""
    tracker: RecoveryTracker = r["tracker"]
    checks = r["checks"]
    return {
        "fuzzer": fuzzer,
        "seed": seed,
        "commit": source_version(),
        **{k: r[k] for k in ("mutated", "clean", "sent", "refused", "crash_count", "nodes_active")},
        **{k: r.get(k, 0) for k in ("lost_on_the_way", "rebased", "held_steps", "resets")},
        "announced_not_received": r.get("announced_not_received", 0),
        "bridge_refused": r.get("bridge_refused") or {},
        "crashes": r["crashes"][:5],
        "seconds": r["seconds"],
        "baseline": r["baseline"],
        "threshold": r["threshold"],
        "extra_columns": r.get("extra_columns", {}),
        "extra_breaches": r.get("extra_breaches", {}),
        "notes": r.get("notes", []),
        "tracker": {
            "bursts": dict(tracker.bursts),
            "unrecovered": dict(tracker.unrecovered),
            "freezes": dict(tracker.freezes),
            "failures": list(tracker.failures),
            "times": {k: _histogram_record(h) for k, h in tracker.times.items()},
            "all": _histogram_record(tracker.all_times),
        },
        "checks": {
            "joint_states": checks.joint_states,
            "commands": checks.commands,
            "max_speed_ratio": checks.max_speed_ratio,
            "breaches": dict(checks.breaches),
            "examples": dict(checks.examples),
        },
    }


def merge(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One results dict (the shape ``print_report`` reads) from the records of several runs."""
    if not records:
        raise ValueError("no records to merge")
    tracker = RecoveryTracker(max(r["threshold"] for r in records))
    checks = SimpleNamespace(joint_states=0, commands=0, max_speed_ratio=0.0, breaches=Counter(), examples={})
    out: dict[str, Any] = {
        "mutated": 0, "clean": 0, "sent": Counter(), "refused": Counter(), "bridge_refused": Counter(),
        "crash_count": 0, "crashes": [], "nodes_active": True, "lost_on_the_way": 0, "rebased": 0,
        "held_steps": 0, "resets": 0, "announced_not_received": 0, "seconds": 0.0,
        "extra_breaches": {}, "diagnostics_seen": True,
    }  # fmt: skip
    extra: dict[str, Counter] = {}
    for r in records:
        for key in ("mutated", "clean", "crash_count", "lost_on_the_way", "rebased", "held_steps"):
            out[key] += r[key]
        out["resets"] += r["resets"]
        out["announced_not_received"] += r["announced_not_received"]
        out["seconds"] += r["seconds"]
        out["nodes_active"] &= bool(r["nodes_active"])
        out["crashes"] += [f"seed {r['seed']}: {c}" for c in r["crashes"]][: 20 - len(out["crashes"])]
        for key in ("sent", "refused", "bridge_refused"):
            out[key].update(r[key])
        for column, values in r["extra_columns"].items():
            extra.setdefault(column, Counter()).update(values)
        for what, values in r["extra_breaches"].items():
            out["extra_breaches"].setdefault(what, Counter()).update(values)
        t = r["tracker"]
        tracker.bursts.update(t["bursts"])
        tracker.unrecovered.update(t["unrecovered"])
        tracker.freezes.update(t["freezes"])
        room = 20 - len(tracker.failures)
        tracker.failures += [f"seed {r['seed']}: {f}" for f in t.get("failures", [])][: max(room, 0)]
        for kind, h in t["times"].items():
            _histogram(h, tracker.times.setdefault(kind, DurationHistogram()))
        _histogram(t["all"], tracker.all_times)
        c = r["checks"]
        checks.joint_states += c["joint_states"]
        checks.commands += c["commands"]
        checks.max_speed_ratio = max(checks.max_speed_ratio, c["max_speed_ratio"])
        checks.breaches.update(c["breaches"])
        for what, detail in c["examples"].items():
            checks.examples.setdefault(what, f"seed {r['seed']}: {detail}")
    seeds = sorted(r["seed"] for r in records)
    baselines = [r["baseline"] for r in records]
    out.update(
        sent=dict(out["sent"]),
        refused=dict(out["refused"]),
        bridge_refused=dict(out["bridge_refused"]),
        extra_columns={k: dict(v) for k, v in extra.items()},
        extra_breaches={k: dict(v) for k, v in out["extra_breaches"].items()},
        tracker=tracker,
        checks=checks,
        baseline=max(baselines),
        threshold=tracker.threshold,
        domain="per chunk",
        notes=[
            f"{len(records)} chunks, seeds {seeds[0]}-{seeds[-1]}, code "
            f"{', '.join(sorted({r.get('commit', 'unknown') for r in records}))}; clean baselines "
            f"{min(baselines):.2e}-{max(baselines):.2e} rad (each chunk judged against its own)",
            *sorted({n for r in records for n in r["notes"] if n.startswith("(")}),
        ],
    )
    return out
