"""``core/lapack_posv``: scipy's ``dposv`` loaded without the ``scipy.linalg`` package import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from dynik_ros.core import lapack_posv


def test_loading_it_does_not_import_scipy_linalg_and_gives_scipys_own_routine():
    """In a fresh interpreter: importing the module (and the QP that uses it) leaves ``scipy.linalg`` out of
    ``sys.modules``; importing ``scipy.linalg.lapack`` afterwards hands out the very same ``dposv``."""
    script = (
        "import sys\n"
        "from dynik_ros.core.velocity_qp import VelocityQP\n"
        "from dynik_ros.core.lapack_posv import dposv\n"
        "assert 'scipy.linalg' not in sys.modules, sorted(k for k in sys.modules if k.startswith('scipy'))\n"
        "from scipy.linalg.lapack import dposv as packaged\n"
        "assert packaged is dposv\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_it_solves_a_positive_definite_system_and_reports_an_indefinite_one():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((7, 7))
    spd = a @ a.T + 7 * np.eye(7)
    b = rng.standard_normal(7)
    _, x, info = lapack_posv.dposv(spd, b, lower=0)
    assert info == 0
    np.testing.assert_allclose(spd @ x, b, atol=1e-12)
    _, _, info = lapack_posv.dposv(-spd, b, lower=0)
    assert info > 0  # not positive definite: the leading minor that failed


def test_without_the_extension_file_the_package_import_is_used(monkeypatch):
    from scipy.linalg.lapack import dposv as packaged

    monkeypatch.setattr(lapack_posv, "_flapack_from_file", lambda: None)
    assert lapack_posv._load_dposv() is packaged

    def broken():
        raise ImportError("another layout")

    monkeypatch.setattr(lapack_posv, "_flapack_from_file", broken)
    assert lapack_posv._load_dposv() is packaged
