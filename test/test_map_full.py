"""The seed's full MAP form (eq. 14-23, sparse): the same estimates as the compact form and the truth."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.estimation.map_dynamics import MapCovariances, MapDynamicsEstimator, plain_inverse_dynamics
from dynik_ros.estimation.map_full import FullMapDynamicsEstimator
from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth

FEET = ("RightFoot", "LeftFoot")


def _rms(x) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


@pytest.mark.parametrize("kind", ["human66", "human48"])
def test_full_form_meets_the_targets_and_agrees_with_the_compact_form(kind):
    robot, truth = human_dynamics_truth("walking", 1.1, 20.0, kind=kind)
    full = FullMapDynamicsEstimator(robot, truth.links, FEET)
    compact = MapDynamicsEstimator(robot, truth.links, FEET)
    assert full.size == 12 * (robot.model.njoints - 1) + 7 * robot.n_joints  # eq. 14
    tau, wrenches, nu_dot, differences = [], [], [], []
    for k in range(len(truth.times)):
        args = (truth.link_accelerations[k], truth.a[k, 6:], truth.wrenches[k], truth.contacts[k])
        e = full.estimate(truth.q[k], truth.v[k], *args)
        tau.append(e.tau)
        wrenches.append(e.wrenches)
        nu_dot.append(e.nu_dot)
        differences.append(e.tau - compact.estimate(truth.q[k], truth.v[k], *args).tau)
    peak = np.abs(truth.tau).max()
    assert _rms(np.array(tau) - truth.tau) <= 0.01 * peak
    assert _rms(np.array(wrenches) - truth.wrenches) <= 0.01 * 75.0 * 9.81
    assert _rms(np.array(nu_dot) - truth.a) < 1e-3
    assert _rms(differences) < 1e-4  # two forms of eq. 1, one estimate


def test_full_form_with_noise_beats_plain_inverse_dynamics():
    robot, truth = human_dynamics_truth("walking", 1.1, 20.0)
    rng = np.random.default_rng(3)
    n = len(truth.times)
    link_acc = truth.link_accelerations + np.concatenate(
        (rng.normal(0, 0.1, (n, 23, 3)), rng.normal(0, 0.5, (n, 23, 3))), axis=2
    )
    joint_acc = truth.a[:, 6:] + rng.normal(0, 1.0, (n, robot.n_joints))
    shoes = truth.wrenches + np.concatenate(
        (rng.normal(0, 5.0, (n, 2, 3)), rng.normal(0, 1.0, (n, 2, 3))), axis=2
    )
    cov = MapCovariances(
        linear_acceleration=0.01, angular_acceleration=0.25, joint_acceleration=1.0, force=25.0, moment=1.0
    )
    full = FullMapDynamicsEstimator(robot, truth.links, FEET, cov)
    tau = np.array(
        [
            full.estimate(truth.q[k], truth.v[k], link_acc[k], joint_acc[k], shoes[k], truth.contacts[k]).tau
            for k in range(n)
        ]
    )
    plain = np.array(
        [
            plain_inverse_dynamics(
                robot, truth.q[k], truth.v[k], "Pelvis", link_acc[k, 0], joint_acc[k], FEET, shoes[k]
            )
            for k in range(n)
        ]
    )
    assert _rms(tau - truth.tau) < 0.5 * _rms(plain - truth.tau)
