"""Unit quaternions <-> rotation matrices in the component order of ROS messages: ``(x, y, z, w)``.

``geometry_msgs/Quaternion`` stores ``x, y, z, w``; pinocchio's ``Quaternion.coeffs()`` uses the same
order, Eigen's constructor and ``scipy``'s ``as_quat(scalar_first=True)`` do not. All functions take
stacks: quaternions ``(..., 4)`` and rotation matrices ``(..., 3, 3)``, so callers never loop over links
in Python. Pure numpy, no ROS imports.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["quaternion_from_rotation", "rotation_from_quaternion", "normalize_quaternion"]


def normalize_quaternion(q: np.ndarray, tolerance: float = 1e-9) -> np.ndarray:
    """``q / |q|`` for ``(..., 4)`` quaternions.

    Raises:
        ValueError: a quaternion is not finite or its norm is below ``tolerance`` (no rotation is defined).
    """
    q = np.asarray(q, dtype=float)
    if q.shape[-1:] != (4,):
        raise ValueError(f"quaternions must have shape (..., 4), got {q.shape}")
    norm = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    if not np.isfinite(q).all():
        raise ValueError("quaternion has non-finite components")
    if np.any(norm < tolerance):
        raise ValueError(f"quaternion norm below {tolerance}: no rotation is defined")
    return q / norm


def rotation_from_quaternion(q: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` of quaternions ``(..., 4)`` in ``(x, y, z, w)`` order.

    The input is normalized first (messages from other tools are not always exactly unit length); ``q`` and
    ``-q`` give the same matrix.
    """
    q = normalize_quaternion(q)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    out = np.empty(q.shape[:-1] + (3, 3))
    out[..., 0, 0] = 1.0 - 2.0 * (y * y + z * z)
    out[..., 0, 1] = 2.0 * (x * y - w * z)
    out[..., 0, 2] = 2.0 * (x * z + w * y)
    out[..., 1, 0] = 2.0 * (x * y + w * z)
    out[..., 1, 1] = 1.0 - 2.0 * (x * x + z * z)
    out[..., 1, 2] = 2.0 * (y * z - w * x)
    out[..., 2, 0] = 2.0 * (x * z - w * y)
    out[..., 2, 1] = 2.0 * (y * z + w * x)
    out[..., 2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return out


def quaternion_from_rotation(r: np.ndarray) -> np.ndarray:
    """Unit quaternions ``(..., 4)`` in ``(x, y, z, w)`` order of rotation matrices ``(..., 3, 3)``.

    Shepperd's method: per matrix, the largest of ``w, x, y, z`` is computed from the diagonal and the
    others from off-diagonal sums, which keeps full precision near 180 degree rotations. The sign is
    canonical, ``w >= 0`` (``q`` and ``-q`` are the same rotation), so the output is deterministic.
    The input is assumed to be a rotation matrix (orthonormal, det +1); it is not re-orthonormalized.
    """
    r = np.asarray(r, dtype=float)
    if r.shape == (3, 3):
        return _quaternion_of_one(r)
    if r.shape[-2:] != (3, 3):
        raise ValueError(f"rotation matrices must have shape (..., 3, 3), got {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rotation matrix has non-finite entries")
    shape = r.shape[:-2]
    m = r.reshape(-1, 3, 3)
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    # 4 * component^2 for w, x, y, z
    squares = np.stack(
        (1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22, 1.0 - m00 - m11 + m22),
        axis=-1,
    )
    case = np.argmax(squares, axis=-1)
    s = 2.0 * np.sqrt(np.maximum(squares[np.arange(len(m)), case], 1e-300))  # 4 * largest component
    d21, d02, d10 = m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]
    s01, s02, s12 = m[:, 0, 1] + m[:, 1, 0], m[:, 0, 2] + m[:, 2, 0], m[:, 1, 2] + m[:, 2, 1]
    # columns x, y, z, w for each case (largest component w, x, y, z respectively)
    candidates = np.stack(
        (
            np.stack((d21, d02, d10, 0.25 * s * s), axis=-1),
            np.stack((0.25 * s * s, s01, s02, d21), axis=-1),
            np.stack((s01, 0.25 * s * s, s12, d02), axis=-1),
            np.stack((s02, s12, 0.25 * s * s, d10), axis=-1),
        ),
        axis=1,
    )
    q = candidates[np.arange(len(m)), case] / s[:, None]
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    q *= np.where(q[:, 3:] < 0.0, -1.0, 1.0)
    return q.reshape(shape + (4,))


def _quaternion_of_one(m: np.ndarray) -> np.ndarray:
    """:func:`quaternion_from_rotation` for a single matrix, in scalar arithmetic (the solver's per-step
    base orientation; the vectorised path costs tens of microseconds for one matrix)."""
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = m.tolist()
    # a sum is finite when every term is (a NaN or an infinity propagates); only an overflowing sum of
    # huge finite entries needs the entry-by-entry test
    if not math.isfinite(m00 + m01 + m02 + m10 + m11 + m12 + m20 + m21 + m22) and not all(
        math.isfinite(v) for v in (m00, m01, m02, m10, m11, m12, m20, m21, m22)
    ):
        raise ValueError("rotation matrix has non-finite entries")
    squares = (1.0 + m00 + m11 + m22, 1.0 + m00 - m11 - m22, 1.0 - m00 + m11 - m22, 1.0 - m00 - m11 + m22)
    case = 0  # the first largest, as argmax
    for i in (1, 2, 3):
        if squares[i] > squares[case]:
            case = i
    s = 2.0 * math.sqrt(max(squares[case], 1e-300))
    if case == 0:
        x, y, z, w = (m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s
    elif case == 1:
        x, y, z, w = 0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s
    elif case == 2:
        x, y, z, w = (m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s
    else:
        x, y, z, w = (m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s
    norm = math.sqrt(x * x + y * y + z * z + w * w) * (-1.0 if w < 0.0 else 1.0)
    return np.array((x / norm, y / norm, z / norm, w / norm))


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products ``a ⊗ b`` of quaternions ``(..., 4)`` in ``(x, y, z, w)`` order (broadcast):
    the rotation of ``a ⊗ b`` is ``R(a) R(b)``."""
    ax, ay, az, aw = (a[..., i] for i in range(4))
    bx, by, bz, bw = (b[..., i] for i in range(4))
    return np.stack(
        (
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ),
        axis=-1,
    )
