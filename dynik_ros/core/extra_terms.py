"""The optional terms of one step of :class:`~dynik_ros.core.dynamical_ik.DynamicalIK`: the second seed's CoM
objective and support rows (:mod:`.com_objective`) and regularizers (:mod:`.regularizers`), the loop rows
(:mod:`.loop_closure`), the hard stance rows (:mod:`.stance_rows`, centred by priority 1 of
:mod:`.stance_priority`) and the floor rows (:mod:`.floor_rows`).

Built only when one of them is enabled, so a plain step never reaches this module. Per step:
:meth:`ExtraTerms.observe` reads ``q_{k-1}`` (CoM, feet in contact) from the kinematics the step computed,
:meth:`ExtraTerms.before_bounds` picks Euler integration for a step with support or loop rows (the stance and
floor rows bound the step's mean velocity instead, and keep the rule), and
:meth:`ExtraTerms.terms` returns the extra cost ``(H, g)`` and the support rows ``(A, l, u)`` on ``nu_k``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from dynik_ros.core.com_objective import ComObjective
from dynik_ros.core.floor_rows import MISS, FloorRows
from dynik_ros.core.frame_kinematics import FrameKinematics
from dynik_ros.core.frame_placements import placement_view
from dynik_ros.core.loop_closure import LoopRows
from dynik_ros.core.regularizers import Regularizers
from dynik_ros.core.small_arrays import dot as _dot
from dynik_ros.core.stance_priority import StancePriority
from dynik_ros.core.stance_rows import StanceRows
from dynik_ros.core.velocity_qp import UNBOUNDED

SECANT_TOLERANCE = 1e-3  # m/s, rad/s: a stance row's miss of J(q_mid) m that is linearised again (17 um per
# 60 Hz step)
SECANT_PASSES = 2  # the rows linearised again at most this often per step
# the miss checked first on the frames' twists (stance_secant's cheap check): one within SECANT_TOLERANCE less
# this margin passes the check with the Jacobian too; the two differ by rounding (<= 2e-15 m/s on CMU 131_02 /
# G1, |J m| <= 2.2 m/s), far inside it
SECANT_MARGIN = 1e-9
_AT_ORIGIN = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])  # a free-flyer's q at the origin, unturned
_LOCAL_WORLD_ALIGNED = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED  # (looked up once: _held_velocity)
_frame_velocity = pin.getFrameVelocity


class ExtraTerms:
    """CoM objective, support rows and regularizers of one :class:`DynamicalIK` (``ik``)."""

    def __init__(self, ik, constraint_matrix: np.ndarray) -> None:
        """``constraint_matrix``: ``C`` of the IK's joint rows (eq. 10b), which priority 1 of the stance rows
        shares."""
        config, robot = ik.config, ik.robot
        self.balance = ComObjective(robot, config.balance) if config.balance.enabled else None
        self.regularizers = Regularizers(robot, config.regularizers) if config.regularizers.enabled else None
        self.loops = LoopRows(robot, config.loops) if config.loops else None
        self.stance = StanceRows(ik.targets, config.stance_frames, robot.nv) if config.stance_frames else None
        self._support_rows = self.balance.n_rows if self.balance is not None else 0
        self.dynamic_rows = self._support_rows + (self.loops.n_rows if self.loops is not None else 0)
        self.dynamic_rows += self.stance.n_rows if self.stance is not None else 0
        floor, period = config.floor, config.sample_period  # (the floor's gamma per step: core/step_gain.py)
        self.floor = FloorRows(robot, floor, ik.targets, period) if floor.enabled else None
        self.dynamic_rows += self.floor.n_rows if self.floor is not None else 0
        # index of the stance rows' block among the dynamic rows: after the support and loop rows, before the
        # floor rows
        self._stance_start = self.dynamic_rows - (self.floor.n_rows if self.floor is not None else 0)
        self._stance_start -= self.stance.n_rows if self.stance is not None else 0
        self._secant = None  # the stance rows' Jacobian half-way along the step (stance_secant), own data
        if self.stance is not None:
            targets = ik.targets
            self._stance_ids = [robot.frame_id(f) for f in self.stance.frames]
            self._stance_gather = np.array(self._stance_ids, dtype=np.intp)  # their placements' rows
            position = {t.frame for t in targets.position_targets}
            orientation = {t.frame for t in targets.orientation_targets}
            # the stance frames' own kinematics: their rows of the stacked Jacobian, in StanceRows.rows order
            held_p = [f for f in self.stance.frames if f in position]
            held_o = [f for f in self.stance.frames if f in orientation]
            self._secant = FrameKinematics(robot, held_p, held_o)
            self._twists = robot.model.createData()  # the stance frames' twists at q_mid (_held_velocity)
            # _held_velocity's q and v of a floating base (the base at the origin, then the nv - 6 joints'
            # entries of the mean), filled in place per call; None with a fixed base
            self._mid_state = None
            if robot.base_dofs:
                self._mid_state = (np.concatenate((_AT_ORIGIN, np.zeros(robot.nv - 6))), np.zeros(robot.nv))
            # per row of the stance block (StanceRows.rows concatenated): its row in the secant's Jacobian
            order = []
            for f in self.stance.frames:
                if f in position:
                    order += [3 * held_p.index(f) + j for j in range(3)]
                if f in orientation:
                    order += [3 * (len(held_p) + held_o.index(f)) + j for j in range(3)]
            self._secant_order = np.array(order, dtype=int)
            # per stance frame: has it position rows, orientation rows (StanceRows.rows, in this order)
            self._stance_parts = [(f in position, f in orientation) for f in self.stance.frames]
        self._held: dict[tuple[bool, ...], np.ndarray] = {}  # _held_of, per stance pattern
        self._twist_parts: dict[tuple[bool, ...], tuple[tuple[int, str], ...]] = {}  # _twist_parts_of
        # the stance frames' placements at q_{k-1} (observe): their rows of the placement table (an array,
        # :mod:`.frame_placements`), else SE3 copies (a list) where pinocchio's layout is not the table's
        self._start_poses: np.ndarray | list | None = None
        self._viewed = None  # the pin.Data whose placement table _table is (_placements)
        self._table: np.ndarray | None = None
        # this step's stacked Jacobian's rows of the frames in contact (_predicted; read only): the secant
        # and the integration's restart read them again
        self._held_jacobian: np.ndarray | None = None
        self._corrected = None  # this step's v* itself (the stance rows are posed with it shifted)
        self._posed_offset = None  # the stance rows' offset as first posed (_predicted), per active row
        self.priority = None  # priority 1 of the stance rows (core/stance_priority.py)
        if self.stance is not None and config.stance_priority:
            self.priority = StancePriority(
                self.stance,
                ik.kinematics.pattern(),
                constraint_matrix,
                config.qp,
                ik._expansion,
                self.dynamic_rows - self.stance.n_rows,
            )
        self._task = None  # this step's stacked Jacobian, v* and weights (the stance rows' inputs)
        # the plain rows tried first (StancePriority.plain_first): only on DAQP, which says when they cannot
        # be met; this step's rows are posed plain until a solve misses them (_plain_checked)
        self._plain_possible = config.qp.solver == "daqp"
        self._plain = False
        self.has_cost = self.balance is not None or self.regularizers is not None  # else rows only
        self.dynamic = None  # this step's dynamic rows (A, l, u), as last posed: _posed (None without rows)
        # (A, l, u) of every dynamic row (support, loop, stance, floor rows in this order), each block
        # posed in place (:meth:`_pose`): building them by concatenation cost ~0.1 ms a step
        rows = self.dynamic_rows
        self._posed = (np.zeros((rows, robot.nv)), np.full(rows, -UNBOUNDED), np.full(rows, UNBOUNDED))
        n_stance = self.stance.n_rows if self.stance is not None else 0
        n_floor = self.floor.n_rows if self.floor is not None else 0
        # views of the stance and floor rows' blocks, which StanceRows.bounds and FloorRows.rows write into
        self._stance_slice = slice(self._stance_start, self._stance_start + n_stance)
        self._stance_block = tuple(part[self._stance_slice] for part in self._posed)
        self._floor_block = tuple(part[rows - n_floor :] for part in self._posed)

    @classmethod
    def wanted(cls, config) -> bool:
        return bool(
            config.balance.enabled
            or config.regularizers.enabled
            or config.loops
            or config.stance_frames
            or config.floor.enabled
        )

    def __getstate__(self) -> dict:
        """A copy views no ``pin.Data`` (a copied view is a snapshot): it makes its own on first use."""
        return {**self.__dict__, "_viewed": None, "_table": None}

    def _placements(self, kinematics) -> np.ndarray | None:
        """The stance frames' rows of the placement table of ``kinematics.data`` (a copy: per frame its
        rotation column by column, then its translation, :mod:`.frame_placements`), one gather where
        reading them frame by frame built two objects a frame; ``None`` where pinocchio's layout is not the
        table's."""
        data = kinematics.data
        if data is not self._viewed:
            self._viewed, self._table = data, placement_view(kinematics.model, data)
        return None if self._table is None else self._table[self._stance_gather]

    def observe(self, kinematics, measurements) -> None:
        if self.regularizers is not None:
            self.regularizers.end_step()  # a new step: its Jacobians are not computed yet
        if self.stance is not None:
            self.stance.observe(measurements.stance)
            pattern = self.stance.pattern
            self._start_poses = None
            if pattern.imposed:
                self._start_poses = self._placements(kinematics)
                if self._start_poses is None:
                    omf = kinematics.data.oMf
                    ids = zip(pattern.active, self._stance_ids, strict=True)
                    self._start_poses = [omf[i].copy() if on else None for on, i in ids]
        if self.loops is not None:
            self.loops.observe(kinematics.data)
        if self.floor is not None:
            self.floor.observe(kinematics.data)
        balance = self.balance
        if balance is None:
            return
        contacts = measurements.contacts
        if contacts is not None and np.shape(contacts) != (balance.n_support,):
            raise ValueError(f"contacts must hold {balance.n_support} flags, got shape {np.shape(contacts)}")
        balance.observe(kinematics.model, kinematics.data, contacts)

    def restart(self) -> None:
        """As just constructed (``DynamicalIK.reset``): priority 1's OSQP restarted too (it adapts its
        ``rho`` as it solves: a reset IK with hard stance rows drifted 1.7e-3 rad from a new one on the CMU
        excerpt)."""
        if self.priority is not None:
            self.priority.restart()

    def held_rows(self) -> np.ndarray | None:
        """This step's imposed stance rows ``J_s`` ``(r, nv)``, whose row space is the directions of ``nu``
        whose step mean they fix (``None``: no foot in contact): the integration restarts the history at that
        mean along them (:meth:`.step_integration.StepIntegration._restart_along`), else
        ``nu_k = 2 m_k - nu_{k-1}`` alternates there (Xsens take on G1: the main QP at its iteration limit on
        25 steps, upper-body MNTE 6.2e-3 against 3.9e-3). Only along them: restarting the whole columns of
        the base and the held legs also reset the base's motions that move no held foot (the legs turning
        under it), which the trapezoid then integrated half a step late, and the trunk and arms on the base
        with them (upper-body MNTE of the Mixamo strafe walk on TALOS 3.21e-3, the old feet's defaults
        3.09e-3)."""
        stance = self.stance
        if stance is None or not stance.imposed or self._task is None or self._task[0] is None:
            return None
        held = self._held_jacobian  # (read only: the caller copies before it zeroes columns)
        return held if held is not None else self._task[0][stance.pattern.rows]

    def _held_of(self, pattern) -> np.ndarray:
        """Per :class:`~.stance_rows.StancePattern` (built at its first step): the rows of the secant's
        Jacobian of the frames in contact (:meth:`stance_secant`)."""
        held = self._held.get(pattern.active)
        if held is None:
            held = self._held[pattern.active] = self._secant_order[pattern.mask]
            held.flags.writeable = False  # kept for every step with this pattern
        return held

    def after_integration(self, ik) -> None:
        """Joints projected back onto the kinematic loops (:mod:`.loop_closure`)."""
        if self.loops is not None:
            ik.joint_positions = self.loops.project(ik.joint_positions, ik.base_position, ik.base_rotation)

    def before_bounds(self, ik) -> None:
        """A multistep rule against an active row makes ``nu_k`` alternate (measured on G1: support rows
        missed by up to 2 mm with Adams, 0.7 mm with the trapezoid, OSQP "solved inaccurate"); with the
        support or loop rows imposed the step is integrated by Euler. The stance rows bound the step's mean
        and their history restarts at it (:meth:`held_rows`), so their steps keep the rule."""
        if self.loops is not None or (self.balance is not None and self.balance.imposes_support):
            ik.integrate_this_step_by_euler()

    def terms(
        self,
        ik,
        kinematics,
        measurements,
        base_position: np.ndarray,
        dt: float,
        jacobian: np.ndarray | None = None,
        corrected: np.ndarray | None = None,
        weights: np.ndarray | None = None,
    ):
        """``(extra cost or None, support rows or None)`` of this step, after the velocity bounds; the stance
        rows (:mod:`.stance_rows`) need the step's stacked ``jacobian``, ``v*`` (``corrected``) and the
        targets' ``weights`` (priority 1, :mod:`.stance_priority`)."""
        config = ik.config
        w0, carried = ik.step_quadrature
        extra = support = None
        if self.balance is not None:
            reference = ik._reference if config.residual_timing == "consistent" else None
            extra = self.balance.step_cost(
                kinematics.model,
                kinematics.data,
                base_position,
                measurements,
                measurements if reference is None else reference,
                dt,
                config.max_gain_dt,
                config.max_linear_speed,
            )
            if self.balance.imposes_support:  # (support_rows is None without rows: no offset to build)
                support = self.balance.support_rows(dt, w0, carried - ik._predicted_mean)
        if self._support_rows:
            self._pose(slice(0, self._support_rows), support)
        if self.loops is not None:
            a_loop, b_loop = self.loops.rows(
                kinematics.model, kinematics.data, ik.base_rotation, dt, ik._predicted_mean
            )
            loop_rows = slice(self._support_rows, self._support_rows + self.loops.n_rows)
            self._pose(loop_rows, (a_loop, b_loop, b_loop))
        if self.floor is not None:
            self.floor.prepare(kinematics.model, kinematics.data, dt, ik._predicted_mean, jacobian)
            self._with_floor(ik, "hard")
        self._task = (
            jacobian,
            self._predicted(kinematics, corrected, jacobian, ik._predicted_mean, dt),
            weights,
        )
        if self.priority is not None:
            self._plain = self.priority.begin_step() and self._plain_possible
        self._with_stance(ik)  # last: priority 1 centres the stance rows under the others
        dynamic = self.dynamic = self._posed if self.dynamic_rows else None
        self._balance_cost = extra
        if self.regularizers is not None:
            self.regularizers.begin_step(kinematics.data)  # ended by iterate, after the last re-solve
            extra = self._with_regularizers(kinematics, w0, carried, ik.nu)
        return extra, dynamic

    def _pose(self, block: slice, rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
        """The dynamic rows ``block`` posed as ``rows = (A, l, u)``; ``None``: zero, unbounded rows."""
        a, lower, upper = self._posed
        if rows is None:
            a[block], lower[block], upper[block] = 0.0, -UNBOUNDED, UNBOUNDED
        else:
            a[block], lower[block], upper[block] = rows

    def _with_floor(self, ik, mode: str) -> None:
        """The floor rows (the last block of the dynamic rows) posed in ``mode``."""
        self.floor.rows(*ik.step_quadrature, mode, out=self._floor_block)

    def _with_stance(self, ik, plain: bool = True) -> None:
        """The stance rows' block posed for this step: the frames in contact bound around ``v*``
        (:mod:`.stance_rows`), centred on ``y*`` of priority 1 with the other dynamic rows as they are posed
        (:mod:`.stance_priority`); zero, unbounded rows for frames out of contact. While the step tries the
        plain rows (``_plain``; ``plain=False`` ends that) they are posed around ``v*`` itself and the next
        solve of the main QP is DAQP's only (``VelocityQP.daqp_only``): :meth:`floor_checked` checks it."""
        stance = self.stance
        if stance is None:
            return
        self._plain = self._plain and plain
        ik.qp.daqp_only = False
        jacobian, corrected, weights = self._task
        if self.priority is not None:
            self.priority.state = ""
        if not (stance.imposed and jacobian is not None and corrected is not None):
            self._pose(self._stance_slice, None)
            return
        centre = corrected
        w0, carried = ik.step_quadrature  # the rows bound the step's mean
        if self._plain:
            ik.qp.daqp_only = True
        elif self.priority is not None:
            weights = ik.weights if weights is None else weights
            args = (jacobian, corrected, weights, ik._lower, ik._upper, self._others(), w0, carried)
            centre = self.priority.centre(*args, self._held_jacobian)  # (the rows held, as gathered)
        stance.bounds(jacobian, centre, w0, carried, out=self._stance_block, held=self._held_jacobian)

    def _others(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dynamic rows other than the stance rows, as posed (views where they are one block: the
        priority's QP copies them)."""
        start, stop = self._stance_start, self._stance_start + self.stance.n_rows
        if start == 0:
            return tuple(part[stop:] for part in self._posed)
        if stop == self.dynamic_rows:
            return tuple(part[:start] for part in self._posed)
        return tuple(np.concatenate((part[:start], part[stop:])) for part in self._posed)

    def floor_checked(self, ik, solution, solve):
        """``solution`` if it meets every dynamic row (floor, stance, loop, support rows) within
        :data:`~.floor_rows.MISS`; else priority 1's solution of the stance rows where it meets them (the main
        QP near a singular leg can end at OSQP's iteration limit, :mod:`.stance_priority`); else the step
        solved again (``solve(dynamic)``) with the floor rows softened, then without them
        (:mod:`.floor_rows`): a QP whose rows contradict each other ends at OSQP's iteration limit with an
        iterate that may miss any of them, e.g. a hard stance foot's."""
        floor, priority = self.floor, self.priority
        if priority is not None:
            priority.taken = False
            solution = self._plain_checked(ik, solution, solve)
        for mode in ("softened", "dropped", None):
            if self._meets(solution):
                break
            fallback = self._fallback(solution)
            if fallback is not None:
                priority.taken = True
                return fallback
            if floor is None or mode is None:
                break
            self._with_floor(ik, mode)
            self._with_stance(ik, plain=False)
            floor.counts[mode] += 1
            solution = solve(self.dynamic)
        return solution

    def _plain_checked(self, ik, solution, solve):
        """``solution`` if the rows were posed plain (:meth:`_with_stance`) and it meets every dynamic row
        (state ``met``, priority 1 skipped); where it does not (DAQP found no optimum: the plain rows
        contradict the others; or missed a row) priority 1 centres the rows as posed and the step is solved
        again (``solve(dynamic)``), as without the plain trial. ``solution`` itself if the rows were not
        posed plain."""
        ik.qp.daqp_only = False
        if not self._plain or not self.stance.imposed:
            return solution
        if self._meets(solution):
            self.priority.met_plainly()
            return solution
        self._with_stance(ik, plain=False)
        return solve(self.dynamic)

    def _fallback(self, solution):
        """Priority 1's ``nu_1`` with the main QP's ``solution`` on the columns in none of the stance rows
        (the swing leg too) where that meets every dynamic row; else on the columns in none of the rows at
        all (:meth:`.StancePriority.fallback`); ``None`` if neither meets them. The swing leg is in its sole's
        floor rows, so the second form stops it for the step (``nu_1`` is its minimum norm, zero): the
        committed excerpt on G1 with OSQP at ``eps_rel`` 1e-4 fell back on 66 steps, the swing foot lagged
        up to 0.2 m and was still closing in after the landing's blend (held sole slid 9 mm)."""
        priority = self.priority
        if priority is None:
            return None
        block = slice(self._stance_start, self._stance_start + self.stance.n_rows)
        stance_rows = tuple(part[block] for part in self._posed)
        for rows in (stance_rows, self.dynamic):
            candidate = priority.fallback(solution, rows)
            if candidate is not None and self._meets(candidate):
                return candidate
        return None

    def stance_secant(self, ik, solution, solve, dt: float):
        """``solution`` with the stance rows linearised where the step goes. A held foot moves by the integral
        of ``J(q(t)) m`` over the step, i.e. ``dt J(q_mid) m`` to third order in ``dt`` (midpoint rule,
        ``q_mid`` half-way along the step at its mean ``m``: ``StepIntegration.advanced``), while the rows
        bound ``J m`` with the step's ``J`` (where the history predicted the step to end, eq. 9-10). Where the
        offset ``(J(q_mid) - J) m`` differs from the one the rows were posed with (first the predicted step's,
        :meth:`_predicted`) by more than
        :data:`SECANT_TOLERANCE`, the rows ask ``J m = v*_s - offset`` instead, priority 1 centres them again
        and the step is solved again (``solve(dynamic)``), up to :data:`SECANT_PASSES` times. Only the rows'
        bounds change, so OSQP's warm start stays close (``J(q_mid)`` itself in the rows left the re-solves at
        OSQP's iteration limit and ``nu_1`` taken on 36 of 54 steps of the left turn below). Measured on the
        Mixamo left turn on TALOS (30 Hz, 16.7 ms steps, the base turning at up to 6.8 rad/s, the swing leg at
        its velocity limits): the held sole moved 1.9-3.7 mm a step where the rows asked 0.04-0.8 mm.
        The miss is checked first on the frames' twists at ``q_mid`` (:meth:`_held_velocity`); only where that
        is not :data:`SECANT_MARGIN` inside the tolerance is the Jacobian at ``q_mid`` taken, so the step is
        the same to the bit (on CMU 131_02 forward and back, G1: 4469 of 5152 checks end on the twists)."""
        stance = self.stance
        if stance is None or not stance.imposed or self._task is None or self._task[0] is None:
            return solution
        rows = stance.pattern.rows
        jacobian, _, weights = self._task
        held = self._held_jacobian if self._held_jacobian is not None else jacobian[rows]
        corrected = self._corrected
        offset = self._posed_offset  # (J(q_mid) - J) m as posed: the rows ask J m = y* - offset
        cheap_pass = SECANT_TOLERANCE - SECANT_MARGIN
        for _ in range(SECANT_PASSES):
            if not solution.solved:
                break
            mean = ik.step_mean(solution.nu)
            moved = _dot(held, mean)
            twists = self._held_velocity(ik, mean, 0.5 * dt)
            if within(twists.tolist(), moved.tolist(), offset.tolist(), cheap_pass):
                break  # the check below passes too (SECANT_MARGIN), without q_mid's Jacobian
            base, q_mid = ik.advanced(mean, 0.5 * dt)
            self._secant.update_jacobian(q_mid)
            secant = (self._secant.stacked_jacobian(base)[self._held_of(stance.pattern)] - held) @ mean
            if np.abs(secant - offset).max() <= SECANT_TOLERANCE:
                break
            offset = secant
            shifted = corrected.copy()
            shifted[rows] -= offset
            self._task = (jacobian, shifted, weights)
            self._with_stance(ik)
            again = self.floor_checked(ik, solve(self.dynamic), solve)
            if not again.solved:
                break
            solution = again
        return solution

    def _held_velocity(self, ik, mean: np.ndarray, h: float) -> np.ndarray:
        """``J(q_mid) m`` of the stance frames in contact (:meth:`stance_secant`'s Jacobian rows; ``q_mid``:
        ``q_{k-1}`` moved for ``h`` seconds at the mean ``m``, ``ik.advanced``) from the frames' twists: one
        first-order forward kinematics instead of ``q_mid`` and its Jacobian (~20 us against ~70 us). The
        base is put at the origin (its twist in base axes ``R^T m_B``, ``R`` its rotation at ``q_mid``) and
        the frames' ``LOCAL_WORLD_ALIGNED`` twists (a frame origin's velocity, its angular velocity) turned
        by ``R``: ``v_B + omega_B x (p - p_B) + R v_rel`` and ``omega_B + R omega_rel``, the rows' ``J m``.
        The same numbers to rounding (:data:`SECANT_MARGIN`)."""
        robot, data, nb = ik.robot, self._twists, ik.robot.base_dofs
        step = h * mean  # (its entries are h * mean[i], as ik.advanced moves q by slices of the mean)
        if nb:
            rotation = _dot(pin.exp3(step[3:6]), ik.base_rotation)
            q, v = self._mid_state  # (q: the base at the origin, then the joints; written in place)
            np.add(ik.joint_positions, step[nb:], out=q[7:])
            _dot(mean[:3], rotation, v[:3])
            _dot(mean[3:6], rotation, v[3:6])
            v[6:] = mean[6:]
        else:
            q, v = ik.joint_positions + step, mean
        pin.forwardKinematics(model := robot.model, data, q, v)
        parts = self._twist_parts.get(self.stance.pattern.active) or self._twist_parts_of(self.stance.pattern)
        if len(parts) == 1:  # one frame in contact: its part itself (its twist kept alive while it is read)
            twist = _frame_velocity(model, data, parts[0][0], _LOCAL_WORLD_ALIGNED)
            stacked = getattr(twist, parts[0][1])
        else:
            twists = [_frame_velocity(model, data, fid, _LOCAL_WORLD_ALIGNED) for fid, _ in parts]
            stacked = np.concatenate([getattr(t, part) for t, (_, part) in zip(twists, parts, strict=True)])
        return _dot(stacked.reshape(-1, 3), rotation.T).reshape(-1) if nb else stacked.copy()

    def _twist_parts_of(self, pattern) -> tuple[tuple[int, str], ...]:
        """The frames in contact with the part of its twist each one's rows read (``vector``: linear and
        angular in one read), kept per pattern (:meth:`_held_velocity`)."""
        frames = zip(pattern.active, self._stance_ids, self._stance_parts, strict=True)
        parts = ((i, "vector" if p and o else "linear" if p else "angular") for on, i, (p, o) in frames if on)
        return self._twist_parts.setdefault(pattern.active, tuple(parts))

    def _predicted(self, kinematics, corrected, jacobian, predicted_mean, dt: float):
        """``v*`` with the held frames' rows shifted by the offset of the predicted step,
        ``Delta x_pred / dt - J m_pred``: the frames' displacement from ``q_{k-1}`` to the predicted
        configuration (where ``kinematics`` and ``jacobian`` are linearised) less its linear part. The rows
        then ask the frames to move by ``dt v*`` where the step moves them by ``Delta x_pred + dt J (m -
        m_pred)``, the linearisation of the floor rows (:mod:`.floor_rows`). With ``J m`` alone the two
        disagreed by the step's second-order motion ``(J(q_mid) - J) m`` (up to 1e-2 m/s on a held sole of
        CMU 131_02 on G1): a corner on the floor was asked under it, and priority 1 gave way on 874 of 1179
        posings. :meth:`stance_secant` checks this offset after the solve; it is zero where the Jacobian is
        taken at ``q_{k-1}``."""
        self._corrected = corrected
        self._held_jacobian = None
        stance = self.stance
        if stance is None or not stance.imposed or jacobian is None or corrected is None:
            self._posed_offset = None
            return corrected
        rows = stance.pattern.rows
        held = self._held_jacobian = jacobian[rows]
        held.flags.writeable = False
        moved = self._moved(kinematics)
        linear = _dot(held, predicted_mean).tolist()
        # (the displacement over dt less J m_pred, per entry in floats: the array formula's operations)
        offset = self._posed_offset = np.array([d / dt - j for d, j in zip(moved, linear, strict=True)])
        shifted = corrected.copy()
        shifted[rows] -= offset
        return shifted

    def _moved(self, kinematics) -> list[float]:
        """The held frames' displacement from ``q_{k-1}`` (:meth:`observe`) to ``kinematics``' placements,
        frame by frame: the origin's ``end - start`` and ``log3(R_end R_start^T)``, as floats. From the
        placement table's rows (:meth:`_placements`) the rotations are viewed with the strides of pinocchio's
        own (column-major), so their product is numpy's same call on the same layout."""
        starts = self._start_poses
        parts = zip(self.stance.pattern.active, self._stance_ids, self._stance_parts, strict=True)
        moved: list[float] = []
        if isinstance(starts, np.ndarray):
            ends = self._placements(kinematics)
            end_rows, start_rows = ends.tolist(), starts.tolist()
            for i, (on, _, (pos, ori)) in enumerate(parts):
                if not on:
                    continue
                if pos:
                    e, b = end_rows[i], start_rows[i]
                    moved += (e[9] - b[9], e[10] - b[10], e[11] - b[11])
                if ori:  # (a row's first nine entries reshaped: R^T, C-ordered; .T: R, column-major)
                    turn = _dot(ends[i, :9].reshape(3, 3).T, starts[i, :9].reshape(3, 3))
                    moved += pin.log3(turn).tolist()
            return moved
        omf = kinematics.data.oMf
        for (on, fid, (pos, ori)), start in zip(parts, starts, strict=True):
            if not on:
                continue
            end = omf[fid]
            if pos:
                moved += (end.translation - start.translation).tolist()
            if ori:
                moved += pin.log3(end.rotation @ start.rotation.T).tolist()
        return moved

    def count_step(self) -> None:
        """The step's stance outcome into priority 1's counts (:meth:`.StancePriority.count_step`)."""
        if self.priority is not None:
            self.priority.count_step()

    def _meets(self, solution) -> bool:
        """``solution`` is usable and meets every dynamic row as posed within :data:`~.floor_rows.MISS`. A
        main-QP solution that the QP itself found within that of every row (the Cholesky shortcut's check)
        is not multiplied out again: every posing is solved before it is checked, so its rows are these."""
        if not solution.solved:
            return False
        if self.dynamic is None or solution.rows_met_within <= MISS:
            return True
        a, lower, upper = self.dynamic
        rows = a @ solution.nu
        return not ((rows < lower - MISS) | (rows > upper + MISS)).any()

    def _with_regularizers(self, kinematics, w0: float, carried: np.ndarray, m0: np.ndarray):
        return self.regularizers.cost_plus(self._balance_cost, kinematics.data, w0, carried, m0)

    def iterate(self, ik, kinematics, solution, solve, dt: float):
        """Re-solve with the velocity regularizer's model at the step's own solution while a body is above
        the threshold (:mod:`.regularizers`); ``solve(extra)`` runs the QP with another extra cost. A step
        where the regularizer acts is integrated by Euler: with Adams' carried history the regularized mean
        velocity made ``nu_k`` alternate (pan-tilt arm: up to 690 rad/s)."""
        regularizers = self.regularizers
        if regularizers is None:
            return solution
        try:
            return self._iterate(ik, kinematics, solution, solve, dt)
        finally:
            regularizers.end_step()

    def _iterate(self, ik, kinematics, solution, solve, dt: float):
        regularizers = self.regularizers
        if regularizers.config.velocity_weight <= 0:
            return solution
        w0, carried = ik.step_quadrature
        for _ in range(regularizers.config.iterations - 1):
            if not solution.solved:
                break
            previous_active = regularizers.last_active
            m = w0 * solution.nu + carried
            if not (regularizers.any_active(kinematics.data, m) or previous_active):
                break  # checked without building the cost (the common case)
            if w0 != 1.0:
                ik.integrate_this_step_by_euler()
                ik._velocity_bounds(dt)  # the bounds are written in place: solve() reads the new ones
                if self.floor is not None:  # the floor rows bound the mean: now nu_k itself
                    self._with_floor(ik, self.floor.mode)
                    self._with_stance(ik, plain=False)  # solved without floor_checked's check
                w0, carried = ik.step_quadrature  # (1, 0) now
                m = solution.nu  # the model about the solution's velocity, now integrated by Euler
            again = solve(self._with_regularizers(kinematics, w0, carried, m))
            change = np.abs(again.nu - solution.nu).max()
            solution = again
            if change <= 1e-6 * (1.0 + np.abs(solution.nu).max()):
                break
        return solution


def within(twists: list[float], moved: list[float], offset: list[float], tolerance: float) -> bool:
    """``np.abs(twists - moved - offset).max() <= tolerance`` of three equal-length vectors given as floats
    (:meth:`ExtraTerms.stance_secant`'s cheap check): the same subtractions, and ``False`` where an entry is
    NaN (as NaN's max compares), without numpy's per-call cost on a dozen entries."""
    for t, m, o in zip(twists, moved, offset, strict=True):
        if not abs(t - m - o) <= tolerance:
            return False
    return True
