"""Helpers shared by tests: the 23 segments of a synthetic motion in Xsens order, an IK stepped through a
take, and ``dynik-retarget`` run as a user runs it (a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from dynik_ros.models.segments import XSENS_SEGMENTS

# the maps' contact settings before issue 9's combination became the default
# (doc/capture_issue9_status.md, *Where issue 9 stands*):
# weighted stance targets held where the human's foot landed, full weight on a foot in the air, no leg reach.
# Tests of a mechanism built on them pin them.
FEET_BEFORE_ISSUE_9 = {"stance": "weighted", "anchor": "human", "reach": False, "swing_weight": 1.0}


def xsens_ordered(motion):
    """``motion`` with its links reordered (in place) to the 23 Xsens segments, as the readers return them."""
    pick = [list(motion.links).index(s) for s in XSENS_SEGMENTS]
    for name in ("positions", "rotations", "linear_velocities", "angular_velocities"):
        setattr(motion, name, getattr(motion, name)[:, pick])
    motion.links = list(XSENS_SEGMENTS)
    return motion


def step_through(ik, measurements, dt: float) -> tuple[np.ndarray, list]:
    """``ik`` stepped once per measurement: the written ``q`` per step ``(N, nq)`` and each step's info."""
    qs, infos = [], []
    for m in measurements:
        q, _ = ik.step(m, dt)
        qs.append(q.copy())
        infos.append(ik.info)
    return np.array(qs), infos


def retarget_cli(args: list[str], out: Path) -> tuple[int, list[str], str]:
    """``python -m dynik_ros.cli.retarget ARGS --quiet --no-plots --out OUT`` in a new process: its exit code,
    the non-blank lines of its stderr, and the whole stderr."""
    result = subprocess.run(
        [sys.executable, "-m", "dynik_ros.cli.retarget", *args, "--quiet", "--no-plots", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, [line for line in result.stderr.splitlines() if line.strip()], result.stderr


def written_sole_heights(out: Path, robot_name: str, half_width: float) -> tuple[np.ndarray, np.ndarray]:
    """From ``dynik-retarget``'s ``retarget.npz`` in ``out``, by forward kinematics of the written ``q``: the
    height above the floor (z = 0) of the lowest point of each foot's sole ``(N, n_feet)`` (its centre-line
    points widened by ``half_width`` across the foot: :func:`dynik_ros.core.sole.sole_polygon`), and which
    samples are the flat part of a contact ``(N, n_feet)`` (held for the map's ``blend_time`` at least)."""
    import pinocchio as pin

    from dynik_ros.core.sole import sole_polygon
    from dynik_ros.retarget import Retargeter

    data = np.load(out / "retarget.npz")
    robot = Retargeter.from_config(robot_name)
    model = robot.robot.model
    fk = model.createData()
    times, contacts = data["times"], data["contacts"]
    feet = robot.config.feet
    frames = [robot.robot.frame_id(foot.frame) for foot in feet]
    corners = [np.array(sole_polygon(foot.sole, half_width)) for foot in feet]
    heights = np.empty(contacts.shape)
    for k, q in enumerate(data["q"]):
        pin.framesForwardKinematics(model, fk, q)
        for f, fid in enumerate(frames):
            pose = fk.oMf[fid]
            heights[k, f] = (pose.translation[2] + corners[f] @ pose.rotation[2]).min()
    flat = np.zeros(contacts.shape, dtype=bool)
    blend = robot.config.contact.blend_time
    for f in range(len(feet)):
        start = None
        for k, t in enumerate(times):
            start = (t if start is None else start) if contacts[k, f] >= 0 else None
            flat[k, f] = start is not None and t - start >= blend - 1e-9
    return heights, flat


def assert_row_field_acts_as_the_target_change(
    rt, measurements, frame: str, field: str, value: float, neutral: float, changed
) -> None:
    """A per-row ``Measurements`` field (``weight_scale``, ``min_gain``) set to ``value`` on ``frame``'s three
    position rows and ``neutral`` elsewhere steps the IK as an IK whose target on ``frame`` is
    ``changed(target)`` (same q after 20 steps, 1e-9); ``neutral`` on every row changes nothing (bit for
    bit); ``value`` changes the motion."""
    import dataclasses

    from dynik_ros.core.dynamical_ik import DynamicalIK
    from dynik_ros.core.targets import TargetSet

    row = [t.frame for t in rt.targets.position_targets].index(frame)
    field_value = np.full(3 * (rt.targets.n_position + rt.targets.n_orientation), neutral)
    field_value[3 * row : 3 * row + 3] = value
    targets = TargetSet([changed(t) if t.frame == frame else t for t in rt.targets.targets])
    with_field, plain, with_neutral = rt.make_ik(), rt.make_ik(), rt.make_ik()
    with_target = DynamicalIK(rt.robot, targets, rt.ik_config(), rt.initial_configuration())
    for m in measurements[:20]:
        with_field.step(dataclasses.replace(m, **{field: field_value}), 0.01)
        with_target.step(m, 0.01)
        plain.step(m, 0.01)
        with_neutral.step(dataclasses.replace(m, **{field: np.full_like(field_value, neutral)}), 0.01)
    assert np.allclose(with_field.q, with_target.q, atol=1e-9)
    assert np.array_equal(with_neutral.q, plain.q)
    assert not np.allclose(with_field.q, plain.q, atol=1e-6)


def assert_row_field_refuses(rt, measurement, field: str, neutral: float, bad: float) -> None:
    """``measurement`` with its per-row field ``field`` holding ``bad`` on one row, or of a wrong length, is
    refused by ``validate`` and by the IK's step, naming the field."""
    import dataclasses

    import pytest

    from dynik_ros.core.targets import InvalidMeasurementError

    values = np.full(3 * (rt.targets.n_position + rt.targets.n_orientation), neutral)
    values[4] = bad
    with pytest.raises(InvalidMeasurementError, match=field):
        dataclasses.replace(measurement, **{field: values}).validate(rt.targets)
    with pytest.raises(InvalidMeasurementError, match=field):
        dataclasses.replace(measurement, **{field: np.full(5, neutral)}).validate(rt.targets)
    with pytest.raises(ValueError, match=field):
        rt.make_ik().step(dataclasses.replace(measurement, **{field: values}), 0.01)
