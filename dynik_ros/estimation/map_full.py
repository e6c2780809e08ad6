"""The seed's full MAP form (Latella et al. 2019, sec. 3.4, eq. 14-23, A5-A7): per-link accelerations and
external wrenches, per-joint internal wrenches and accelerations, tied by the recursive Newton-Euler
equations, solved with sparse linear algebra (scipy.sparse, SuperLU).

Unknowns (eq. 14), per body ``L`` of the pinocchio model (the base, then one per 1-DoF joint, Human66's
massless intermediate bodies included): ``alpha_L`` (6) and ``f^x_L`` (6); per joint ``J``: ``f_J`` (6,
the wrench from the parent onto ``L`` through ``J``) and ``s_ddot_J`` (1): ``12 N_B + 7 n`` = 1266 for
Human66. Torques are projections, ``tau_J = S_J^T f_J``.

Acceleration variable: instead of the seed's proper sensor acceleration (eq. 12) the *gravity-offset
spatial acceleration* ``alpha_L = a_L - (R_L^T g, 0)`` (body frame; RNEA's ``a_0 = -g`` trick). Like
eq. 12 it needs no linear velocity of the base to propagate, and the accelerometer reads it directly:
``y_L = alpha_L + (omega_L x v_L, 0)`` (classical minus gravity, eq. 12, 20). Equations (``D d + b_D = 0``,
eq. 18 second block, eq. 19-23):

* propagation (eq. 16), every body but the base: ``alpha_L - X_{L,lambda} alpha_lambda - S_J s_ddot_J =
  v_L x S_J s_dot_J`` (the gravity offset is a uniform field and propagates unchanged);
* Newton-Euler (eq. 17), every body: ``M_L alpha_L + v_L x* M_L v_L = f^x_L + f_J - sum_mu X*_{L,mu} f_mu``.

Measurements as in the compact form (:mod:`.map_dynamics`): the suit's links (eq. 20), the shoes on the
contact links (eq. 21), the joint accelerations. Prior: uninformative on everything but the external
wrenches, which are zero-mean with ``no_contact_wrench`` on every link not in contact (eq. 14 has an
``f^x`` on every link) and ``prior_wrench`` on a contact link in contact.

The sparsity pattern of ``D`` and the measurement matrix ``Y`` are fixed: they are laid out once and only
the transforms ``X`` (joint angles) and the velocity terms change per sample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.estimation.map_dynamics import GRAVITY, MapCovariances, MapEstimate


def _motion_cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows of ``a x b`` for motion vectors (linear, angular) ``(K, 6)``."""
    return np.concatenate(
        (np.cross(a[:, 3:], b[:, :3]) + np.cross(a[:, :3], b[:, 3:]), np.cross(a[:, 3:], b[:, 3:])), axis=1
    )


def _force_cross(v: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Rows of ``v x* f`` for motion ``v`` and force ``f`` (linear, angular) ``(K, 6)``."""
    return np.concatenate(
        (np.cross(v[:, 3:], f[:, :3]), np.cross(v[:, 3:], f[:, 3:]) + np.cross(v[:, :3], f[:, :3])), axis=1
    )


class FullMapDynamicsEstimator:
    """Same inputs and outputs as :class:`~dynik_ros.estimation.map_dynamics.MapDynamicsEstimator`; the
    seed's serialization of ``d`` and its sparse ``D`` (module docstring)."""

    def __init__(
        self,
        robot: RobotModel,
        links: Sequence[str],
        contact_links: Sequence[str] = ("RightFoot", "LeftFoot"),
        covariances: MapCovariances | None = None,
    ):
        model = robot.model
        if not robot.floating_base or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ValueError(f"{robot.name}: the full MAP form needs a free-flyer base")
        self.robot, self.model, self.data = robot, model, model.createData()
        self.covariances = covariances or MapCovariances()
        self.nj = model.njoints
        self.bodies, self.n = self.nj - 1, robot.n_joints
        self.links, self.contact_links = tuple(links), tuple(contact_links)
        self.link_frames = [model.frames[robot.frame_id(n)] for n in self.links]
        self.contact_frames = [model.frames[robot.frame_id(n)] for n in self.contact_links]
        self.size = 12 * self.bodies + 7 * self.n
        self._fj0, self._sdd0 = 12 * self.bodies, 12 * self.bodies + 6 * self.n
        self._parents = np.array([int(model.parents[i]) for i in range(self.nj)])
        self._velocity_index = np.array([model.idx_vs[i] for i in range(2, self.nj)])
        self._inertia = np.array([model.inertias[i].matrix() for i in range(1, self.nj)])
        data = model.createData()  # S_J in its body's frame: constant for 1-DoF joints
        q0 = pin.neutral(model)
        pin.computeJointJacobians(model, data, q0)
        self._subspace = np.array(
            [data.oMi[i].actInv(pin.Motion(data.J[:, model.idx_vs[i]])).vector for i in range(2, self.nj)]
        )
        self._layout_model()
        self._layout_measurements()

    # serialization (eq. 14): joint i (1..) carries body i - 1: alpha, f^x; joint i >= 2: f_J, s_ddot
    def _alpha(self, i: int) -> int:
        return 12 * (i - 1)

    def _fx(self, i: int) -> int:
        return 12 * (i - 1) + 6

    def _fj(self, i: int) -> int:
        return self._fj0 + 6 * (i - 2)

    def _sdd(self, i: int) -> int:
        return self._sdd0 + (i - 2)

    def _layout_model(self) -> None:
        """Row/column indices of every block of D: constant blocks with their values, then the joint
        transforms ``-X_{L,lambda}`` (eq. 16) and the children's ``X*`` (eq. 17), filled per sample."""
        rows, cols, vals = [], [], []

        def block(r0: int, c0: int, h: int, w: int, values: np.ndarray | None = None) -> None:
            rr, cc = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
            rows.append((rr + r0).ravel())
            cols.append((cc + c0).ravel())
            if values is not None:
                vals.append(np.asarray(values, dtype=float).ravel())

        eye6 = np.eye(6)
        n_prop = 6 * (self.nj - 2)
        for k, i in enumerate(range(2, self.nj)):  # eq. 16: identity and -S_J
            block(6 * k, self._alpha(i), 6, 6, eye6)
            block(6 * k, self._sdd(i), 6, 1, -self._subspace[k])
        for i in range(1, self.nj):  # eq. 17: M_L, -1 on f^x_L and f_J
            r0 = n_prop + 6 * (i - 1)
            block(r0, self._alpha(i), 6, 6, self._inertia[i - 1])
            block(r0, self._fx(i), 6, 6, -eye6)
            if i >= 2:
                block(r0, self._fj(i), 6, 6, -eye6)
        self._constant_values = np.concatenate(vals)
        for k, i in enumerate(range(2, self.nj)):  # eq. 16: -X_{L,lambda} at alpha_lambda
            block(6 * k, self._alpha(int(self._parents[i])), 6, 6)
        for c in range(2, self.nj):  # eq. 17: X*_{lambda,c} f_c in the parent's rows
            block(n_prop + 6 * (int(self._parents[c]) - 1), self._fj(c), 6, 6)
        self._d_rows, self._d_cols = np.concatenate(rows), np.concatenate(cols)
        self._d_shape = (n_prop + 6 * self.bodies, self.size)

    def _layout_measurements(self) -> None:
        """Y (constant: each sensor reads one variable block through a fixed frame placement)."""
        self._link_rows = [
            (self._alpha(f.parentJoint), f.placement.inverse().action) for f in self.link_frames
        ]
        self._shoe_rows = [
            (self._fx(f.parentJoint), f.placement.inverse().toDualActionMatrix()) for f in self.contact_frames
        ]
        self._y_cache: dict[tuple, tuple[sp.csr_matrix, sp.csr_matrix]] = {}

    def _measurement_matrix(self, links: tuple, joints: tuple, shoes: tuple) -> sp.csr_matrix:
        rows, cols, vals, count = [], [], [], 0
        for (c0, matrix), on in zip(self._link_rows + self._shoe_rows, links + shoes, strict=True):
            if on:
                rr, cc = np.nonzero(matrix)
                rows.append(rr + count)
                cols.append(cc + c0)
                vals.append(matrix[rr, cc])
                count += 6
        measured = np.flatnonzero(joints)
        rows.append(np.arange(len(measured)) + count)
        cols.append(self._sdd0 + measured)
        vals.append(np.ones(len(measured)))
        count += len(measured)
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(count, self.size)
        )

    def estimate(
        self,
        q: np.ndarray,
        v: np.ndarray,
        link_accelerations: np.ndarray | None = None,
        joint_accelerations: np.ndarray | None = None,
        wrenches: np.ndarray | None = None,
        contacts: Sequence[bool] | None = None,
    ) -> MapEstimate:
        """``d_MAP`` (eq. A7); arguments as :meth:`MapDynamicsEstimator.estimate`. Returns ``nu_dot``
        (base spatial acceleration in the base frame without the gravity offset, and ``s_ddot``), the
        torques and the contact links' wrenches in their frames."""
        cov, model, data, nj = self.covariances, self.model, self.data, self.nj
        contacts = [True] * len(self.contact_links) if contacts is None else list(contacts)
        if len(contacts) != len(self.contact_links):
            raise ValueError(f"expected {len(self.contact_links)} contact flags, got {len(contacts)}")
        pin.forwardKinematics(model, data, q, v)
        transforms = [data.liMi[i] for i in range(2, nj)]
        values = np.concatenate(
            (
                self._constant_values,
                -np.array([m.inverse().action for m in transforms]).ravel(),
                np.array([m.toDualActionMatrix() for m in transforms]).ravel(),
            )
        )
        d_matrix = sp.csr_matrix((values, (self._d_rows, self._d_cols)), shape=self._d_shape)
        velocities = np.array([data.v[i].vector for i in range(1, nj)])
        s_dot = np.asarray(v, dtype=float)[self._velocity_index]
        b_prop = -_motion_cross(velocities[1:], self._subspace * s_dot[:, None])
        b_ne = _force_cross(velocities, np.einsum("kij,kj->ki", self._inertia, velocities))
        b_vec = np.concatenate((b_prop.ravel(), b_ne.ravel()))
        # prior (A5): uninformative, external wrenches zero unless on a contact link in contact
        prior = np.full(self.size, 1.0 / cov.prior_acceleration)
        prior[self._fj0 : self._sdd0] = 1.0 / cov.prior_torque
        fx = (12 * np.arange(self.bodies) + 6)[:, None] + np.arange(6)
        prior[fx.ravel()] = 1.0 / cov.no_contact_wrench
        for frame, on in zip(self.contact_frames, contacts, strict=True):
            if on:
                prior[self._fx(frame.parentJoint) : self._fx(frame.parentJoint) + 6] = 1.0 / cov.prior_wrench
        precision = (d_matrix.T @ d_matrix) / cov.model + sp.diags(prior)
        rhs = -(d_matrix.T @ b_vec) / cov.model
        # measurements (eq. 20, 21, joint accelerations)
        residuals, weights = [], []
        link_on: tuple = (False,) * len(self.links)
        if link_accelerations is not None:
            measured = np.asarray(link_accelerations, dtype=float).reshape(len(self.links), 6)
            link_on = tuple(bool(x) for x in np.isfinite(measured).all(axis=1))
            w = np.array([1 / cov.linear_acceleration] * 3 + [1 / cov.angular_acceleration] * 3)
            for frame, y, on in zip(self.link_frames, measured, link_on, strict=True):
                if on:
                    v_f = frame.placement.actInv(data.v[frame.parentJoint])
                    residuals.append(y - np.concatenate((np.cross(v_f.angular, v_f.linear), np.zeros(3))))
                    weights.append(w)
        shoe_on: tuple = (False,) * len(self.contact_links)
        if wrenches is not None:
            measured = np.asarray(wrenches, dtype=float).reshape(len(self.contact_links), 6)
            shoe_on = tuple(bool(x) for x in np.isfinite(measured).all(axis=1))
            w = np.array([1 / cov.force] * 3 + [1 / cov.moment] * 3)
            for y, on in zip(measured, shoe_on, strict=True):
                if on:
                    residuals.append(y)
                    weights.append(w)
        joint_on: tuple = (False,) * self.n
        if joint_accelerations is not None:
            s_ddot = np.asarray(joint_accelerations, dtype=float).reshape(self.n)
            joint_on = tuple(bool(x) for x in np.isfinite(s_ddot))
            residuals.append(s_ddot[np.array(joint_on)])
            weights.append(np.full(int(sum(joint_on)), 1 / cov.joint_acceleration))
        # link and shoe residuals are ordered as the rows of _measurement_matrix: links, shoes, joints
        key = (link_on, joint_on, shoe_on)
        if key not in self._y_cache:
            y_matrix = self._measurement_matrix(link_on, joint_on, shoe_on)
            self._y_cache[key] = y_matrix
        y_matrix = self._y_cache[key]
        if y_matrix.shape[0]:
            w = np.concatenate(weights)
            precision = precision + (y_matrix.T @ sp.diags(w) @ y_matrix)
            rhs = rhs + y_matrix.T @ (w * np.concatenate(residuals))
        d_map = splu(sp.csc_matrix(precision), permc_spec="MMD_AT_PLUS_A").solve(rhs)
        return self._unpack(d_map)

    def _unpack(self, d_map: np.ndarray) -> MapEstimate:
        fj = d_map[self._fj0 : self._sdd0].reshape(-1, 6)
        tau = np.einsum("ki,ki->k", self._subspace, fj)
        base = d_map[0:6].copy()
        base[:3] += self.data.oMi[1].rotation.T @ GRAVITY  # remove the gravity offset
        nu_dot = np.concatenate((base, d_map[self._sdd0 :]))
        wrenches = np.array(
            [
                frame.placement.inverse().toDualActionMatrix() @ d_map[self._fx(frame.parentJoint) :][:6]
                for frame in self.contact_frames
            ]
        ).reshape(len(self.contact_frames), 6)
        return MapEstimate(nu_dot, tau, wrenches)
