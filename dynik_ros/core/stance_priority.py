"""Prioritized (lexicographic) hard stance: the stance rows of :mod:`.stance_rows` centred where the robot
can meet them, so a step with a foot in contact is never infeasible.

Hard stance rows ``v*_s - tol <= J_s nu <= v*_s + tol`` contradict the joint rows of eq. (10b) (the bounds of
eq. 12-13) and the floor rows (:mod:`.floor_rows`) when the held pose asks for more than the limits allow
(a leg leaning past its ankle roll's range, a held sole under the floor). OSQP then ends at its iteration
limit with an iterate that misses any row, or the step holds. Lexicographic order instead: priority 1 is

    nu_1 = argmin_nu  1/2 || W_s (J_s nu - v*_s) ||^2 + 1/2 mu ||nu||^2
           s.t.       l <= C nu <= u        (the step's joint rows, eq. 10b)
                      the step's other dynamic rows (support, loop and floor rows: they win)

with ``J_s``, ``v*_s``, ``W_s`` the stance frames' rows of the stacked Jacobian, of eq. (9)'s corrected
velocity and of the weights, and ``y* = J_s nu_1``. The cost is strictly convex in ``y = J_s nu``, so ``y*``
is unique (for ``mu -> 0``; ``mu`` is a small damping that makes ``nu_1`` unique for the solvers and the
Cholesky shortcut of :class:`~.velocity_qp.VelocityQP`), and the set of ``nu`` that keep priority 1 optimal is
``{nu feasible : J_s nu = y*}``. The main QP (eq. 10) then takes the stance rows as

    y* - tol <= J_s nu <= y* + tol

feasible by construction (``nu_1`` meets them), the same as the plain rows whenever those are feasible
(``y* = v*_s``, to ``mu``'s and OSQP's accuracy: well inside ``tol``), and otherwise the sole moves as close
to its held pose as the whole body's joints allow while every other target gives way. Where the main QP
still ends without meeting its rows (near a singular leg OSQP needs thousands of iterations; or "solved"
1-2e-4 outside them, OSQP's accuracy; DAQP, the default solver, meets them: 0 such steps on CMU 131_03 / G1
against 5), the step takes ``nu_1``, with the main QP's solution on the columns in none of the rows
(:meth:`StancePriority.fallback`, :func:`main_on_free_columns`). Priority 1 is a second
:class:`~.velocity_qp.VelocityQP` with the main QP's solver (on DAQP: every QP of CMU 131_02's first 1247
steps on G1 optimal, rows met within 1e-6, the cost of a tight OSQP's solution).

Plain rows first (:attr:`StancePriority.plain_first`, on by default: :data:`PLAIN_FIRST`; with DAQP only).
Where priority 1 meets the plain rows (``|y* - v*_s| <= tol``, state ``met``) the main QP with the plain rows
``v*_s - tol <= J_s nu <= v*_s + tol`` is feasible too, and priority 1 is a QP solved for nothing. So after a
step that met its rows or had no foot in contact (:meth:`StancePriority.begin_step`, the predictor) the step
poses the plain rows and solves the main QP on DAQP alone (``VelocityQP.daqp_only``: OSQP would spend its
iteration limit on rows that cannot be met). Where DAQP finds the optimum and it meets every dynamic row
(``ExtraTerms._meets``) the step is done, state ``met``, counted in ``counts["skipped"]``; otherwise priority
1 centres the rows as posed and the step is solved again, the same QPs as without the trial (the same floats
where nothing before differed: ``test/test_stance_plain_first.py``). The secant's re-posing
(``ExtraTerms.stance_secant``) poses the plain rows again while the step meets them, its solve checked the
same way; the floor rows' softening and the regularizers' Euler re-solve pose the rows centred by priority 1,
solved then, so :meth:`fallback` always has this step's priority 1. The answer moves within the rows' band on
the steps that skip: ``v*_s`` instead of ``y*`` (equal to ``mu``'s accuracy where priority 1 met the rows,
~1e-11 rad), and where ``y*`` was just within ``tol`` of ``v*_s``. On the 60 s CMU walk on G1: 2337 of 7353
steps skip priority 1 (~180 trials failed, a DAQP solve each), yielded 1889 -> 1811.
ROS-free.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dynik_ros.core.small_arrays import dot as _dot
from dynik_ros.core.stance_rows import StanceRows, on_mean
from dynik_ros.core.velocity_qp import QPSettings, QPSolution, VelocityQP

DAMPING = 1e-8  # mu: small against the stance rows' J_s J_s^T (>= ~1: the base's columns), see the docstring
MAX_ITER = 4000  # priority 1 near a singular leg (G1 on CMU 131_01: legs straight, v*_s met at 20 rad/s)
# converged in ~3400 OSQP iterations; the usual step takes the Cholesky shortcut or < 100
STATES = ("met", "yielded", "failed")  # StepInfo.stance: y* = v*_s; y* != v*_s (gave way); priority 1 failed
# StancePriority.plain_first's default: after a step that met the rows, try them plain first
PLAIN_FIRST = True


class StancePriority:
    """Priority 1 of the stance rows (see the module docstring): per step :meth:`centre` returns ``v*`` with
    the active stance frames' rows replaced by ``y*``; :attr:`state` and :attr:`counts` say how it went."""

    def __init__(
        self,
        stance: StanceRows,
        jacobian_pattern: np.ndarray,
        constraint_matrix: np.ndarray,
        settings: QPSettings,
        expansion: np.ndarray | None,
        other_rows: int,
        plain_first: bool | None = None,
    ):
        self.stance = stance
        # see the module docstring; only with DAQP (ExtraTerms checks); None: PLAIN_FIRST
        self.plain_first = PLAIN_FIRST if plain_first is None else plain_first
        # columns of nu in a joint row of more than one column (coupled joints): fallback moves them with the
        # rows' columns; with locked and mimic joints the columns of one free joint move together
        self._coupled = (constraint_matrix[(constraint_matrix != 0).sum(axis=1) > 1] != 0).any(axis=0)
        self._expansion = None if expansion is None else np.asarray(expansion) != 0
        self._rows = np.concatenate(stance.rows)
        self.qp = VelocityQP(
            jacobian_pattern[self._rows],
            constraint_matrix,
            replace(settings, damping=DAMPING, max_iter=MAX_ITER),
            expansion,
            dynamic_rows=other_rows,
        )
        self.state = ""
        self.taken = False  # this step's solution is nu_1 (:meth:`fallback`, taken by ExtraTerms)
        # steps whose y* is not v*_s / whose priority 1 failed / that took priority 1's nu (fallback) / that
        # met the plain rows without solving priority 1 (plain_first)
        self.counts = dict.fromkeys((*STATES[1:], "taken", "skipped"), 0)
        self._solution: QPSolution | None = None  # this step's priority 1, while its y* is posed
        self._solved = False  # priority 1 was solved in this step (begin_step)
        self._last = ""  # the previous step's state, the predictor of plain_first (count_step)

    def centre(
        self,
        jacobian: np.ndarray,
        corrected: np.ndarray,
        weights: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        others: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
        w0: float = 1.0,
        carried: np.ndarray | None = None,
        held_jacobian: np.ndarray | None = None,
    ) -> np.ndarray:
        """``corrected`` (``v*`` of eq. 9, the whole stack) with the rows of the stance frames in contact
        replaced by ``y*`` of priority 1 under the joint rows ``lower``/``upper`` and the ``others`` dynamic
        rows; ``corrected`` itself where priority 1 has no usable solution (``state`` ``failed``). ``y*``
        is the stance frames' velocity over the step's mean ``m = w0 nu + carried`` (:mod:`.stance_rows`).
        ``held_jacobian``: ``jacobian[pattern.rows]`` where the caller has it (read, not gathered again; with
        every frame in contact it is the task's rows too)."""
        rows, pattern = self._rows, self.stance.pattern
        held = pattern.rows  # the rows of the frames in contact
        if held_jacobian is None:
            held_jacobian = jacobian[held]
        w = weights[rows]  # (a new array) frames out of contact take no part: np.where's values
        if len(held) != len(rows):
            w = np.where(pattern.mask, w, 0.0)
        stance_jacobian = held_jacobian if len(held) == len(rows) else jacobian[rows]  # (the same rows)
        task, target = on_mean(stance_jacobian, corrected[rows], w0, carried)
        solution = self.qp.solve(task, target, w, lower, upper, dynamic=others)
        self._solution = solution
        self._solved = True
        if not solution.solved:
            self.state = STATES[2]
            self.qp.reset_warm_start()
            return corrected
        centred = corrected.copy()
        mean = w0 * solution.nu if carried is None else w0 * solution.nu + carried
        achieved = _dot(held_jacobian, mean)
        # (np.abs(achieved - v*).max() <= tol entry by entry in floats: the same subtractions, False at NaN)
        met, tolerance = True, self.stance.tolerance
        for a, c in zip(achieved.tolist(), corrected[held].tolist(), strict=True):
            if not abs(a - c) <= tolerance:
                met = False
                break
        centred[held] = achieved
        self.state = STATES[0] if met else STATES[1]
        return centred

    def restart(self) -> None:
        """As just constructed: a fresh OSQP (:meth:`VelocityQP.restart`), no step's solution kept."""
        self.qp.restart()
        self.state = ""
        self.taken = False
        self._solution = None
        self._solved = False
        self._last = ""

    def begin_step(self) -> bool:
        """A new step: no priority 1 solved in it yet (a fallback then solves it on demand). Returns whether
        to try the plain rows first: :attr:`plain_first` and the previous step met them or had no foot in
        contact. Measured on the 60 s CMU walk on G1, trying every posing: the plain rows met after a met
        step on 2632 of 2793 posings, after one without contact 96 of 115, after a yielded one 315 of 1747
        (there a failed trial costs more than priority 1 saves)."""
        self._solution = None
        self._solved = False
        return self.plain_first and self._last in ("", STATES[0])

    def met_plainly(self) -> None:
        """The step's plain rows were met (the main QP's solution meets every dynamic row): state ``met``
        without priority 1, as its ``y* = v*_s`` would have said."""
        self.state = STATES[0]

    def count_step(self) -> None:
        """Add the step's outcome (its last :meth:`centre`, whether it took ``nu_1``) to :attr:`counts`, once
        per step however often the step's rows were posed again (floor rows softened, the stance rows
        linearised again: :mod:`.extra_terms`)."""
        if self.state in STATES[1:]:
            self.counts[self.state] += 1
        if self.taken:
            self.counts["taken"] += 1
        if self.state == STATES[0] and not self._solved:
            self.counts["skipped"] += 1
        self._last = self.state

    def fallback(
        self, main: QPSolution | None = None, rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ) -> QPSolution | None:
        """The step's solution when the main QP ends without meeting its dynamic ``rows`` ``(A, l, u)``:
        priority 1's ``nu_1`` (it meets the stance rows centred on its ``y*``) with the columns in none of the
        rows from the main QP's solution ``main`` (:func:`main_on_free_columns`; ``nu_1`` itself without
        ``main``); ``None`` without a usable ``nu_1``."""
        solution = self._solution
        if solution is None or not solution.solved or not self.state:
            return None
        nu, status = solution.nu, f"stance priority 1 ({solution.status})"
        if main is not None and main.solved and rows is not None:
            free = ~((rows[0] != 0).any(axis=0) | self._coupled)
            if self._expansion is not None:  # a free joint's columns (mimic followers) move together
                free = ~(self._expansion[:, (self._expansion[~free]).any(axis=0)]).any(axis=1)
            nu = main_on_free_columns(solution.nu, main.nu, free)
            status += ", the main QP's on the free columns"
        return QPSolution(nu, status, solution.iterations, True)


def main_on_free_columns(first: np.ndarray, main: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``nu_1`` with the columns ``free`` (in none of the step's dynamic rows: the arms, trunk and head
    against the feet's stance and floor rows) taken from the main QP's solution: the rows see ``nu_1``'s
    values, so they are met as ``nu_1`` meets them. Taking ``nu_1`` whole stopped every joint outside the
    stance rows for the step (``nu_1`` is their minimum norm, zero): on the real CMU 131_03 take G1's right
    wrist, turning at its 22 rad/s limit, stood still on 5 steps whose main QP was "solved" 1.1-2e-4 outside
    its rows, and the hand fell 83 deg behind its target."""
    return np.where(free, main, first)
