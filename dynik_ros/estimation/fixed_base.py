"""The human as a fixed-base system rooted at a foot: the formalism the seed compares against (Latella et
al. 2019, sec. 4.4, after their earlier fixed-base MAP, refs. [7], [24]).

In the fixed-base formalism a foot is the model's base and is fixed in the world: its twist and
acceleration are zero, the joint velocities alone give every link's velocity, and the ground's wrench on
that foot is the base's reaction: it is not a variable of ``d`` and its shoe is not read (the seed: "the
lack of the external force estimation ... on the link appointed as the model base"); the base must be
changed between tasks (left foot for T1 and T3, right foot for T2).

Here it is written in the floating-base model, which is equivalent: the floating-base dynamics (eq. 1)
plus the holonomic constraint that the base foot is still, ``J_F nu_dot + c_F = 0`` (with ``J_F nu = 0`` for
the velocities, eq. 8/9 with that foot alone), with the foot's wrench free (an uninformative prior, no
measurement), are the foot-rooted model's dynamics with that wrench as the constraint's multiplier. The
estimate is the MAP of :class:`~dynik_ros.estimation.map_dynamics.MapDynamicsEstimator` with those rows
(``still``); the measurements are otherwise the same (the suit's link accelerations, the joint
accelerations, the other shoe).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.estimation.base_velocity import BaseVelocityFromContacts
from dynik_ros.estimation.map_dynamics import MapCovariances, MapDynamicsEstimator, MapEstimate


class FixedBaseMapEstimator:
    """MAP estimate with ``base_foot`` (one of ``contact_links``) as a fixed base (module docstring)."""

    def __init__(
        self,
        robot: RobotModel,
        links: Sequence[str],
        contact_links: Sequence[str] = ("RightFoot", "LeftFoot"),
        covariances: MapCovariances | None = None,
    ):
        self.contact_links = tuple(contact_links)
        self.map = MapDynamicsEstimator(robot, links, contact_links, covariances)
        self.base = BaseVelocityFromContacts(robot, contact_links)

    def velocity(self, q: np.ndarray, s_dot: np.ndarray, base_foot: str) -> np.ndarray:
        """``nu`` of the fixed-base model: the base foot still (eq. 8/9 with that foot alone)."""
        flags = self._flags(base_foot)
        s_dot = np.asarray(s_dot, dtype=float)
        return np.concatenate((self.base.estimate(q, s_dot, flags), s_dot))

    def estimate(
        self,
        q: np.ndarray,
        s_dot: np.ndarray,
        base_foot: str,
        link_accelerations: np.ndarray | None = None,
        joint_accelerations: np.ndarray | None = None,
        wrenches: np.ndarray | None = None,
        contacts: Sequence[bool] | None = None,
    ) -> MapEstimate:
        """The estimate with ``base_foot`` fixed: ``wrenches`` ``(m, 6)`` are the shoes (the base foot's
        row is ignored: the fixed-base formalism has no variable for it); ``contacts`` the other feet's
        prior (default: in contact). The returned wrench of the base foot is the constraint's reaction."""
        flags = self._flags(base_foot)
        shoes = None
        if wrenches is not None:
            shoes = np.array(wrenches, dtype=float).reshape(len(self.contact_links), 6)
            shoes[np.array(flags)] = np.nan
        prior = [True] * len(flags) if contacts is None else list(contacts)
        prior = [on or base for on, base in zip(prior, flags, strict=True)]
        return self.map.estimate(
            q, self.velocity(q, s_dot, base_foot), link_accelerations, joint_accelerations, shoes, prior,
            still=flags,
        )  # fmt: skip

    def _flags(self, base_foot: str) -> list[bool]:
        if base_foot not in self.contact_links:
            raise ValueError(f"fixed base '{base_foot}' is not one of the contact links {self.contact_links}")
        return [name == base_foot for name in self.contact_links]


def fixed_vs_floating(
    robot: RobotModel,
    q: np.ndarray,
    s_dot: np.ndarray,
    contacts: np.ndarray,
    base_foot: str,
    link_accelerations: np.ndarray,
    joint_accelerations: np.ndarray,
    wrenches: np.ndarray,
    links: Sequence[str],
    contact_links: Sequence[str] = ("RightFoot", "LeftFoot"),
    covariances: MapCovariances | None = None,
) -> dict[str, np.ndarray]:
    """Sec. 4.4's comparison over ``N`` samples: the fixed-base estimate (``base_foot`` fixed, its shoe
    unread) and the floating-base one (pelvis base, its twist from the feet in ``contacts`` by eq. 8-10,
    both shoes). Returns ``{"fixed": ..., "floating": ...}``, each a dict of ``tau`` ``(N, n)``,
    ``wrenches`` ``(N, m, 6)``, ``nu_dot`` ``(N, nv)`` and ``pelvis`` ``(N, 3)``: the base's proper linear
    acceleration (eq. 13) implied by ``nu_dot``."""
    import pinocchio as pin

    from dynik_ros.estimation.synthetic_dynamics import proper_accelerations

    fixed = FixedBaseMapEstimator(robot, links, contact_links, covariances)
    floating = MapDynamicsEstimator(robot, links, contact_links, covariances)
    base_velocity = BaseVelocityFromContacts(robot, contact_links)
    data = robot.model.createData()
    base_frame = [robot.frame_id("Pelvis")]
    out: dict[str, dict[str, list]] = {
        name: {"tau": [], "wrenches": [], "nu_dot": [], "pelvis": []} for name in ("fixed", "floating")
    }
    for k in range(len(q)):
        flags = [bool(c) for c in contacts[k]]
        v_floating = np.concatenate((base_velocity.estimate(q[k], s_dot[k], flags), s_dot[k]))
        estimates = {
            "fixed": (
                fixed.estimate(q[k], s_dot[k], base_foot, link_accelerations[k], joint_accelerations[k],
                               wrenches[k], flags),
                fixed.velocity(q[k], s_dot[k], base_foot),
            ),
            "floating": (
                floating.estimate(q[k], v_floating, link_accelerations[k], joint_accelerations[k],
                                  wrenches[k], flags),
                v_floating,
            ),
        }  # fmt: skip
        for name, (estimate, v) in estimates.items():
            pin.forwardKinematics(robot.model, data, q[k], v, estimate.nu_dot)
            pin.updateFramePlacements(robot.model, data)
            out[name]["tau"].append(estimate.tau)
            out[name]["wrenches"].append(estimate.wrenches)
            out[name]["nu_dot"].append(estimate.nu_dot)
            out[name]["pelvis"].append(proper_accelerations(robot, data, base_frame)[0, :3])
    return {name: {key: np.array(value) for key, value in d.items()} for name, d in out.items()}
