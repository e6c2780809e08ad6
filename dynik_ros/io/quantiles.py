"""``np.median`` and ``np.percentile`` without importing ``numpy.ma`` (~15 ms CPU on a run's first call:
the median's NaN check asks whether the partitioned array is a masked one, the percentile's ``np.unique``
of its partition indexes whether that is masked), for the readers' and the summary's plain float arrays.

The same steps as numpy's ``_median`` and ``_quantile`` (method ``linear``): the same ``partition`` at the
same indexes, the mean of the middle or the same interpolation (``b - (b - a)(1 - t)`` from ``t >= 1/2``),
a NaN put back where the partition's last element is NaN; so the same floats, bit for bit
(``test_quantiles``). Anything else (other dtypes, empty arrays, a sequence of percentiles) is numpy's."""

from __future__ import annotations

import numpy as np


def median(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``np.median(values, axis)`` of a float array (a flattened one for ``axis=None``)."""
    a = np.asarray(values)
    if a.ndim == 0 or a.size == 0 or a.dtype.kind != "f":
        return np.median(a, axis=axis)  # numpy's own warnings and types
    if axis is None:
        a, axis = a.reshape(-1), 0
    n = a.shape[axis]
    kth = [n // 2 - 1, n // 2] if n % 2 == 0 else [n // 2]
    part = np.partition(a, kth + [-1], axis=axis)
    indexer = [slice(None)] * part.ndim
    indexer[axis] = slice(n // 2 - 1, n // 2 + 1) if n % 2 == 0 else slice(n // 2, n // 2 + 1)
    result = np.mean(part[tuple(indexer)], axis=axis)
    last = part.take(-1, axis=axis)
    nan = np.isnan(last)
    if not nan.any():
        return result
    if isinstance(result, np.generic):
        return last
    np.copyto(result, last, where=nan)
    return result


def percentile(values: np.ndarray, q: float, axis: int | None = None) -> np.ndarray:
    """``np.percentile(values, q, axis)`` of a float64 array and one number ``q`` in [0, 100] (a flattened
    array for ``axis=None``)."""
    a = np.asarray(values)
    if (
        a.dtype != np.float64
        or type(q) not in (int, float)
        or a.ndim == 0
        or a.size == 0
        or not 0 <= q <= 100
    ):
        return np.percentile(a, q, axis=axis)
    if axis is None:
        arr = a.flatten()
    else:
        arr = a.copy()
        if axis % a.ndim != 0:
            arr = np.moveaxis(arr, axis, 0)
    n = arr.shape[0]
    virtual = (n - 1) * np.true_divide(q, 100, out=...)
    if virtual >= n - 1:  # numpy takes the last element from both sides
        previous = following = -1
    else:
        previous = int(np.floor(virtual))
        following = previous + 1
    gamma = float(virtual - np.intp(previous))  # numpy's, from the index it takes (-1 past the end)
    arr.partition(np.array(sorted({0, -1, previous, following}), dtype=np.intp), axis=0)
    nans = np.isnan(arr[-1, ...])
    low, high = arr[previous], arr[following]
    diff = high - low
    result = np.add(low, diff * gamma, out=...)
    np.subtract(
        high, diff * (1 - gamma), out=result, where=gamma >= 0.5, casting="unsafe", dtype=type(result.dtype)
    )
    if result.ndim == 0:
        result = result[()]
    if np.any(nans):
        if np.ndim(result) == 0:
            return arr[-1]
        np.copyto(result, arr[-1, ...], where=nans)
    return result
