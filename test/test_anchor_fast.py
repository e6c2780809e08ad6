"""Session 37's shortcuts in the ``anchor: robot`` replay and the QP wrappers (issue 9's speed target) give
what the plain code they replaced gives, bit for bit: each is checked here against a copy of that code.

- ``ActiveSetQP.solve`` writes the clipped bounds and ``[C^T | q]`` into arrays kept per workspace and leaves
  the factor's upper triangle unzeroed (``dtrtrs`` reads the lower one only);
- ``RobotAnchoredFeet._replayed`` compares the feet's rows with the sample's only until the first hold moved;
- ``_few_rows_plainly_valid`` checks the fields one by one instead of in a loop."""

from __future__ import annotations

import math
from pathlib import Path

import daqp
import numpy as np

from dynik_ros.core.active_set_qp import INFINITY, NOT_POSITIVE_DEFINITE, OPTIMAL, ActiveSetQP
from dynik_ros.core.lapack import dpotrf, dtrtrs
from dynik_ros.core.so3 import exp_so3
from dynik_ros.core.targets import _few_rows_plainly_valid


class _PlainActiveSetQP:
    """``ActiveSetQP`` as it was before session 37 (main 7e6feaf): new arrays every solve, a clean factor."""

    def __init__(self, n: int, m: int):
        self.n, self.m = n, m
        self._model = daqp.Model()
        self._set_up = False
        self._cold = np.zeros(m, dtype=np.intc)
        self.iterations = 0
        self.exitflag = 0

    def solve(self, hessian, gradient, rows, lower, upper):
        n, m = self.n, self.m
        lower = np.maximum(lower, -INFINITY)
        upper = np.minimum(upper, INFINITY)
        factor, info = dpotrf(hessian.T, lower=1, clean=1)
        if info != 0:
            return self._failed(NOT_POSITIVE_DEFINITE)
        stacked = np.empty((n, m + 1), order="F")
        stacked[:, :m] = rows.T
        stacked[:, m] = gradient
        solved, _ = dtrtrs(factor, stacked, lower=1, overwrite_b=1)
        ldp_rows, linear = solved[:, :m].T, solved[:, m]
        self._cold[:] = 0
        if self._set_up:
            flag = self._model.update(f=linear, A=ldp_rows, bupper=upper, blower=lower, sense=self._cold)
        else:
            flag, _ = self._model.setup(np.eye(n), linear, ldp_rows, upper, lower, self._cold)
            self._set_up = flag >= 0
        if flag < 0:
            return self._failed(flag)
        z, _, exitflag, info = self._model.solve()
        self.iterations = int(info["iterations"])
        if exitflag != OPTIMAL:
            return self._failed(exitflag)
        x, _ = dtrtrs(factor, z, lower=1, trans=1)
        if not np.isfinite(x).all():
            return self._failed(exitflag)
        self.exitflag = exitflag
        return x

    def _failed(self, flag):
        self.exitflag = int(flag)
        return None


def _qp(rng: np.random.Generator, n: int, m: int, kind: int):
    """A QP of ``n`` columns and ``m`` rows around a point that meets them (many rows active), with bounds
    of every kind (infinite, past DAQP's infinity, an equality, a band); ``kind`` 1-4 makes it one DAQP or
    LAPACK refuses: not positive definite, NaN gradient, crossing bounds, NaN rows."""
    a = rng.normal(size=(n + 3, n))
    hessian = a.T @ a + 1e-3 * np.eye(n)
    gradient = rng.normal(size=n) * rng.choice([1.0, 30.0])
    rows = rng.normal(size=(m, n))
    x0 = rng.normal(size=n) * 0.2
    r = rows @ x0
    lower, upper = r - rng.uniform(0.01, 0.5, m), r + rng.uniform(0.01, 0.5, m)
    lower[0], upper[0] = -np.inf, np.inf
    lower[1], upper[1] = -1e40, 1e40  # beyond DAQP's infinity: clipped to it
    lower[2] = upper[2] = r[2]  # an equality
    upper[3] = INFINITY * 2.0
    if kind == 1:
        hessian[0, 0] = -1.0
    elif kind == 2:
        gradient[rng.integers(n)] = np.nan
    elif kind == 3:
        lower[4], upper[4] = r[4] + 1.0, r[4] - 1.0
    elif kind == 4:
        rows[rng.integers(m), rng.integers(n)] = np.nan
    return hessian, gradient, rows, lower, upper


def test_one_daqp_workspace_solves_each_problem_of_a_sequence_as_the_plain_solve():
    """One ``ActiveSetQP`` over 400 problems in turn (a refused one every few, so that a solve after a
    failure is checked too) gives the plain solve's minimiser, bit for bit, its exit flag and iterations;
    a returned minimiser is its own array (the next solves leave it as it was)."""
    rng = np.random.default_rng(37)
    for n, m in ((6, 9), (12, 20)):
        fast, plain = ActiveSetQP(n, m), _PlainActiveSetQP(n, m)
        kept = []
        verdicts = {"solved": 0, "refused": 0}
        for trial in range(200):
            kind = int(rng.integers(0, 12)) if trial > 2 else 0
            problem = _qp(rng, n, m, kind if kind <= 4 else 0)
            inputs = [p.copy() for p in problem]
            with np.errstate(invalid="ignore"):
                expected = plain.solve(*problem)
                got = fast.solve(*problem)
            for before, after in zip(inputs, problem, strict=True):  # the caller's arrays are read only
                np.testing.assert_array_equal(before, after)
            assert (got is None) == (expected is None), (n, trial, kind)
            assert fast.exitflag == plain.exitflag and fast.iterations == plain.iterations, (n, trial)
            if expected is not None:
                assert got.tobytes() == expected.tobytes(), (n, trial)
                kept.append((got, expected.copy()))
            verdicts["solved" if expected is not None else "refused"] += 1
        for got, expected in kept:
            assert got.tobytes() == expected.tobytes()
        assert min(verdicts.values()) > 20, verdicts


def _plain_few_rows(values, rotation_tolerance):
    """``_few_rows_plainly_valid`` as it was before session 37 (main 7e6feaf)."""
    positions, rotations, linear, angular = values
    n_p, n_o = len(positions), len(rotations)
    total = 0.0
    for value, shape in zip(values, ((n_p, 3), (n_o, 3, 3), (n_p, 3), (n_o, 3)), strict=True):
        if value is None:
            continue
        if type(value) is not np.ndarray or value.shape != shape or value.dtype.char != "d":
            return False
        if value is not rotations:
            total += sum(value.ravel().tolist())
    if not math.isfinite(total):
        return False
    limit = rotation_tolerance - 1e-12
    low = -limit
    for a, b, c, d, e, f, g, h, i in rotations.reshape(-1, 9).tolist():
        if not (
            low <= a * a + d * d + g * g - 1.0 <= limit
            and low <= b * b + e * e + h * h - 1.0 <= limit
            and low <= c * c + f * f + i * i - 1.0 <= limit
            and low <= a * b + d * e + g * h <= limit
            and low <= a * c + d * f + g * i <= limit
            and low <= b * c + e * f + h * i <= limit
        ):
            return False
        if not (a * e * i + b * f * g + c * d * h) - (c * e * g + b * d * i + a * f * h) > 0.5 + 1e-12:
            return False
    return True


def test_the_few_rows_check_gives_the_plain_verdict_on_every_kind_of_rows():
    """``_few_rows_plainly_valid`` answers as its plain loop on random feet's rows: clean, NaN / inf in
    each field, huge entries whose sums overflow in one field or cancel across fields, the wrong dtype,
    shape or type in each field, fields left out, no rows at all."""
    rng = np.random.default_rng(11)
    tolerance = 1e-3
    answers = {True: 0, False: 0}
    for trial in range(8000):
        n_p, n_o = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        values = [
            rng.normal(size=(n_p, 3)),
            exp_so3(rng.normal(size=(n_o, 3)) * 2.0).reshape(n_o, 3, 3),
            rng.normal(size=(n_p, 3)) if rng.random() < 0.8 else None,
            rng.normal(size=(n_o, 3)) if rng.random() < 0.8 else None,
        ]
        kind, field = trial % 8, int(rng.integers(4))
        value = values[field]
        if kind == 1 and value is not None and value.size:
            value.reshape(-1)[rng.integers(value.size)] = rng.choice([np.nan, np.inf, -np.inf])
        elif kind == 2 and value is not None and value.size and field != 1:
            value[...] = rng.choice([1e308, -1e308])  # a field's sum overflows, or the fields' cancel
        elif kind == 3 and value is not None:
            values[field] = value.astype(np.float32)
        elif kind == 4 and value is not None:
            values[field] = value[..., :2]
        elif kind == 5 and value is not None:
            values[field] = value.tolist()
        elif kind == 6 and n_o:
            values[1][rng.integers(n_o)] *= rng.choice([-1.0, 1.0 + 2e-3, 1.0 + 2e-4])
        with np.errstate(over="ignore", invalid="ignore"):
            expected = _plain_few_rows(values, tolerance)
            got = _few_rows_plainly_valid(values, tolerance)
        assert got is expected, (trial, kind, field)
        answers[expected] += 1
    assert min(answers.values()) > 1000, answers


def _plain_replayed(self, k, m, robot, frames, q):
    """``RobotAnchoredFeet._replayed`` as it was before session 37 (main 7e6feaf): the feet's rows compared
    with the sample's at every sample."""
    from dynik_ros.retarget.robot_anchor import with_rows

    if self._q_at_sample is None or self.human.measured[k - 1]:
        self._q_at_sample = np.array(q, dtype=float)
    work = self._work
    position, velocity, rotation, omega = work[0][k], work[1][k], work[2][k], work[3][k]
    if self._data is None or self._data[0] is not robot:
        self._data = robot, robot.model.createData()
    self._frames = frames
    decided = self._decided[k] if self._decided is not None else [None] * len(self.rows)
    flags, flat, on_toe = self.flags[k], self.flat[k], self.on_toe[k]
    for f in range(len(self.rows)):
        self.contact.advance(
            f, k, self.human, position[f], velocity[f], rotation, omega, flags, flat, on_toe,
            self._robot_sole, decided[f],
        )  # fmt: skip
    rows, ori_rows = self._rows_at, self._ori_rows_at
    feet_rotations = rotation[self._feet_at]
    if (
        m.positions[rows].tolist() == position.tolist()
        and m.rotations[ori_rows].tolist() == feet_rotations.tolist()
    ):
        return m, None
    positions = np.array(m.positions, dtype=float)
    positions[rows] = position
    rotations = np.array(m.rotations, dtype=float)
    rotations[self.orientation_rows] = feet_rotations
    linear, angular = m.linear_velocities, m.angular_velocities
    feet_omegas = None
    if linear is not None:
        linear = np.array(linear, dtype=float)
        linear[rows] = velocity
    if angular is not None:
        feet_omegas = omega[self._feet_at]
        angular = np.array(angular, dtype=float)
        angular[self.orientation_rows] = feet_omegas
    out = with_rows(m, positions, rotations, linear, angular)
    return out, (position, feet_rotations, None if linear is None else velocity, feet_omegas)


def test_the_replay_compared_until_the_first_moved_hold_gives_the_plain_replay(monkeypatch):
    """The replay of the CMU excerpt on G1 with the configurations of an IK run gives, sample by sample,
    what the plain replay (rows compared at every sample) gives: the same measurement values, the same
    verdict of the rows' check, the sample's own measurement object wherever the plain one returns it
    before the first hold moved, and the same moved holds."""
    from dynik_ros.core.targets import plainly_valid_all
    from dynik_ros.io.motion_files import detect_format, read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter
    from dynik_ros.retarget.robot_anchor import RobotAnchoredFeet

    path = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"
    motion = read_motion_file(path, detect_format(path))
    rt = Retargeter.from_config("g1")
    rt.reset()
    measurements, flags = rt.motion_measurements(motion)
    ik = rt.make_ik()
    configurations = []
    checked = RobotAnchoredFeet.checked_measurement

    def recorded(self, k, m, robot, frames, q, plain, tolerance):
        configurations.append((k, np.array(q)))
        return checked(self, k, m, robot, frames, q, plain, tolerance)

    monkeypatch.setattr(RobotAnchoredFeet, "checked_measurement", recorded)
    rt.run(motion.times, measurements, ik, settle=0.0, evaluate=False, contacts=flags)
    monkeypatch.undo()
    replay, robot = rt.robot_anchor, rt.robot
    frames = [f.frame for f in rt.config.feet]
    tolerance = ik.config.rotation_tolerance
    trusted = plainly_valid_all(measurements, ik.targets, tolerance)
    assert trusted

    def run(replayed):
        monkeypatch.setattr(RobotAnchoredFeet, "_replayed", replayed)
        replay.start()
        out = [
            (*replay.checked_measurement(k, measurements[k], robot, frames, q, trusted, tolerance),
             len(replay.contact.reanchors))
            for k, q in configurations
        ]  # fmt: skip
        monkeypatch.undo()
        return out, list(replay.contact.reanchors)

    fast, fast_moved = run(RobotAnchoredFeet._replayed)
    plain, plain_moved = run(_plain_replayed)
    assert fast_moved == plain_moved and len(plain_moved) >= 3
    same_object = 0
    for (k, _), (got, got_checked, moved), (expected, expected_checked, _) in zip(
        configurations, fast, plain, strict=True
    ):
        assert got_checked == expected_checked, k
        for name, value in vars(expected).items():
            other = vars(got)[name]
            if isinstance(value, np.ndarray):
                assert other.dtype == value.dtype and other.tobytes() == value.tobytes(), (k, name)
            else:
                assert other == value, (k, name)
        if expected is measurements[k] and not moved:  # before the first moved hold: not copied
            assert got is measurements[k], k
            same_object += 1
    assert same_object >= 3
