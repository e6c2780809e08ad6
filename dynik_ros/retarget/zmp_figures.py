"""The ZMP of a written trajectory from whole-body dynamics, against the support polygons (issue 12).

With ``v``, ``a`` by finite differences of the written ``q`` (on the configuration manifold: pinocchio's
``difference`` from ``q_k`` to its neighbours, so the base's rotation is handled), pinocchio's centroidal
momentum rate ``h_dot = (m c_ddot, L_dot)`` (about the CoM) gives the ground wrench: force
``f = m c_ddot - m g`` and moment about the CoM ``L_dot``. The ZMP on the ground plane ``z = z_g`` is where
the horizontal moment of that wrench vanishes (``L_dot + (c - p) x f`` with zero x and y):

    p_x = c_x - ((c_z - z_g) f_x + L_dot_y) / f_z,      p_y = c_y - ((c_z - z_g) f_y - L_dot_x) / f_z

(with ``L_dot = 0`` and a constant height this is the cart-table ZMP of Kajita et al. 2003). The first and
last samples have no central difference and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from dynik_ros.core.com_objective import support_distance


def finite_differences(model, times: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(v, a)`` ``(N, nv)`` by central differences on the manifold (NaN on the first and last sample)."""
    n = len(q)
    v = np.full((n, model.nv), np.nan)
    a = np.full((n, model.nv), np.nan)
    for k in range(1, n - 1):
        hp, hm = times[k + 1] - times[k], times[k] - times[k - 1]
        forward = pin.difference(model, q[k], q[k + 1])
        backward = pin.difference(model, q[k], q[k - 1])
        v[k] = (forward * hm / hp - backward * hp / hm) / (hp + hm)
        a[k] = 2.0 * (forward / hp + backward / hm) / (hp + hm)
    return v, a


def whole_body_zmp(
    model, times: np.ndarray, q: np.ndarray, ground: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(zmp (N, 2), com (N, 3))`` of the trajectory ``q`` sampled at ``times`` (module docstring)."""
    times, q = np.asarray(times, dtype=float), np.asarray(q, dtype=float)
    data = model.createData()
    v, a = finite_differences(model, times, q)
    mass = pin.computeTotalMass(model)
    gravity = model.gravity.linear
    zmp = np.full((len(q), 2), np.nan)
    com = np.zeros((len(q), 3))
    for k in range(len(q)):
        if not np.isfinite(v[k, 0]):
            com[k] = pin.centerOfMass(model, data, q[k])
            continue
        rate = pin.computeCentroidalMomentumTimeVariation(model, data, q[k], v[k], a[k])
        c = data.com[0].copy()
        com[k] = c
        force = rate.linear - mass * gravity
        moment = rate.angular
        height = c[2] - ground
        zmp[k] = (
            c[0] - (height * force[0] + moment[1]) / force[2],
            c[1] - (height * force[1] - moment[0]) / force[2],
        )
    return zmp, com


@dataclass
class ZmpFigures:
    zmp: np.ndarray  # (N, 2) whole-body ZMP of the output (NaN at both ends)
    distance: np.ndarray  # (N,) ZMP distance inside the polygon of the feet in contact [m]; NaN: not counted

    def fraction_inside(self, margin: float = 0.01) -> float:
        valid = np.isfinite(self.distance)
        return float(np.mean(self.distance[valid] >= margin)) if valid.any() else float("nan")

    @property
    def counted(self) -> int:
        return int(np.isfinite(self.distance).sum())


def zmp_figures(
    robot, times, q, flags: np.ndarray, feet, half_width: float, ground: float = 0.0
) -> ZmpFigures:
    """Whole-body ZMP of every output sample against the polygon of the feet in contact at that ``q``
    (:func:`.balance.support_figures`'s polygons)."""
    from dynik_ros.retarget.balance import support_figures

    polygons = support_figures(robot, np.asarray(q), flags, feet, half_width).hulls
    zmp, _ = whole_body_zmp(robot.model, times, q, ground)
    distance = np.full(len(zmp), np.nan)
    for k, hull in enumerate(polygons):
        if hull is not None and np.all(np.isfinite(zmp[k])):
            distance[k] = support_distance(zmp[k], hull)
    return ZmpFigures(zmp, distance)
