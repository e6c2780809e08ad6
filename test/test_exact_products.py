"""The readers' products with a constant permutation or the identity, done as gathers: ``@``'s values and
signs bit for bit, signed zeros, tiny and huge entries and non-finite ones included."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.io.exact_products import identity_times, permutation_matrix, turned_matrices, turned_vectors


def _awkward(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random entries of every scale with exact zeros of both signs, and a few non-finite ones."""
    rng = np.random.default_rng(seed)
    m = rng.normal(size=shape) * rng.choice([1e-300, 1e-8, 1.0, 1e8, 1e300], size=shape)
    m = np.where(rng.random(shape) < 0.2, -0.0, m)
    m = np.where(rng.random(shape) < 0.1, 0.0, m)
    flat = m.reshape(-1)
    flat[rng.choice(flat.size, 3, replace=False)] = [np.inf, -np.inf, np.nan]
    return m


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    return got.shape == expected.shape and np.array_equal(got.view(np.uint64), expected.view(np.uint64))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (0 * inf in the products)
@pytest.mark.parametrize("order", [(2, 0, 1), (0, 1, 2), (1, 2, 0)])
def test_turned_matrices_are_the_products(order):
    turn = permutation_matrix(order)
    m = _awkward((50, 7, 3, 3), 1)
    assert _same_bits(turned_matrices(m, order), turn @ m @ turn.T)
    v = _awkward((40, 7, 3), 2)
    assert _same_bits(turned_vectors(v, order), v @ turn.T)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_identity_product_is_a_copy_where_it_can_be():
    m = _awkward((400, 3, 3), 3)
    assert _same_bits(identity_times(m), np.eye(3) @ m)
    m = _awkward((20, 5, 3, 3), 4)
    assert _same_bits(identity_times(m), np.eye(3) @ m)


def test_the_permutation_is_the_readers_turn():
    from dynik_ros.io.bvh import Y_UP_ORDER, Y_UP_TO_Z_UP

    np.testing.assert_array_equal(permutation_matrix(Y_UP_ORDER), Y_UP_TO_Z_UP)


def _angles(n: int, seed: int, finite: bool = False) -> np.ndarray:
    """Degrees of every kind: exact zeros of both signs, quarter and half turns, tiny, huge, non-finite."""
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, 90.0, -90.0, 180.0, -180.0, 360.0, 1e-300, -1e-310, 1e-160, 1e300]
    special += [] if finite else [np.inf, np.nan]
    return np.where(rng.random(n) < 0.3, rng.choice(special, n), rng.uniform(-400.0, 400.0, n))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_forward_kinematics_is_the_plain_chain_of_products():
    """``forward_kinematics`` (a joint's first rotation without BLAS: ``identity_times``) gives the plain
    chain ``I @ R1 @ R2 @ R3`` and ``R_parent @ local`` bit for bit, on channel values of every kind."""
    from dynik_ros.io.bvh import BvhData, BvhJoint, _axis_rotations, forward_kinematics

    orders = ["zxy", "xyz", "yzx", "zyx", "zz"]
    joints = [BvhJoint("root", -1, np.array([1.0, -0.0, 2.0]), ["xposition", "yposition", "zposition"])]
    joints[0].channels += [f"{a}rotation" for a in "zxy"]
    column = 6
    for i, order in enumerate(orders):
        channels = [f"{a}rotation" for a in order] + (["xposition"] if i == 2 else [])
        joints.append(BvhJoint(f"j{i}", i, np.array([0.5, -0.0, 3.0]), channels, first_channel=column))
        column += len(channels)
    values = np.stack([_angles(500, c, finite=c % 2 == 0) for c in range(column)], axis=1)
    pos, rot = forward_kinematics(BvhData(joints, values, 0.01))
    for j, joint in enumerate(joints):
        local = np.broadcast_to(np.eye(3), (500, 3, 3)).copy()
        for c, ch in enumerate(joint.channels):
            if ch.endswith("rotation"):
                local = local @ _axis_rotations(ch[0], values[:, joint.first_channel + c])
        expected = local if joint.parent < 0 else rot[:, joint.parent] @ local
        assert _same_bits(rot[:, j], expected), joint.name
