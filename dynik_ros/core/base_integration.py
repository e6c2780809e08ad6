"""SO(3)-safe integration of the base orientation (sec. 3.3, eq. 14 of Rapetti et al. 2020).

Eq. (14) integrates the rotation matrix directly and adds the Baumgarte-like term
``A = rho/2 ((R^T R)^-1 - I)`` that pulls ``R`` back onto SO(3). The paper writes ``R (S(omega) + A)``;
with ``omega`` the world-frame angular velocity the rotation dynamics is ``R_dot = S(omega) R =
R S(R^T omega)``, which is what we integrate.

Two schemes are offered:

* ``"euler"`` - eq. (14) as printed, explicit Euler: ``R+ = R + dt R (S(R^T omega) + A)``. Its
  orthonormality error settles near ``dt |omega|^2 / rho``.
* ``"exp"`` (default) - the exact exponential of the angular velocity over the step, plus the same eq. (14a)
  correction for round-off: ``R+ = R (exp(S(R^T omega) dt) + dt A)``. Orthonormal to machine precision.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.core.small_arrays import matrix3
from dynik_ros.core.so3 import exp_so3_entries, skew, transposed_times

SCHEMES = ("exp", "euler")


def orthonormality_correction(rotation: np.ndarray, gain: float) -> np.ndarray:
    """``A = rho/2 ((R^T R)^-1 - I)`` of eq. (14a); the symmetric 3x3 inverse by its adjugate."""
    return np.array(_correction_rows(rotation, gain))


def _correction_rows(rotation: np.ndarray, gain: float) -> tuple[tuple[float, float, float], ...]:
    """The rows of :func:`orthonormality_correction` as Python floats (:func:`integrate_rotation` adds them
    to the exponential's before making one array)."""
    (a, b, c), (_, d, e), (_, _, f) = (rotation.T @ rotation).tolist()
    cofactors = (d * f - e * e, c * e - b * f, b * e - c * d, a * f - c * c, b * c - a * e, a * d - b * b)
    s = 0.5 * gain / (a * cofactors[0] + b * cofactors[1] + c * cofactors[2])
    h = 0.5 * gain
    return (
        (s * cofactors[0] - h, s * cofactors[1], s * cofactors[2]),
        (s * cofactors[1], s * cofactors[3] - h, s * cofactors[4]),
        (s * cofactors[2], s * cofactors[4], s * cofactors[5] - h),
    )


def integrate_rotation(
    rotation: np.ndarray, omega_world: np.ndarray, dt: float, gain: float = 10.0, scheme: str = "exp"
) -> np.ndarray:
    """One step of eq. (14b) for the base rotation; ``gain`` is ``rho``, capped at ``1/dt`` for stability."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown rotation integration scheme '{scheme}', expected one of {SCHEMES}")
    rho = min(gain, 1.0 / dt)
    if scheme == "euler":
        omega_body = rotation.T @ omega_world
        return rotation + dt * rotation @ (skew(omega_body) + orthonormality_correction(rotation, rho))
    # exp(S(omega_body dt)) + dt A entry by entry in floats, the sums numpy's would make, in one array
    x, y, z = transposed_times(rotation.tolist(), *np.asarray(omega_world, dtype=float).tolist())  # R^T omega
    e0, e1, e2, e3, e4, e5, e6, e7, e8 = exp_so3_entries(x * dt, y * dt, z * dt)
    (a0, a1, a2), (a3, a4, a5), (a6, a7, a8) = _correction_rows(rotation, rho)
    step = (e0 + dt * a0, e1 + dt * a1, e2 + dt * a2, e3 + dt * a3, e4 + dt * a4, e5 + dt * a5)
    return rotation @ matrix3((*step, e6 + dt * a6, e7 + dt * a7, e8 + dt * a8))
