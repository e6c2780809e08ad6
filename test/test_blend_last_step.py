"""The touch-down blend's last step carries the rest of its turn (retarget/foot_contact.py, README *The
blend's last step*), measured on the written trajectory.

The feed-forward of the blend's turn was ``h'`` at each sample; ``h'`` of the smoothstep is 0 at the end of
the blend, so the step to the sample that ends it moved the sole by none of its last part of the turn (10 %
of the touch-down tilt at 50 Hz: ``1 - h(0.8)``) and that sample, the first of the flat part, starts the
hard stance rows, which hold the sole where it is. Now that step's feed-forward is the secant of the turn
over it."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
from test_swing_weight import _one_leg_sway

from dynik_ros.retarget.foot_figures import foot_figures
from dynik_ros.retarget.retargeter import Retargeter


def heel_first(rate: float, duration: float = 1.0):
    """A still human whose right foot stands 20 deg toe up on its heel (the foot and toe links pitched about
    the foot link) at ``rate`` Hz: the contact starts tilted and its blend turns the sole level."""
    motion = _one_leg_sway(duration=duration, rate=rate)
    foot, toe = motion.links.index("RightFoot"), motion.links.index("RightToe")
    pitch = pin.rpy.rpyToMatrix(0.0, -math.radians(20.0), 0.0)
    heel = motion.positions[0, foot].copy()
    for link in (foot, toe):
        lever = motion.positions[:, link] - heel
        motion.positions[:, link] = heel + lever @ pitch.T
        motion.rotations[:, link] = pitch @ motion.rotations[:, link]
    return motion


@pytest.mark.parametrize(("rate", "most"), [(50.0, 1.4), (60.0, 1.0), (120.0, 0.3)])
def test_a_sole_landing_on_its_heel_is_level_when_its_flat_part_starts(rate, most):
    """G1, the map's defaults (hard stance rows): the right sole's tilt over the flat part by forward
    kinematics of the written trajectory, under ``most`` degrees (measured 1.10, 0.79, 0.19 deg; with ``h'``
    as the last step's feed-forward 2.16, 1.62, 0.47 deg), one contact, no joint outside its limits."""
    rt = Retargeter.from_config("g1")
    out = rt.retarget_motion(heel_first(rate), settle=1.0)
    assert out.solved.all()
    right = foot_figures(
        rt.robot, out.q, out.times, out.contacts, rt.config.feet, rt.config.contact.blend_time,
        half_width=rt.config.balance.sole_half_width,
    )[1]  # fmt: skip
    assert right.phases == 1, right.line()
    assert right.tilt_flat_max_deg <= most, right.line()
    joints = out.q[:, 7:]
    assert (joints >= rt.robot.lower - 1e-9).all() and (joints <= rt.robot.upper + 1e-9).all()
    speeds = np.abs(np.diff(joints, axis=0)) / np.diff(out.times)[:, None]
    assert (speeds <= rt.robot.velocity_limit * (1 + 1e-6)).all()
