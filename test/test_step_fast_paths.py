"""The per-step shortcuts of the IK (issue 10's CPU cuts) give the answers of the plain formulas: the same
verdicts, the same numbers, on random input on both sides of every branch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynik_ros.core.quaternion import _quaternion_of_one, quaternion_from_rotation
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import (
    FrameTarget,
    InvalidMeasurementError,
    Measurements,
    TargetSet,
    plainly_valid_all,
    plainly_valid_rows,
)


def _verdict(measurements: Measurements, targets: TargetSet, full: bool) -> str:
    """``"ok"`` or the error message of :meth:`Measurements.validate` (``full``: without its fast path)."""
    if full:
        measurements = _FullChecks(**measurements.__dict__)
    try:
        measurements.validate(targets, 1e-3)
    except InvalidMeasurementError as exc:
        return str(exc)
    except TypeError as exc:  # a list of rotations: not taken, with the fast path or without
        return f"TypeError: {exc}"
    return "ok"


class _FullChecks(Measurements):
    def _plainly_valid(self, targets: TargetSet, rotation_tolerance: float) -> bool:
        return False


def _random_measurements(rng: np.random.Generator, n_p: int, n_o: int) -> Measurements:
    rotations = exp_so3(rng.normal(size=(n_o, 3)) * 2.0)
    m = Measurements(
        rng.normal(size=(n_p, 3)),
        rotations,
        rng.normal(size=(n_p, 3)) if rng.random() < 0.8 else None,
        rng.normal(size=(n_o, 3)) if rng.random() < 0.8 else None,
    )
    if rng.random() < 0.3:
        m.com_position, m.com_velocity = rng.normal(size=3), rng.normal(size=3)
    fields = ["positions", "rotations", "linear_velocities", "angular_velocities", "com_position"]
    for _ in range(rng.integers(0, 3)):  # 0-2 defects
        name = fields[rng.integers(len(fields))]
        value = getattr(m, name)
        if value is None:
            continue
        value = np.array(value)
        kind = rng.integers(8)
        flat = value.reshape(-1)
        i = rng.integers(flat.size) if flat.size else 0
        if kind == 0 and flat.size:
            flat[i] = np.nan
        elif kind == 1 and flat.size:
            flat[i] = rng.choice([np.inf, -np.inf])
        elif kind == 2 and flat.size:
            flat[:] = 1e308 * np.sign(rng.normal(size=flat.size))  # finite, sums overflow
        elif kind == 3:
            value = value[:-1] if value.shape[0] else value  # wrong shape
        elif kind == 4 and name == "rotations" and len(value):
            # off the tolerance, inside it, a reflection (of the rotations left by a shape defect)
            value[rng.integers(len(value))] *= rng.choice([1.0 + 2e-3, 1.0 + 5e-4, -1.0])
        elif kind == 5:
            value = value.tolist()  # not an array: the full checks take lists too
        elif kind == 6:
            value = value.astype(np.float32)
        elif kind == 7 and name == "com_position":
            m.com_velocity = None
        setattr(m, name, value)
    return m


@pytest.mark.parametrize("n_p, n_o", [(1, 23), (6, 15), (0, 4), (3, 0)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the full checks on 1e308 entries overflow
def test_validate_fast_path_gives_the_verdicts_of_the_full_checks(n_p, n_o):
    frames = [f"f{i}" for i in range(max(n_p, n_o))]
    targets = TargetSet([FrameTarget(f, position=i < n_p, orientation=i < n_o) for i, f in enumerate(frames)])
    rng = np.random.default_rng(n_p * 100 + n_o)
    verdicts = {"ok": 0, "refused": 0}
    for _ in range(1500):
        m = _random_measurements(rng, n_p, n_o)
        expected = _verdict(m, targets, full=True)
        assert _verdict(m, targets, full=False) == expected
        verdicts["ok" if expected == "ok" else "refused"] += 1
    assert min(verdicts.values()) > 100, verdicts  # both sides of the checks were exercised


def _clean_like(m: Measurements, rng: np.random.Generator, n_p: int, n_o: int) -> Measurements:
    """A valid measurement giving the fields ``m`` gives (``None`` where it has ``None``)."""
    return Measurements(
        rng.normal(size=(n_p, 3)),
        exp_so3(rng.normal(size=(n_o, 3)) * 2.0),
        None if m.linear_velocities is None else rng.normal(size=(n_p, 3)),
        None if m.angular_velocities is None else rng.normal(size=(n_o, 3)),
        None if m.com_position is None else rng.normal(size=3),
        None if m.com_velocity is None else rng.normal(size=3),
        weight_scale=None if m.weight_scale is None else rng.random(3 * (n_p + n_o)),
        min_gain=None if m.min_gain is None else rng.random(3 * (n_p + n_o)),
    )


@pytest.mark.parametrize("n_p, n_o", [(1, 23), (6, 15), (0, 4), (3, 0)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the full checks on 1e308 entries overflow
def test_a_batch_found_plainly_valid_at_once_is_one_every_sample_of_passes(n_p, n_o):
    """``plainly_valid_all`` (``Retargeter.run`` validates a take at once, then steps it ``checked``): on
    clean samples with one random sample among them (0-2 defects of every kind), a batch it passes is one
    whose every sample the full checks pass, and it passes every batch whose samples the per-sample fast path
    passes; a sample refused by the full checks fails the batch."""
    frames = [f"f{i}" for i in range(max(n_p, n_o))]
    targets = TargetSet([FrameTarget(f, position=i < n_p, orientation=i < n_o) for i, f in enumerate(frames)])
    rng = np.random.default_rng(7 + n_p * 100 + n_o)
    outcomes = {"passed": 0, "failed": 0}
    for _ in range(400):
        m = _random_measurements(rng, n_p, n_o)
        if rng.random() < 0.3:
            m.weight_scale = rng.random(3 * (n_p + n_o)) - (0.1 if rng.random() < 0.3 else 0.0)
        batch = [_clean_like(m, rng, n_p, n_o) for _ in range(6)]
        batch.insert(int(rng.integers(len(batch) + 1)), m)
        passed = plainly_valid_all(batch, targets)
        if passed:
            assert all(_verdict(x, targets, full=True) == "ok" for x in batch)
        if _verdict(m, targets, full=True) != "ok":
            assert not passed
        huge = any(  # entries near the float limit: a sum over the samples may overflow (decided one by one)
            isinstance(v, np.ndarray) and v.size and np.nanmax(np.abs(v)) > 1e300 for v in vars(m).values()
        )
        if all(x._plainly_valid(targets, 1e-3) for x in batch) and not huge:
            assert passed
        outcomes["passed" if passed else "failed"] += 1
    assert min(outcomes.values()) > 60, outcomes  # both verdicts exercised
    # a field given on some samples only: not decided at once (each sample is then validated by its step)
    mixed = [_clean_like(m, rng, n_p, n_o) for _ in range(3)]
    mixed[1].com_position, mixed[1].com_velocity = np.zeros(3), np.zeros(3)
    mixed[0].com_position = mixed[0].com_velocity = None
    mixed[2].com_position = mixed[2].com_velocity = None
    assert not plainly_valid_all(mixed, targets) and plainly_valid_all([], targets)


def test_replaced_rows_are_checked_as_the_whole_measurement_would_be():
    """``plainly_valid_rows`` (the feet's rows the ``anchor: robot`` replay replaced): a row NaN, infinite,
    a reflection or out of the rotation tolerance fails it, a rotation within it passes."""
    rng = np.random.default_rng(3)
    rotations = exp_so3(rng.normal(size=(2, 3)))
    positions, linear, angular = rng.normal(size=(2, 3)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    assert plainly_valid_rows(positions, rotations, linear, angular)
    assert plainly_valid_rows(positions, rotations, None, None)
    for name, i, value in (
        ("positions", (1, 2), np.nan),
        ("linear", (0, 0), np.inf),
        ("angular", (1, 1), np.nan),
        ("rotations", (1, 0, 0), np.nan),
    ):
        bad = {"positions": positions, "rotations": rotations, "linear": linear, "angular": angular}
        bad[name] = bad[name].copy()
        bad[name][i] = value
        assert not plainly_valid_rows(bad["positions"], bad["rotations"], bad["linear"], bad["angular"])
    for factor, expected in ((-1.0, False), (1.0 + 2e-3, False), (1.0 + 2e-4, True)):
        scaled = rotations.copy()
        scaled[0] *= factor
        assert plainly_valid_rows(positions, scaled, linear, angular) is expected


def test_the_few_rows_check_passes_only_rows_the_fast_path_passes():
    """``plainly_valid_rows`` decides on the rows' Python floats first (``_few_rows_plainly_valid``, the
    replay's every sample): on random feet's rows, clean, with NaN / inf / huge entries, reflections, the
    wrong dtype or shape, and rotations scaled to just inside, at and just outside the tolerance, it passes
    none the fast path (``_plain_values``) refuses, and its verdict through ``plainly_valid_rows`` is the fast
    path's; it passes the clean rows itself (else the shortcut would save nothing)."""
    from dynik_ros.core.targets import _few_rows_plainly_valid, _field_shapes, _plain_values

    rng = np.random.default_rng(5)
    tolerance = 1e-3
    counts = {"fast": 0, "both refuse": 0, "fast path only": 0}
    for trial in range(6000):
        n_p, n_o = int(rng.integers(1, 4)), int(rng.integers(0, 4))
        values = [
            rng.normal(size=(n_p, 3)),
            exp_so3(rng.normal(size=(n_o, 3)) * 2.0).reshape(n_o, 3, 3),
            rng.normal(size=(n_p, 3)) if rng.random() < 0.8 else None,
            rng.normal(size=(n_o, 3)) if rng.random() < 0.8 else None,
        ]
        kind = trial % 9
        if kind == 1:  # |R^T R - I| ~ 2 eps at a scale 1 + eps: eps within 1e-9 of tolerance / 2
            if n_o:
                values[1][rng.integers(n_o)] *= 1.0 + tolerance / 2.0 * (1.0 + rng.uniform(-1e-9, 1e-9))
        elif kind == 2 and n_o:  # the scale whose squared norm is 1 + tolerance, to the last bit or so
            values[1][rng.integers(n_o)] *= math.sqrt(1.0 + tolerance) * (1.0 + rng.integers(-3, 4) * 2e-16)
        elif kind == 3 and n_o:
            values[1][rng.integers(n_o)] *= -1.0  # a reflection
        elif kind == 4:
            i = int(rng.integers(4))
            if values[i] is not None and values[i].size:
                values[i].reshape(-1)[rng.integers(values[i].size)] = rng.choice([np.nan, np.inf, -np.inf])
        elif kind == 5:
            values[0] = np.full((n_p, 3), 1e308)  # finite, its sum overflows
        elif kind == 6:
            values[0] = values[0].astype(np.float32)
        elif kind == 7:
            values[0] = values[0][:, :2]
        full = (*values, None, None, None, None)
        with np.errstate(over="ignore", invalid="ignore"):
            expected = _plain_values(full, _field_shapes(n_p, n_o), n_o, tolerance)
            fast = _few_rows_plainly_valid(values, tolerance)
            assert plainly_valid_rows(*values, tolerance) is expected
        assert expected or not fast, (trial, kind)
        if kind == 0:
            assert fast  # clean rows: decided by the shortcut
        counts["fast" if fast else "both refuse" if not expected else "fast path only"] += 1
    assert min(counts.values()) > 100, counts


def test_the_few_rows_check_reads_each_entry_of_r_transpose_r():
    """``_few_rows_plainly_valid`` refuses a rotation whose ``R^T R - I`` is past the tolerance in any one of
    its six entries, above or below (a column too long or too short, two columns not orthogonal either way),
    as the fast path does, and passes it within: each entry is checked, not only their largest at random."""
    from dynik_ros.core.targets import _few_rows_plainly_valid, _field_shapes, _plain_values

    rng = np.random.default_rng(9)
    tolerance = 1e-3
    pairs = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
    for trial in range(600):
        rotation = exp_so3(rng.normal(size=3) * 2.0)
        i, j = pairs[trial % 6]
        for size, inside in ((0.5, True), (1.5, False)):
            gap = size * tolerance * rng.choice([-1.0, 1.0])
            bent = rotation.copy()
            if i == j:  # column i's squared norm 1 + gap
                bent[:, i] *= math.sqrt(1.0 + gap)
            else:  # column j leans towards column i: their dot product gap (and |col j|^2 1 + gap^2)
                bent[:, j] += gap * rotation[:, i]
            values = [rng.normal(size=(2, 3)), bent[None], rng.normal(size=(2, 3)), rng.normal(size=(1, 3))]
            full = (*values, None, None, None, None)
            expected = _plain_values(full, _field_shapes(2, 1), 1, tolerance)
            assert expected is inside, (trial, i, j, gap)
            assert _few_rows_plainly_valid(values, tolerance) is inside, (trial, i, j, gap)


def test_quaternion_of_one_matrix_is_the_vectorised_formula():
    """The scalar path (the solver's base per step) equals the vectorised Shepperd formula on random
    rotations, every largest-component case and half turns, and refuses non-finite entries."""
    rng = np.random.default_rng(7)
    matrices = list(exp_so3(rng.normal(size=(3000, 3)) * 2.0))
    matrices += [np.eye(3), *(np.diag(d) for d in ([1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]))]
    matrices += list(exp_so3(math.pi * np.eye(3))) + [exp_so3(np.full(3, math.pi / math.sqrt(3.0)))]
    for r in matrices:
        one = _quaternion_of_one(r)
        many = quaternion_from_rotation(r[None])[0]
        np.testing.assert_allclose(one, many, rtol=0, atol=1e-15)
    for bad in (np.nan, np.inf, -np.inf):
        for i in range(9):
            r = np.eye(3)
            r.reshape(-1)[i] = bad
            with pytest.raises(ValueError, match="non-finite"):
                _quaternion_of_one(r)


def test_decoded_link_states_pass_every_check_the_ik_would_make_again():
    """ik_node steps its decoded link states with ``checked=True``: whatever the decoder accepts (quaternion
    norms within QUATERNION_NORM_TOLERANCE, finite values) passes Measurements.validate, and the rest is
    refused by the decoder itself; so skipping the IK's own check changes no verdict."""
    from dynik_ros.nodes.cdr_writer import LinkStatesWriter
    from dynik_ros.nodes.conversions import QUATERNION_NORM_TOLERANCE, LinkStatesDecoder, MessageRejected

    rng = np.random.default_rng(11)
    n = 23
    names = [f"L{i}" for i in range(n)]
    targets = TargetSet([FrameTarget(name, position=i == 0) for i, name in enumerate(names)])
    writer, decoder = LinkStatesWriter(names, "world"), LinkStatesDecoder()
    accepted = refused = 0
    for k in range(400):
        quaternions = rng.normal(size=(n, 4)) * rng.choice([1.0, 1e-150, 1e150])
        quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
        # norms at unit length, just inside the tolerance, or spread across it (then mostly refused)
        spread = (0.0, 0.999, 1.5)[k % 3]
        quaternions *= 1.0 + rng.uniform(-spread, spread, size=(n, 1)) * QUATERNION_NORM_TOLERANCE
        positions, linear, angular = rng.normal(size=(3, n, 3))
        if k % 7 == 0:
            (positions, linear, angular)[k % 3][rng.integers(n), rng.integers(3)] = rng.choice(
                [np.nan, np.inf]
            )
        try:
            links = decoder.decode(writer.serialize(k + 1, positions, quaternions, linear, angular))
        except MessageRejected:
            refused += 1
            continue
        m = Measurements(
            links.positions[:1], links.rotations, links.linear_velocities[:1], links.angular_velocities
        )
        m.validate(targets, 1e-12)  # passes even at a tolerance 1e9 times tighter than the IK's
        accepted += 1
    assert accepted > 100 and refused > 100


def test_checked_steps_are_the_validated_steps():
    """``DynamicalIK.step(..., checked=True)`` only skips the check: the same q, v bit for bit."""
    import warnings

    from dynik_ros.bench.setups import load_case
    from dynik_ros.core.dynamical_ik import DynamicalIK

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = load_case("human66", "running", 1.0, 240.0)
    plain = DynamicalIK(case.robot, case.targets, q0=case.q0)
    checked = DynamicalIK(case.robot, case.targets, q0=case.q0)
    for m in case.measurements:
        q1, v1 = plain.step(m, 1 / 240)
        q2, v2 = checked.step(m, 1 / 240, checked=True)
        assert np.array_equal(q1, q2) and np.array_equal(v1, v2)
    with pytest.raises(InvalidMeasurementError):  # unchecked steps still refuse
        checked.step(Measurements(m.positions * np.nan, m.rotations), 1 / 240)


def test_log_residual_batches_equal_the_rotation_vector_of_each_pair():
    """``orientation_log_residual_world`` on batches mixing tiny, small, large and obtuse angles (every branch
    of its shortcuts in one call) against scipy's rotation vector of ``R* R^T`` per pair (ground truth), and
    ``vee_of_skew_part`` against the textbook entries."""
    from scipy.spatial.transform import Rotation

    from dynik_ros.core.so3 import orientation_log_residual_world, vee_of_skew_part

    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(1, 20))
        model = exp_so3(rng.normal(size=(n, 3)) * 2.0)
        axes = rng.normal(size=(n, 3))
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
        scales = [1e-9, 1e-7, 1e-5, 1e-3, 0.3, 1.5, 2.0, 3.0] if trial % 2 else [1e-3, 0.3, 1.5]
        angles = rng.choice(scales, size=n) * rng.uniform(0.5, 1.0, size=n)
        target = exp_so3(angles[:, None] * axes) @ model
        log = orientation_log_residual_world(model, target)
        truth = Rotation.from_matrix(target @ np.swapaxes(model, -1, -2)).as_rotvec()
        np.testing.assert_allclose(log, truth, rtol=0, atol=1e-12)
        m = target @ np.swapaxes(model, -1, -2)
        vee = np.stack([0.5 * np.array((r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1])) for r in m])
        assert np.array_equal(vee_of_skew_part(m), vee)
        assert vee_of_skew_part(m).flags.c_contiguous  # einsum's sums over it follow the layout


def test_posed_dynamic_rows_are_the_blocks_each_row_set_builds():
    """The stance and floor rows posed in place (``ExtraTerms._pose``) are, after every step of a walk with
    hard stance rows and floor rows, what :meth:`StanceRows.bounds` and :meth:`FloorRows.rows` give for the
    step alone (stance rows centred on ``v*``: priority 1 off), zero, unbounded rows for feet in the air."""
    import dataclasses
    import warnings
    from pathlib import Path

    from dynik_ros.core.dynamical_ik import DynamicalIK
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    rt.reset()
    motion = read_motion_file(Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measurements, contacts = rt.compute(*rt.motion_arrays(motion))
    base = rt.make_ik()
    config = dataclasses.replace(base.config, stance_priority=False)
    ik = DynamicalIK(rt.robot, base.targets, config, base.q, home=base.home)
    extra = ik.extra
    assert extra.stance is not None and extra.floor is not None and extra.priority is None
    stance_start = extra.dynamic_rows - extra.floor.n_rows - extra.stance.n_rows
    stance_block = slice(stance_start, stance_start + extra.stance.n_rows)
    floor_block = slice(extra.dynamic_rows - extra.floor.n_rows, None)
    imposed = 0
    for k in range(1, min(len(measurements), 240)):
        ik.step(measurements[k], float(motion.times[k] - motion.times[k - 1]))
        a, lower, upper = extra.dynamic
        w0, carried = ik.step_quadrature
        floor = extra.floor.rows(w0, carried, extra.floor.mode)
        for part, expected in zip((a, lower, upper), floor, strict=True):
            assert np.array_equal(part[floor_block], expected)
        jacobian, centre, _ = extra._task
        if extra.stance.imposed:
            imposed += 1
            stance = extra.stance.bounds(jacobian, centre, w0, carried)
        else:
            stance = ik.qp._no_dynamic_rows(extra.stance.n_rows)
        for part, expected in zip((a, lower, upper), stance, strict=True):
            assert np.array_equal(part[stance_block], expected)
    assert imposed > 50  # both kinds of steps were checked


def test_q_is_the_join_of_the_pose_after_every_way_the_pose_changes():
    """``DynamicalIK.q`` (joined once per pose) equals ``RobotModel.join`` of the base pose and joints, bit
    for bit, after steps, ``set_base_pose``, ``rebase``, ``restore_state``, ``reset`` and ``stop``; and a
    caller writing into the array it got changes neither the IK nor the next ``q``."""
    import warnings

    from dynik_ros.bench.setups import load_case
    from dynik_ros.core.dynamical_ik import DynamicalIK

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        case = load_case("g1", "walking", 0.5, 100.0)
    ik = DynamicalIK(case.robot, case.targets, q0=case.q0)

    def joined() -> np.ndarray:
        return ik.robot.join(ik.base_position, ik.base_rotation, ik.joint_positions)

    saved = None
    for k, m in enumerate(case.measurements):
        q, _ = ik.step(m, 0.01)
        assert np.array_equal(q, joined()) and np.array_equal(ik.q, joined())
        q[:] = 0.0  # the caller's copy
        assert np.array_equal(ik.q, joined()) and np.abs(ik.q).max() > 0
        if k == 10:
            saved = ik.save_state()
        if k == 20:
            ik.set_base_pose(ik.base_position + 0.1, exp_so3(np.array([0.0, 0.0, 0.3])) @ ik.base_rotation)
            assert np.array_equal(ik.q, joined())
        if k == 30:
            ik.rebase(m, 0.01)
            assert np.array_equal(ik.q, joined())
        if k == 35:
            ik.stop()
            assert np.array_equal(ik.q, joined())
    before = ik.q
    ik.restore_state(saved)
    assert np.array_equal(ik.q, joined()) and not np.array_equal(ik.q, before)
    ik.reset(case.q0)
    assert np.array_equal(ik.q, joined()) and np.array_equal(ik.q, ik.robot.join(*ik.robot.split(case.q0)))


@pytest.mark.parametrize("solver", ["daqp", "osqp"])
def test_a_solution_the_qp_says_meets_its_rows_meets_them_multiplied_out(solver):
    """``QPSolution.rows_met_within`` (the Cholesky shortcut and DAQP, which lets ``ExtraTerms._meets`` skip
    its own product) is true of the rows multiplied out: ``l - tol <= C nu <= u + tol`` for the joint rows
    and the dynamic rows of random QPs, with and without an expansion; every path of the solver (shortcut,
    DAQP; shortcut, OSQP: no claim) is exercised."""
    from dynik_ros.core.velocity_qp import QPSettings, VelocityQP

    rng = np.random.default_rng(9)
    n, m, dynamic = 8, 12, 5
    expansion = np.eye(n)[:, :6]  # two locked columns
    paths = {"shortcut": 0, solver: 0}
    named = {"solved (no active constraint)": "shortcut", "solved (DAQP)": "daqp"}  # else OSQP's own status
    for with_expansion in (False, True):
        e = expansion if with_expansion else None
        constraint = np.eye(n)
        qp = VelocityQP(
            np.ones((m, n), dtype=bool),
            constraint,
            QPSettings(solver=solver),
            expansion=e,
            dynamic_rows=dynamic,
        )
        for _ in range(300):
            jacobian = rng.normal(size=(m, n))
            target = rng.normal(size=m)
            width = rng.choice([0.05, 100.0])
            lower, upper = -width * rng.random(n), width * rng.random(n)
            a = rng.normal(size=(dynamic, n))
            dl, du = -width * rng.random(dynamic), width * rng.random(dynamic)
            solution = qp.solve(jacobian, target, np.ones(m), lower, upper, dynamic=(a, dl, du))
            assert solution.solved
            path = named.get(solution.status, "osqp")
            paths[path] = paths.get(path, 0) + 1
            assert np.isfinite(solution.rows_met_within) == (path != "osqp")
            if np.isfinite(solution.rows_met_within):
                tol = solution.rows_met_within
                kept = np.flatnonzero(np.any(constraint @ (np.eye(n) if e is None else e) != 0, axis=1))
                rows = np.concatenate(((constraint @ solution.nu)[kept], a @ solution.nu))
                low = np.concatenate((lower[kept], dl)) - tol - 1e-12
                high = np.concatenate((upper[kept], du)) + tol + 1e-12
                assert np.all(rows >= low) and np.all(rows <= high)
    assert min(paths.values()) > 50 and len(paths) == 2, paths
