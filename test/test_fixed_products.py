"""Whole-take stacks times one fixed matrix as one flat BLAS product (retarget/fixed_products.py, issue 9's
speed target): numpy's stacked ``@`` bit for bit, on rotations, matrices of every scale, exact zeros of both
signs and broadcast or strided stacks."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.retarget.fixed_products import each_times_fixed, fixed_times, times_fixed


def _stacks(rng: np.random.Generator, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Matrices or vectors of ``shape``: scaled normals with signed zeros, rotations, a strided view."""
    values = rng.normal(size=shape) * 10.0 ** rng.integers(-6, 6, size=shape)
    zeros = rng.random(shape) < 0.2
    values[zeros] = rng.choice([0.0, -0.0], size=int(zeros.sum()))
    out = [values]
    if shape[-2:] == (3, 3):
        q = rng.normal(size=shape[:-2] + (4,))
        q /= np.linalg.norm(q, axis=-1, keepdims=True)
        w, x, y, z = np.moveaxis(q, -1, 0)
        rotations = np.stack(
            [
                np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
                np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
                np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
            ],
            -2,
        )
        out.append(rotations)
        padded = np.zeros(shape[:-2] + (4, 4))
        padded[..., :3, :3] = values
        out.append(padded[..., :3, :3])  # (a placement's rotation part: a strided view)
    return out


def _fixed(rng: np.random.Generator) -> list[np.ndarray]:
    """Fixed matrices: a rotation about z (the world alignment), a general one with zeros, the identity."""
    c, s = np.cos(0.3), np.sin(0.3)
    general = rng.normal(size=(3, 3))
    general[0, 1] = -0.0
    return [np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), general, np.eye(3)]


@pytest.mark.parametrize("n", [1, 3, 7200])
def test_the_flat_products_are_the_stacked_ones_bit_for_bit(n):
    rng = np.random.default_rng(n)
    for fixed in _fixed(rng):
        for stack in _stacks(rng, (n, 5, 3)):
            assert times_fixed(stack, fixed.T).tobytes() == (stack @ fixed.T).tobytes()
        for stack in _stacks(rng, (n, 4, 3, 3)):
            assert times_fixed(stack, fixed).tobytes() == (stack @ fixed).tobytes()
            got = fixed_times(fixed, stack)
            assert got.flags.c_contiguous and got.tobytes() == (fixed @ stack).tobytes()
    for stack in _stacks(rng, (n, 6, 3, 3)):
        offsets = rng.normal(size=(6, 3, 3))
        offsets[2] = np.eye(3)
        assert each_times_fixed(stack, offsets).tobytes() == (stack @ offsets).tobytes()
    assert each_times_fixed(np.zeros((n, 0, 3, 3)), np.zeros((0, 3, 3))).shape == (n, 0, 3, 3)
