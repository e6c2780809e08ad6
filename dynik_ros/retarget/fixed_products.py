"""Whole-take stacks of 3-vectors and 3x3 matrices times one fixed 3x3 matrix, as one flat BLAS product (issue
9's speed target; :meth:`.retargeter.Retargeter.compute`'s alignment and rotation offsets).

numpy's ``@`` on a stack calls BLAS once per item: ~0.2 us a 3x3 matrix, 11-18 ms for a 60 s, 120 Hz take's
15 orientation targets times their offsets. The same products laid out as one ``(3N, 3) @ (3, 3)`` product
make every entry the same three-term dot product over the same index, summed in the same order from zeroed
accumulators, so the same floats bit for bit (``test_fixed_products``, against the stacked ``@``, on
rotations, matrices of every scale and signed zeros); :mod:`.trajectory_errors`' forward kinematics of the
written trajectory uses it too.
"""

from __future__ import annotations

import numpy as np


def times_fixed(stack: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """``stack @ matrix`` for a stack of 3-vectors ``(..., 3)`` (rows) or of 3x3 matrices ``(..., 3, 3)`` and
    one ``(3, 3)`` matrix or ``(3,)`` vector, as one flat product."""
    stack = np.ascontiguousarray(stack, dtype=float)
    return (stack.reshape(-1, 3) @ matrix).reshape(stack.shape[:-1] + np.shape(matrix)[1:])


def fixed_times(matrix: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """``matrix @ stack`` for one ``(3, 3)`` matrix and a stack ``(..., 3, 3)``: ``(stack^T matrix^T)^T``, the
    same products (each ``matrix_ik stack_kj``, its factors swapped: the same float) over the same ``k``."""
    turned = times_fixed(np.swapaxes(stack, -1, -2), np.asarray(matrix, dtype=float).T)
    return np.ascontiguousarray(np.swapaxes(turned, -1, -2))


def each_times_fixed(stack: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """``stack @ matrices`` for a stack ``(N, K, 3, 3)`` and one fixed matrix per column ``(K, 3, 3)``: a flat
    product per column."""
    out = np.empty(np.broadcast_shapes(np.shape(stack), np.shape(matrices)))
    for i, matrix in enumerate(matrices):
        out[:, i] = times_fixed(stack[:, i], matrix)
    return out
