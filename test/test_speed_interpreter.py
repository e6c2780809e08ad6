"""``real_captures.py --speed`` names the interpreter it timed (README *Which Python the venv is made with*):
its version, binary and whether libpython is a shared library in this very process."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from real_captures import interpreter_description  # noqa: E402


def test_the_speed_benchmark_names_the_interpreter_and_its_libpython():
    text = interpreter_description()
    assert text.startswith(f"Python {platform.python_version()} (")
    assert getattr(sys, "_base_executable", sys.executable) in text
    with open("/proc/self/maps") as maps:
        shared = any("libpython" in line for line in maps)
    assert ("shared libpython" in text) == shared
    assert ("libpython linked in" in text) == (not shared)
