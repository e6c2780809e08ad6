"""Centre-of-mass objective and quasi-static support constraint, as rows of the one QP per step.

Second seed (Schumacher et al. 2021, sec. IV-B b): the CoM objective ``f_CoM = 1/2 |sum_i M_i/M c_i - c^|^2``
with a per-axis weight ``w_CoM`` ("for the Walker example, we disable the vertical component"), and the
requirement for slow walking that "the overall CoM of the robot must project into the support polygon
spanned by the feet currently in contact with the ground" (sec. V-4).

In the dynamical IK (Rapetti et al. 2020) every objective is a velocity row closed on its pose error (eq. 9),
so the CoM objective is the row triple

    J_com nu = v*_com = v_com_ref + K_com (c_ref - c)        weighted per world axis by w_CoM,

with ``J_com`` pinocchio's ``jacobianCenterOfMass`` (taken from the Jacobians the step computes anyway,
converted to the mixed velocity ``(I p_dot_B, I omega_B, s_dot)``: ``J = [I, -S(c - p_B), J_s]``).

Support constraint (optional, hard): with the feet in contact (``Measurements.contacts``), their sole
polygons (``SupportFrame.points`` in the foot frame, at the pose of the previous output ``q_{k-1}``)
projected on the ground give the support polygon, its convex hull shrunk by ``margin`` the admissible set
``{x : a_i . x <= b_i}``. The step's CoM ``c_k`` is linearised where the step is predicted to end,
``c_k ~ c(q_pred) + dt J_com (w_0 nu_k + c_carried - m_pred)`` (the same quadrature as the integration:
``w_0``, ``c_carried`` and the prediction ``m_pred`` of :class:`~dynik_ros.core.dynamical_ik.DynamicalIK`),
so ``a_i . c_k <= b_i`` is one linear row in ``nu_k`` per edge. A step with support rows is integrated by
Euler (``w_0 = 1``): a multistep rule against an active row makes ``nu_k`` alternate from step to step. A
CoM already outside an edge (a foot just lifted, the polygon jumped) must not get further out and returns
at rate ``recovery_gain``:
``a_i . c_k <= a_i . c_{k-1} + min(1, k_r dt) s_i`` for slack ``s_i = b_i - a_i . c_{k-1} < 0``. When the
rows cannot be met together with the joint limits OSQP reports the QP infeasible and the step takes the
solver's failure path (hold still, no NaN).

Dynamic balance is not modelled: a quasi-static CoM inside the support is necessary for standing still but
neither necessary nor sufficient while the body accelerates. The ZMP ``p = c_xy - c_z / g * c_ddot_xy`` (or
the capture point ``c_xy + c_dot_xy / sqrt(g / c_z)``) inside the support is the dynamic condition; it needs
the CoM acceleration, i.e. the change of ``J_com nu`` over the step, and would enter as further rows on
``nu_k`` beside these (linear in ``nu_k`` for the capture point, whose velocity part is ``J_com nu_k``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.velocity_qp import UNBOUNDED

_REFRESH = 1e-4  # max change of a foot pose entry (m, or rotation entry) before the polygon is rebuilt
Vector3 = tuple[float, float, float]


@dataclass(frozen=True)
class SupportFrame:
    """A foot: model frame and the corners of its sole in that frame (metres, at least 3, not collinear)."""

    frame: str
    points: tuple[Vector3, ...]

    def __post_init__(self) -> None:
        p = np.asarray(self.points, dtype=float)
        if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 3 or not np.all(np.isfinite(p)):
            raise ValueError(f"support frame '{self.frame}': points must be at least 3 finite (x, y, z)")
        if len(convex_hull(p[:, :2])) < 3:
            raise ValueError(f"support frame '{self.frame}': the sole points span no area")


@dataclass(frozen=True)
class BalanceConfig:
    """CoM objective and support constraint (all off by default: the step is unchanged).

    ``com_weight``: per world axis (``w_CoM``; 0 disables an axis, the seed's walker used no vertical);
    ``com_gain``: ``K_com`` [1/s]; ``support``: the feet; ``hard_support``: impose the support rows;
    ``margin``: the polygon is shrunk by this [m]; ``recovery_gain``: return rate from outside [1/s].
    """

    enabled: bool = False
    com_weight: Vector3 = (1.0, 1.0, 0.0)
    com_gain: float = 10.0
    support: tuple[SupportFrame, ...] = ()
    hard_support: bool = False
    margin: float = 0.01
    recovery_gain: float = 10.0

    def __post_init__(self) -> None:
        w = np.asarray(self.com_weight, dtype=float)
        if w.shape != (3,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("balance.com_weight must be three finite values >= 0")
        for name in ("com_gain", "margin", "recovery_gain"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"balance.{name} must be finite and >= 0, got {value}")
        if self.hard_support and not self.support:
            raise ValueError("balance.hard_support needs support frames (the feet)")


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Vertices of the convex hull of 2-D ``points`` counter-clockwise (Andrew's monotone chain; plain
    Python: for the handful of sole corners it is several times faster than numpy's small-array calls)."""
    pts = sorted(set(map(tuple, np.asarray(points, dtype=float)[:, :2].tolist())))
    if len(pts) <= 2:
        return np.array(pts, dtype=float).reshape(-1, 2)

    def chain(sequence: list) -> list:
        out: list = []
        for p in sequence:
            while len(out) >= 2:
                (ox, oy), (ax, ay) = out[-2], out[-1]
                if (ax - ox) * (p[1] - oy) - (ay - oy) * (p[0] - ox) > 1e-15:
                    break
                out.pop()
            out.append(p)
        return out

    lower, upper = chain(pts), chain(pts[::-1])
    return np.array(lower[:-1] + upper[:-1], dtype=float)


def halfplanes(hull: np.ndarray, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)``: outward unit normals ``(m, 2)`` and offsets so that the counter-clockwise ``hull``
    shrunk by ``margin`` is ``{x : a x <= b}``."""
    vertices = hull.tolist()
    normals, offsets = [], []
    for (x0, y0), (x1, y1) in zip(vertices, vertices[1:] + vertices[:1], strict=True):
        nx, ny = y1 - y0, x0 - x1
        length = math.hypot(nx, ny)
        nx, ny = nx / length, ny / length
        normals.append((nx, ny))
        offsets.append(nx * x0 + ny * y0 - margin)
    return np.array(normals), np.array(offsets)


def support_distance(point: np.ndarray, hull: np.ndarray) -> float:
    """Signed distance of a 2-D point inside the convex ``hull`` from its boundary (negative outside)."""
    a, b = halfplanes(hull)
    return float(np.min(b - a @ np.asarray(point, dtype=float)[:2]))


class ComObjective:
    """The CoM rows and the support rows for one :class:`RobotModel` (see the module docstring)."""

    def __init__(self, robot: RobotModel, config: BalanceConfig):
        self.robot = robot
        self.config = config
        self.weights = np.asarray(config.com_weight, dtype=float)
        self._planar = bool(self.weights[2] == 0.0)  # no vertical row (the default): its products are zeros
        self._n_com_rows = 2 if self._planar else 3
        self._squared_weights = (self.weights**2)[: self._n_com_rows, None]
        self._frames = [robot.frame_id(s.frame) for s in config.support]
        self._points = [np.asarray(s.points, dtype=float) for s in config.support]
        self.n_rows = sum(len(p) for p in self._points) if config.hard_support else 0
        self.com = np.zeros(3)  # c(q_{k-1})
        self.hull = np.zeros((0, 2))  # support polygon of the feet in contact at q_{k-1} (unshrunk)
        self._halfplanes = (np.zeros((0, 2)), np.zeros(0))
        self._key: tuple | None = None
        self._jacobian = np.zeros((3, robot.nv))
        if robot.floating_base:
            self._jacobian[:, :3] = np.eye(3)
        self._cost_rows = self._jacobian[: self._n_com_rows]  # a view: the rows the cost uses

    @property
    def imposes_support(self) -> bool:
        """Support rows this step: hard support configured and a foot in contact at ``q_{k-1}``."""
        return bool(self.n_rows and len(self.hull))

    @property
    def n_support(self) -> int:
        return len(self._frames)

    def observe(self, model: pin.Model, data: pin.Data, contacts: np.ndarray | None) -> None:
        """CoM and support polygon at ``q_{k-1}`` from ``data`` holding its frame placements. The polygon
        (and its half-planes) is rebuilt only when the contacts change or a foot in contact moved by more
        than ``_REFRESH`` (0.1 mm at the sole's corners; the margin absorbs less)."""
        self.com = pin.centerOfMass(model, data, pin.KinematicLevel.POSITION, False).copy()
        if not self.n_rows or contacts is None or not np.any(contacts):
            self.hull = np.zeros((0, 2))
            self._key = None
            return
        on = tuple(bool(c) for c in contacts)
        feet = [i for i, o in enumerate(on) if o]
        poses = np.array([data.oMf[self._frames[i]].homogeneous[:3].ravel() for i in feet])
        cached = self._key
        if cached is not None and cached[0] == on and np.abs(poses - cached[1]).max() < _REFRESH:
            return
        corners = [
            pts @ pose.reshape(3, 4)[:, :3].T + pose.reshape(3, 4)[:, 3]
            for pose, pts in zip(poses, (self._points[i] for i in feet), strict=True)
        ]
        self.hull = convex_hull(np.concatenate(corners))
        self._halfplanes = halfplanes(self.hull, self.config.margin)
        self._key = (on, poses)

    def update_jacobian(self, model: pin.Model, data: pin.Data, base_position: np.ndarray) -> None:
        """``J_com`` in mixed velocity and ``c(q_pred)`` from ``data`` holding the step's joint Jacobians
        (``computeJointJacobians``); the support rows use both."""
        j_pin = pin.jacobianCenterOfMass(model, data, False)
        self.com_predicted = data.com[0].copy()
        jac = self._jacobian
        nb = self.robot.base_dofs
        jac[:, nb:] = j_pin[:, nb:]
        if nb:  # -S(c - p_B); its diagonal stays 0
            dx, dy, dz = (self.com_predicted - base_position).tolist()
            jac[0, 4], jac[0, 5], jac[1, 3], jac[1, 5], jac[2, 3], jac[2, 4] = dz, -dy, -dz, dx, dy, -dx

    def cost(
        self,
        model: pin.Model,
        data: pin.Data,
        base_position: np.ndarray,
        com_target: np.ndarray,
        com_velocity: np.ndarray | None,
        gain: float,
        max_speed: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(H, g)`` of ``1/2 |W (J_com nu - v*_com)|^2`` with ``data`` holding the step's joint
        Jacobians (``computeJointJacobians``); also keeps ``c`` there (``c(q_pred)``) for the support rows."""
        self.update_jacobian(model, data, base_position)
        # v*_com per axis in Python floats (the same IEEE operations as numpy's elementwise ones)
        c = self.com.tolist()
        r = np.asarray(com_target, dtype=float).tolist()
        v = (0.0, 0.0, 0.0) if com_velocity is None else np.asarray(com_velocity, dtype=float).tolist()
        target = [v[i] + gain * (r[i] - c[i]) for i in range(3)]
        squared = target[0] * target[0] + target[1] * target[1] + target[2] * target[2]
        if squared > max_speed * max_speed * (1.0 - 1e-9):  # near or over the cap (a glitch): as before,
            capped = np.array(target)  # numpy's norm (np.linalg.norm's formula, without its checks)
            speed = math.sqrt(float(capped @ capped))
            if speed > max_speed:
                target = (capped * (max_speed / speed)).tolist()
        weighted = self._cost_rows * self._squared_weights
        # -(W^T v*) as W^T (-v*): negation is exact
        return self._cost_rows.T @ weighted, weighted.T @ np.array([-t for t in target[: self._n_com_rows]])

    def step_cost(
        self,
        model: pin.Model,
        data: pin.Data,
        base_position: np.ndarray,
        measurements,
        reference,
        dt: float,
        max_gain_dt: float,
        max_speed: float,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The CoM cost of a step (``None`` without a CoM target): ``reference`` is the measurement the
        residual compares ``q_{k-1}`` with (the residual timing), ``measurements`` gives the feed-forward.
        The CoM Jacobian is updated either way (the support rows use it)."""
        if reference.com_position is None:
            self.update_jacobian(model, data, base_position)
            return None
        gain = min(self.config.com_gain, max_gain_dt / dt)
        return self.cost(
            model, data, base_position, reference.com_position, measurements.com_velocity, gain, max_speed
        )

    def support_rows(
        self, dt: float, w0: float, offset: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(A, l, u)`` of the support rows on ``nu_k`` (module docstring); ``offset`` is
        ``c_carried - m_pred`` (mixed ``nv``). ``None`` without a foot in contact."""
        if not self.n_rows or not len(self.hull):
            return None
        a, b = self._halfplanes
        slack = b - a @ self.com[:2]
        rate = min(1.0, self.config.recovery_gain * dt)
        bound = np.where(slack >= 0.0, b, a @ self.com[:2] + rate * slack)
        j_xy = self._jacobian[:2]
        rows = a @ j_xy  # (m, nv)
        m = len(b)
        out = np.zeros((self.n_rows, self.robot.nv))
        upper = np.full(self.n_rows, UNBOUNDED)
        out[:m] = rows
        upper[:m] = (bound - a @ self.com_predicted[:2] - dt * (rows @ offset)) / (w0 * dt)
        return out, np.full(self.n_rows, -UNBOUNDED), upper


def support_frames(frames: Sequence[str], points: Sequence[Sequence[Vector3]]) -> tuple[SupportFrame, ...]:
    """:class:`SupportFrame` tuple from parallel lists (a convenience for configuration code)."""
    return tuple(SupportFrame(f, tuple(map(tuple, p))) for f, p in zip(frames, points, strict=True))
