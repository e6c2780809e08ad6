"""The readers' rotation vectors (io/rotation_vectors.py, issue 9's speed target) are scipy Rotation's, bit
for bit: ``from_matrix(R).as_rotvec()`` and ``from_rotvec(v).as_matrix()`` on random rotations, the small
turns between two frames of a capture (the series below 1e-3 rad), half turns and their ties, exact zeros of
both signs; matrices that are not plainly rotations go to scipy itself (its nearest rotation, its error)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from dynik_ros.io.rotation_vectors import rotation_matrices, rotation_vectors


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b))


def _rotations(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random rotations, the small relative turns of consecutive capture frames, near and exact half turns,
    the identity and axis-aligned turns (zeros of both signs in the matrices)."""
    base = Rotation.random(n, random_state=int(rng.integers(1 << 30))).as_matrix()
    turn = Rotation.from_rotvec(rng.normal(size=(n, 3)) * rng.choice([1e-7, 1e-4, 9e-4, 2e-3, 0.3], (n, 1)))
    small = base @ turn.as_matrix() @ np.swapaxes(base, -1, -2)
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    half = Rotation.from_rotvec(axis * (np.pi - rng.choice([0.0, 1e-9, 1e-4], (n, 1)))).as_matrix()
    exact = np.array([np.diag(d) for d in ([1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1])], dtype=float)
    quarter = Rotation.from_rotvec(np.pi / 2 * np.eye(3)).as_matrix().round(15) + 0.0
    # exact half turns 2 n n^T - I (w = 0: the canonical sign by the first non-zero of x, y, z)
    axes = np.concatenate(
        (axis[:50], [[-0.6, 0.8, 0.0], [0.0, -0.6, 0.8], [-0.36, 0.48, 0.8], [0.0, 0.6, -0.8]])
    )
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    exact_half = 2.0 * axes[:, :, None] * axes[:, None, :] - np.eye(3)
    return np.concatenate(
        (
            base,
            small,
            half,
            exact_half,
            exact,
            -exact[:, :, [1, 0, 2]],
            quarter,
            np.eye(3)[None] * -0.0 + np.eye(3),
        )
    )


def test_rotation_vectors_are_scipys_bit_for_bit():
    rng = np.random.default_rng(7)
    matrices = _rotations(rng, 20000)
    assert _same_bits(rotation_vectors(matrices), Rotation.from_matrix(matrices).as_rotvec())


def test_rotation_matrices_of_vectors_are_scipys_bit_for_bit():
    rng = np.random.default_rng(8)
    vectors = rng.normal(size=(60000, 3)) * rng.choice(
        [0.0, 1e-8, 1e-4, 9.99e-4, 1.001e-3, 0.2, 3.0], (60000, 1)
    )
    vectors[:6] = [
        [0.0, -0.0, 0.0],
        [-0.0, 0.0, -0.0],
        [np.pi, 0, 0],
        [0, -np.pi, 0],
        [1e-3, 0, 0],
        [0, 0, 1e-3],
    ]
    expected = Rotation.from_rotvec(vectors).as_matrix()
    assert _same_bits(rotation_matrices(vectors), expected)
    assert _same_bits(rotation_matrices(vectors[7]), Rotation.from_rotvec(vectors[7]).as_matrix()[None])


def test_matrices_that_are_not_plainly_rotations_get_scipys_own_answer():
    """Off by more than the plain tolerance (scipy then takes the nearest rotation), and a reflection (scipy's
    error): the same answers as scipy's, whichever way they are mixed with plain rotations."""
    rng = np.random.default_rng(9)
    matrices = _rotations(rng, 300)
    matrices[::3] += rng.normal(size=matrices[::3].shape) * rng.choice(
        [1e-13, 1e-10, 1e-6], (len(matrices[::3]), 1, 1)
    )
    assert _same_bits(rotation_vectors(matrices), Rotation.from_matrix(matrices).as_rotvec())
    matrices[5] = np.diag([1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="determinant"):
        Rotation.from_matrix(matrices)
    with pytest.raises(ValueError, match="determinant"):
        rotation_vectors(matrices)


def test_reading_a_bvh_take_does_not_import_scipy_spatial():
    """The BVH reader's angular velocities and derived segments (CMU: T12, L5 by ``_slerp``) need no
    ``scipy.spatial`` (its import cost ~0.1 s of ``dynik-retarget``'s start): a fresh process reads the
    committed CMU excerpt without loading it."""
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    code = (
        "import sys\nfrom dynik_ros.io.motion_files import read_motion_file\n"
        f"motion = read_motion_file({str(path)!r})\n"
        "assert any('derived' in n for n in motion.notices), motion.notices\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.spatial')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
