"""scripts/bootstrap.sh on a venv made before it recorded its interpreter (no ``python=`` in the stamp):
the notice about a shared-libpython interpreter is said once, then the check is recorded. The venv is a
real ``python -m venv`` whose ``bin/python`` is replaced by a shim that answers the bootstrap's
"shared libpython?" probe as told; the stamp's keys are the project venv's own, so the fast path runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAMP = Path(sys.prefix) / ".dynik-stamp"


def _fake_venv(tmp_path: Path, shared: bool) -> Path:
    if not STAMP.is_file():
        pytest.skip("the tests do not run in a venv made by scripts/bootstrap.sh")
    keys = [line for line in STAMP.read_text().splitlines() if line.startswith(("req=", "project="))]
    if len(keys) != 2:
        pytest.skip("this venv's stamp has no req/project keys")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    python.unlink()
    # The shim: the probe (-c ...) exits 1 for "a shared libpython is mapped", 0 for "none".
    python.write_text(f"#!/bin/sh\nexit {1 if shared else 0}\n")
    python.chmod(0o755)
    (venv / ".dynik-stamp").write_text("\n".join(keys) + "\n")
    return venv


def _bootstrap(venv: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "DYNIK_FRESH", "VIRTUAL_ENV")}
    env.update(DYNIK_VENV=str(venv), DYNIK_ROS="wheels")
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "bootstrap.sh")], env=env, capture_output=True, text=True, timeout=120
    )


def _static_python_on_path() -> bool:
    probe = "import sys\nwith open('/proc/self/maps') as m: sys.exit(any('libpython' in l for l in m))"
    for name in ("python3", "python3.13", "python3.12", "python3.11"):
        found = subprocess.run(["bash", "-c", f"type -ap {name}"], capture_output=True, text=True).stdout
        for path in found.split():
            if subprocess.run([path, "-c", probe], capture_output=True).returncode == 0:
                return True
    return False


def test_shared_libpython_venv_is_named_once(tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path, shared=True)
    first = _bootstrap(venv)
    assert first.returncode == 0, first.stderr
    stamp = (venv / ".dynik-stamp").read_text()
    assert f"python={(venv / 'bin' / 'python').resolve()}" in stamp.splitlines()
    if _static_python_on_path():
        assert "notice:" in first.stderr and "shared libpython" in first.stderr, first.stderr
        assert "DYNIK_FRESH=1 ./dynik bootstrap" in first.stderr
    else:
        assert "notice:" not in first.stderr
    second = _bootstrap(venv)
    assert second.returncode == 0 and "notice:" not in second.stderr, second.stderr
    assert (venv / ".dynik-stamp").read_text() == stamp


def test_static_libpython_venv_says_nothing(tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path, shared=False)
    result = _bootstrap(venv)
    assert result.returncode == 0 and "notice:" not in result.stderr, result.stderr
    assert "python=" in (venv / ".dynik-stamp").read_text()
