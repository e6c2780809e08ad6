"""``benchmarks/contact_diagnosis.py FILE --robot R [--time-scale S] -- OPTIONS``: the robot and the time
scale before ``--`` are the script's own, the options after it go to ``dynik-retarget``. An argparse REMAINDER
after the optional FILE took everything behind FILE: the header said "g1" for a TALOS run and
``--time-scale`` before ``--`` reached the CLI unparsed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import contact_diagnosis  # noqa: E402


def test_the_robot_before_the_double_dash_is_the_one_run_and_named(monkeypatch, capsys):
    calls = []

    def diagnose(path: Path, robot: str, extra: list[str]) -> list[str]:  # the row's run, recorded
        calls.append((path, robot, extra))
        return ["exit 0"]

    monkeypatch.setattr(contact_diagnosis, "diagnose", diagnose)
    argv = ["take.bvh", "--robot", "talos", "--time-scale", "3", "--", "--stance", "hard"]
    assert contact_diagnosis.main(argv) == 0
    assert calls == [(Path("take.bvh"), "talos", ["--stance", "hard", "--time-scale", "3.0"])]
    assert capsys.readouterr().out.startswith("== take.bvh talos: exit 0")
    calls.clear()
    assert contact_diagnosis.main(["take.bvh", "--robot", "icub"]) == 0  # no options for the CLI
    assert calls == [(Path("take.bvh"), "icub", [])]
