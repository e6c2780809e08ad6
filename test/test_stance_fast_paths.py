"""The stance and floor rows' per-step shortcuts (issue 9's speed target) give the answers of the plain
formulas, bit for bit: what one combination of stance flags selects, derived once (``StancePattern``); the
stance and floor rows written in place into the step's dynamic rows; the other dynamic rows handed to
priority 1 as views; the held directions and the secant's rows per combination of flags."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.extra_terms import ExtraTerms
from dynik_ros.core.floor_rows import MODES
from dynik_ros.core.stance_rows import StanceRows, on_mean
from dynik_ros.core.targets import FrameTarget, TargetSet

EXCERPT = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"


def _plain_bounds(stance: StanceRows, flags, jacobian, corrected, w0, carried):
    """The stance rows' ``(A, l, u)`` frame by frame, as :meth:`StanceRows.bounds` wrote them before it
    used the pattern and ``out``: fresh arrays, zero, unbounded rows for frames out of contact."""
    a = np.zeros((stance.n_rows, stance.nv))
    lower, upper = np.full(stance.n_rows, -np.inf), np.full(stance.n_rows, np.inf)
    start = 0
    for on, rows in zip(flags, stance.rows, strict=True):
        stop = start + len(rows)
        if on:
            a[start:stop] = w0 * jacobian[rows]
            centre = corrected[rows] if carried is None else corrected[rows] - jacobian[rows] @ carried
            lower[start:stop], upper[start:stop] = centre - stance.tolerance, centre + stance.tolerance
        start = stop
    return a, lower, upper


def test_the_stance_pattern_and_bounds_are_those_of_the_flags_after_every_observe():
    """Every sequence of flags (``None`` too): the pattern's rows, mask and ``imposed`` are the plain
    selections of the flags just observed, and the bounds written over any earlier content of ``out`` are
    the plain formula's, bit for bit."""
    targets = TargetSet(
        [
            FrameTarget("base", position=True),
            FrameTarget("left", position=True),
            FrameTarget("right", position=True),
            FrameTarget("hand", position=False),
        ]
    )
    # rows: left has position and orientation rows, right too, hand orientation only
    stance = StanceRows(targets, ["left", "right", "hand"], nv=7, tolerance=0.01)
    sizes = [len(r) for r in stance.rows]
    assert sizes == [6, 6, 3]
    rng = np.random.default_rng(3)
    jacobian = rng.normal(size=(3 * 3 + 3 * 4, 7))
    out = tuple(rng.normal(size=shape) for shape in ((15, 7), (15,), (15,)))
    sequence = [None, *itertools.product((False, True), repeat=3)] * 2
    rng.shuffle(sequence)
    for flags in sequence:
        stance.observe(None if flags is None else np.array(flags))
        flags = np.zeros(3, dtype=bool) if flags is None else np.array(flags)
        pattern = stance.pattern
        assert pattern.active == tuple(flags) and stance.imposed == flags.any()
        plain_rows = [r for on, r in zip(flags, stance.rows, strict=True) if on]
        np.testing.assert_array_equal(pattern.rows, np.concatenate(plain_rows) if plain_rows else [])
        np.testing.assert_array_equal(pattern.mask, np.repeat(flags, sizes))
        assert not (pattern.rows.flags.writeable or pattern.mask.flags.writeable)  # shared by later steps
        corrected, carried, w0 = rng.normal(size=21), rng.normal(size=7), rng.uniform(0.5, 1.0)
        expected = _plain_bounds(stance, flags, jacobian, corrected, w0, carried)
        written = stance.bounds(jacobian, corrected, w0, carried, out=out)
        fresh = stance.bounds(jacobian, corrected, w0, carried)
        # the held rows given (ExtraTerms' step: read frame by frame as slices; a 3-row block too)
        given = stance.bounds(jacobian, corrected, w0, carried, held=jacobian[pattern.rows])
        for got, new, by_held, want in zip(written, fresh, given, expected, strict=True):
            assert np.array_equal(got, want) and np.array_equal(new, want) and np.array_equal(by_held, want)
        plain = _plain_bounds(stance, flags, jacobian, corrected, w0, None)
        euler = stance.bounds(jacobian, corrected, w0, None, held=jacobian[pattern.rows])
        for got, want in zip(euler, plain, strict=True):
            assert np.array_equal(got, want)  # no carried velocity (Euler)
    assert len(stance._patterns) == 8  # one per combination, built once
    with pytest.raises(ValueError, match="read-only"):
        stance.active[0] = True  # the flags change only through observe (the pattern follows them)


def test_floor_rows_written_in_place_are_the_plain_formula_in_every_mode():
    """:meth:`FloorRows.rows` into ``out`` holding anything: ``(w0 J_z, b - J_z c, inf)``, ``b`` clipped at
    zero when softened, zero, unbounded rows when dropped: the formula, bit for bit."""
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    ik = rt.make_ik()
    floor = ik.extra.floor
    kinematics = ik.kinematics
    rng = np.random.default_rng(5)
    q = ik.q.copy()
    q[7:] += rng.uniform(-0.2, 0.2, size=q.size - 7)
    kinematics.update(q)
    floor.observe(kinematics.data)
    floor.prepare(kinematics.model, kinematics.data, 0.01, rng.normal(size=ik.robot.nv))
    jz, bound = floor._jacobian, floor._bound
    for mode in MODES:
        w0, carried = rng.uniform(0.5, 1.0), rng.normal(size=ik.robot.nv)
        out = tuple(rng.normal(size=shape) for shape in (jz.shape, (floor.n_rows,), (floor.n_rows,)))
        written = floor.rows(w0, carried, mode, out=out)
        assert all(got is given for got, given in zip(written, out, strict=True))
        if mode == "dropped":
            expected = np.zeros_like(jz), np.full(floor.n_rows, -np.inf), np.full(floor.n_rows, np.inf)
        else:
            b = bound if mode == "hard" else np.minimum(bound, 0.0)
            expected = w0 * jz, b - jz @ carried, np.full(floor.n_rows, np.inf)
        for got, new, want in zip(written, floor.rows(w0, carried, mode), expected, strict=True):
            assert np.array_equal(got, want) and np.array_equal(new, want)
        assert floor.mode == mode


@pytest.mark.parametrize("support, stance, floor", [(0, 12, 8), (4, 12, 8), (4, 12, 0), (0, 12, 0)])
def test_the_rows_priority_1_takes_are_the_other_dynamic_rows(support, stance, floor):
    """:meth:`ExtraTerms._others` (views where the other rows are one block) is the concatenation of the
    dynamic rows before and after the stance block, for every layout of support, stance and floor rows."""
    rng = np.random.default_rng(support + floor)
    rows = support + stance + floor
    posed = (rng.normal(size=(rows, 5)), rng.normal(size=rows), rng.normal(size=rows))
    extra = SimpleNamespace(
        _stance_start=support, stance=SimpleNamespace(n_rows=stance), dynamic_rows=rows, _posed=posed
    )
    others = ExtraTerms._others(extra)
    for got, part in zip(others, posed, strict=True):
        assert np.array_equal(got, np.concatenate((part[:support], part[support + stance :])))


def _check_held_per_step(ik, measurements, times, seen: set) -> None:
    """Step ``ik`` through ``measurements``; after each step the held directions are the held frames' rows
    of the step's Jacobian, and the secant's rows of the
    frames in contact (kept per combination of flags) are the plain selections of the step's flags."""
    extra = ik.extra
    stance, secant = extra.stance, extra._secant
    position_ids, orientation_ids = secant.position_ids, secant.orientation_ids
    for k in range(1, len(measurements)):
        ik.step(measurements[k], float(times[k] - times[k - 1]))
        flags = np.array(stance.active)
        seen.add(tuple(bool(f) for f in flags))
        if not flags.any():
            assert extra.held_rows() is None
            continue
        held = extra._task[0][np.concatenate([r for on, r in zip(flags, stance.rows, strict=True) if on])]
        np.testing.assert_array_equal(extra.held_rows(), held)
        own = []  # the secant Jacobian's rows (position frames, then orientation frames) per frame in contact
        for on, fid in zip(flags, extra._stance_ids, strict=True):
            if on:
                if fid in position_ids:
                    own += [3 * position_ids.index(fid) + j for j in range(3)]
                if fid in orientation_ids:
                    own += [3 * (len(position_ids) + orientation_ids.index(fid)) + j for j in range(3)]
        np.testing.assert_array_equal(extra._held_of(stance.pattern), own)
        assert not extra._held_of(stance.pattern).flags.writeable  # shared by later steps with these flags


def test_the_history_restarts_along_the_held_rows_and_the_bound_columns_as_their_projector_says():
    """``StepIntegration._restart_along`` (the Gram-matrix basis, by Cholesky or by eigh) against the plain
    formula: with ``P`` the orthogonal projector onto the span of the held rows and the unit rows of the bound
    columns (``pinv(M) M``), ``nu <- nu + P (m - nu)`` and every past ``nu`` likewise; also with rows that
    repeat or vanish once the bound columns are zeroed, and with no bound column."""
    from dynik_ros.core.dynamical_ik import DynamicalIKConfig
    from dynik_ros.retarget.retargeter import Retargeter

    ik = Retargeter.from_config("g1").make_ik(DynamicalIKConfig(integration="adams"))  # (keeps the history)
    nv = ik.robot.nv
    rng = np.random.default_rng(5)
    base_rows = rng.normal(size=(12, nv))
    cases = [
        (base_rows, np.array([8, 9, 20])),
        (base_rows, None),
        (np.vstack((base_rows[:6], base_rows[:6])), np.array([7])),  # repeated rows: rank 6
        (np.eye(nv)[[10, 11, 3]], np.array([10, 11])),  # two rows vanish on the bound columns
    ]
    from dynik_ros.core.step_integration import _cholesky_basis

    by_cholesky = []
    for rows, columns in cases:
        zeroed = rows.copy()
        if columns is not None:
            zeroed[:, columns] = 0.0
        by_cholesky.append(_cholesky_basis(zeroed, zeroed @ zeroed.T) is not None)
        mean = rng.normal(size=nv)
        ik.nu = rng.normal(size=nv)
        ik._past_nu = rng.normal(size=ik._past_nu.shape)
        nu, past = ik.nu.copy(), ik._past_nu.copy()
        stacked = rows if columns is None else np.vstack((rows, np.eye(nv)[columns]))
        projector = np.linalg.pinv(stacked) @ stacked
        ik._restart_along(rows, mean, columns)
        np.testing.assert_allclose(ik.nu, nu + projector @ (mean - nu), atol=1e-9)
        np.testing.assert_allclose(ik._past_nu, past + (mean - past) @ projector, atol=1e-9)
        np.testing.assert_allclose(stacked @ ik.nu, stacked @ mean, atol=1e-9)  # fixed where the rows act
    assert by_cholesky == [True, True, False, False]  # the factor where the rows are independent, else eigh


def test_held_rows_and_secant_rows_per_pattern_are_the_plain_selections_on_a_walk():
    """On every step of the committed walk on G1 and of a stand (hard stance, floor rows: the defaults), the
    held directions and the secant's rows of the frames in contact, kept per combination of flags, are the
    plain selections of the step's flags."""
    from dynik_ros.cli.retarget import synthetic_motion
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    seen: set = set()
    for motion in (read_motion_file(EXCERPT), synthetic_motion("tpose", 0.3, 100.0)):
        rt.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            measurements, _ = rt.compute(*rt.motion_arrays(motion))
        ik = rt.make_ik()
        assert ik.extra.stance is not None and ik.extra.priority is not None
        _check_held_per_step(ik, measurements, motion.times, seen)
    assert {(True, False), (False, True), (True, True)} <= seen  # single and double support both checked


def _plain_predicted(extra, starts, kinematics, corrected, jacobian, predicted_mean, dt):
    """``_predicted``'s offset and shifted ``v*`` as the plain formula: the frames' SE3 at ``q_{k-1}``
    (``starts``, copies) and now read one by one, concatenated, the whole stack's rows multiplied."""
    omf, moved = kinematics.data.oMf, []
    for on, fid, start, (pos, ori) in zip(
        extra.stance.pattern.active, extra._stance_ids, starts, extra._stance_parts, strict=True
    ):
        if on:
            if pos:
                moved.append(omf[fid].translation - start.translation)
            if ori:
                moved.append(pin.log3(omf[fid].rotation @ start.rotation.T))
    rows = extra.stance.pattern.rows
    offset = np.concatenate(moved) / dt - jacobian[rows] @ predicted_mean
    shifted = corrected.copy()
    shifted[rows] -= offset
    return offset, shifted


@pytest.mark.parametrize("table", [True, False])
def test_the_predicted_offset_and_the_secant_check_are_the_plain_formulas_on_a_walk(monkeypatch, table):
    """On every held step of the committed walk on G1: the predicted step's offset and the shifted ``v*``
    (:meth:`ExtraTerms._predicted`, from the placement table's rows, or the SE3 copies where the table is
    not there) are the plain formula's bit for bit, the held Jacobian rows kept for the step are the
    stacked Jacobian's rows of the frames in contact, and the secant's cheap check
    (:func:`~dynik_ros.core.extra_terms.within`) answers as ``np.abs(...).max() <= tol`` does."""
    from dynik_ros.core import extra_terms
    from dynik_ros.io.motion_files import read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter

    if not table:
        monkeypatch.setattr(extra_terms, "placement_view", lambda model, data: None)
    observe, predicted = extra_terms.ExtraTerms.observe, extra_terms.ExtraTerms._predicted
    checked = {"offsets": 0, "checks": 0}

    def observed(self, kinematics, measurements):
        observe(self, kinematics, measurements)
        assert isinstance(self._start_poses, np.ndarray) == table or not self.stance.imposed
        omf = kinematics.data.oMf
        self.plain_starts = [omf[i].copy() for i in self._stance_ids]

    def compared(self, kinematics, corrected, jacobian, predicted_mean, dt):
        shifted = predicted(self, kinematics, corrected, jacobian, predicted_mean, dt)
        if self.stance.imposed:
            offset, plain = _plain_predicted(
                self, self.plain_starts, kinematics, corrected, jacobian, predicted_mean, dt
            )
            assert np.array_equal(self._posed_offset, offset) and np.array_equal(shifted, plain)
            assert np.array_equal(self._held_jacobian, jacobian[self.stance.pattern.rows])
            assert not self._held_jacobian.flags.writeable  # the integration's restart reads it too
            checked["offsets"] += 1
        return shifted

    def checked_within(twists, moved, offset, tolerance):
        answer = extra_terms_within(twists, moved, offset, tolerance)
        plain = np.abs(np.array(twists) - np.array(moved) - np.array(offset)).max() <= tolerance
        assert answer == plain
        checked["checks"] += 1
        return answer

    extra_terms_within = extra_terms.within
    monkeypatch.setattr(extra_terms.ExtraTerms, "observe", observed)
    monkeypatch.setattr(extra_terms.ExtraTerms, "_predicted", compared)
    monkeypatch.setattr(extra_terms, "within", checked_within)
    rt = Retargeter.from_config("g1")
    motion = read_motion_file(EXCERPT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measurements, _ = rt.compute(*rt.motion_arrays(motion))
    ik = rt.make_ik()
    for k in range(1, len(measurements)):
        ik.step(measurements[k], float(motion.times[k] - motion.times[k - 1]))
    assert checked["offsets"] > 100 and checked["checks"] > 100, checked


def test_the_secants_cheap_check_is_numpys_max_with_nan_and_at_the_tolerance():
    """:func:`~dynik_ros.core.extra_terms.within` against ``np.abs(t - m - o).max() <= tol``: random vectors
    about the tolerance, an entry exactly at it, and NaN anywhere (numpy's max is NaN: the check fails)."""
    from dynik_ros.core.extra_terms import within

    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(3, 13))
        t, m, o = (rng.normal(scale=1e-3, size=n) for _ in range(3))
        tol = float(rng.choice([1e-4, 1e-3, 5e-3]))
        if rng.random() < 0.2:
            t[int(rng.integers(n))] = np.nan
        if rng.random() < 0.2:
            o[:] = t - m - tol  # |t - m - o| at the tolerance, to rounding
        plain = bool(np.abs(t - m - o).max() <= tol)
        assert within(t.tolist(), m.tolist(), o.tolist(), tol) == plain


def _plain_held_velocity(extra, ik, mean, h):
    """``ExtraTerms._held_velocity`` as first written: ``@`` products, joints moved by ``h * mean[nb:]``."""
    robot, data, nb = ik.robot, extra._twists, ik.robot.base_dofs
    joints = ik.joint_positions + h * mean[nb:]
    if nb:
        rotation = pin.exp3(h * mean[3:6]) @ ik.base_rotation
        q = np.concatenate((np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]), joints))
        v = np.concatenate((mean[:3] @ rotation, mean[3:6] @ rotation, mean[6:]))
    else:
        q, v = joints, mean
    pin.forwardKinematics(robot.model, data, q, v)
    frame, twists = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED, []
    for on, fid, (pos, ori) in zip(
        extra.stance.pattern.active, extra._stance_ids, extra._stance_parts, strict=True
    ):
        if on:
            twist = pin.getFrameVelocity(robot.model, data, fid, frame)
            twists.append(twist.vector if pos and ori else twist.linear if pos else twist.angular)
    stacked = np.concatenate(twists)
    return (stacked.reshape(-1, 3) @ rotation.T).reshape(-1) if nb else stacked


def test_the_secants_twists_are_their_plain_formula_bit_for_bit():
    """``ExtraTerms._held_velocity`` (np.dot's C function for ``@``, ``h m`` once) against its plain formula
    on G1 with a floating and a fixed base, every combination of held feet, random configurations and means;
    and ``_dot`` against ``@`` on the layouts the stance rows multiply (C- and column-major 3 x 3, their
    transposes, rows of 3, the held Jacobian rows and a vector)."""
    from test_stance_secant import held_feet_iks

    from dynik_ros.core.small_arrays import dot as _dot

    rng = np.random.default_rng(7)
    for floating, flags, ik in held_feet_iks(rng):
        for _ in range(20):
            mean, h = rng.normal(scale=rng.choice([0.1, 1.0, 10.0]), size=ik.robot.nv), 0.5 / 120.0
            fast = ik.extra._held_velocity(ik, mean, h)
            assert np.array_equal(fast, _plain_held_velocity(ik.extra, ik, mean, h)), (floating, flags)
    for _ in range(3000):
        a = pin.exp3(rng.normal(size=3))
        b = np.asfortranarray(pin.exp3(rng.normal(size=3)) @ a)
        rows, jacobian, vector = (
            rng.normal(size=(int(rng.integers(1, 5)), 3)),
            rng.normal(size=(12, 35)),
            rng.normal(size=35),
        )
        for x, y in (
            (a, b),
            (b, a),
            (b.T, a),
            (a, b.T),
            (vector[:3], a),
            (vector[3:6], b),
            (rows, a.T),
            (rows, b.T),
            (jacobian, vector),
            (jacobian[6:], vector),
        ):
            assert np.array_equal(_dot(x, y), x @ y)
        task, target = on_mean(jacobian, vector[:12], 0.75, vector)  # (priority 1's rows on the mean)
        assert np.array_equal(task, 0.75 * jacobian)
        assert np.array_equal(target, vector[:12] - jacobian @ vector)
