"""LAPACK routines from scipy without importing the ``scipy.linalg`` package: ``dposv`` (Cholesky
factorisation and solve of a symmetric positive definite system: the unconstrained step), ``dpotrf`` (the
Cholesky factor alone), ``dtrtrs`` (triangular solves with it: the QP brought to least-distance form,
:mod:`.active_set_qp`; the held rows orthonormalised, :mod:`.step_integration`) and ``dpocon`` (the factor's
reciprocal condition number).

``from scipy.linalg.lapack import dposv`` runs ``scipy.linalg/__init__``, which pulls in scipy's array-API
layer and most of ``scipy.linalg``: ~0.25 s of a ``dynik-retarget`` process's start (``python -X
importtime``), for four routines. They live in scipy's compiled ``scipy.linalg._flapack`` extension, which
depends on numpy alone; it is loaded here from its file, so :data:`dposv` is the very function
``scipy.linalg.lapack.dposv`` is (same object once both are imported; same floats), and so are the others.
Where that file cannot be found or loaded (another scipy layout), the package import is used as before.
ROS-free.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

_MODULE = "scipy.linalg._flapack"


def _flapack_from_file():
    """scipy's ``_flapack`` extension module, loaded from its file without its package; ``None`` if absent."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("scipy")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "linalg"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"_flapack{suffix}"
        if path.is_file():
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader(_MODULE, loader))
            loader.exec_module(module)
            sys.modules[_MODULE] = module  # a later ``import scipy.linalg`` takes this one, not a second copy
            return module
    return None


def _load(name: str) -> Callable:
    """The routine ``name`` from the extension file, else from ``scipy.linalg.lapack`` (package import)."""
    try:
        module = _flapack_from_file()
        if module is not None and callable(getattr(module, name, None)):
            return getattr(module, name)
    except (ImportError, OSError):
        pass
    from scipy.linalg import lapack

    return getattr(lapack, name)


dposv = _load("dposv")
dpotrf = _load("dpotrf")
dtrtrs = _load("dtrtrs")
dpocon = _load("dpocon")
