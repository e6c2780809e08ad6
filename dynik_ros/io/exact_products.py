"""Stacked 3x3 products with a constant permutation (or the identity) as index gathers, bit for bit what
numpy's ``@`` gives (ROS-free; the readers' whole-take arrays, issue 9's speed).

numpy's ``@`` on a stack of 3x3 matrices calls BLAS once per matrix (~0.2 us each: 0.04 s for the BVH
reader's axis turn of a 60 s, 120 Hz take). With a 0/1 permutation ``P`` every entry of ``P @ M`` is a sum
of three products of which one is ``1 * M_kj`` (exact) and two are ``0 * M_k'j`` (a signed zero): whatever
the order of the sums and whether BLAS fuses them, the entry is ``M_kj`` when that is non-zero, and ``+0``
when it is ``+0`` (a sum of zeros is ``-0`` only when every term is). Only a ``-0`` entry (BLAS may give
``+0``) or a non-finite one (``0 * inf`` is NaN) leaves the gather unsure: matrices holding one are
multiplied by ``@`` itself, so the result is ``@``'s in every case (``test_exact_products``).
"""

from __future__ import annotations

import numpy as np


def _unsure(m: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Which items (over ``axes`` reduced) hold a ``-0`` or a non-finite entry."""
    return ((m == 0.0) & np.signbit(m) | ~np.isfinite(m)).any(axis=axes)


def identity_times(m: np.ndarray) -> np.ndarray:
    """``np.eye(3) @ m`` of ``(..., 3, 3)`` matrices, bit for bit (module docstring): a copy of ``m``."""
    m = np.asarray(m, dtype=float)
    out = m.copy()
    unsure = _unsure(m, (-2, -1))
    if unsure.any():
        out[unsure] = np.eye(3) @ m[unsure]
    return out


def permutation_matrix(order: tuple[int, int, int] | list[int]) -> np.ndarray:
    """The 0/1 matrix ``P`` with ``(P v)_a = v[order[a]]``."""
    p = np.zeros((3, 3))
    p[np.arange(3), list(order)] = 1.0
    return p


def turned_matrices(m: np.ndarray, order: tuple[int, int, int] | list[int]) -> np.ndarray:
    """``P @ m @ P.T`` of ``(..., 3, 3)`` matrices with ``P = permutation_matrix(order)``, bit for bit:
    ``m[..., order, :][..., :, order]``, gathered at once (module docstring)."""
    m = np.asarray(m, dtype=float)
    order = list(order)
    # out[a, b] = m[order[a], order[b]] in one gather over the flattened 3x3, not two (8 ms less a take)
    entries = [3 * order[a] + order[b] for a in range(3) for b in range(3)]
    out = m.reshape(m.shape[:-2] + (9,))[..., entries].reshape(m.shape)
    unsure = _unsure(m, (-2, -1))
    if unsure.any():
        turn = permutation_matrix(order)
        out[unsure] = turn @ m[unsure] @ turn.T
    return out


def turned_vectors(v: np.ndarray, order: tuple[int, int, int] | list[int]) -> np.ndarray:
    """``v @ P.T`` of ``(N, L, 3)`` vectors with ``P = permutation_matrix(order)``, bit for bit:
    ``v[..., order]``; numpy multiplies each ``(L, 3)`` frame as one matrix, so an unsure frame is
    multiplied whole by ``@`` (module docstring)."""
    v = np.asarray(v, dtype=float)
    if v.ndim != 3:
        raise ValueError(f"turned_vectors: (N, L, 3) vectors expected, got {v.shape}")
    out = v[..., list(order)]
    unsure = _unsure(v, (-2, -1))
    if unsure.any():
        out[unsure] = v[unsure] @ permutation_matrix(order).T
    return out
