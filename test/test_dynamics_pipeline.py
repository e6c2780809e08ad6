"""The ROS-free estimation chain of dynamics_node (suit link states -> Human66 state -> contacts -> MAP)
against the synthetic walk's inverse-dynamics ground truth."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.estimation.contact_classification import state_from_flags
from dynik_ros.estimation.dynamics_pipeline import HumanDynamicsPipeline, PipelineConfig
from dynik_ros.estimation.suit_kinematics import SuitKinematics, SuitSample
from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
from dynik_ros.retarget.human import human_model, synthetic_human_motion


def _run(rate: float, config: PipelineConfig | None = None, shoes: bool = True):
    robot, truth = human_dynamics_truth("walking", 1.1, rate)
    motion = synthetic_human_motion("walking", 1.1, rate)
    assert list(motion.links) == list(truth.links)
    pipeline = HumanDynamicsPipeline(robot, config)
    outputs = []
    for k in range(len(motion.times)):
        sample = SuitSample(
            motion.times[k],
            motion.positions[k],
            motion.rotations[k],
            motion.linear_velocities[k],
            motion.angular_velocities[k],
            k,
        )
        out = pipeline.push(sample, truth.wrenches[k] if shoes else None)
        if out is not None:
            assert out.stamp_ns == k - 1  # one sample behind
            outputs.append(out)
    index = np.array([o.stamp_ns for o in outputs])
    return truth, index, outputs


def test_suit_kinematics_recovers_the_true_state():
    truth, index, outputs = _run(60.0)
    np.testing.assert_allclose(np.array([o.q for o in outputs]), truth.q[index], atol=1e-12)
    np.testing.assert_allclose(np.array([o.v for o in outputs]), truth.v[index], atol=1e-10)


def test_pipeline_torques_converge_with_the_sample_rate():
    errors = []
    for rate in (60.0, 120.0):
        truth, index, outputs = _run(rate)
        tau = np.array([o.tau for o in outputs])
        errors.append(np.sqrt(np.mean((tau - truth.tau[index]) ** 2)))
        peak = np.abs(truth.tau).max()
        assert errors[-1] <= 0.001 * peak  # central differences of the suit's twists
        states = np.array([o.state for o in outputs])
        truth_states = np.array([state_from_flags(*c) for c in truth.contacts[index]])
        assert np.mean(states == truth_states) > 0.9 and all(o.from_shoes for o in outputs)
    assert errors[1] < errors[0] / 3  # second order: about 4x smaller at twice the rate


def test_pipeline_without_shoes_and_with_the_base_from_the_feet():
    truth, index, outputs = _run(60.0, PipelineConfig(base_velocity="contacts"), shoes=False)
    assert not any(o.from_shoes for o in outputs)
    assert all(np.all(np.isfinite(o.tau)) for o in outputs)
    # the synthetic walk's loaded foot slides, so the base twist from the feet is not the suit's
    moved = [np.abs(o.v[:6] - truth.v[i, :6]).max() for o, i in zip(outputs, index, strict=True)]
    assert max(moved) > 0.05
    with pytest.raises(ValueError, match="base_velocity"):
        PipelineConfig(base_velocity="mocap")


def test_suit_kinematics_on_human48_recovers_the_true_state():
    """Human48's joints have 1-3 axes in anatomical order: eq. 6 by Gauss-Newton, not in closed form."""
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.motion.synthetic import synthesize

    robot, truth = human_dynamics_truth("walking", 1.1, 60.0, kind="human48")
    motion = synthesize(robot, "walking", 1.1, 60.0, list(XSENS_SEGMENTS), pelvis_height(Subject()))
    kinematics = SuitKinematics.for_human(robot)
    for k in range(len(motion.times)):
        sample = SuitSample(
            motion.times[k],
            motion.positions[k],
            motion.rotations[k],
            motion.linear_velocities[k],
            motion.angular_velocities[k],
        )
        q = kinematics.configuration(sample.positions, sample.rotations)
        np.testing.assert_allclose(q, truth.q[k], atol=1e-8)
        v = kinematics.velocity(q, sample.linear_velocities, sample.angular_velocities)
        np.testing.assert_allclose(v, truth.v[k], atol=1e-8)


def test_suit_kinematics_needs_every_xsens_link():
    from dynik_ros.models.human import XSENS_JOINTS, XSENS_PARENT
    from dynik_ros.models.segments import XSENS_SEGMENTS

    links = [n for n in XSENS_SEGMENTS if n != "LeftToe"]
    with pytest.raises(ValueError, match="LeftToe"):
        SuitKinematics(human_model("human66"), links, XSENS_PARENT, XSENS_JOINTS)
