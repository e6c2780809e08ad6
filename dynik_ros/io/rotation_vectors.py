"""Rotation vectors of many rotation matrices and back, as ``scipy.spatial.transform.Rotation`` gives them,
bit for bit, in whole-array numpy (the readers' angular velocities and derived segments, issue 9's speed).

``Rotation.from_matrix(R).as_rotvec()`` took ~0.2 s on a 60 s, 120 Hz BVH take (its checks run a LAPACK
determinant per matrix) and importing ``scipy.spatial`` for it another 0.1 s. Its arithmetic for a rotation
matrix: the quaternion by the largest of ``R_00, R_11, R_22, tr R`` (Shepperd's choice: ``q_i = 1 - tr R +
2 R_ii``, ``q_j = R_ji + R_ij``, ``q_k = R_ki + R_ik``, ``w = R_kj - R_jk``, or from the trace), normalised;
canonical (``w >= 0``, ties by the first non-zero of ``x, y, z``); ``theta = 2 atan2(|q_xyz|, w)`` and the
vector ``q_xyz theta / sin(theta / 2)``, or the series ``2 + theta^2 / 12 + 7 theta^4 / 2880`` for ``theta
<= 1e-3``. Back: ``q = (v sin(theta/2) / theta, cos(theta/2))`` (series ``1/2 - theta^2/48 + theta^4/3840``)
and the matrix of ``q``. The same operations in the same order (``test_rotation_vectors``: bit for bit
against scipy on random, small, near-half-turn rotations). scipy first turns a matrix that is not orthonormal
within 1e-12 into the nearest rotation (an SVD) and refuses ``det R <= 0``: matrices not orthonormal within
:data:`PLAIN` here, or with ``det R <= 1/2``, are handed to scipy itself."""

from __future__ import annotations

import numpy as np

# |R R^T - I| (each entry) under which a matrix is taken as scipy takes an orthonormal one: far inside scipy's
# 1e-12, so both agree whatever the rounding of the two products (~1e-15 at |R| ~ 1)
PLAIN = 1e-14


def rotation_vectors(matrices: np.ndarray) -> np.ndarray:
    """``Rotation.from_matrix(matrices).as_rotvec()`` of ``(N, 3, 3)`` matrices: ``(N, 3)`` (module
    docstring); those not plainly rotations go to scipy."""
    m = np.asarray(matrices, dtype=float).reshape(-1, 3, 3)
    entries = _entries(m)
    plain = _plain(m, entries)
    if plain.all():
        return _as_rotvec(_quaternions(m, entries))
    out = np.empty((len(m), 3))
    out[plain] = _as_rotvec(_quaternions(m[plain]))
    if not plain.all():
        from scipy.spatial.transform import Rotation

        out[~plain] = Rotation.from_matrix(m[~plain]).as_rotvec()
    return out


def rotation_matrices(vectors: np.ndarray) -> np.ndarray:
    """``Rotation.from_rotvec(vectors).as_matrix()`` of ``(N, 3)`` rotation vectors: ``(N, 3, 3)``."""
    v = np.asarray(vectors, dtype=float).reshape(-1, 3)
    angle = np.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2])
    square = angle * angle
    with np.errstate(invalid="ignore", divide="ignore"):  # (theta = 0 takes the series)
        scale = np.where(angle <= 1e-3, 0.5 - square / 48 + square * square / 3840, np.sin(angle / 2) / angle)
    x, y, z = (v[:, i] * scale for i in range(3))
    w = np.cos(angle / 2)
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    xy, zw, xz, yw, yz, xw = x * y, z * w, x * z, y * w, y * z, x * w
    columns = (
        (x2 - y2 - z2 + w2, 2 * (xy + zw), 2 * (xz - yw)),
        (2 * (xy - zw), -x2 + y2 - z2 + w2, 2 * (yz + xw)),
        (2 * (xz + yw), 2 * (yz - xw), -x2 - y2 + z2 + w2),
    )
    out = np.empty((len(v), 3, 3))
    for c, column in enumerate(columns):
        for r, value in enumerate(column):
            out[:, r, c] = value
    return out


def _entries(m: np.ndarray) -> list[list[np.ndarray]]:
    """``e[i][j] = R_ij`` of every matrix, ``(N,)`` each, contiguous (one copy: the whole-array operations
    below run on contiguous rows, not on every ninth float of the stack)."""
    flat = np.ascontiguousarray(m.reshape(-1, 9).T)
    return [[flat[3 * i + j] for j in range(3)] for i in range(3)]


def _plain(m: np.ndarray, entries: list[list[np.ndarray]] | None = None) -> np.ndarray:
    """Which matrices are orthonormal within :data:`PLAIN` (``R R^T`` entry by entry) with ``det R > 1/2``."""
    e = entries or _entries(m)
    worst = np.zeros(len(m))
    for i in range(3):
        for j in range(i, 3):
            dot = e[i][0] * e[j][0] + e[i][1] * e[j][1] + e[i][2] * e[j][2]
            worst = np.maximum(worst, np.abs(dot - 1.0) if i == j else np.abs(dot))
    (a, b, c), (d, f, g), (h, k, n) = e
    det = a * (f * n - g * k) - b * (d * n - g * h) + c * (d * k - f * h)
    return (worst <= PLAIN) & (det > 0.5)


def _quaternions(m: np.ndarray, entries: list[list[np.ndarray]] | None = None) -> np.ndarray:
    """Unit quaternions ``(N, 4)`` (x, y, z, w) of orthonormal matrices, scipy's choice and order (module
    docstring): the candidate most matrices choose computed whole-array, the others on their own rows."""
    e = entries or _entries(m)
    trace = e[0][0] + e[1][1] + e[2][2]
    choice = np.stack((e[0][0], e[1][1], e[2][2], trace)).argmax(axis=0)
    q = np.empty((4, len(m)))
    counts = np.bincount(choice, minlength=4)
    most = int(counts.argmax())
    q[:] = _candidate(most, e, trace)
    for c in range(4):
        if c != most and counts[c]:
            rows = np.flatnonzero(choice == c)
            q[:, rows] = _candidate(c, [[x[rows] for x in row] for row in e], trace[rows])
    norm = np.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q / norm).T


def _candidate(c: int, e: list[list[np.ndarray]], trace: np.ndarray) -> np.ndarray:
    """The quaternions ``(4, N)`` (not normalised) of the matrices' entries ``e`` by candidate ``c``: ``q_i``
    largest (``c = i``: ``q_i = 1 - tr R + 2 R_ii``, ``q_j = R_ji + R_ij``, ``q_k = R_ki + R_ik``,
    ``w = R_kj - R_jk``) or ``w`` largest (``c = 3``, from the trace)."""
    q = np.empty((4, len(trace)))
    if c == 3:
        q[0] = e[2][1] - e[1][2]
        q[1] = e[0][2] - e[2][0]
        q[2] = e[1][0] - e[0][1]
        q[3] = 1 + trace
        return q
    i, j, k = c, (c + 1) % 3, (c + 2) % 3
    q[i] = 1 - trace + 2 * e[i][i]
    q[j] = e[j][i] + e[i][j]
    q[k] = e[k][i] + e[i][k]
    q[3] = e[k][j] - e[j][k]
    return q


def _as_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vectors ``(N, 3)`` of unit quaternions ``(N, 4)``, canonical first (module docstring)."""
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    flip = (w < 0) | ((w == 0) & ((x < 0) | ((x == 0) & ((y < 0) | ((y == 0) & (z < 0))))))
    q = np.where(flip[:, None], -q, q)
    norm = np.sqrt(q[:, 0] * q[:, 0] + q[:, 1] * q[:, 1] + q[:, 2] * q[:, 2])
    angle = 2 * np.arctan2(norm, q[:, 3])
    square = angle * angle
    small = angle <= 1e-3
    with np.errstate(invalid="ignore", divide="ignore"):  # (theta = 0 takes the series)
        scale = np.where(small, 2 + square / 12 + 7 * square * square / 2880, angle / np.sin(angle / 2.0))
    return scale[:, None] * q[:, :3]
