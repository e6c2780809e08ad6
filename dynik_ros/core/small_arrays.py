"""numpy's own kernels for the IK step's small arrays, without the Python layers around them (issue 9).

A call on a handful of floats is mostly numpy's argument handling. Counted by callgrind (one process, 3000
calls each, numpy 2.4): ``np.einsum`` 15.9k instructions a call where the C function it forwards to takes
10.1k (the rest: its Python wrapper and its dispatcher); ``np.array`` of a list of 51 floats 18.7k where
``np.fromiter`` takes 12.7k; of a nested 3 x 3 tuple 9.0k where ``np.fromiter`` of the flat 9 and a reshape
take 5.9k. Same kernels, so the same values. ROS-free.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

try:  # what np.einsum calls when not asked to optimize (its default)
    from numpy._core.multiarray import c_einsum as einsum
except ImportError:  # a numpy laid out otherwise: its public function
    einsum = np.einsum

# np.dot's own C function (its NEP 18 ``_implementation``, without the ``__array_function__`` dispatch in
# front of it): @'s products of small matrices and vectors by the same BLAS calls, so the same values
# (test_stance_fast_paths, test_feet_fast_paths), ~1 us less than matmul's dispatch; np.dot where numpy has
# no such attribute
dot = getattr(np.dot, "_implementation", np.dot)


def vector(values: Sequence[float]) -> np.ndarray:
    """``np.array(values)`` of a flat sequence of floats (a new float64 array)."""
    return np.fromiter(values, float, len(values))


def matrix3(values: Sequence[float]) -> np.ndarray:
    """The 3 x 3 float64 array of 9 floats in row-major order (``np.array`` of its rows)."""
    return np.fromiter(values, float, 9).reshape(3, 3)
