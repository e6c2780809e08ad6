"""The IK step's per-call shortcuts of issue 9's speed target (session 32) give the answers of the plain
formulas they replaced, bit for bit: the log residual's common case (no angle small or obtuse) decided by two
reductions, the base rotation's step built from floats in one array, the stacked Jacobian's two sets of skews
gathered at once and its support mask as floats, the secant's twists read as one 6-vector per frame, and the
floor rows' ``J_z`` written in place. Each plain formula is the code as it was before the shortcut."""

from __future__ import annotations

import copy

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.base_integration import integrate_rotation, orthonormality_correction
from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.frame_kinematics import _MINUS_SKEW, FrameKinematics
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.so3 import exp_so3, orientation_log_residual_world, vee_of_skew_part
from dynik_ros.core.targets import FrameTarget
from dynik_ros.retarget.registry import load_robot


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values (NaN where NaN) and the same signs of zero."""
    return (
        a.shape == b.shape
        and np.array_equal(a, b, equal_nan=True)
        and np.array_equal(np.signbit(a), np.signbit(b))
    )


def _plain_log_residual(r_model: np.ndarray, r_target: np.ndarray) -> np.ndarray:
    """``orientation_log_residual_world`` as it was: every angle's case selected by comparisons and counts."""
    m = r_target @ np.swapaxes(r_model, -1, -2)
    w = vee_of_skew_part(m)
    sin2 = np.einsum("...i,...i->...", w, w)
    cos = 0.5 * (np.einsum("...ii->...", m) - 1.0)
    if sin2.max(initial=0.0) < 1e-8 and cos.min(initial=1.0) > 0.0:
        return w * (1.0 + sin2 / 6.0)[..., None]
    sin = np.sqrt(sin2)
    theta = np.arctan2(sin, cos)
    small = sin < 1e-6
    if np.count_nonzero(small):
        scale = np.where(small, 1.0 + sin2 / 6.0, theta / np.where(small, 1.0, sin))
    else:
        scale = theta / sin
    out = w * scale[..., None]
    if np.count_nonzero(cos < 0.0):
        return orientation_log_residual_world(r_model, r_target)  # the obtuse axes: not a shortcut's
    return out


def test_log_residual_common_case_is_the_general_formula():
    """Batches of every mix of tiny, small, ordinary and obtuse angles (the shortcut taken only where none is
    small nor obtuse), rotations read through a strided view as the step reads them: the plain selections'
    values and signs of zero."""
    rng = np.random.default_rng(11)
    taken = 0
    for trial in range(400):
        n = int(rng.integers(1, 16))
        model = exp_so3(rng.normal(size=(n, 3)) * 2.0)
        table = np.zeros((n, 12))  # the placement table's layout: rotation row-major, then translation
        table[:, :9] = model.reshape(n, 9)
        strided = table[:, :9].reshape(-1, 3, 3)
        scales = [1e-9, 1e-7, 1e-5, 1e-3, 0.3, 1.5, 2.0] if trial % 3 == 0 else [1e-3, 0.05, 0.3, 1.0, 1.5]
        angles = rng.choice(scales, size=n) * rng.uniform(0.5, 1.0, size=n)
        axes = rng.normal(size=(n, 3))
        target = exp_so3(angles[:, None] * axes / np.linalg.norm(axes, axis=1, keepdims=True)) @ model
        for r_model in (model, strided):
            got = orientation_log_residual_world(r_model, target)
            assert _bitwise_equal(got, _plain_log_residual(r_model, target)), trial
        cos = 0.5 * (np.einsum("...ii->...", target @ np.swapaxes(model, -1, -2)) - 1.0)
        taken += bool(angles.max() > 1e-4 and angles.min() > 2e-6 and cos.min() >= 0.0)
    assert taken > 100  # the shortcut itself was checked, not only the general case


def _plain_integrate_rotation(
    rotation: np.ndarray, omega_world: np.ndarray, dt: float, gain: float
) -> np.ndarray:
    """``integrate_rotation``'s ``"exp"`` scheme as it was: numpy arrays added."""
    rho = min(gain, 1.0 / dt)
    correction = orthonormality_correction(rotation, rho)
    omega_body = rotation.T @ omega_world
    return rotation @ (exp_so3(omega_body * dt) + dt * correction)


def test_the_base_rotation_step_in_floats_is_the_array_formula():
    """Rotations a little off SO(3) (the correction not zero), angular velocities from 1e-12 to 30 rad/s (the
    exponential's series branch too), steps of 1/1000 to 1/20 s: the same matrix to the bit."""
    rng = np.random.default_rng(12)
    for _ in range(2000):
        rotation = exp_so3(rng.normal(size=3)) + rng.normal(scale=1e-7, size=(3, 3))
        omega = rng.normal(size=3) * 10.0 ** rng.uniform(-12, 1.5)
        dt, gain = 1.0 / rng.uniform(20.0, 1000.0), rng.uniform(1.0, 40.0)
        got = integrate_rotation(rotation, omega, dt, gain=gain, scheme="exp")
        assert _bitwise_equal(got, _plain_integrate_rotation(rotation, omega, dt, gain))


def _minus_skews(d: np.ndarray) -> np.ndarray:
    """``-S(d_i)`` of every row of ``d`` (n x 3), stacked (3n x 3), gathered row by row from the entries of
    ``d``, ``-d`` and a zero column: the assembly before the one flat gather."""
    entries = np.concatenate((d, -d, np.zeros((len(d), 1))), axis=1)
    return entries[:, _MINUS_SKEW].reshape(-1, 3)


def _plain_stacked_jacobian(kinematics: FrameKinematics, base_position: np.ndarray) -> np.ndarray:
    """``FrameKinematics.stacked_jacobian`` as it was: the skews of ``p`` and ``p - p_B`` gathered apart, the
    support mask multiplied as bools; into a copy of the kinematics' array."""
    nb, npos = kinematics._nb, kinematics._n_pos
    jw = kinematics.data.J
    lin, ang = jw[:3, nb:], jw[3:, nb:]
    out = kinematics.jacobian.copy()
    p = kinematics._positions_all[:npos]
    velocity = (_minus_skews(p) @ ang).reshape(npos, 3, -1)
    velocity += lin
    velocity *= kinematics._support_pos[:, None, :]
    out[: 3 * npos, nb:] = velocity.reshape(3 * npos, -1)
    if nb:
        out[: 3 * npos, 3:6] = _minus_skews(p - base_position)
    out[kinematics._ori_rows, kinematics._ori_src[1]] = jw[kinematics._ori_src]
    return out


@pytest.mark.parametrize("floating", [True, False])
def test_the_stacked_jacobian_with_its_skews_at_once_is_the_plain_assembly(floating):
    """G1 with a floating and a fixed base, random configurations (the predicted one's ``update_jacobian``
    and ``update``), base positions away from the pelvis: the plain assembly's matrix to the bit."""
    robot = RobotModel.from_urdf_file(load_robot("g1").urdf_path, floating_base=floating)
    positions = ["pelvis", "left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link"]
    orientations = ["pelvis", "torso_link", "left_ankle_roll_link", "right_wrist_yaw_link"]
    kinematics = FrameKinematics(robot, positions, orientations)
    rng = np.random.default_rng(13)
    for trial in range(30):
        q = pin.randomConfiguration(robot.model, -np.ones(robot.nq), np.ones(robot.nq))
        q[q.size - robot.n_joints :] = rng.uniform(robot.lower, robot.upper)
        if trial % 2:
            kinematics.update_jacobian(q)
        else:
            kinematics.update(q)
        base = rng.normal(size=3)
        assert _bitwise_equal(kinematics.stacked_jacobian(base), _plain_stacked_jacobian(kinematics, base))
        if trial == 10:  # a copy writes its skews into its own array (views rebuilt, not snapshots)
            copied = copy.deepcopy(kinematics)
            copied.update_jacobian(pin.neutral(robot.model))
            assert _bitwise_equal(copied.stacked_jacobian(-base), _plain_stacked_jacobian(copied, -base))
            kinematics.stacked_jacobian(base)
            assert _bitwise_equal(copied.stacked_jacobian(-base), _plain_stacked_jacobian(copied, -base))
            assert not np.shares_memory(copied._skew_source, kinematics._skew_source)


def _plain_held_velocity(extra, ik, mean: np.ndarray, h: float) -> np.ndarray:
    """``ExtraTerms._held_velocity`` as it was: every frame's linear and angular parts read apart."""
    robot, data, nb = ik.robot, extra._twists, ik.robot.base_dofs
    joints = ik.joint_positions + h * mean[nb:]
    rotation = pin.exp3(h * mean[3:6]) @ ik.base_rotation
    q = np.concatenate((np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]), joints))
    v = np.concatenate((mean[:3] @ rotation, mean[3:6] @ rotation, mean[6:]))
    pin.forwardKinematics(robot.model, data, q, v)
    twists = []
    for on, fid, (pos, ori) in zip(
        extra.stance.pattern.active, extra._stance_ids, extra._stance_parts, strict=True
    ):
        if on:
            twist = pin.getFrameVelocity(robot.model, data, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
            if pos:
                twists.append(twist.linear)
            if ori:
                twists.append(twist.angular)
    return (np.concatenate(twists).reshape(-1, 3) @ rotation.T).reshape(-1)


def test_the_secants_twists_read_whole_are_the_parts_read_apart():
    """G1 holding a frame with position and orientation rows and one with orientation rows only, every
    combination of flags, random configurations and means: the same twists to the bit."""
    robot = RobotModel.from_urdf_file(load_robot("g1").urdf_path)
    feet = ("left_ankle_roll_link", "right_ankle_roll_link")
    targets = [
        FrameTarget("pelvis", position=True),
        FrameTarget(feet[0], position=True),
        FrameTarget(feet[1]),
    ]
    rng = np.random.default_rng(14)
    for flags in ((True, True), (True, False), (False, True)):
        q0 = robot.neutral_configuration(warn=False)
        q0[7:] = rng.uniform(robot.lower, robot.upper)
        ik = DynamicalIK(robot, targets, DynamicalIKConfig(stance_frames=feet), q0=q0)
        extra = ik.extra
        extra.stance.observe(np.array(flags))
        for _ in range(5):
            mean, h = rng.normal(size=robot.nv), 0.004
            got = extra._held_velocity(ik, mean, h)
            assert _bitwise_equal(got, _plain_held_velocity(extra, ik, mean, h)), flags


def test_floor_rows_vertical_jacobian_written_in_place_is_the_plain_formula():
    """``FloorRows.prepare`` on G1's soles at random configurations, from the stacked Jacobian and from
    pinocchio's: ``J_z = v_z + l_y w_x - l_x w_y`` and its bound as the plain expression gives them."""
    from dynik_ros.retarget.retargeter import Retargeter

    ik = Retargeter.from_config("g1").make_ik()
    floor, kinematics = ik.extra.floor, ik.kinematics
    rng = np.random.default_rng(15)
    for trial in range(20):
        q = ik.q.copy()
        q[7:] += rng.uniform(-0.3, 0.3, size=q.size - 7)
        kinematics.update(q)
        floor.observe(kinematics.data)
        jacobian = kinematics.stacked_jacobian(q[:3]) if trial % 2 else None
        mean, dt = rng.normal(size=ik.robot.nv), 1.0 / rng.uniform(30.0, 240.0)
        floor.prepare(kinematics.model, kinematics.data, dt, mean, jacobian)
        origins, levers = floor._levers(kinematics.data)
        if jacobian is not None:
            vertical, ang_x, ang_y = jacobian[floor._stacked_rows].reshape(3, floor.n_rows, -1)
        else:
            vertical, ang_x, ang_y = floor._pinocchio_rows(kinematics.model, kinematics.data)
        plain = vertical + levers[:, 1, None] * ang_x - levers[:, 0, None] * ang_y
        predicted = origins[:, 2] + levers[:, 2] - floor.config.height
        bound = ((1.0 - floor.config.gain) * floor.previous - predicted) / dt + plain @ mean
        assert _bitwise_equal(floor._jacobian, plain) and _bitwise_equal(floor._bound, bound)
