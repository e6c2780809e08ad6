"""The IK step's per-call shortcuts of session 34 give the answers of the plain formulas they replaced, bit
for bit: the log residual in Python floats, the placement gathers by flat indices, the QP's diagonal added
through a view, the predicted base rotation's exponential from floats, the columns at bounds by one nonzero,
numpy's kernels called without their wrappers (small_arrays). Each plain formula is the code as it was before
the shortcut."""

from __future__ import annotations

import copy

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.base_integration import integrate_rotation
from dynik_ros.core.dynamical_ik import DynamicalIK
from dynik_ros.core.floor_rows import FloorConfig, FloorRows, points_of_feet
from dynik_ros.core.frame_kinematics import FrameKinematics, pose_residual, to_pinocchio_velocity
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.small_arrays import einsum, matrix3, vector
from dynik_ros.core.so3 import exp_so3, log_residual_rows, orientation_log_residual_world, transposed_times
from dynik_ros.core.targets import FrameTarget
from dynik_ros.core.velocity_qp import QPSettings, VelocityQP
from dynik_ros.retarget import Retargeter
from dynik_ros.retarget.registry import load_robot


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values (NaN where NaN) and the same signs of zero."""
    return (
        a.shape == b.shape
        and np.array_equal(a, b, equal_nan=True)
        and np.array_equal(np.signbit(a), np.signbit(b))
    )


def _plain_pose_residual(positions, rotations, target_positions, target_rotations) -> np.ndarray:
    """``pose_residual(..., rotation_log=True)`` as it was: the numpy log residual, concatenated."""
    return np.concatenate(
        (
            (target_positions - positions).reshape(-1),
            orientation_log_residual_world(rotations, target_rotations).reshape(-1),
        )
    )


def test_the_log_residual_in_floats_is_the_numpy_formula():
    """Batches of 1-16 targets with every mix of tiny (the series), small, ordinary and obtuse angles (the
    floats decline those), rotations read through a strided view as the step reads them, and a NaN: the
    numpy residual's values and signs of zero; the floats themselves decided most batches."""
    rng = np.random.default_rng(34)
    taken = series = 0
    for trial in range(600):
        n = int(rng.integers(1, 17))
        model = exp_so3(rng.normal(size=(n, 3)) * 2.0)
        table = np.zeros((n, 12))  # the placement table's layout: rotation row-major, then translation
        table[:, :9] = model.reshape(n, 9)
        strided = table[:, :9].reshape(-1, 3, 3)
        if trial % 4 == 0:
            scales = [1e-9, 1e-7, 1e-5, 1e-3, 0.3, 1.5, 2.0]
        elif trial % 4 == 1:
            scales = [1e-9, 1e-7, 1e-6, 3e-5]  # all within the series' reach
        else:
            scales = [1e-3, 0.05, 0.3, 1.0, 1.5]
        angles = rng.choice(scales, size=n) * rng.uniform(0.5, 1.0, size=n)
        axes = rng.normal(size=(n, 3))
        target = exp_so3(angles[:, None] * axes / np.linalg.norm(axes, axis=1, keepdims=True)) @ model
        positions, target_positions = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
        if trial == 7:
            target[0, 1, 2] = np.nan
        for r_model in (model, strided):
            got = pose_residual(positions, r_model, target_positions, target, rotation_log=True)
            plain = _plain_pose_residual(positions, r_model, target_positions, target)
            assert _bitwise_equal(got, plain), trial
        rows = log_residual_rows(target @ np.swapaxes(model, -1, -2))
        taken += rows is not None
        series += rows is not None and angles.max() < 1e-4
    assert taken > 300 and series > 50  # the floats' own paths were checked, not only the numpy one


def _g1_kinematics():
    """G1 (floating base) with the retargeting map's floor points and a few target frames."""
    rt = Retargeter.from_config("g1")
    robot = rt.robot
    positions = ["pelvis", "left_ankle_roll_link", "right_ankle_roll_link"]
    orientations = ["pelvis", "torso_link", "left_ankle_roll_link", "right_wrist_yaw_link"]
    floor = FloorConfig(points_of_feet(rt.config.feet, rt.config.balance.sole_half_width))
    return robot, FrameKinematics(robot, positions, orientations), FloorRows(robot, floor)


def test_placement_gathers_by_flat_indices_are_the_gathers_by_rows_and_columns():
    """The frame poses (``update``, ``poses``), the predicted positions (``update_jacobian``) and the floor
    points' origins and levers read through the placement table's flat view equal the reads by rows and
    columns, to the bit, at random configurations; a deep copy (a shadow IK's) reads its own data."""
    robot, kinematics, floor = _g1_kinematics()
    assert kinematics._table_flat is not None  # the flat view is there to be checked
    rng = np.random.default_rng(35)
    twin = copy.deepcopy(kinematics)
    for trial in range(20):
        q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
        q[q.size - robot.n_joints :] = rng.uniform(robot.lower, robot.upper)
        for k in (kinematics, twin):
            positions, rotations = k.update(q) if trial % 2 else k.poses(q)
            plain = k._table[k._pose_gather]
            assert _bitwise_equal(positions, plain[: k._n_pos, 9:])
            assert _bitwise_equal(rotations, plain[k._n_pos :, :9].reshape(-1, 3, 3))
            k.update_jacobian(q)
            assert _bitwise_equal(k._positions_all, k._table[k._position_gather])
        origins, levers = floor._levers(kinematics.data)
        assert floor._table_flat is not None
        plain = floor._table[floor._gather]
        assert _bitwise_equal(origins, plain[:, 9:])
        assert _bitwise_equal(levers, np.einsum("nij,nj->ni", plain[:, :9].reshape(-1, 3, 3), floor._offsets))


def _plain_task(qp: VelocityQP, jacobian, target_velocity, weights, regularization):
    """``VelocityQP.solve``'s ``(P, q)`` as it was: the diagonal added through a gather and a scatter of its
    flat indices."""
    e = qp.expansion
    if e is not None:
        jacobian = jacobian @ e
    weighted = jacobian * (weights**2)[:, None]
    hessian = jacobian.T @ weighted
    flat = hessian.reshape(-1)
    diagonal_indices = np.arange(qp.n) * (qp.n + 1)
    flat[diagonal_indices] += qp.settings.damping
    gradient = -(weighted.T @ target_velocity)
    if regularization is not None:
        diagonal, target = regularization
        if e is None:
            flat[diagonal_indices] += diagonal
            gradient -= diagonal * target
        else:
            flat[diagonal_indices] += qp._hessian_weights.T @ diagonal
            gradient -= e.T @ (diagonal * target)
    return hessian, gradient


def test_the_qp_cost_with_its_diagonal_viewed_is_the_indexed_formula():
    """Random Jacobians, weights, targets and diagonal regularizations, with and without an expansion (locked
    and mimic joints): ``P`` and ``q`` of the QP as the indexed formula makes them, to the bit."""
    rng = np.random.default_rng(36)
    m, nv = 24, 10
    expansion = np.zeros((nv, 8))
    expansion[:6, :6] = np.eye(6)
    expansion[6, 6], expansion[7, 7], expansion[8, 7] = 1.0, 1.0, -0.5  # a locked joint, a follower
    constraint = np.hstack((np.zeros((4, 6)), np.eye(4)))
    for e in (None, expansion):
        qp = VelocityQP(np.ones((m, nv), dtype=bool), constraint, QPSettings(), e)
        for trial in range(50):
            jacobian = rng.normal(size=(m, nv))
            velocity, weights = rng.normal(size=m), rng.uniform(0.0, 3.0, size=m)
            regularization = (rng.uniform(0.0, 5.0, nv), rng.normal(size=nv)) if trial % 2 else None
            lower, upper = -np.ones(4), np.ones(4)
            qp.solve(jacobian, velocity, weights, lower, upper, regularization)
            hessian, gradient = _plain_task(qp, jacobian, velocity, weights, regularization)
            assert _bitwise_equal(qp._task[0], hessian) and _bitwise_equal(qp._task[1], gradient)


def _random_g1_poses(seed: int, count: int = 300):
    """G1 on a floating base with two targets, put ``count`` times at a random base pose and joint
    configuration within the limits: yields ``(robot, ik, rng)`` after each, ``rng`` seeded with ``seed``."""
    robot = RobotModel.from_urdf_file(load_robot("g1").urdf_path, floating_base=True)
    ik = DynamicalIK(robot, [FrameTarget("pelvis", position=True), FrameTarget("torso_link")])
    rng = np.random.default_rng(seed)
    for _ in range(count):
        ik.base_position, ik.base_rotation = rng.normal(size=3), exp_so3(rng.normal(size=3))
        ik.joint_positions = rng.uniform(robot.lower, robot.upper)
        yield robot, ik, rng


def test_the_predicted_configuration_from_floats_is_the_array_formula():
    """``StepIntegration.advanced`` (the step's predicted configuration): base rotation moved by the
    exponential of ``h`` times the mean's angular rows made from their floats, for angular velocities from
    1e-12 to 30 rad/s (the series branch too) and random poses: ``exp_so3``'s array formula, to the bit."""
    for robot, ik, rng in _random_g1_poses(seed=37):
        mean = rng.normal(size=robot.nv) * 10.0 ** rng.uniform(-12, 1.5)
        h = 1.0 / rng.uniform(20.0, 1000.0)
        position, q = ik.advanced(mean, h)
        plain_position = ik.base_position + h * mean[:3]
        rotation = exp_so3(h * mean[3:6]) @ ik.base_rotation
        plain = robot.join(plain_position, rotation, ik.joint_positions + h * mean[6:])
        assert _bitwise_equal(position, plain_position) and _bitwise_equal(q, plain)


def test_the_integrated_step_from_one_product_is_the_sliced_formula():
    """``StepIntegration._integrate`` (one product ``dt m`` for the base position and the joints): random
    poses, means from 1e-12 to 30 and history weights, joints near their limits: the base position, rotation
    (eq. 14) and clipped joints of the formula that multiplies each slice of the mean, to the bit."""
    for robot, ik, rng in _random_g1_poses(seed=40):
        ik._corrector = np.array([rng.uniform(0.3, 1.0), 0.2])
        ik._carried_velocity = rng.normal(size=robot.nv)
        nu = rng.normal(size=robot.nv) * 10.0 ** rng.uniform(-12, 1.5)
        dt = 1.0 / rng.uniform(20.0, 1000.0)
        start = (ik.base_position, ik.base_rotation, ik.joint_positions)
        mean = ik._corrector[0] * nu + ik._carried_velocity
        position = start[0] + dt * mean[:3]
        rotation = integrate_rotation(
            start[1], mean[3:6], dt, ik.config.orthonormality_gain, ik.config.rotation_integration
        )
        joints = np.clip(start[2] + dt * mean[6:], robot.lower, robot.upper)
        ik._integrate(nu.copy(), dt)
        assert _bitwise_equal(ik.base_position, position) and _bitwise_equal(ik.base_rotation, rotation)
        assert _bitwise_equal(ik.joint_positions, joints)


def test_the_columns_at_bounds_by_one_nonzero_are_the_counted_ones():
    """``_columns_at_bounds`` (joints whose ``nu_k`` ended on a bound of the mean): random bounds, some at the
    velocity limit, and velocities on, near and off them: the columns of the plain count and flatnonzero."""
    robot = RobotModel.from_urdf_file(load_robot("g1").urdf_path, floating_base=True)
    ik = DynamicalIK(robot, [FrameTarget("pelvis", position=True), FrameTarget("torso_link")])
    rng = np.random.default_rng(38)
    nb, n, vmax = robot.base_dofs, robot.n_joints, robot.velocity_limit
    found = 0
    for trial in range(300):
        ik._lower[:n] = np.where(rng.random(n) < 0.3, -vmax, -rng.uniform(0.1, 1.0, n) * vmax)
        ik._upper[:n] = np.where(rng.random(n) < 0.3, vmax, rng.uniform(0.1, 1.0, n) * vmax)
        pick = rng.integers(0, 3, n) if trial % 4 > 1 else np.full(n, 2)  # 1 in 4: none on a bound
        if trial % 4 == 1:  # one joint on a bound
            pick[rng.integers(n)] = rng.integers(0, 2)
        ik.nu[nb:] = np.where(pick == 0, ik._lower[:n], np.where(pick == 1, ik._upper[:n], 0.0))
        ik.nu[nb:] += rng.normal(size=n) * 10.0 ** rng.uniform(-9, -5)
        lower, upper = ik._lower[:n], ik._upper[:n]
        s_dot = ik.nu[nb:]
        slack = 1e-6 * (1.0 + np.maximum(np.abs(lower), np.abs(upper)))
        active = ((s_dot >= upper - slack) & (upper < vmax)) | ((s_dot <= lower + slack) & (lower > -vmax))
        plain = nb + np.flatnonzero(active) if np.count_nonzero(active) else None
        got = ik._columns_at_bounds()
        assert (got is None and plain is None) or np.array_equal(got, plain)
        found += got is not None
    assert 0 < found < 300


def test_the_small_array_helpers_are_numpys_public_calls():
    """``small_arrays``: ``vector`` and ``matrix3`` make what ``np.array`` makes of the same floats (a new
    float64 array, C-ordered, rows as given), ``einsum`` gives ``np.einsum``'s values for the step's
    subscripts on random stacks, to the bit."""
    rng = np.random.default_rng(39)
    for _ in range(200):
        values = (rng.normal(size=int(rng.integers(1, 60))) * 10.0 ** rng.uniform(-8, 8)).tolist()
        got = vector(values)
        assert _bitwise_equal(got, np.array(values)) and got.dtype == np.float64 and got.flags.owndata
        nine = tuple(rng.normal(size=9).tolist())
        got = matrix3(nine)
        assert _bitwise_equal(got, np.array((nine[:3], nine[3:6], nine[6:]))) and got.flags.c_contiguous
        rows = rng.normal(size=(int(rng.integers(1, 20)), 3))
        assert _bitwise_equal(einsum("ij,ij->i", rows, rows), np.einsum("ij,ij->i", rows, rows))
        rotations, offsets = rng.normal(size=(8, 3, 3)), rng.normal(size=(8, 3))
        plain = np.einsum("nij,nj->ni", rotations, offsets)
        assert _bitwise_equal(einsum("nij,nj->ni", rotations, offsets), plain)


class _GivenSolution:
    """A stand-in for DAQP that answers a given ``x``."""

    iterations = 0

    def __init__(self, x):
        self.x = x

    def solve(self, *args):
        return self.x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the infinite x's inf - inf
def test_the_rows_miss_in_one_reduction_is_the_larger_of_the_two():
    """``_active_set``'s miss (``rows_met_within``) and whether the shortcut is tried next, from one reduction
    of the rows' distances below and above their bounds: the plain two reductions' values, for solutions
    inside, on and outside random bounds (some infinite), and for an infinite ``x`` (a NaN distance)."""
    rng = np.random.default_rng(40)
    n, m = 8, 12
    constraint = rng.normal(size=(m, n))
    qp = VelocityQP(np.ones((6, n), dtype=bool), constraint, QPSettings())
    for trial in range(300):
        x = rng.normal(size=n)
        rows = constraint @ x
        lower = rows - rng.choice([-1e-3, 0.0, 1e-12, 0.5], size=m)
        upper = np.where(rng.random(m) < 0.2, np.inf, rows + rng.choice([-1e-3, 0.0, 0.5], size=m))
        if trial % 3 == 0:  # every row inside
            lower, upper = rows - rng.uniform(1e-9, 1.0, m), rows + rng.uniform(1e-9, 1.0, m)
        if trial % 50 == 0:
            x = x.copy()
            x[0] = np.inf
        qp._dense = _GivenSolution(x)
        solution = qp._active_set(np.eye(n), np.zeros(n), constraint, lower, upper)
        rows = constraint @ x
        below, above = float((lower - rows).max()), float((rows - upper).max())
        assert solution.rows_met_within == max(0.0, below, above) or (
            np.isnan(solution.rows_met_within) and np.isnan(max(0.0, below, above))
        )
        assert qp._free_last == (max(below, above) < -qp.settings.shortcut_tolerance)


def test_the_pinocchio_velocity_in_floats_is_the_matrix_vector_formula():
    """``to_pinocchio_velocity`` (the step's ``v``): ``R_B^T`` times the linear and the angular base rows
    summed in floats, for random rotations, velocities from 1e-9 to 1e3 and exact zeros: numpy's ``R.T @ v``
    to the bit (the joints copied as they are), and the base rotation's ``R^T omega`` the same way."""
    rng = np.random.default_rng(41)
    for trial in range(2000):
        rotation = exp_so3(rng.normal(size=3)) if trial % 2 else rng.normal(size=(3, 3))
        nu = rng.normal(size=12) * 10.0 ** rng.uniform(-9, 3)
        if trial % 7 == 0:
            nu[rng.integers(0, 6, size=2)] = 0.0
            rotation[rng.integers(3), rng.integers(3)] = -0.0
        plain = np.array(nu)
        plain[:3], plain[3:6] = rotation.T @ nu[:3], rotation.T @ nu[3:6]
        assert _bitwise_equal(to_pinocchio_velocity(nu, rotation, True), plain)
        omega, dt = nu[3:6], 1.0 / rng.uniform(20.0, 1000.0)
        body = rotation.T @ omega  # integrate_rotation's R^T omega, as it was
        (x, y, z), got = body.tolist(), integrate_rotation(rotation, omega, dt, 10.0, "exp")
        assert _bitwise_equal(np.array(transposed_times(rotation.tolist(), *omega.tolist())), body)
        assert got.shape == (3, 3) and x == body[0] and y == body[1] and z == body[2]
