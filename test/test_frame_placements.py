"""The frame placements read as one numpy view of pinocchio's ``data.oMf`` (core/frame_placements.py) are
pinocchio's own, on every frame of the registry's robots and the human model, and the kinematics built on
them give bit for bit what reading the frames one by one gives (also in a deep copy)."""

from __future__ import annotations

import copy

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.frame_kinematics import FrameKinematics
from dynik_ros.core.frame_placements import placement_table, pose_indices
from dynik_ros.retarget import Retargeter


def _random_q(model: pin.Model, rng: np.random.Generator) -> np.ndarray:
    lower = np.clip(np.nan_to_num(model.lowerPositionLimit), -1.5, 1.5)
    upper = np.clip(np.nan_to_num(model.upperPositionLimit), -1.5, 1.5)
    q = pin.neutral(model)
    free = 7 if model.joints[1].nq == 7 else 0
    q[:3] = rng.uniform(-1, 1, 3) if free else q[:3]
    if free:
        quaternion = rng.normal(size=4)
        q[3:7] = quaternion / np.linalg.norm(quaternion)
    q[free:] = rng.uniform(lower[free:], upper[free:])
    return q


@pytest.fixture(scope="module", params=["g1", "talos", "icub"])
def kinematics(request) -> FrameKinematics:
    return Retargeter.from_config(request.param).make_ik().kinematics


def test_the_table_is_every_frame_placement_as_pinocchio_gives_it(kinematics, human66):
    rng = np.random.default_rng(3)
    for model in (kinematics.model, human66.model):
        data = model.createData()
        table = placement_table(model, data)
        assert table is not None and table.shape == (model.nframes, 12)
        for _ in range(3):
            pin.forwardKinematics(model, data, _random_q(model, rng))
            pin.updateFramePlacements(model, data)
            ids = list(range(model.nframes))
            gathered = table[pose_indices(ids)]
            for i in ids:
                np.testing.assert_array_equal(gathered[i, :9].reshape(3, 3), data.oMf[i].rotation)
                np.testing.assert_array_equal(gathered[i, 9:], data.oMf[i].translation)


def test_kinematics_on_the_table_equal_the_frame_by_frame_reads_bit_for_bit(kinematics):
    rng = np.random.default_rng(4)
    plain = copy.deepcopy(kinematics)
    plain._table = None  # read frame by frame (the fallback)
    for _ in range(3):
        q = _random_q(kinematics.model, rng)
        for a, b in zip(kinematics.poses(q), plain.poses(q), strict=True):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(kinematics.update(q), plain.update(q), strict=True):
            np.testing.assert_array_equal(a, b)
        base = q[:3].copy()
        np.testing.assert_array_equal(kinematics.stacked_jacobian(base), plain.stacked_jacobian(base))
        kinematics.update_jacobian(q)
        plain.update_jacobian(q)
        np.testing.assert_array_equal(kinematics.stacked_jacobian(base), plain.stacked_jacobian(base))


def test_a_deep_copy_reads_its_own_data(kinematics):
    rng = np.random.default_rng(5)
    q1, q2 = _random_q(kinematics.model, rng), _random_q(kinematics.model, rng)
    twin = copy.deepcopy(kinematics)
    assert twin._table is not None and twin.data is not kinematics.data
    positions, rotations = (np.array(a) for a in twin.poses(q1))
    kinematics.poses(q2)  # the original moves: the copy must not
    np.testing.assert_array_equal(twin.poses(q1)[0], positions)
    fresh = FrameKinematics(
        kinematics.robot,
        [kinematics.model.frames[i].name for i in kinematics.position_ids],
        [kinematics.model.frames[i].name for i in kinematics.orientation_ids],
    )
    expected = fresh.poses(q1)
    np.testing.assert_array_equal(positions, expected[0])
    np.testing.assert_array_equal(rotations, expected[1])
    twin.update_jacobian(q1)
    fresh.update_jacobian(q1)
    np.testing.assert_array_equal(twin.stacked_jacobian(q1[:3]), fresh.stacked_jacobian(q1[:3]))
