"""The extra terms' fast paths (session 37) against the plain formulas they replace, bit for bit: the floor
rows' Jacobian from per-frame slices of the stacked Jacobian, their bound written in place, the heights from a
third of the placement gather, the stance flags taken by their bytes, priority 1's weights and its ``met``
check in floats."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dynik_ros.core.floor_rows import FloorRows, _frame_slices
from dynik_ros.core.stance_priority import STATES
from dynik_ros.core.stance_rows import StancePattern, StanceRows
from dynik_ros.core.targets import FrameTarget, TargetSet


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _plain_levers(floor: FloorRows, data) -> tuple[np.ndarray, np.ndarray]:
    """Per point its frame's origin and lever, frame by frame through pinocchio's own placements."""
    poses = np.array([data.oMf[i].homogeneous for i in floor._frame_ids])[floor._point_frame]
    levers = np.einsum("nij,nj->ni", poses[:, :3, :3], floor._offsets)
    return poses[:, :3, 3], levers


def _plain_prepare(floor: FloorRows, data, dt: float, mean: np.ndarray, jacobian: np.ndarray):
    """``FloorRows.prepare`` as it was (main 7e6feaf): ``(J_z, b)`` from the gathered stacked rows."""
    origins, levers = _plain_levers(floor, data)
    vertical, ang_x, ang_y = jacobian[floor._stacked_rows].reshape(3, floor.n_rows, -1)
    plain = vertical + levers[:, 1, None] * ang_x - levers[:, 0, None] * ang_y
    predicted = origins[:, 2] + levers[:, 2] - floor.config.height
    return plain, ((1.0 - floor.config.gain) * floor.previous - predicted) / dt + plain @ mean


def _ik(robot: str, height: float = 0.0, reverse: bool = False):
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config(robot)
    ik = rt.make_ik()
    floor = ik.extra.floor
    points = floor.config.points[::-1] if reverse else floor.config.points
    config = replace(floor.config, height=height, points=points)
    return ik, FloorRows(ik.robot, config, ik.targets)


@pytest.mark.parametrize(
    "robot, height, reverse",
    [
        ("g1", 0.0, False),
        ("icub", 0.0, True),
        ("talos", 0.0, False),
        ("g1", 0.013, True),
        ("icub", -0.02, False),
    ],
)
def test_floor_rows_from_frame_slices_are_the_gathered_formula(robot, height, reverse):
    """Each robot's soles (their corners also in the reverse order: the frames' slices step backwards), on
    and off a floor at zero: ``J_z``, ``b`` and the heights at random configurations as the plain formulas
    give them, and as the gathered rows give them where the slices are not used."""
    ik, floor = _ik(robot, height, reverse)
    assert floor._frame_rows is not None
    gathered = FloorRows(ik.robot, floor.config, ik.targets)
    gathered._frame_rows = None  # the gather of every point's rows
    kinematics = ik.kinematics
    rng = np.random.default_rng(37)
    for _ in range(8):
        q = ik.q.copy()
        q[7:] += rng.uniform(-0.3, 0.3, size=q.size - 7)
        kinematics.update(q)
        jacobian = kinematics.stacked_jacobian(q[:3])
        mean, dt = rng.normal(size=ik.robot.nv), 1.0 / rng.uniform(30.0, 240.0)
        for rows in (floor, gathered):
            rows.observe(kinematics.data)
            origins, levers = _plain_levers(rows, kinematics.data)
            assert _bitwise_equal(rows.previous, origins[:, 2] + levers[:, 2] - height)
            rows.prepare(kinematics.model, kinematics.data, dt, mean, jacobian)
            plain, bound = _plain_prepare(rows, kinematics.data, dt, mean, jacobian)
            assert _bitwise_equal(rows._jacobian, plain) and _bitwise_equal(rows._bound, bound)


def test_floor_heights_keep_nan_and_inf_where_the_formula_does():
    """Placements holding NaN and inf (a configuration gone bad): the heights' NaN and inf entries where the
    plain formula puts them, the finite ones to the bit."""
    ik, floor = _ik("g1")
    kinematics = ik.kinematics
    q = ik.q.copy()
    q[7:] += 0.1
    kinematics.update(q)
    floor.observe(kinematics.data)  # (makes the table's views)
    fid = floor._frame_ids[floor._point_frame[0]]
    for bad in (np.nan, np.inf, -np.inf):
        rotation = kinematics.data.oMf[fid].rotation
        saved = rotation.copy()
        rotation[2, 0] = bad
        kinematics.data.oMf[fid].rotation = rotation
        got = floor.heights(kinematics.data)
        origins, levers = _plain_levers(floor, kinematics.data)
        want = origins[:, 2] + levers[:, 2] - floor.config.height
        assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).any() == np.isnan(bad)
        assert _bitwise_equal(got[np.isfinite(want)], want[np.isfinite(want)])
        assert _bitwise_equal(got[np.isinf(want)], want[np.isinf(want)])
        kinematics.data.oMf[fid].rotation = saved


def test_frame_slices_are_the_points_rows_or_none():
    """The slices' rows are each block's frame's rows, forwards, backwards, from row 0, one frame; ``None``
    where the points are not frame by frame, as many per frame, or a kind of row is not evenly spaced."""
    table = np.arange(70.0)[:, None]
    cases = [
        (np.array([0, 0, 1, 1]), [(5, 20), (8, 29)]),
        (np.array([1, 1, 1, 0, 0, 0]), [(2, 20), (8, 29)]),  # backwards
        (np.array([1, 1, 0, 0]), [(0, 0), (3, 9)]),  # backwards down to row 0: the slice runs to the start
        (np.array([0, 0, 0]), [(4, 40)]),
        (np.array([2, 2, 1, 1, 0, 0]), [(2, 30), (5, 33), (8, 36)]),
    ]
    for point_frame, frame_rows in cases:
        slices = _frame_slices(point_frame, frame_rows)
        assert slices is not None
        blocks = point_frame.reshape(len(frame_rows), -1)[:, 0]
        for kind, index in enumerate(slices):
            want = [frame_rows[f][min(kind, 1)] + (kind == 2) for f in blocks]
            assert table[index].shape == (len(frame_rows), 1, 1)
            assert table[index].ravel().tolist() == want
    assert _frame_slices(np.array([0, 1, 0, 1]), [(5, 20), (8, 29)]) is None  # not frame by frame
    assert _frame_slices(np.array([0, 0, 0, 1]), [(5, 20), (8, 29)]) is None  # uneven
    assert _frame_slices(np.array([0, 1, 2]), [(2, 30), (5, 33), (9, 36)]) is None  # not evenly spaced
    assert _frame_slices(np.array([0, 0, 1, 1]), [(5, 20), (5, 29)]) is None  # one row twice


def _plain_pattern(stance: StanceRows, flags) -> StancePattern:
    """The pattern of ``flags`` as ``StanceRows.observe`` built it (main 7e6feaf)."""
    flags = np.zeros(len(stance.frames), dtype=bool) if flags is None else np.asarray(flags, dtype=bool)
    return StancePattern.of(stance.rows, flags)


def test_stance_flags_taken_by_their_bytes_are_the_flags():
    """Flags as boolean arrays (new and seen combinations, a row of a table, a strided column), lists,
    integers and ``None``: the same pattern and active flags as building the pattern from them; a wrong
    shape is refused whether or not its bytes are a known pattern's."""
    targets = TargetSet(
        [
            FrameTarget("a", position=True),
            FrameTarget("b", position=True, orientation=False),
            FrameTarget("c"),
        ]
    )
    stance = StanceRows(targets, ("a", "b"), 12)
    table = np.array([[True, False, True], [False, False, True], [True, True, False]])
    sequence = [
        np.array([True, False]),
        np.array([True, False]),
        None,
        [False, True],
        np.array([1, 1]),
        table[0, :2],
        table[:2, 2],  # strided
        table[1, :2],
        np.array([True, True]),
        np.array([False, False]),
    ]
    for flags in sequence:
        stance.observe(flags)
        want = _plain_pattern(stance, flags)
        got = stance.pattern
        assert got.active == want.active and got.imposed == want.imposed
        assert _bitwise_equal(got.rows, want.rows) and _bitwise_equal(got.mask, want.mask)
        assert stance.active.tolist() == list(want.active)
    for wrong in (np.array([True]), np.array([[True, False]]), np.array([True, False, True])):
        with pytest.raises(ValueError):
            stance.observe(wrong)


def test_priority_weights_and_met_check_are_the_array_formulas():
    """Priority 1 on G1 with one foot and both feet held, random tasks: the weights its QP gets are
    ``np.where(mask, weights[rows], 0)`` and its state says ``met`` exactly where
    ``np.abs(y* - v*_s).max() <= tol``, NaN ``v*`` included."""
    from dynik_ros.retarget.retargeter import Retargeter

    ik = Retargeter.from_config("g1").make_ik()
    extra, priority = ik.extra, ik.extra.priority
    seen = []
    solve = priority.qp.solve

    def spy(task, target, w, *args, **kwargs):
        seen.append(w.copy())
        return solve(task, target, w, *args, **kwargs)

    priority.qp.solve = spy
    rng = np.random.default_rng(3)
    kinematics = ik.kinematics
    kinematics.update(ik.q)
    jacobian = kinematics.stacked_jacobian(ik.q[:3])
    nv = ik.robot.nv
    states = set()
    for trial in range(24):
        flags = [(True, True), (True, False), (False, True)][trial % 3]
        extra.stance.observe(np.array(flags))
        pattern = extra.stance.pattern
        weights = rng.uniform(0.5, 2.0, size=jacobian.shape[0])
        corrected = rng.normal(scale=0.05, size=jacobian.shape[0])
        if trial % 4 == 3:  # reachable: v*_s what a small nu gives
            corrected[pattern.rows] = jacobian[pattern.rows] @ rng.normal(scale=1e-3, size=nv)
        if trial == 23:
            corrected[pattern.rows[0]] = np.nan
        limit = 5.0 if trial % 2 else 1e-4  # tight joint rows: v*_s out of reach, priority 1 gives way
        lower, upper = np.full(ik._lower.size, -limit), np.full(ik._upper.size, limit)
        centred = priority.centre(jacobian, corrected, weights, lower, upper, None)
        rows = priority._rows
        assert _bitwise_equal(seen[-1], np.where(pattern.mask, weights[rows], 0.0))
        if priority.state == STATES[2]:
            continue
        held = pattern.rows
        met = np.abs(centred[held] - corrected[held]).max() <= extra.stance.tolerance
        assert priority.state == (STATES[0] if met else STATES[1])
        states.add(priority.state)
    assert states == {STATES[0], STATES[1]}


def test_priority_with_the_held_rows_given_is_priority_gathering_them():
    """Two priority 1s of G1 fed the same random steps (one foot, both feet), one given the held rows
    ``jacobian[pattern.rows]`` (ExtraTerms' gather, which is also the task's rows with both feet down), one
    gathering them itself: the same QP inputs, ``y*`` and states to the bit."""
    from dynik_ros.retarget.retargeter import Retargeter

    iks = [Retargeter.from_config("g1").make_ik() for _ in range(2)]
    tasks: list[list[np.ndarray]] = [[], []]
    for ik, seen in zip(iks, tasks, strict=True):
        solve = ik.extra.priority.qp.solve

        def spy(task, target, w, *args, _solve=solve, _seen=seen, **kwargs):
            _seen.append(np.concatenate((task.ravel(), target, w)))
            return _solve(task, target, w, *args, **kwargs)

        ik.extra.priority.qp.solve = spy
    kinematics = iks[0].kinematics
    kinematics.update(iks[0].q)
    jacobian = kinematics.stacked_jacobian(iks[0].q[:3])
    rng = np.random.default_rng(8)
    nv = iks[0].robot.nv
    for trial in range(12):
        flags = np.array([(True, True), (True, False), (False, True)][trial % 3])
        weights = rng.uniform(0.5, 2.0, size=jacobian.shape[0])
        corrected = rng.normal(scale=0.05, size=jacobian.shape[0])
        w0, carried = rng.uniform(0.5, 1.0), rng.normal(scale=0.01, size=nv)
        limit = 5.0 if trial % 2 else 1e-4
        lower, upper = np.full(iks[0]._lower.size, -limit), np.full(iks[0]._upper.size, limit)
        results = []
        for k, ik in enumerate(iks):
            ik.extra.stance.observe(flags)
            held = jacobian[ik.extra.stance.pattern.rows] if k else None
            priority = ik.extra.priority
            centred = priority.centre(jacobian, corrected, weights, lower, upper, None, w0, carried, held)
            results.append((centred, priority.state))
            if priority.state != STATES[2]:  # y* as the plain formula gives it: J_s (w0 nu_1 + c)
                rows = ik.extra.stance.pattern.rows
                achieved = jacobian[rows] @ (w0 * priority._solution.nu + carried)
                assert _bitwise_equal(centred[rows], achieved)
        assert _bitwise_equal(results[0][0], results[1][0]) and results[0][1] == results[1][1]
        assert _bitwise_equal(tasks[0][-1], tasks[1][-1])
