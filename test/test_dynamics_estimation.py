"""Human whole-body dynamics (issue 13, Latella et al. 2019): base velocity from contacts (eq. 7-10),
contact classification (Algorithm 1, online, kinematic) and the MAP estimator (eq. 24-25, A5-A7), against
ground truth from forward kinematics and pinocchio's inverse dynamics."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.estimation.base_velocity import BaseVelocityFromContacts
from dynik_ros.estimation.contact_classification import (
    DOUBLE,
    NONE,
    RIGHT,
    KinematicContactClassifier,
    OnlineContactClassifier,
    classify_offline,
    state_from_flags,
)
from dynik_ros.estimation.kinematic_contact import contact_sequence
from dynik_ros.estimation.map_dynamics import MapCovariances, MapDynamicsEstimator, plain_inverse_dynamics
from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth
from dynik_ros.motion.gait import PROGRAMMES
from dynik_ros.motion.synthetic import joint_trajectory
from dynik_ros.retarget.config import ContactSpec
from dynik_ros.retarget.human import human_model

FEET = ("RightFoot", "LeftFoot")


@pytest.fixture(scope="module")
def walk66():
    return human_dynamics_truth("walking", duration=2.2, rate=60.0)[1]


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


# ----------------------------------------------------------------------------- base velocity (eq. 7-10)
def _planted_base(robot, joints: np.ndarray, foot: str, placement: pin.SE3) -> np.ndarray:
    """``q`` with joint angles ``joints`` whose base puts ``foot`` at ``placement`` (world)."""
    model, data = robot.model, robot.model.createData()
    q = np.concatenate((np.zeros(3), [0, 0, 0, 1.0], joints))
    pin.framesForwardKinematics(model, data, q)
    base = placement * data.oMf[robot.frame_id(foot)].inverse()
    q[:3], q[3:7] = base.translation, pin.Quaternion(base.rotation).coeffs()
    return q


def _planted_motion(robot, foot: str, times: np.ndarray, symmetric: bool = False):
    """Joint motion of the walk programme with the base solved so that ``foot`` never moves; the true base
    twist by central differences of the base pose (+-1e-5 s). ``symmetric``: the legs only flex (hip,
    knee, ankle about y) and the left one copies the right one, so both feet stay still (a squat)."""
    programme = PROGRAMMES["walking"]
    placement = pin.SE3(pin.rpy.rpyToMatrix(0.0, 0.0, 0.3), np.array([0.2, -0.1, 0.0]))

    def joints(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q, v = joint_trajectory(robot, programme, t, 1.0)
        s, s_dot = q[:, 7:], v[:, 6:]
        if symmetric:  # sagittal leg motion only, the left leg a copy of the right one
            for name in robot.joint_names:
                if any(j in name for j in ("Hip", "Knee", "Ankle")):
                    i = robot.joint_index(name)
                    if not name.endswith("roty"):
                        s[:, i] = s_dot[:, i] = 0.0
                    elif name.startswith("jLeft"):
                        j = robot.joint_index(name.replace("Left", "Right"))
                        s[:, i], s_dot[:, i] = s[:, j], s_dot[:, j]
        return s, s_dot

    h = 1e-5
    s, s_dot = joints(times)
    s_plus, s_minus = joints(times + h)[0], joints(times - h)[0]
    q = np.array([_planted_base(robot, s[k], foot, placement) for k in range(len(times))])
    twist = np.zeros((len(times), 6))
    for k in range(len(times)):
        base = pin.XYZQUATToSE3(q[k, :7])
        plus = pin.XYZQUATToSE3(_planted_base(robot, s_plus[k], foot, placement)[:7])
        minus = pin.XYZQUATToSE3(_planted_base(robot, s_minus[k], foot, placement)[:7])
        twist[k] = (pin.log6(base.actInv(plus)).vector - pin.log6(base.actInv(minus)).vector) / (2 * h)
    return q, s_dot, twist


@pytest.mark.parametrize("foot", FEET)
def test_base_twist_from_one_planted_foot_is_the_true_one(foot):
    robot = human_model("human66")
    q, s_dot, truth = _planted_motion(robot, foot, np.linspace(0.0, 1.1, 12))
    estimator = BaseVelocityFromContacts(robot, FEET)
    flags = (foot == "RightFoot", foot == "LeftFoot")
    for k in range(len(q)):
        assert np.abs(truth[k]).max() > 0.05  # the base really moves
        np.testing.assert_allclose(estimator.estimate(q[k], s_dot[k], flags), truth[k], atol=1e-5)
    # the other foot alone is not still: its estimate is wrong
    other = (not flags[0], not flags[1])
    errors = [np.abs(estimator.estimate(q[k], s_dot[k], other) - truth[k]).max() for k in range(len(q))]
    assert max(errors) > 0.1


def test_base_twist_in_double_support_eq10():
    robot = human_model("human66")
    q, s_dot, truth = _planted_motion(robot, "RightFoot", np.linspace(0.0, 1.1, 8), symmetric=True)
    estimator = BaseVelocityFromContacts(robot, FEET)
    for k in range(len(q)):
        assert np.abs(truth[k]).max() > 0.02
        np.testing.assert_allclose(estimator.estimate(q[k], s_dot[k], (True, True)), truth[k], atol=1e-5)
    linear, angular = estimator.estimate_world(q[3], s_dot[3], (True, True))
    rotation = pin.Quaternion(q[3, 3:7]).toRotationMatrix()
    np.testing.assert_allclose(linear, rotation @ truth[3, :3], atol=1e-5)
    assert estimator.estimate(q[0], s_dot[0], (False, False)) is None
    with pytest.raises(ValueError, match="2 contact flags"):
        estimator.estimate(q[0], s_dot[0], (True,))


# ----------------------------------------------------------------------------- contact classification
def _truth_states(truth) -> np.ndarray:
    return np.array([state_from_flags(*flags) for flags in truth.contacts])


def test_algorithm1_classifies_the_walk(walk66):
    robot = human_model("human66")
    fz = walk66.vertical_forces(robot)
    states = classify_offline(fz[:, 0], fz[:, 1])
    truth = _truth_states(walk66)
    single = truth != DOUBLE
    assert np.array_equal(states[single], truth[single])  # every single-support sample right
    both_loaded = (walk66.shares > 0.3).all(axis=1)  # each foot carries more than 30 % (threshold 25 %)
    assert both_loaded.any() and np.all(states[both_loaded] == DOUBLE)
    literal = classify_offline(fz[:, 0], fz[:, 1], fraction=1.0)  # the seed's T = mean(f_RF + f_LF)
    assert np.count_nonzero(literal[single] != truth[single]) > 0.1 * np.count_nonzero(single)
    with pytest.raises(ValueError, match="equally long"):
        classify_offline(fz[:, 0], fz[:-1, 1])


def test_online_classifier_follows_the_load(walk66):
    robot = human_model("human66")
    fz = walk66.vertical_forces(robot)
    online = OnlineContactClassifier(on_fraction=0.10, off_fraction=0.05)
    states = online.run(fz[:, 0], fz[:, 1])
    weight = 75.0 * 9.81
    assert online.weight == pytest.approx(weight, rel=0.05)  # the self-tuned weight: the mean total force
    clear = ((fz == 0) | (fz > 0.15 * weight)).all(axis=1)  # away from the hysteresis band
    clear[:5] = False  # the running mean settles over the first samples
    truth = _truth_states(walk66)
    assert np.array_equal(states[clear], truth[clear])
    # hysteresis: a foot loaded at 8 % of the weight stays in contact, a new one at 8 % does not enter
    steady = OnlineContactClassifier(weight=weight)
    assert steady.update(0.5 * weight, 0.5 * weight) == DOUBLE
    assert steady.update(0.92 * weight, 0.08 * weight) == DOUBLE
    assert steady.update(weight, 0.0) == RIGHT
    assert steady.update(0.92 * weight, 0.08 * weight) == RIGHT
    assert steady.update(0.0, 0.0) == NONE


def test_kinematic_contact_shared_rule():
    spec = ContactSpec()
    heights = np.array([[0.10], [0.02], [0.05], [0.07], [0.02], [0.02]])
    speeds = np.array([[0.0], [0.1], [0.1], [0.1], [0.6], [0.3]])
    # in at 2 cm, held at 5 cm (< height_off 6 cm), out at 7 cm, not in at 0.6 m/s, in at 0.3 m/s
    flags = contact_sequence(heights, speeds, spec)[:, 0]
    assert flags.tolist() == [False, True, True, False, False, True]
    from dynik_ros.retarget import foot_contact

    assert foot_contact.next_contact is contact_sequence.__globals__["next_contact"]  # one rule, not a copy


def test_kinematic_classifier_on_a_standing_and_a_lifted_foot():
    from dynik_ros.retarget.human import human_tpose

    pose = human_tpose()
    links = list(pose)
    p = np.array([pose[n][0] for n in links])
    v = np.zeros_like(p)
    classifier = KinematicContactClassifier.for_human(links)
    assert classifier.update(p, v) == DOUBLE
    lifted = p.copy()
    for name in ("LeftFoot", "LeftToe"):
        lifted[links.index(name), 2] += 0.10
    assert classifier.update(lifted, v) == RIGHT
    with pytest.raises(ValueError, match="RightToe"):
        KinematicContactClassifier(links, (("RightFoot", "RightToe"), ("LeftFoot",)), {"RightFoot": 0.1})


# ----------------------------------------------------------------------------- MAP estimator (eq. 24-25)
def _run_map(robot, truth, shoes=True, joint_acc=None, link_acc=None, wrenches=None, covariances=None):
    estimator = MapDynamicsEstimator(robot, truth.links, FEET, covariances)
    joint_acc = truth.a[:, 6:] if joint_acc is None else joint_acc
    link_acc = truth.link_accelerations if link_acc is None else link_acc
    wrenches = truth.wrenches if wrenches is None else wrenches
    out = [
        estimator.estimate(
            truth.q[k],
            truth.v[k],
            link_acc[k],
            joint_acc[k],
            wrenches[k] if shoes else None,
            truth.contacts[k],
        )
        for k in range(len(truth.times))
    ]
    return (
        np.array([e.tau for e in out]),
        np.array([e.wrenches for e in out]),
        np.array([e.nu_dot for e in out]),
    )


@pytest.mark.parametrize("kind", ["human66", "human48"])
def test_map_noise_free_meets_the_targets(kind, walk66):
    robot, truth = (
        (human_model("human66"), walk66)
        if kind == "human66"
        else human_dynamics_truth("walking", duration=1.1, rate=30.0, kind="human48")
    )
    tau, wrenches, nu_dot = _run_map(robot, truth)
    weight = 75.0 * 9.81
    assert _rms(tau - truth.tau) <= 0.01 * np.abs(truth.tau).max()
    assert _rms(wrenches - truth.wrenches) <= 0.01 * weight
    assert _rms(nu_dot - truth.a) < 1e-3
    # without shoes the single-support wrench is still determined by the base rows of eq. 1
    tau, wrenches, _ = _run_map(robot, truth, shoes=False)
    single = truth.contacts.sum(axis=1) == 1
    assert _rms(tau[single] - truth.tau[single]) <= 0.01 * np.abs(truth.tau).max()
    assert _rms(wrenches[single] - truth.wrenches[single]) <= 0.01 * weight


def test_map_with_noise_beats_plain_inverse_dynamics(walk66):
    robot, truth = human_model("human66"), walk66
    rng = np.random.default_rng(7)
    n, links, joints = len(truth.times), len(truth.links), robot.n_joints
    sigma = {"lin": 0.1, "ang": 0.5, "joint": 1.0, "force": 5.0, "moment": 1.0}
    link_acc = truth.link_accelerations + np.concatenate(
        (rng.normal(0, sigma["lin"], (n, links, 3)), rng.normal(0, sigma["ang"], (n, links, 3))), axis=2
    )
    joint_acc = truth.a[:, 6:] + rng.normal(0, sigma["joint"], (n, joints))
    wrenches = truth.wrenches + np.concatenate(
        (rng.normal(0, sigma["force"], (n, 2, 3)), rng.normal(0, sigma["moment"], (n, 2, 3))), axis=2
    )
    covariances = MapCovariances(
        linear_acceleration=sigma["lin"] ** 2,
        angular_acceleration=sigma["ang"] ** 2,
        joint_acceleration=sigma["joint"] ** 2,
        force=sigma["force"] ** 2,
        moment=sigma["moment"] ** 2,
    )
    tau, estimated, _ = _run_map(robot, truth, True, joint_acc, link_acc, wrenches, covariances)
    plain = np.array(
        [
            plain_inverse_dynamics(
                robot, truth.q[k], truth.v[k], "Pelvis", link_acc[k, 0], joint_acc[k], FEET, wrenches[k]
            )
            for k in range(n)
        ]
    )
    assert _rms(tau - truth.tau) < 0.5 * _rms(plain - truth.tau)
    assert _rms(estimated - truth.wrenches) < _rms(wrenches - truth.wrenches)  # the shoes denoised too


def test_map_refuses_bad_input(walk66):
    robot = human_model("human66")
    with pytest.raises(ValueError, match="'force' must be a positive"):
        MapCovariances(force=0.0)
    estimator = MapDynamicsEstimator(robot, walk66.links)
    with pytest.raises(ValueError, match="link accelerations must be"):
        estimator.estimate(walk66.q[0], walk66.v[0], np.zeros((3, 6)))
    with pytest.raises(ValueError, match="2 contact flags"):
        estimator.estimate(walk66.q[0], walk66.v[0], contacts=(True,))
    # an unmeasured link (NaN row) or shoe is skipped, not propagated
    acc = walk66.link_accelerations[0].copy()
    acc[5] = np.nan
    wrenches = walk66.wrenches[0].copy()
    wrenches[1] = np.nan
    out = estimator.estimate(walk66.q[0], walk66.v[0], acc, walk66.a[0, 6:], wrenches, walk66.contacts[0])
    assert np.all(np.isfinite(out.tau)) and np.all(np.isfinite(out.wrenches))


def test_map_with_the_torques_in_closed_form_is_the_full_map(walk66):
    """The estimator solves for (nu_dot, f) with the torques eliminated; the same MAP written out with all
    of d = (nu_dot, tau, f) (eq. A5-A7, 150 unknowns) gives the same estimate."""
    import pinocchio as pin

    robot, truth = human_model("human66"), walk66
    cov = MapCovariances(linear_acceleration=0.01, joint_acceleration=1.0, force=25.0, prior_torque=1e4)
    estimator = MapDynamicsEstimator(robot, truth.links, FEET, cov)
    rng = np.random.default_rng(5)
    model, data = robot.model, robot.model.createData()
    nv, n = robot.nv, robot.n_joints
    for k in (3, 40):
        q, v = truth.q[k], truth.v[k]
        link_acc = truth.link_accelerations[k] + rng.normal(0, 0.1, truth.link_accelerations[k].shape)
        link_acc[4] = np.nan  # a link not measured
        joint_acc = truth.a[k, 6:] + rng.normal(0, 1.0, n)
        shoes = truth.wrenches[k] + rng.normal(0, 5.0, (2, 6))
        contacts = (True, False)
        got = estimator.estimate(q, v, link_acc, joint_acc, shoes, contacts)
        # the full system, written out
        mass = pin.crba(model, data, q)
        mass = np.triu(mass) + np.triu(mass, 1).T
        bias = pin.nonLinearEffects(model, data, q, v)
        gravity_a = np.zeros(nv)
        gravity_a[:3] = pin.Quaternion(q[3:7]).toRotationMatrix().T @ np.array([0, 0, 9.81])
        pin.forwardKinematics(model, data, q, v, gravity_a)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        local = pin.ReferenceFrame.LOCAL
        size = nv + n + 12
        d_matrix = np.zeros((nv, size))
        d_matrix[:, :nv], d_matrix[6:, nv : nv + n] = mass, -np.eye(n)
        for f, name in enumerate(FEET):
            d_matrix[:, nv + n + 6 * f : nv + n + 6 * f + 6] = -pin.getFrameJacobian(
                model, data, robot.frame_id(name), local
            ).T
        prior = np.concatenate(
            (np.full(nv, 1 / cov.prior_acceleration), np.full(n, 1 / cov.prior_torque),
             np.full(6, 1 / cov.prior_wrench), np.full(6, 1 / cov.no_contact_wrench))
        )  # fmt: skip
        rows, weights, measured = [], [], []
        for i, name in enumerate(truth.links):
            if i == 4:
                continue
            fid = robot.frame_id(name)
            row = np.zeros((6, size))
            row[:, :nv] = pin.getFrameJacobian(model, data, fid, local)
            rows.append(row)
            weights += [1 / cov.linear_acceleration] * 3 + [1 / cov.angular_acceleration] * 3
            measured.append(link_acc[i] - pin.getFrameClassicalAcceleration(model, data, fid, local).vector)
        rows.append(np.eye(size)[6:nv])
        weights += [1 / cov.joint_acceleration] * n
        measured.append(joint_acc)
        rows.append(np.eye(size)[nv + n :])
        weights += ([1 / cov.force] * 3 + [1 / cov.moment] * 3) * 2
        measured.append(shoes.ravel())
        y_matrix, w, y = np.vstack(rows), np.array(weights), np.concatenate(measured)
        precision = d_matrix.T @ d_matrix / cov.model + np.diag(prior) + y_matrix.T @ (w[:, None] * y_matrix)
        d_map = np.linalg.solve(precision, -d_matrix.T @ bias / cov.model + y_matrix.T @ (w * y))
        np.testing.assert_allclose(got.nu_dot, d_map[:nv], atol=1e-7)
        np.testing.assert_allclose(got.tau, d_map[nv : nv + n], atol=1e-6)
        np.testing.assert_allclose(got.wrenches.ravel(), d_map[nv + n :], atol=1e-6)
