"""SO(3) helpers: the skew operators of the paper's notation (sec. 2.1) and orientation residuals.

All functions accept stacks of matrices ``(..., 3, 3)`` and vectors ``(..., 3)`` so callers never loop in
Python over targets.
"""

from __future__ import annotations

import math

import numpy as np

from dynik_ros.core.small_arrays import matrix3


def skew(v: np.ndarray) -> np.ndarray:
    """``S(v)``: the matrix with ``S(v) u = v x u`` (sec. 2.1), for ``v`` of shape ``(..., 3)``."""
    v = np.asarray(v, dtype=float)
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


# flat indices (row-major 3x3) of the entries of sk(M)^vee: (m21 - m12, m02 - m20, m10 - m01) / 2
_VEE_PLUS, _VEE_MINUS = np.array([7, 2, 3]), np.array([5, 6, 1])


def vee_of_skew_part(m: np.ndarray) -> np.ndarray:
    """``sk(M)^vee`` with ``sk(M) = (M - M^T)/2`` (sec. 2.1), for ``M`` of shape ``(..., 3, 3)`` (two gathers
    of the flattened matrices: a stack of three slices cost 3x as much per solver step)."""
    flat = m.reshape(m.shape[:-2] + (9,))
    # row-major like the stack was (the gathers come out column-major; einsum's sums follow the layout)
    return 0.5 * np.subtract(flat[..., _VEE_PLUS], flat[..., _VEE_MINUS], order="C")


def orientation_residual_world(r_model: np.ndarray, r_target: np.ndarray) -> np.ndarray:
    """Orientation part of the residual of eq. (5), expressed in the world frame.

    Eq. (5) writes ``sk(R^T R*)^vee`` in the link frame; the Jacobian rows we use are world-aligned, so we
    return ``R sk(R^T R*)^vee = sk(R* R^T)^vee``. Its norm is ``sin`` of the rotation angle between the two.
    """
    return vee_of_skew_part(r_target @ np.swapaxes(r_model, -1, -2))


# Tie-break for the axis of a half-turn (where +a and -a give the same rotation): a fixed direction that
# no elementary axis is orthogonal to, so every target flipped about the same axis turns the same way.
_HALF_TURN_SIDE = np.array([0.267, 0.535, 0.802])


def orientation_log_residual_world(r_model: np.ndarray, r_target: np.ndarray) -> np.ndarray:
    """``log(R* R^T)^vee``: the world-frame rotation vector ``theta a`` from the model to the target.

    It equals :func:`orientation_residual_world` scaled by ``theta / sin(theta)`` (identical to first order
    near the target), but keeps growing up to ``pi`` instead of falling back to zero past 90 degrees: the
    ``sin`` residual of eq. (5) vanishes for a target turned half a turn, so the closed loop of eq. (9) has
    no pull at all there. Half-turn axes are signed towards a fixed direction (deterministic, shared by
    every target).
    """
    m = r_target @ np.swapaxes(r_model, -1, -2)
    w = vee_of_skew_part(m)  # sin(theta) a
    sin2 = np.einsum("...i,...i->...", w, w)
    cos = 0.5 * (np.einsum("...ii->...", m) - 1.0)
    lowest_cos = cos.min(initial=1.0)
    if sin2.max(initial=0.0) < 1e-8 and lowest_cos > 0.0:
        # every angle below 1e-4 rad (tracking): theta / sin(theta) = 1 + theta^2 / 6 + O(theta^4)
        return w * (1.0 + sin2 / 6.0)[..., None]
    sin = np.sqrt(sin2)
    theta = np.arctan2(sin, cos)
    if lowest_cos >= 0.0 and sin.min(initial=1.0) >= 1e-6:
        # the common case, none small nor obtuse (NaN fails both tests): the general case's own quotient,
        # decided by two reductions instead of two comparisons and their counts
        return w * (theta / sin)[..., None]
    small = sin < 1e-6
    if np.count_nonzero(small):  # (.any()'s wrappers cost more)
        scale = np.where(small, 1.0 + sin2 / 6.0, theta / np.where(small, 1.0, sin))
    else:  # the common case: the same quotient without the selections
        scale = theta / sin
    out = w * scale[..., None]
    obtuse = cos < 0.0
    if np.count_nonzero(obtuse):
        # past 90 degrees take the axis from the symmetric part, (M + M^T)/2 - cos I = (1 - cos) a a^T
        mo, wo, co, to = m[obtuse], w[obtuse], cos[obtuse], theta[obtuse]
        outer = 0.5 * (mo + np.swapaxes(mo, -1, -2)) - co[:, None, None] * np.eye(3)
        diagonal = np.einsum("...ii->...i", outer)
        column = np.argmax(diagonal, axis=-1)
        rows = np.arange(column.size)
        axis = (
            outer[rows, :, column] / np.sqrt(np.maximum(diagonal[rows, column] * (1.0 - co), 1e-300))[:, None]
        )
        side = np.einsum("...i,...i->...", axis, wo)
        tie = np.abs(side) < 1e-12
        side = np.where(tie, axis @ _HALF_TURN_SIDE, side)
        axis *= np.where(side < 0.0, -1.0, 1.0)[:, None]
        out[obtuse] = to[:, None] * axis
    return out


def log_residual_rows(m: np.ndarray) -> list[float] | None:
    """:func:`orientation_log_residual_world`'s rows for ``m = R* R^T`` ``(n, 3, 3)``, flattened, as Python
    floats: the same operations in the same order (einsum's squared norm adds the first and last squares,
    then the middle one; the trace in order; numpy's own ``arctan2``), so the same bits. ``None`` where an
    angle is obtuse, a value is not finite or there is no matrix: the numpy path decides there. Why: 14
    targets' residual cost ~29 us a step in numpy calls on 3-vectors, ~15 us in floats."""
    sines2, cosines, rows = [], [], []
    for m0, m1, m2, m3, m4, m5, m6, m7, m8 in m.reshape(-1, 9).tolist():
        a, b, c = 0.5 * (m7 - m5), 0.5 * (m2 - m6), 0.5 * (m3 - m1)  # sin(theta) axis (vee_of_skew_part)
        rows.append((a, b, c))
        sines2.append((a * a + c * c) + b * b)
        cosines.append(0.5 * ((m0 + m4 + m8) - 1.0))
    if not rows or not math.isfinite(sum(sines2) + sum(cosines)):
        return None
    lowest_cos = min(cosines)
    if lowest_cos < 0.0:
        return None
    out: list[float] = []
    if max(sines2) < 1e-8 and lowest_cos > 0.0:  # every angle below 1e-4 rad (the numpy path's series)
        for (a, b, c), s2 in zip(rows, sines2, strict=True):
            k = 1.0 + s2 / 6.0
            out += (a * k, b * k, c * k)
        return out
    sines = [math.sqrt(s2) for s2 in sines2]  # (IEEE square roots: numpy's to the bit)
    thetas = np.arctan2(sines, cosines).tolist()
    for (a, b, c), s2, s, theta in zip(rows, sines2, sines, thetas, strict=True):
        k = theta / s if s >= 1e-6 else 1.0 + s2 / 6.0  # the numpy path's small angles
        out += (a * k, b * k, c * k)
    return out


def normalized_trace_error(r_model: np.ndarray, r_target: np.ndarray) -> np.ndarray:
    """``tr(I - R^T R*) / 2`` per pair (the summand of eq. 15), in [0, 2]; 0 when aligned."""
    trace = np.einsum("...ij,...ij->...", r_model, r_target)
    return 0.5 * (3.0 - trace)


def orthonormality_error(r: np.ndarray) -> np.ndarray:
    """Largest absolute entry of ``R^T R - I`` per matrix."""
    gram = np.swapaxes(r, -1, -2) @ r
    return np.abs(gram - np.eye(3)).max(axis=(-1, -2))


def determinant(r: np.ndarray) -> np.ndarray:
    """Determinant of 3x3 matrices ``(..., 3, 3)`` as the triple product of their columns."""
    c0, c1, c2 = r[..., :, 0], r[..., :, 1], r[..., :, 2]
    return (
        c0[..., 0] * (c1[..., 1] * c2[..., 2] - c1[..., 2] * c2[..., 1])
        - c0[..., 1] * (c1[..., 0] * c2[..., 2] - c1[..., 2] * c2[..., 0])
        + c0[..., 2] * (c1[..., 0] * c2[..., 1] - c1[..., 1] * c2[..., 0])
    )


def exp_so3(phi: np.ndarray) -> np.ndarray:
    """Rotation matrices ``exp(S(phi))`` (Rodrigues' formula) for rotation vectors ``phi`` ``(..., 3)``."""
    phi = np.asarray(phi, dtype=float)
    if phi.ndim == 1:  # the per-step base rotation, in scalar arithmetic (numpy calls cost more here)
        return matrix3(exp_so3_entries(*phi.tolist()))
    angle = np.linalg.norm(phi, axis=-1)[..., None, None]
    k = skew(phi)
    small = angle < 1e-8
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0 - angle**2 / 6.0, np.sin(safe) / safe)
    b = np.where(small, 0.5 - angle**2 / 24.0, (1.0 - np.cos(safe)) / safe**2)
    return np.eye(3) + a * k + b * (k @ k)


def exp_so3_entries(x: float, y: float, z: float) -> tuple[float, ...]:
    """The entries of ``exp(S(phi))`` for one rotation vector ``phi = (x, y, z)``, row by row, as Python
    floats: what :func:`exp_so3` returns for one vector, for callers that add to it before making an array
    (:func:`~.base_integration.integrate_rotation`; one flat sequence: :func:`~.small_arrays.matrix3`)."""
    angle2 = x * x + y * y + z * z
    if angle2 < 1e-16:
        a, b = 1.0 - angle2 / 6.0, 0.5 - angle2 / 24.0
    else:
        angle = math.sqrt(angle2)
        a, b = math.sin(angle) / angle, (1.0 - math.cos(angle)) / angle2
    # I + a S(phi) + b S(phi)^2, with S(phi)^2 = phi phi^T - |phi|^2 I
    return (1.0 + b * (x * x - angle2), b * x * y - a * z, b * x * z + a * y,
            b * x * y + a * z, 1.0 + b * (y * y - angle2), b * y * z - a * x,
            b * x * z - a * y, b * y * z + a * x, 1.0 + b * (z * z - angle2))  # fmt: skip


def transposed_times(rows: list[list[float]], x: float, y: float, z: float) -> tuple[float, float, float]:
    """``R^T (x, y, z)`` for ``R``'s ``rows`` (``R.tolist()``), summed in order onto a zero: what numpy's
    ``R.T @ v`` gives for a 3 x 3 matrix and a 3-vector (BLAS's matrix-vector kernel adds to the zeroed
    output, so a zero comes out positive; checked by the tests)."""
    (a, b, c), (d, e, f), (g, h, i) = rows
    return 0.0 + a * x + d * y + g * z, 0.0 + b * x + e * y + h * z, 0.0 + c * x + f * y + i * z


def project_to_so3(m: np.ndarray) -> np.ndarray:
    """Closest rotation matrix to ``M`` in the Frobenius norm (polar decomposition through the SVD)."""
    u, _, vt = np.linalg.svd(m)
    d = np.sign(np.linalg.det(u @ vt))
    u[..., :, -1] *= d[..., None] if np.ndim(d) else d
    return u @ vt


def rotation_about(axis: str, angle: float) -> np.ndarray:
    """Elementary rotation about ``x``, ``y`` or ``z`` by ``angle`` radians."""
    index = "xyz".index(axis)
    phi = np.zeros(3)
    phi[index] = angle
    return exp_so3(phi)
