"""The IPOPT whole-body baseline (dynik_ros.bench.ipopt_ik): casadi kinematics against pinocchio, tracking
accuracy, joint limits, warm start, the accuracy stopping rule, and its place in the Figure 7 benchmark."""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

ca = pytest.importorskip("casadi")

from dynik_ros.bench.figure7 import METHODS, available_methods, make_solver  # noqa: E402
from dynik_ros.bench.ipopt_ik import IpoptWholeBodyIK, casadi_frame_poses, rodrigues  # noqa: E402
from dynik_ros.bench.setups import load_case  # noqa: E402
from dynik_ros.core.metrics import TrackingEvaluator  # noqa: E402
from dynik_ros.core.robot_model import RobotModel  # noqa: E402
from dynik_ros.core.so3 import exp_so3, rotation_about  # noqa: E402
from dynik_ros.core.targets import FrameTarget, InvalidMeasurementError, Measurements, TargetSet  # noqa: E402
from dynik_ros.models.assets import urdf_path  # noqa: E402
from dynik_ros.retarget.registry import load_robot  # noqa: E402

# Every joint type the casadi kinematics accept besides the free-flyer and RX/RY/RZ of the human models:
# continuous about an unaligned axis (RevoluteUnboundedUnaligned), prismatic unaligned, continuous about z
# (RUBZ), prismatic along y (PY), revolute about an unaligned axis.
JOINT_ZOO = """<robot name="zoo">
  <link name="a"/><link name="b"/><link name="c"/><link name="d"/><link name="e"/><link name="f"/>
  <joint name="continuous_unaligned" type="continuous"><parent link="a"/><child link="b"/>
    <origin xyz="0.1 0.2 0.3" rpy="0.1 0.2 0.3"/><axis xyz="0 0.6 0.8"/></joint>
  <joint name="prismatic_unaligned" type="prismatic"><parent link="b"/><child link="c"/>
    <origin xyz="0.1 0 0.3" rpy="0.4 0 0.3"/><axis xyz="0.6 0 0.8"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="continuous_z" type="continuous"><parent link="c"/><child link="d"/>
    <origin xyz="0 0.2 0" rpy="0 0.5 0"/><axis xyz="0 0 1"/></joint>
  <joint name="prismatic_y" type="prismatic"><parent link="d"/><child link="e"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="revolute_unaligned" type="revolute"><parent link="e"/><child link="f"/>
    <origin xyz="0.3 0 0" rpy="0 0 0.2"/><axis xyz="0.48 0.6 0.64"/>
    <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
</robot>"""


def _pinocchio_models() -> dict[str, pin.Model]:
    return {
        "human66": RobotModel.from_urdf_file(urdf_path("human66")).model,
        "g1": load_robot("g1").robot.model,
        "icub": load_robot("icub").robot.model,  # revolute joints about unaligned axes
        "joint-zoo": pin.buildModelFromXML(JOINT_ZOO),
    }


@pytest.fixture(scope="module")
def models() -> dict[str, pin.Model]:
    return _pinocchio_models()


@pytest.mark.parametrize("name", ["human66", "g1", "icub", "joint-zoo"])
def test_casadi_kinematics_match_pinocchio_for_every_frame(models, name):
    model = models[name]
    frames = list(range(len(model.frames)))
    q = ca.SX.sym("q", model.nq)
    poses = casadi_frame_poses(model, frames, q)
    fk = ca.Function("fk", [q], [ca.horzcat(*[ca.horzcat(p, r) for p, r in poses])])
    data = model.createData()
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(4):
        # random configuration: joints over +-3 rad (limits ignored), random base pose and unit quaternion
        q_value = pin.neutral(model)
        for joint in model.joints[1:]:
            i, kind = joint.idx_q, joint.shortname()
            if kind == "JointModelFreeFlyer":
                q_value[i : i + 3] = rng.uniform(-1, 1, 3)
                quat = rng.normal(size=4)
                q_value[i + 3 : i + 7] = quat / np.linalg.norm(quat)
            elif joint.nq == 2:
                angle = rng.uniform(-3, 3)
                q_value[i : i + 2] = np.cos(angle), np.sin(angle)
            else:
                q_value[i] = rng.uniform(-3, 3)
        pin.framesForwardKinematics(model, data, q_value)
        out = np.asarray(fk(q_value))
        for k, fid in enumerate(frames):
            pose = data.oMf[fid]
            worst = max(
                worst,
                np.abs(out[:, 4 * k] - pose.translation).max(),
                np.abs(out[:, 4 * k + 1 : 4 * k + 4] - pose.rotation).max(),
            )
    assert worst < 1e-10


def test_casadi_kinematics_reject_unsupported_joints():
    model = pin.Model()
    model.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "ball")
    model.addJoint(1, pin.JointModelRX(), pin.SE3.Identity(), "hinge")
    model.addBodyFrame("tip", 2, pin.SE3.Identity(), 0)
    tip = model.getFrameId("tip")
    with pytest.raises(ValueError, match="'ball'.*JointModelSpherical"):
        casadi_frame_poses(model, [tip], ca.SX.sym("q", model.nq))


def test_rodrigues_matches_exp_so3_and_is_smooth_at_zero():
    theta = ca.SX.sym("theta", 3)
    rot = ca.Function("rot", [theta], [rodrigues(theta)])
    for phi in ([0.0, 0.0, 0.0], [1e-4, -2e-3, 3e-3], [5e-3, 0.0, 0.0], [0.3, -1.2, 2.0]):
        assert np.abs(np.asarray(rot(phi)) - exp_so3(np.array(phi))).max() < 1e-15
    # first derivatives at 0 (the warm start of every solve): d exp / d theta_i = S(e_i)
    first = ca.Function("rodrigues_jacobian", [theta], [ca.jacobian(ca.vec(rodrigues(theta)), theta)])
    basis = [np.asarray(ca.DM(ca.skew(e))).reshape(-1, order="F") for e in np.eye(3)]
    assert np.abs(np.asarray(first(np.zeros(3))) - np.stack(basis, axis=1)).max() < 1e-15
    # second derivatives: finite at 0, continuous across the series / closed-form switch at |theta| = 1e-2
    cost = ca.sumsqr(rodrigues(theta) - rotation_about("x", 0.3))
    second = ca.Function("rodrigues_hessian", [theta], [ca.hessian(cost, theta)[0]])
    assert np.all(np.isfinite(np.asarray(second(np.zeros(3)))))
    axis = np.array([0.48, 0.6, 0.64])
    below, above = (np.asarray(second(1e-2 * (1 + d) * axis)) for d in (-1e-7, 1e-7))
    assert np.abs(below - above).max() < 1e-6


@pytest.fixture(scope="module")
def walking():
    return load_case("human66", "walking", 2.0, 60.0)


@pytest.fixture(scope="module")
def walking_run(walking):
    """IPOPT IK over 2 s of Human66 walking at 60 Hz: the solver, and per sample (q, v, info)."""
    ik = IpoptWholeBodyIK(walking.robot, walking.targets, q0=walking.q0)
    dt = float(walking.times[1] - walking.times[0])
    trace = []
    for m in walking.measurements:
        q, v = ik.step(m, dt)
        trace.append((q.copy(), v.copy(), dataclasses.replace(ik.info)))
    return ik, trace


def test_tracks_human66_walking_exactly_after_the_first_second(walking, walking_run):
    _, trace = walking_run
    evaluator = TrackingEvaluator(walking.robot, walking.targets)
    later = [k for k, t in enumerate(walking.times) if t - walking.times[0] >= 1.0]
    errors = [evaluator.evaluate(trace[k][0], trace[k][1], walking.measurements[k]).mnte for k in later]
    assert np.mean(errors) < 1e-8
    assert all(info.converged for _, _, info in trace)
    assert max(info.max_residual for _, _, info in trace) < 1e-4


def test_ipopt_stops_on_pose_accuracy(walking, walking_run):
    # every sample ends by the accuracy callback, not by IPOPT's own (much tighter) KKT tolerance
    infos = [info for _, _, info in walking_run[1]]
    assert all(info.status == "User_Requested_Stop" for info in infos)
    assert np.mean([info.iterations for info in infos[1:]]) <= 3
    # the warm start itself is checked (iteration 0): an already accurate pose costs no iteration
    ik = IpoptWholeBodyIK(walking.robot, walking.targets, q0=walking_run[1][-1][0])
    q, v = ik.step(walking.measurements[-1], 1 / 60)
    assert ik.info.iterations == 0 and ik.info.converged
    assert np.allclose(q, walking_run[1][-1][0], rtol=0, atol=1e-15) and np.abs(v).max() < 1e-12


def test_joint_limits_are_respected(walking, walking_run):
    robot = walking.robot
    for q, _, _ in walking_run[1]:
        s = q[7:]
        assert np.all(s >= robot.lower) and np.all(s <= robot.upper)


def test_velocity_is_the_finite_difference_of_consecutive_solutions(walking, walking_run):
    _, trace = walking_run
    dt = float(walking.times[1] - walking.times[0])
    (q0, _, _), (q1, v1, _) = trace[10], trace[11]
    assert np.allclose(v1, pin.difference(walking.robot.model, q0, q1) / dt, atol=1e-12)


def test_warm_start_needs_fewer_iterations_than_a_cold_start(walking, walking_run):
    _, trace = walking_run
    k = 90
    warm = IpoptWholeBodyIK(walking.robot, walking.targets, q0=trace[k - 1][0])
    warm.step(walking.measurements[k], 1 / 60)
    cold = IpoptWholeBodyIK(walking.robot, walking.targets, q0=walking.q0)
    cold.step(walking.measurements[k], 1 / 60)
    assert warm.info.converged and cold.info.converged
    assert warm.info.iterations < cold.info.iterations


def test_cold_start_far_from_the_target_does_not_converge_to_a_flipped_link():
    # Running starts with the right arm ~100 deg from the neutral pose: sk(.)^vee would also vanish with the
    # arm turned by 180 deg; the continuation must land on the true pose.
    case = load_case("human66", "running", 0.1, 60.0)
    ik = IpoptWholeBodyIK(case.robot, case.targets, q0=case.q0)
    q, v = ik.step(case.measurements[0], 1 / 60)
    assert ik.info.stages > 1 and ik.info.converged
    assert TrackingEvaluator(case.robot, case.targets).evaluate(q, v, case.measurements[0]).mnte < 1e-8


def test_a_flipped_link_is_not_accurate(walking, walking_run):
    ik, trace = walking_run
    q = trace[-1][0]
    positions, rotations = ik.kinematics.poses(q)
    flipped = rotations.copy()
    flipped[-1] = rotation_about("z", np.pi) @ flipped[-1]  # sk(R* R^T)^vee = 0, yet 180 deg off
    base_rotation = walking.robot.split(q)[1]
    x = np.concatenate((q[:3], np.zeros(3), q[7:]))
    accurate, worst = ik._accurate(x, ik._parameters(base_rotation, positions, flipped))
    assert float(worst) < 1e-12 and not bool(accurate)
    accurate, _ = ik._accurate(x, ik._parameters(base_rotation, positions, rotations))
    assert bool(accurate)


def test_fixed_base_model():
    robot = RobotModel.from_urdf_file(urdf_path("human66"), floating_base=False)
    arm = ["RightUpperArm", "RightForeArm", "RightHand"]
    targets = TargetSet([FrameTarget(f, position=(f == "RightHand")) for f in arm])
    s = robot.neutral_configuration()
    s = np.clip(s + np.random.default_rng(3).uniform(-0.3, 0.3, s.size), robot.lower, robot.upper)
    ik_for_goal = IpoptWholeBodyIK(robot, targets)
    positions, rotations = ik_for_goal.kinematics.poses(s)
    ik = IpoptWholeBodyIK(robot, targets)
    q, _ = ik.step(Measurements(positions, rotations), 0.01)
    assert q.shape == (robot.nq,) and ik.info.converged


def test_non_finite_measurements_are_rejected(walking):
    ik = IpoptWholeBodyIK(walking.robot, walking.targets, q0=walking.q0)
    m = walking.measurements[0]
    bad = Measurements(m.positions.copy(), m.rotations.copy(), m.linear_velocities, m.angular_velocities)
    bad.positions[0, 1] = np.nan
    with pytest.raises(ValueError, match="not finite") as error:
        ik.step(bad, 1 / 60)
    assert isinstance(error.value, InvalidMeasurementError)
    assert np.array_equal(ik.q, walking.q0)


def test_registered_in_the_figure7_benchmark(walking):
    assert "whole-body-ipopt" in METHODS and "whole-body-ipopt" in available_methods()
    solver = make_solver("whole-body-ipopt", walking.robot, walking.targets, walking.q0)
    assert isinstance(solver, IpoptWholeBodyIK) and solver.tolerance == 1e-4


def test_dynik_bench_runs_the_ipopt_method(capsys):
    from dynik_ros.bench.cli import main

    argv = ["--models", "human66", "--scenarios", "walking", "--methods", "dynamical", "whole-body-ipopt"]
    assert main(argv + ["--duration", "0.5", "--memory-steps", "0"]) == 0
    table = capsys.readouterr().out
    assert "whole-body-ipopt" in table and "nan" not in table.split("issue targets")[0]
