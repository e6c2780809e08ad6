"""The coupled rows' shortcuts of session 36 give the answers of the plain formulas they replaced, bit for
bit: the still-joints test of ``_velocity_bounds`` (``np.clip`` and ``np.all`` as ufuncs), the early return of
``_back_inside_coupled_rows`` and the 1-norm of ``_cholesky_basis``. Each plain formula is the code as it was
before the shortcut; the inputs are iCub's own shoulder rows, with rows active, violated and crossed."""

from __future__ import annotations

import numpy as np
import pytest

import dynik_ros.core.step_integration as step_integration
from dynik_ros.core.joint_velocity_bounds import JointVelocityBounds
from dynik_ros.core.step_integration import ROW_ROUND_OFF
from dynik_ros.core.velocity_qp import UNBOUNDED
from dynik_ros.retarget import Retargeter

STATE = (
    "joint_positions",
    "_corrector",
    "_carried_velocity",
    "_weights_key",
    "_fell_back",
    "_lower",
    "_upper",
)


@pytest.fixture(scope="module")
def icub():
    """iCub's IK (trapezoidal, as dynik-retarget runs it): ten shoulder rows on six joints."""
    ik = Retargeter.from_config("icub").make_ik()
    assert ik._n_coupled == 10 and not ik._followers
    ik._fell_back = False
    ik._plan_integration(1 / 120)  # the step's quadrature: the state _velocity_bounds reads
    return ik


def _bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values (NaN where NaN) and the same signs of zero."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _plain_still_test(a, carried, w0, lower, upper, rows_upper) -> bool:
    """The test as it was: the still joints clipped by ``np.clip``, every row by ``np.all``."""
    still = np.clip(-carried / w0, lower, upper)
    return bool(np.all(a @ still <= rows_upper + 1e-12))


def _plain_velocity_bounds(ik, dt: float) -> None:
    """``_velocity_bounds`` as it was (coupled rows, no followers)."""
    robot, kg, n = ik.robot, ik.config.limit_gain, ik.robot.n_joints
    vmax = robot.velocity_limit
    below = ik.joint_positions - robot.lower
    above = robot.upper - ik.joint_positions
    m_low = -np.minimum(vmax * np.tanh(kg * below), below / dt)
    m_high = np.minimum(vmax * np.tanh(kg * above), above / dt)
    c = robot.constraints
    slack = np.maximum(c.b - c.A @ ik.joint_positions, 0.0)
    row_high = np.minimum(c.velocity_bound * np.tanh(kg * slack), slack / dt)
    for attempt in range(2):
        w0 = ik._corrector[0]
        carried = ik._carried_velocity[robot.base_dofs :]
        lower = np.maximum((m_low - carried) / w0, -vmax)
        upper = np.minimum((m_high - carried) / w0, vmax)
        feasible = np.count_nonzero(lower <= upper) == n
        rows_upper = (row_high - c.A @ carried) / w0
        if feasible:
            still = np.clip(-carried / w0, lower, upper)
            feasible = bool(np.all(c.A @ still <= rows_upper + 1e-12))
        if feasible or attempt:
            break
        ik._use_euler_for_this_step()
    ik._lower[:n], ik._upper[:n] = lower, upper
    ik._lower[n:] = -UNBOUNDED
    ik._upper[n:] = rows_upper


def _plain_back_inside(ik, previous: np.ndarray, dt: float) -> None:
    """``_back_inside_coupled_rows`` as it was."""
    c, s = ik.robot.constraints, ik.joint_positions
    excess = c.A @ s - c.b
    over = (excess > 0.0) & (excess <= ROW_ROUND_OFF)
    if not over.any():
        return
    rows = c.A[over]
    s = s - rows.T @ np.linalg.lstsq(rows @ rows.T, excess[over], rcond=None)[0]
    if ik._expansion is not None:
        s = ik.robot.apply_reductions(s)
    reach = dt * ik.robot.velocity_limit
    s = np.clip(s, previous - reach, previous + reach)
    ik.joint_positions = np.clip(s, ik.robot.lower, ik.robot.upper)


def _saved(ik) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k in STATE for v in [getattr(ik, k)]}


def _restore(ik, state: dict) -> None:
    for k, v in state.items():
        setattr(ik, k, v.copy() if isinstance(v, np.ndarray) else v)


def _reachable_rows(ik) -> list[int]:
    """The rows some joints inside the box meet (iCub's upper bounds on the differences are never reached)."""
    c, robot = ik.robot.constraints, ik.robot
    highest = np.where(c.A > 0, c.A * robot.upper, c.A * robot.lower).sum(axis=1)
    return [int(i) for i in np.flatnonzero(highest > c.b + 1e-3)]


def _on_a_row(ik, rng, row: int, offset: float) -> np.ndarray:
    """Joints inside the box with coupled row ``row`` at ``A s - b = offset`` (up to round-off): a random
    configuration whose row joints move from the row's lowest corner of the box towards its highest."""
    c, robot = ik.robot.constraints, ik.robot
    a = c.A[row]
    joints = a != 0.0
    for _ in range(100):
        start = rng.uniform(robot.lower, robot.upper)
        end = start.copy()
        start[joints] = np.where(a > 0, robot.lower, robot.upper)[joints]
        end[joints] = np.where(a > 0, robot.upper, robot.lower)[joints]
        start = start + rng.uniform(0.0, 0.5) * (end - start)
        share = (c.b[row] + offset - a @ start) / (a @ end - a @ start)
        if 0.0 <= share <= 1.0:
            return start + share * (end - start)
    raise AssertionError("no configuration on the row inside the box")


def test_the_still_test_is_the_plain_clip_and_all(icub):
    """Random carried velocities (NaN and inf among them), weights and boxes, rows whose bound is the still
    joints' own product plus nothing, the 1e-12 tolerance, a little more or less: the same answer, and
    both answers many times."""
    rng = np.random.default_rng(36)
    a, n = icub.robot.constraints.A, icub.robot.n_joints
    answers = {True: 0, False: 0}
    for trial in range(3000):
        carried = rng.normal(size=n) * rng.choice([1e-3, 0.3, 3.0])
        if trial % 50 == 0:
            carried[rng.integers(n)] = rng.choice([np.nan, np.inf, -np.inf])
        if trial % 7 == 0:
            carried[rng.integers(n, size=5)] = 0.0
        w0 = float(rng.choice([0.5, 1.0, 0.375, 5.0 / 12.0]))
        lower = -rng.uniform(0.0, 2.0, n)
        upper = rng.uniform(0.0, 2.0, n)
        if trial % 3 == 0:
            lower[:4] = upper[:4] = 0.0  # a closed interval: the clip decides alone
        still = np.clip(-carried / w0, lower, upper)
        offsets = rng.choice([0.0, 1e-16, 1e-9], size=10)
        if trial % 2:  # one row short of the still joints' product, by round-off or more
            offsets[rng.integers(10)] = rng.choice([-1e-16, -1e-13, -1e-6])
        rows_upper = a @ still - 1e-12 + offsets
        plain = _plain_still_test(a, carried, w0, lower, upper, rows_upper)
        fast = JointVelocityBounds._still_meets_rows(icub, carried, w0, lower, upper, rows_upper)
        assert type(fast) is bool or isinstance(fast, np.bool_)
        assert bool(fast) == plain, trial
        answers[plain] += 1
    assert min(answers.values()) > 500, answers


def test_the_bounds_on_icub_are_the_plain_formula_with_rows_inside_active_violated_and_falling_back(
    icub, monkeypatch
):
    """``_velocity_bounds`` on iCub from joints inside the rows, on a row, across a row, with carried
    velocities that keep the still test true, large ones that empty the box, and ones along a row at about
    the velocity limit, which make the still test false (the step falls back to Euler): every bound, the
    corrector and the fallback flag bit for bit."""
    rng = np.random.default_rng(3601)
    robot, ik, nb = icub.robot, icub, icub.robot.base_dofs
    start = _saved(ik)
    fell_back = kept = 0
    still_failed = [0]
    still_test = JointVelocityBounds._still_meets_rows

    def counted(*args) -> bool:
        answer = still_test(*args)
        still_failed[0] += not answer
        return answer

    monkeypatch.setattr(JointVelocityBounds, "_still_meets_rows", counted)
    try:
        for trial in range(400):
            kind = trial % 4
            carried = np.zeros(robot.nv)
            carried[nb:] = rng.normal(size=robot.n_joints) * rng.choice([1e-4, 0.05, 1.0, 20.0])
            if kind == 0:
                s = rng.uniform(robot.lower, robot.upper)
            else:
                offset = {1: 0.0, 2: 1e-5, 3: -1e-9}[kind]
                row = int(rng.choice(_reachable_rows(ik)))
                s = _on_a_row(ik, rng, row, offset)
                if trial % 8 < 4:  # pushed along the row at about the velocity limit: the still test fails
                    a, vmax = robot.constraints.A[row], robot.velocity_limit
                    speed = np.min(vmax[a != 0.0] / np.abs(a[a != 0.0]))
                    carried[nb:] = a * speed * rng.uniform(0.6, 1.3) + carried[nb:] * 1e-3
            state = dict(
                start,
                joint_positions=s,
                _corrector=np.array([0.5, 0.5]),
                _carried_velocity=carried,
                _weights_key=None,
                _fell_back=False,
            )
            dt = float(rng.choice([1 / 120, 1 / 60]))
            _restore(ik, state)
            _plain_velocity_bounds(ik, dt)
            plain = _saved(ik)
            _restore(ik, state)
            ik._velocity_bounds(dt)
            fast = _saved(ik)
            for k in STATE:
                if isinstance(plain[k], np.ndarray):
                    assert _bitwise_equal(plain[k], fast[k]), (trial, k)
                else:
                    assert plain[k] == fast[k], (trial, k)
            fell_back += plain["_fell_back"]
            kept += not plain["_fell_back"]
    finally:
        _restore(ik, start)
    assert fell_back > 20 and kept > 20 and still_failed[0] > 20, (fell_back, kept, still_failed)


@pytest.mark.parametrize("offset", [-1e-3, -1e-12, 0.0, 5e-324, 1e-9, 1e-6, ROW_ROUND_OFF, 2 * ROW_ROUND_OFF])
def test_back_inside_the_rows_is_the_plain_formula(icub, offset):
    """Joints left by a step short of a row, on it, across it by round-off (moved back along it) and across
    it by more than ``ROW_ROUND_OFF`` (left alone): the same joints bit for bit, from the same previous
    joints."""
    rng = np.random.default_rng(int(abs(offset) * 1e12) % 1000)
    ik, c = icub, icub.robot.constraints
    start = _saved(ik)
    moved = 0
    try:
        for trial in range(30):
            rows = _reachable_rows(ik)
            s = _on_a_row(ik, rng, rows[trial % len(rows)], offset)
            previous = s + rng.normal(size=s.size) * 1e-3
            excess = c.A @ s - c.b
            _restore(ik, dict(start, joint_positions=s))
            _plain_back_inside(ik, previous, 1 / 120)
            plain = ik.joint_positions.copy()
            _restore(ik, dict(start, joint_positions=s))
            ik._back_inside_coupled_rows(previous, 1 / 120)
            assert _bitwise_equal(plain, ik.joint_positions), trial
            moved += plain is not s and not _bitwise_equal(plain, s)
            if np.any((excess > 0.0) & (excess <= ROW_ROUND_OFF)):
                assert not _bitwise_equal(plain, s)
    finally:
        _restore(ik, start)
    if 0.0 < offset <= ROW_ROUND_OFF / 2:
        assert moved > 0


def test_the_norm_given_to_the_condition_estimate_is_the_plain_sums(monkeypatch):
    """``_cholesky_basis`` hands LAPACK's ``dpocon`` ``np.abs(gram).sum(axis=0).max()`` bit for bit: grams of
    held-foot-like rows (12 x 38, some columns zeroed), of rows with negative products, and one with a NaN."""
    seen = []
    real = step_integration.dpocon

    def recording(factor, norm, **kwargs):
        seen.append(norm)
        return real(factor, norm, **kwargs)

    monkeypatch.setattr(step_integration, "dpocon", recording)
    rng = np.random.default_rng(3602)
    for trial in range(300):
        rows = rng.normal(size=(12, 38)) * rng.choice([1e-3, 1.0, 1e3], size=(12, 1))
        if trial % 3 == 0:
            rows[:, rng.integers(38, size=6)] = 0.0
        gram = rows @ rows.T
        if trial % 5 == 0:  # not a Gram matrix: columns of mixed signs and sizes (sums in another order)
            gram = gram + np.diag(rng.uniform(1e3, 1e4, 12)) - np.abs(rng.normal(size=(12, 12)))
        if trial == 7:
            gram[3, 5] = np.nan
        seen.clear()
        step_integration._cholesky_basis(rows, gram)
        if seen:
            plain = float(np.abs(gram).sum(axis=0).max())
            assert _bitwise_equal(np.float64(seen[0]), np.float64(plain)), trial
            assert type(seen[0]) is float
