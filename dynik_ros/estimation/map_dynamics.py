"""Maximum-A-Posteriori estimate of human joint torques and external wrenches (Latella et al. 2019,
sec. 3.4 and Appendix A), in the compact floating-base form.

**Which form.** The seed's ``d`` (eq. 14) serializes, per link, the proper sensor acceleration and the
external wrench and, per joint, the internal (joint) wrench and the joint acceleration (``12 N_B + 7 n``
unknowns, 1266 for Human66), tied by the recursive Newton-Euler equations (eq. 16-17, matrix ``D``,
eq. 19-23). Here the same dynamics are written in their equivalent compact form, eq. 1,

    M(q) nu_dot + h(q, nu) = B tau + sum_k J_Ck(q)^T f_k,

with the unknowns ``d = (nu_dot, tau, f_1 .. f_m)`` (base and joint accelerations, joint torques, one
external wrench per contact link; ``6 + 2 n + 6 m`` = 150 for Human66 with two feet), so
``D = [M, -B, -J_C1^T .. -J_Cm^T]`` and ``b_D = h``. What the full form adds: the internal wrench at every
joint (here only its projection on the joint axis, ``tau = S^T f_J``), a per-link external wrench
variable for every link (here only at the candidate contact links) and a model covariance per link
equation instead of per generalized coordinate.

**Measurements** ``y = Y d + b_Y`` (eq. 18, first block): the suit's proper sensor accelerations
(eq. 12, 20) of its links, ``alpha_L^g = J_L nu_dot + (J_L_dot nu - (R_L^T g, 0))`` with ``J_L`` the link's
Jacobian in its own frame; the shoes' wrenches, ``y_k = f_k`` (eq. 21 with the sensor frame at the foot
frame); the joint accelerations, ``y = s_ddot``.

**Solution** (eq. 25, A5-A7), with diagonal covariances: the prior ``d ~ N(mu_d, Sigma_d)`` and the model
``D d + b_D ~ N(0, Sigma_D)`` give ``Sigma_D_bar^-1 = D^T Sigma_D^-1 D + Sigma_d^-1`` and
``Sigma_D_bar^-1 mu_D_bar = Sigma_d^-1 mu_d - D^T Sigma_D^-1 b_D`` (A5); the posterior precision is
``Sigma_D_bar^-1 + Y^T Sigma_y^-1 Y`` and ``d_MAP = Sigma_d|y (Y^T Sigma_y^-1 (y - b_Y) +
Sigma_D_bar^-1 mu_D_bar)`` (A7). The precision is dense (``M`` is), so it is solved by a dense
Cholesky factorization (LAPACK ``dposv``); the seed's sparse ``D`` does not arise here.

**The torques in closed form.** ``tau`` appears only in the joint rows of eq. 1 (``tau = [A x + h]_joints``
with ``A = [M, -J_C^T]``, ``x = (nu_dot, f)``) and in its prior; no sensor reads it. Minimizing the MAP cost
over ``tau`` first leaves the base rows of eq. 1 with ``Sigma_D^-1`` and the joint rows with
``(Sigma_D + Sigma_tau)^-1``, a system in ``x`` alone (84 unknowns on Human66 instead of 150: the Schur
complement of the torques' diagonal block, the same ``d_MAP``), and then
``tau = [A x + h]_joints Sigma_tau / (Sigma_D + Sigma_tau)``. Every buffer is allocated once.

Contact state enters through the prior: a foot in contact has an uninformative wrench prior
(``prior_wrench``); a foot not in contact has zero mean with ``no_contact_wrench`` (small: it carries
nothing). With shoes the measurement decides either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import pinocchio as pin

from dynik_ros.core.lapack import dposv
from dynik_ros.core.robot_model import RobotModel

GRAVITY = np.array([0.0, 0.0, -9.81])


@dataclass(frozen=True)
class MapCovariances:
    """Diagonal covariances (variances, SI units squared) of the MAP estimator.

    Defaults follow sec. 4.5: low for the sensors (the seed used 1e-6 to 1e-4) and the model, high for
    the prior (nothing is known a priori). Set the sensor variances to the sensors' noise when known."""

    model: float = 1e-4  # Sigma_D, per row of eq. 1 [N^2, (N m)^2]
    prior_acceleration: float = 1e4  # Sigma_d on nu_dot
    prior_torque: float = 1e6  # Sigma_d on tau
    prior_wrench: float = 1e6  # Sigma_d on the wrench of a foot in contact
    no_contact_wrench: float = 1e-4  # Sigma_d on the wrench of a foot not in contact (zero mean)
    linear_acceleration: float = 1e-4  # Sigma_y, suit accelerometers [(m/s^2)^2]
    angular_acceleration: float = 1e-4  # Sigma_y, suit angular accelerations [(rad/s^2)^2]
    joint_acceleration: float = 1e-4  # Sigma_y, joint accelerations [(rad/s^2)^2]
    force: float = 1e-4  # Sigma_y, shoe forces [N^2]
    moment: float = 1e-4  # Sigma_y, shoe moments [(N m)^2]

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < np.inf:
                raise ValueError(f"covariance '{f.name}' must be a positive finite number, got {value!r}")


@dataclass
class MapEstimate:
    """One MAP estimate: ``nu_dot`` (nv,), ``tau`` (n,), ``wrenches`` (m, 6) on the contact links in their
    own frames (force, moment)."""

    nu_dot: np.ndarray
    tau: np.ndarray
    wrenches: np.ndarray


class MapDynamicsEstimator:
    """Floating-base MAP estimator of eq. 24-25 in the compact form (module docstring).

    ``links``: the suit's links whose proper accelerations may be measured (their frames in ``robot``);
    ``contact_links``: the links that may carry an external wrench (default: the feet).

    Per step the buffers are reused and the torques are solved in closed form (module docstring): the
    Cholesky factorizes ``nv + 6 m`` unknowns."""

    def __init__(
        self,
        robot: RobotModel,
        links: Sequence[str],
        contact_links: Sequence[str] = ("RightFoot", "LeftFoot"),
        covariances: MapCovariances | None = None,
    ):
        if not robot.floating_base:
            raise ValueError(f"{robot.name}: the floating-base MAP estimator needs a floating-base model")
        self.robot = robot
        self.links = tuple(links)
        self.contact_links = tuple(contact_links)
        self.link_ids = [robot.frame_id(n) for n in self.links]
        self.contact_ids = [robot.frame_id(n) for n in self.contact_links]
        self.covariances = cov = covariances or MapCovariances()
        self.data = robot.model.createData()
        self.nv, self.n = nv, n = robot.nv, robot.n_joints
        self.m = m = len(self.contact_links)
        self.size = size = nv + n + 6 * m
        self._tau = slice(nv, nv + n)
        self._wrenches = slice(nv + n, size)
        self._gravity_a = np.zeros(nv)
        self._lower = np.tril_indices(nv, -1)
        reduced = nv + 6 * m  # x = (nu_dot, f): the torques are eliminated in closed form (estimate())
        self._precision = np.zeros((reduced, reduced))
        self._rhs = np.zeros(reduced)
        self._model = np.zeros((nv, reduced))  # A = [M, -J_C1^T .. -J_Cm^T]
        self._prior = np.full(reduced, 1.0 / cov.prior_acceleration)
        self._wrench_weight = np.array([1.0 / cov.force] * 3 + [1.0 / cov.moment] * 3)
        self._link_weight = np.tile(
            [1.0 / cov.linear_acceleration] * 3 + [1.0 / cov.angular_acceleration] * 3, len(self.links)
        )
        self._diagonal = np.arange(reduced) * (reduced + 1)  # flat indices of the precision's diagonal
        self._link_rows = np.zeros((6 * len(self.links), nv))
        self._link_residuals = np.zeros(6 * len(self.links))

    def _wrench_slice(self, k: int) -> slice:
        """Wrench ``k`` in ``d`` (and, minus the torques, in the reduced ``x``)."""
        start = self.nv + self.n + 6 * k
        return slice(start, start + 6)

    def _x_wrench(self, k: int) -> slice:
        return slice(self.nv + 6 * k, self.nv + 6 * k + 6)

    def estimate(
        self,
        q: np.ndarray,
        v: np.ndarray,
        link_accelerations: np.ndarray | None = None,
        joint_accelerations: np.ndarray | None = None,
        wrenches: np.ndarray | None = None,
        contacts: Sequence[bool] | None = None,
        still: Sequence[bool] | None = None,
    ) -> MapEstimate:
        """``d_MAP`` (eq. A7) at configuration ``q`` and velocity ``v`` (pinocchio layout).

        ``link_accelerations`` ``(L, 6)``: proper sensor accelerations (eq. 12) of :attr:`links` in their
        frames; rows with a NaN are not measured. ``joint_accelerations`` ``(n,)``. ``wrenches`` ``(m, 6)``:
        the shoes under the contact links (foot frames), NaN rows not measured, ``None``: no shoes.
        ``contacts``: per contact link (default: all in contact). ``still``: per contact link, held still
        in the world (the fixed-base formalism, :mod:`.fixed_base`): model rows ``J_C nu_dot + c_C = 0``
        (``c_C`` its classical acceleration at ``nu_dot = 0``) with the model's covariance."""
        cov, model, data, nv, n = self.covariances, self.robot.model, self.data, self.nv, self.n
        contacts = [True] * self.m if contacts is None else list(contacts)
        if len(contacts) != self.m:
            raise ValueError(f"expected {self.m} contact flags, got {len(contacts)}")
        # model rows D d + b_D = 0 with D = [M, -B, -J_C^T] (eq. 1), b_D = h
        model_a = self._model
        mass = pin.crba(model, data, q)  # upper triangle
        model_a[:, :nv] = mass
        model_a[:, :nv][self._lower] = mass.T[self._lower]
        bias = pin.nonLinearEffects(model, data, q, v)
        # classical accelerations at nu_dot = 0 with the whole body accelerated by -g: every frame's is then
        # its b_Y of eq. 12 (a uniform translation adds R_L^T (-g) to each link, whatever the velocities)
        base_rotation = pin.Quaternion(np.asarray(q[3:7])).toRotationMatrix()
        self._gravity_a[:3] = -base_rotation.T @ GRAVITY
        pin.forwardKinematics(model, data, q, v, self._gravity_a)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        for k, fid in enumerate(self.contact_ids):
            model_a[:, nv + 6 * k : nv + 6 * k + 6] = pin.getFrameJacobian(
                model, data, fid, pin.ReferenceFrame.LOCAL
            ).T
        model_a[:, nv:] *= -1.0
        # the torques eliminated (module docstring): base rows weighted 1 / Sigma_D, joint rows
        # 1 / (Sigma_D + Sigma_tau)
        w_base, w_joint = 1.0 / cov.model, 1.0 / (cov.model + cov.prior_torque)
        p, rhs = self._precision, self._rhs
        base_rows, joint_rows = model_a[:6], model_a[6:]
        p[:] = (base_rows.T * w_base) @ base_rows
        p += (joint_rows.T * w_joint) @ joint_rows
        rhs[:] = base_rows.T @ bias[:6]
        rhs *= -w_base
        rhs -= (joint_rows.T @ bias[6:]) * w_joint
        prior, diagonal = self._prior, self._diagonal
        for k, on in enumerate(contacts):
            prior[self._x_wrench(k)] = 1.0 / (cov.prior_wrench if on else cov.no_contact_wrench)
        p.flat[diagonal] += prior  # Sigma_d^-1 (A5a)
        if still is not None:
            self._add_still_links(list(still), p, rhs)
        # measurements (eq. 18 first block, A7): Y^T Sigma_y^-1 Y and Y^T Sigma_y^-1 (y - b_Y)
        if link_accelerations is not None:
            self._add_link_accelerations(np.asarray(link_accelerations, dtype=float), p, rhs)
        if joint_accelerations is not None:
            s_ddot = np.asarray(joint_accelerations, dtype=float).reshape(n)
            ok = np.flatnonzero(np.isfinite(s_ddot)) + 6
            p.flat[diagonal[ok]] += 1.0 / cov.joint_acceleration
            rhs[ok] += s_ddot[ok - 6] / cov.joint_acceleration
        if wrenches is not None:
            weight = self._wrench_weight
            measured = np.asarray(wrenches, dtype=float).reshape(self.m, 6)
            for k in range(self.m):
                if np.isfinite(measured[k]).all():
                    block = self._x_wrench(k)
                    p.flat[diagonal[block]] += weight
                    rhs[block] += weight * measured[k]
        _, x, info = dposv(p, rhs, lower=1, overwrite_a=1)  # symmetric: C order = Fortran transpose
        if info != 0:
            raise np.linalg.LinAlgError(f"MAP precision not positive definite (LAPACK dposv info {info})")
        tau = (joint_rows @ x + bias[6:]) * (cov.prior_torque / (cov.model + cov.prior_torque))
        return MapEstimate(x[:nv].copy(), tau, x[nv:].reshape(self.m, 6).copy())

    def _add_still_links(self, still: list[bool], precision: np.ndarray, rhs: np.ndarray) -> None:
        """Rows ``J_C nu_dot = -c_C`` of the contact links held still (after :meth:`estimate`'s
        kinematics with the ``-g`` base acceleration: ``c_C`` is the classical acceleration minus
        ``(R_C^T (-g), 0)``)."""
        if len(still) != self.m:
            raise ValueError(f"expected {self.m} still flags, got {len(still)}")
        model, data, nv = self.robot.model, self.data, self.nv
        local = pin.ReferenceFrame.LOCAL
        for k, fid in enumerate(self.contact_ids):
            if not still[k]:
                continue
            jac = pin.getFrameJacobian(model, data, fid, local)
            c = pin.getFrameClassicalAcceleration(model, data, fid, local).vector.copy()
            c[:3] += data.oMf[fid].rotation.T @ GRAVITY
            precision[:nv, :nv] += jac.T @ jac / self.covariances.model
            rhs[:nv] -= jac.T @ c / self.covariances.model

    def _add_link_accelerations(self, measured: np.ndarray, precision: np.ndarray, rhs: np.ndarray) -> None:
        """Rows ``alpha_L^g = J_L nu_dot + b_L`` (eq. 12, 20) for every measured link."""
        model, data, nv = self.robot.model, self.data, self.nv
        if measured.shape != (len(self.links), 6):
            raise ValueError(f"link accelerations must be ({len(self.links)}, 6), got {measured.shape}")
        rows, residuals = self._link_rows, self._link_residuals
        local = pin.ReferenceFrame.LOCAL
        finite = np.isfinite(measured).all(axis=1)
        for i, fid in enumerate(self.link_ids):
            if finite[i]:
                rows[6 * i : 6 * i + 6] = pin.getFrameJacobian(model, data, fid, local)
                residuals[6 * i : 6 * i + 6] = (
                    measured[i] - pin.getFrameClassicalAcceleration(model, data, fid, local).vector
                )  # b_Y with -g (estimate())
            else:
                rows[6 * i : 6 * i + 6] = 0.0
                residuals[6 * i : 6 * i + 6] = 0.0
        weighted = rows.T * self._link_weight
        precision[:nv, :nv] += weighted @ rows
        rhs[:nv] += weighted @ residuals


def plain_inverse_dynamics(
    robot: RobotModel,
    q: np.ndarray,
    v: np.ndarray,
    base_link: str,
    base_acceleration: np.ndarray,
    joint_accelerations: np.ndarray,
    contact_links: Sequence[str],
    wrenches: np.ndarray,
    data: pin.Data | None = None,
) -> np.ndarray:
    """The baseline: joint torques ``[M nu_dot + h]_joints - sum_k J_s,k^T f_k`` with ``nu_dot`` from the
    measured proper acceleration of ``base_link`` (eq. 12) and the measured joint accelerations, and the
    measured shoe wrenches ``(m, 6)`` (a NaN row counts as zero). Every measurement is taken as it is:
    nothing is fused, the base rows' imbalance is ignored."""
    model = robot.model
    data = data or model.createData()
    nv, nb = robot.nv, robot.base_dofs
    a = np.zeros(nv)
    a[nb:] = joint_accelerations
    pin.forwardKinematics(model, data, q, v, a)
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    fid = robot.frame_id(base_link)
    jac = pin.getFrameJacobian(model, data, fid, pin.ReferenceFrame.LOCAL)
    acc = pin.getFrameClassicalAcceleration(model, data, fid, pin.ReferenceFrame.LOCAL).vector.copy()
    acc[:3] -= data.oMf[fid].rotation.T @ GRAVITY  # prediction with zero base acceleration
    a[:nb] = np.linalg.solve(jac[:, :nb], np.asarray(base_acceleration, dtype=float) - acc)
    tau = pin.rnea(model, data, q, v, a)[nb:].copy()
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    for k, name in enumerate(contact_links):
        wrench = np.nan_to_num(np.asarray(wrenches[k], dtype=float))
        jac_k = pin.getFrameJacobian(model, data, robot.frame_id(name), pin.ReferenceFrame.LOCAL)
        tau -= jac_k[:, nb:].T @ wrench
    return tau
