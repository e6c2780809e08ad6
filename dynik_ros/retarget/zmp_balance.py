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
from dynik_ros.retarget.zmp_plan import ZmpPlan, ZmpPlanSpec, relaxed_plan


def target_polygons(balanced, measurements: Sequence[Measurements], flags: np.ndarray) -> list:
    """Per sample the ground hull ``(m, 2)`` of the sole corners of the feet in contact (``flags >= 0``) at
    their targets, or ``None`` (``balanced``: a :class:`.balance.BalancedTargets`)."""
    from dynik_ros.retarget.balance import sole_polygon

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


def zmp_plan_of(balanced, times, measurements, flags, reference: np.ndarray) -> ZmpPlan:
    """The ZMP plan of a take: polygons from the targets, ``reference`` ``(N, >= 2)`` for CoM and ZMP. When
    it has no solution at the map's margin (a real walk's double supports too short for its steps), the
    plan at the largest margin that has one (:func:`.zmp_plan.relaxed_plan`; the summary says which)."""
    polygons = target_polygons(balanced, measurements, flags)
    reference = np.asarray(reference, dtype=float)[:, :2]
    height = com_height(balanced.retargeter)
    spec = ZmpPlanSpec(margin=balanced.spec.margin)
    return relaxed_plan(np.asarray(times, dtype=float), polygons, height, reference, reference, spec)


def dynamic_targets(
    balanced, times, measurements, flags, reference: np.ndarray
) -> tuple[np.ndarray, np.ndarray, ZmpPlan]:
    """``(com (N, 3), velocity (N, 3), plan)`` for the CoM rows: the ZMP plan (horizontal; no z row)."""
    result = zmp_plan_of(balanced, times, measurements, flags, reference)
    com = np.zeros((len(times), 3))
    velocity = np.zeros((len(times), 3))
    com[:, :2], velocity[:, :2] = result.com, result.velocity
    return com, velocity, result


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
        f"; plan INFEASIBLE with the {1e3 * margin:g} mm margin: planned with {needed} (the least that "
        f"solves), its ZMP inside by less than the margin on {len(past)} samples from t = "
        f"{plan.times[past[0]]:.2f} s"
    )
