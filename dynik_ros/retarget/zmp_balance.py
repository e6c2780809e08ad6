"""The ZMP plan (:mod:`.zmp_plan`) applied to a retargeted take (``balance.plan: zmp``).

The support polygon of each sample is the convex hull of the sole corners of the feet the retargeter's
detection has in contact, at their targets (offline: the whole sequence is known). The quasi-static plan's
CoM target (:func:`.balance.plan`: the stance sole's centre, moving across the double supports) is both the
weak CoM reference and the ZMP reference of the QP. The IK's CoM rows then track the planned ``c_k`` with
``c_dot_k`` as feed-forward; the hard CoM-in-support rows are off in this mode (:func:`.balance.ik_config`):
a dynamic plan moves the CoM outside the stance foot while its ZMP stays inside.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from dynik_ros.core.com_objective import convex_hull
from dynik_ros.core.targets import Measurements
from dynik_ros.retarget.zmp_plan import GRAVITY, ZmpPlan, ZmpPlanSpec, relaxed_plan

OFFSET_CLIP = 0.03  # m: the contact switches add decimetres for a few samples; no plan absorbs those (with
# 0.1 the 4-step planted walk's second pass was relaxed further and fell in MuJoCo; with 0.03 it stood)


def target_polygons(balanced, measurements: Sequence[Measurements], flags: np.ndarray) -> list:
    """Per sample the ground hull ``(m, 2)`` of the sole corners of the feet in contact (``flags >= 0``) at
    their targets, or ``None`` (``balanced``: a :class:`.balance.BalancedTargets`)."""
    from dynik_ros.core.sole import sole_polygon

    feet = balanced.retargeter.config.feet
    soles = [np.array(sole_polygon(f.sole, balanced.spec.sole_half_width)) for f in feet]
    out: list = []
    for k, m in enumerate(measurements):
        corners = []
        for f, (row, ori) in enumerate(zip(balanced._rows, balanced._ori_rows, strict=True)):
            if flags[k, f] < 0:
                continue
            rotation = m.rotations[ori] if ori is not None else np.eye(3)
            corners.append(m.positions[row] + soles[f] @ rotation.T)
        out.append(convex_hull(np.concatenate(corners)[:, :2]) if corners else None)
    return out


def com_height(retargeter) -> float:
    """The cart-table height: the map's ``balance.com_height`` if set, else the CoM of the IK's start pose
    above the robot's ground."""
    spec = retargeter.config.balance
    if spec.com_height > 0:
        return float(spec.com_height)
    model = retargeter.robot.model
    com = pin.centerOfMass(model, model.createData(), retargeter.initial_configuration())
    return float(com[2] - retargeter.contact.robot_ground)


def zmp_plan_of(
    balanced, times, measurements, flags, reference: np.ndarray, offset: np.ndarray | None = None
) -> ZmpPlan:
    """The ZMP plan of a take: polygons from the targets, ``reference`` ``(N, >= 2)`` for CoM and ZMP. When
    it has no solution at the map's margin (a real walk's double supports too short for its steps), the
    plan at the largest margin that has one (:func:`.zmp_plan.relaxed_plan`; the summary says which).
    ``offset`` ``(N, 2)``: the planned ZMP plus it must be in the support (the polygons moved by -offset)."""
    polygons = target_polygons(balanced, measurements, flags)
    if offset is not None:
        polygons = [None if p is None else p - offset[k] for k, p in enumerate(polygons)]
    reference = np.asarray(reference, dtype=float)[:, :2]
    height = com_height(balanced.retargeter)
    spec = ZmpPlanSpec(margin=balanced.spec.margin)
    return relaxed_plan(np.asarray(times, dtype=float), polygons, height, reference, reference, spec)


def _targets(plan: ZmpPlan) -> tuple[np.ndarray, np.ndarray]:
    com = np.zeros((len(plan.times), 3))
    velocity = np.zeros((len(plan.times), 3))
    com[:, :2], velocity[:, :2] = plan.com, plan.velocity
    return com, velocity


def whole_body_offset(retargeter, times, q, height: float, clip: float = OFFSET_CLIP) -> np.ndarray:
    """``(N, 2)``: the whole-body ZMP of the output ``q`` (:mod:`.zmp_figures`) minus the cart-table ZMP
    ``c - z_c/g c_ddot`` of the same output's CoM, each coordinate clipped to ``+-clip`` (0 at both ends)."""
    from dynik_ros.retarget.zmp_figures import whole_body_zmp

    times = np.asarray(times, dtype=float)
    zmp, com = whole_body_zmp(retargeter.robot.model, times, q, retargeter.contact.robot_ground)
    cart = com[:, :2].copy()
    hm, hp = np.diff(times)[:-1], np.diff(times)[1:]
    c = com[:, :2]
    c_ddot = 2 * ((c[2:] - c[1:-1]) / hp[:, None] - (c[1:-1] - c[:-2]) / hm[:, None]) / (hm + hp)[:, None]
    cart[1:-1] -= height / GRAVITY * c_ddot
    return np.clip(np.nan_to_num(zmp - cart), -clip, clip)


def dynamic_targets(
    balanced, times, measurements, flags, reference: np.ndarray, support: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, ZmpPlan]:
    """``(com (N, 3), velocity (N, 3), plan)`` for the CoM rows: the ZMP plan (horizontal; no z row). With
    ``balance.zmp_passes`` > 1, each further pass retargets the take with the plan so far (a fresh IK, 1 s
    settle) and re-plans with the cart-table ZMP held inside the support shifted by what the whole body
    added (:func:`whole_body_offset`): Kajita et al. 2003's two-stage "dynamics filter", offline."""
    from dataclasses import replace

    result = zmp_plan_of(balanced, times, measurements, flags, reference)
    retargeter = balanced.retargeter
    for _ in range(balanced.spec.zmp_passes - 1):
        com, velocity = _targets(result)
        trial = [
            replace(
                m,
                com_position=com[k],
                com_velocity=velocity[k],
                contacts=None if support is None else support[k],
            )
            for k, m in enumerate(measurements)
        ]
        q = retargeter.run(
            times, trial, ik=retargeter.make_ik(), settle=1.0, evaluate=False, contacts=flags
        ).q
        offset = whole_body_offset(retargeter, times, q, com_height(retargeter))
        result = zmp_plan_of(balanced, times, measurements, flags, reference, offset)
    return (*_targets(result), result)


def plan_note(plan: ZmpPlan | None, margin: float) -> str:
    """The summary's words on the plan: feasible at the map's ``margin``, or the margin it needed."""
    if plan is None:
        return ""
    if plan.margin >= margin - 1e-12:
        return f"; plan feasible with the {1e3 * margin:g} mm margin"
    needed = (
        f"the ZMP allowed {-1e3 * plan.margin:.0f} mm past the soles"
        if plan.margin < 0
        else f"a {1e3 * plan.margin:.0f} mm margin"
    )
    past = np.flatnonzero(plan.distance < margin - 1e-4)
    return (
        f"; NO PLAN with the {1e3 * margin:g} mm margin (none exists: the largest margin with one is an "
        f"LP's optimum): planned with {needed} (0.5 mm more than the least that "
        f"solves), its ZMP inside by less than the margin on {len(past)} samples from t = "
        f"{plan.times[past[0]]:.2f} s"
    )
