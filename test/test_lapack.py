"""``core/lapack``: scipy's LAPACK routines, loaded without importing ``scipy.linalg``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from dynik_ros.core import lapack


def test_loading_it_does_not_import_scipy_linalg_and_gives_scipys_own_routine():
    """In a fresh interpreter: importing the module (and the QP that uses it) leaves ``scipy.linalg`` out of
    ``sys.modules``; importing ``scipy.linalg.lapack`` afterwards hands out the very same routines."""
    script = (
        "import sys\n"
        "from dynik_ros.core.velocity_qp import VelocityQP\n"
        "from dynik_ros.core.lapack import dpocon, dposv, dpotrf, dtrtrs\n"
        "assert 'scipy.linalg' not in sys.modules, sorted(k for k in sys.modules if k.startswith('scipy'))\n"
        "from scipy.linalg import lapack\n"
        "assert lapack.dposv is dposv and lapack.dpotrf is dpotrf and lapack.dtrtrs is dtrtrs\n"
        "assert lapack.dpocon is dpocon\n"
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
    _, x, info = lapack.dposv(spd, b, lower=0)
    assert info == 0
    np.testing.assert_allclose(spd @ x, b, atol=1e-12)
    _, _, info = lapack.dposv(-spd, b, lower=0)
    assert info > 0  # not positive definite: the leading minor that failed


def test_without_the_extension_file_the_package_import_is_used(monkeypatch):
    from scipy.linalg.lapack import dposv as packaged

    monkeypatch.setattr(lapack, "_flapack_from_file", lambda: None)
    assert lapack._load("dposv") is packaged

    def broken():
        raise ImportError("another layout")

    monkeypatch.setattr(lapack, "_flapack_from_file", broken)
    assert lapack._load("dposv") is packaged


def test_the_factor_and_its_triangular_solves():
    """``dpotrf`` (upper, the other triangle cleaned) gives ``R`` with ``R^T R = P``; ``dtrtrs`` solves
    ``R^T X = B`` and ``R x = z``; an indefinite matrix is reported by ``info``."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 6))
    spd = a @ a.T + 6 * np.eye(6)
    factor, info = lapack.dpotrf(spd, lower=0, clean=1)
    assert info == 0
    np.testing.assert_array_equal(np.tril(factor, -1), 0.0)
    np.testing.assert_allclose(factor.T @ factor, spd, atol=1e-12)
    b = rng.standard_normal((6, 3))
    x, info = lapack.dtrtrs(factor, b, trans=1)
    assert info == 0
    np.testing.assert_allclose(factor.T @ x, b, atol=1e-12)
    z = rng.standard_normal(6)
    y, info = lapack.dtrtrs(factor, z)
    np.testing.assert_allclose(factor @ y, z, atol=1e-12)
    assert lapack.dpotrf(-spd, lower=0)[1] > 0
    rcond, info = lapack.dpocon(factor, float(np.abs(spd).sum(axis=0).max()))
    assert info == 0
    exact = 1.0 / (np.abs(spd).sum(axis=0).max() * np.abs(np.linalg.inv(spd)).sum(axis=0).max())
    assert exact / 10 <= rcond <= exact * 10  # an estimate of the 1-norm reciprocal condition number
