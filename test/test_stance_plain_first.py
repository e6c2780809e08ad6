"""Plain stance rows first (``StancePriority.plain_first``, ``core/stance_priority.py``): after a step that
met its stance rows the step poses them plain (``v*_s +- tol``) and solves the main QP on DAQP alone; only
where that does not meet every row is priority 1 solved, as without the trial."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from test_floor_rows import RATE
from test_stance_priority import held_roll_past_the_limit
from test_stance_rows import _pulled_run

from dynik_ros.core import stance_priority
from dynik_ros.core.dynamical_ik import DynamicalIKConfig
from dynik_ros.retarget.retargeter import ROBOT_INTEGRATION, Retargeter


def _counting_resolves(ik) -> list[int]:
    """``ik``'s main QP with its re-solves counted (the step's own solve is ``solve``; a failed plain trial is
    followed by one ``resolve`` with the rows centred by priority 1)."""
    count = [0]
    resolve = ik.qp.resolve

    def counted(*args, **kwargs):
        count[0] += 1
        return resolve(*args, **kwargs)

    ik.qp.resolve = counted
    return count


def test_where_the_plain_rows_cannot_be_met_the_step_is_priority_1s_bit_for_bit():
    """The held roll past G1's ankle-roll limit (test_stance_priority.py): the plain rows cannot be met on
    any step with the feet in contact. With the plain rows tried on every such step (the predictor forced),
    each trial ends in DAQP without an optimum (OSQP is never set up: it would spend its iteration limit on
    the contradicting rows), priority 1 is solved and the step re-solved, and every written ``q`` and state
    equals the run without the trial bit for bit."""
    rt, rolled, q0, _ = held_roll_past_the_limit()
    tried, plain = rt.make_ik(q0=q0), rt.make_ik(q0=q0)
    plain.extra.priority.plain_first = False
    assert tried.extra.priority.plain_first  # the default
    resolves = _counting_resolves(tried)
    stance = 0
    for m in rolled:
        tried.extra.priority._last = "met"  # the predictor forced: a trial on every step
        q_tried, _ = tried.step(m, 1.0 / RATE)
        q_plain, _ = plain.step(m, 1.0 / RATE)
        np.testing.assert_array_equal(q_tried, q_plain)
        assert tried.info.stance == plain.info.stance and tried.info.solved
        stance += bool(m.stance.all())
    counts = tried.extra.priority.counts
    assert stance >= 180 and counts["yielded"] == stance and counts["skipped"] == 0
    assert resolves[0] == stance  # every step in contact tried the plain rows and fell back
    assert tried.qp._solver is None and plain.qp._solver is None  # OSQP never set up


def test_where_the_plain_rows_can_be_met_priority_1_is_skipped():
    """The pulled legs of test_stance_rows.py without floor rows (rows that can be met): every step in
    contact meets the plain rows, so none solves priority 1 (``skipped`` counts them) and the trajectory is
    the plain rows' (``stance_priority=False``) bit for bit; with priority 1 on every step it is within 1e-9
    rad and m of it (``y* = v*_s`` to priority 1's damping: 1.4e-11 measured)."""
    runs, counts = {}, {}
    for plain_first in (True, False):
        old = stance_priority.PLAIN_FIRST
        stance_priority.PLAIN_FIRST = plain_first  # the default of the IK that _pulled_run makes
        try:
            rt, infos, result = _pulled_run("hard", floor_rows=False)
        finally:
            stance_priority.PLAIN_FIRST = old
        assert {info.stance for info in infos} == {"", "met"}
        runs[plain_first] = result.q
        counts[plain_first] = sum(info.stance == "met" for info in infos)
    _, _, plain = _pulled_run("hard", floor_rows=False, priority=False)
    np.testing.assert_array_equal(runs[True], plain.q)
    np.testing.assert_allclose(runs[True], runs[False], rtol=0.0, atol=1e-9)
    assert counts[True] == counts[False] >= 180


def test_plain_first_on_the_real_walk_moves_the_trajectory_within_the_rows_tolerance():
    """The committed CMU excerpt on TALOS, hard stance and floor rows: met and yielded steps alternate. With
    the plain rows first 60 steps skip priority 1 (those after a met step or without contact that meet their
    rows); the yielded steps are the same and every step keeps the floor rows; the written ``q`` differs
    from priority 1 by at most 1e-5 rad and m (measured 1.4e-6; the rows' band: 1e-4 m/s, rad/s)."""
    from dynik_ros.io.motion_files import read_motion_file

    rt = Retargeter.from_config("talos")
    contact = dataclasses.replace(rt.config.contact, stance="hard")
    rt.config = dataclasses.replace(rt.config, contact=contact)
    rt.contact.spec = contact
    motion = read_motion_file(Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh")
    steps = np.diff(motion.times, prepend=motion.times[0] - 1.0 / 120.0)
    runs, counts = {}, {}
    for plain_first in (True, False):
        rt.reset()
        measurements, _ = rt.motion_measurements(motion)
        ik = rt.make_ik(DynamicalIKConfig(integration=ROBOT_INTEGRATION))
        ik.extra.priority.plain_first = plain_first
        rt.settle(ik, measurements[0], 1.0)
        qs = []
        for dt, m in zip(steps, measurements, strict=True):
            qs.append(ik.step(m, float(dt))[0].copy())
            assert ik.info.solved and ik.info.floor == "hard"
        runs[plain_first], counts[plain_first] = np.array(qs), dict(ik.extra.priority.counts)
    assert counts[True]["skipped"] > 40 and counts[False]["skipped"] == 0
    assert counts[True]["yielded"] == counts[False]["yielded"] > 20
    np.testing.assert_allclose(runs[True], runs[False], rtol=0.0, atol=1e-5)
