"""``dynik-retarget``'s verdict on a written trajectory that ran away (``retarget/runaway.py``): a real G1
walk summarised as the CLI does (``summarize``), then its written configurations corrupted on purpose. The
old verdict looked at NaN and limits only and said OK to a 2.3 m position RMSE and a 12.9 m slide."""

from __future__ import annotations

import re

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.cli import retarget as cli
from dynik_ros.retarget import Retargeter
from dynik_ros.retarget.runaway import BASE_SHARE, SLIDE_MM, TRACKING_SHARE


@pytest.fixture(scope="module")
def walk():
    retargeter = Retargeter.from_config("g1")
    motion = cli.synthetic_motion("walking", 2.0, 60.0)
    result = retargeter.retarget_motion(motion, settle=0.5)
    return retargeter, motion, result


def _summary(retargeter, motion, result, q):
    from dataclasses import replace

    return cli.summarize(retargeter, replace(result, q=q), motion, 0.5, 0.0)


def _result_line(summary) -> str:
    return next(line for line in summary.text.splitlines() if line.startswith("result "))


def test_a_base_that_leaves_by_metres_fails_naming_the_figures(walk):
    retargeter, motion, result = walk
    assert _summary(retargeter, motion, result, result.q).ok  # the walk as solved
    q = result.q.copy()
    q[:, 0] += np.linspace(0.0, 3.0, len(q))  # the whole robot drifts 3 m along x over the take
    summary = _summary(retargeter, motion, result, q)
    line = _result_line(summary)
    assert not summary.ok and line.split(maxsplit=1)[1].startswith("FAILED: ")
    # ground truth: the written base (pinocchio, frame by frame) against the targets the IK was given
    robot, root = retargeter.robot, retargeter.config.root.frame
    column = [t.frame for t in retargeter.targets.position_targets].index(root)
    data, fid = robot.model.createData(), robot.frame_id(root)
    distance = []
    for k in range(len(q)):
        pin.framesForwardKinematics(robot.model, data, q[k])
        distance.append(np.linalg.norm(data.oMf[fid].translation - result.position_targets[k, column]))
    height = retargeter.calibration.robot_root_height
    worst = max(distance)
    assert worst > 2.9  # 3 m at the end, less what the solved base was off
    at = int(np.argmax(distance))
    assert f"base {worst:.2f} m from its target (sample {at}) > {BASE_SHARE * height:.2f} m" in line
    rmse = float(re.search(r"position RMSE mean (\d+) mm > (\d+) mm", line).group(1))
    assert rmse > 1e3 * TRACKING_SHARE * height


def test_a_sole_sliding_far_beyond_the_target_fails_alone(walk):
    """0.2 m: the base stays within its threshold and the tracking within its; only the slide trips."""
    retargeter, motion, result = walk
    foot = int(np.argmax((result.contacts >= 0).sum(axis=0)))
    held = np.flatnonzero(result.contacts[:, foot] >= 0)
    ends = np.flatnonzero(np.diff(held) > 1)
    first = held[: ends[0] + 1] if ends.size else held  # the first contact of that foot
    assert len(first) * (motion.times[1] - motion.times[0]) > retargeter.config.contact.blend_time
    q = result.q.copy()
    q[first[-2] :, 0] += 0.2  # the robot jumps 0.2 m forward on the flat part: the held sole with it
    summary = _summary(retargeter, motion, result, q)
    side = retargeter.config.feet[foot].side
    slid = summary.stats[f"foot_{side}_slide_max_mm"]
    assert slid == pytest.approx(200.0, abs=15.0)  # the sole moved with the base
    assert not summary.ok
    assert _result_line(summary).endswith(
        f"FAILED: foot {side} slid {slid:.0f} mm in one contact > {SLIDE_MM:g} mm"
    )


def test_non_finite_output_fails(walk):
    retargeter, motion, result = walk
    q = result.q.copy()
    q[len(q) // 2, 7] = np.nan
    summary = _summary(retargeter, motion, result, q)
    assert not summary.ok and _result_line(summary).endswith("FAILED: NaN in output")
