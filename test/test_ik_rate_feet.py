"""``--ik-rate``: the IK stepped on every second sample of a 120 Hz take keeps the feet as at the full rate,
in seconds (``core/step_gain.py``: the floor rows' per-step ``gamma``; ``retarget/robot_anchor.py``: a hold
read one sample period before its sample); at the take's own rate nothing changes, bit for bit."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.cli.retarget import main
from dynik_ros.core.dynamical_ik import DynamicalIKConfig
from dynik_ros.core.floor_rows import FloorConfig, FloorRows, points_of_feet
from dynik_ros.core.step_gain import per_step_gain
from dynik_ros.retarget.foot_figures import foot_figures
from dynik_ros.retarget.offline_run import full_rate_step
from dynik_ros.retarget.retargeter import Retargeter

EXCERPT = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"


def test_per_step_gain_is_the_gain_itself_at_one_step_and_compounds_over_several():
    rng = random.Random(7)
    gains = [0.5, 0.1, 0.3, 0.7, 1.0, 0.0] + [rng.random() for _ in range(200)]
    for g in gains:
        one = per_step_gain(g, 1.0)
        assert one is g or one.hex() == g.hex()  # the same float: stepping at the full rate is unchanged
        # two steps in a row leave the product of what each leaves
        assert math.isclose(1.0 - per_step_gain(g, 2.0), (1.0 - g) ** 2, rel_tol=1e-12, abs_tol=1e-15)
        half = per_step_gain(g, 0.5)  # and half a step twice is one step
        assert math.isclose((1.0 - half) ** 2, 1.0 - g, rel_tol=1e-12, abs_tol=1e-15)
    assert per_step_gain(0.5, 2.0) == 0.75 and per_step_gain(1.0, 3.0) == 1.0
    # why one step returns the gain itself: 1 - (1 - g) is not g for every float
    assert any(1.0 - (1.0 - g) != g for g in gains)


def test_full_rate_step_is_the_take_interval_split_as_the_run_splits_it():
    assert full_rate_step(np.arange(13) / 120.0) == pytest.approx(1 / 120.0)
    assert full_rate_step(np.arange(13) / 30.0) == pytest.approx(1 / 60.0)  # 33 ms: two steps of 17 ms
    with pytest.raises(ValueError, match="sample_period"):
        DynamicalIKConfig(sample_period=-0.01)


def test_floor_rows_keep_the_share_of_a_depth_per_second_over_a_longer_step():
    """A step covering two of the take's steps asks the point back by ``1 - (1 - gamma)^2`` of its depth."""
    rt = Retargeter.from_config("g1")
    config = FloorConfig(points_of_feet(rt.config.feet, 0.02), gain=0.5)
    model, data = rt.robot.model, rt.robot.model.createData()
    q = rt.initial_configuration()
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    dt = 1 / 60
    kept = {}
    for period in (0.0, dt, dt / 2):
        rows = FloorRows(rt.robot, config, sample_period=period)
        rows.previous = np.full(rows.n_rows, -0.01)  # every corner 1 cm under the floor at the step's start
        rows.prepare(model, data, dt, np.zeros(rt.robot.nv))
        kept[period] = rows._kept.copy()
    np.testing.assert_array_equal(kept[0.0], kept[dt])  # one step of the take: the gain as given
    np.testing.assert_allclose(kept[0.0], np.full_like(kept[0.0], -0.005))
    np.testing.assert_allclose(kept[dt / 2], np.full_like(kept[0.0], -0.0025))


def _feet(tmp_path: Path, robot: str, *options: str) -> list:
    out = tmp_path / f"{robot}{'_'.join(options)}"
    code = main(
        [str(EXCERPT), "--robot", robot, "--out", str(out), "--no-bag", "--no-plots", "--quiet", *options]
    )
    assert code == 0
    data = np.load(out / "retarget.npz")
    rt = Retargeter.from_config(robot)
    contact, half = rt.config.contact, rt.config.balance.sole_half_width
    figures = foot_figures(
        rt.robot,
        data["q"],
        data["times"],
        data["contacts"],
        rt.config.feet,
        contact.blend_time,
        half_width=half,
    )
    return figures, data


def test_ik_rate_60_keeps_the_soles_on_the_floor_and_still_as_at_120_hz(tmp_path):
    """TALOS on the committed CMU excerpt (120 Hz): at 60 Hz the held soles stand on the floor and slide no
    more than 0.3 mm beyond the full rate's worst. Before (the floor's gamma per step, the hold read at the
    step's start): above the floor 1.4 mm against 0.7, slide 1.0 mm against 0.5."""
    full, _ = _feet(tmp_path, "talos")
    half, _ = _feet(tmp_path, "talos", "--ik-rate", "60")
    above = max(f.above_flat_max_mm for f in full)
    slide = max(f.slide_max_mm for f in full)
    tilt = max(f.tilt_flat_max_deg for f in full)
    for f in half:
        assert f.phases >= 1
        assert f.above_flat_max_mm <= above + 0.3, (f.side, f.above_flat_max_mm, above)
        assert f.slide_max_mm <= slide + 0.3, (f.side, f.slide_max_mm, slide)
        assert f.tilt_flat_max_deg <= tilt + 0.5, (f.side, f.tilt_flat_max_deg, tilt)
        assert f.penetration_max_mm <= 0.5


def test_ik_rate_at_the_take_rate_writes_the_same_trajectory_bit_for_bit(tmp_path):
    _, plain = _feet(tmp_path, "g1")
    _, same = _feet(tmp_path, "g1", "--ik-rate", "120")
    for name in ("q", "v", "nu", "contacts", "mnte"):
        np.testing.assert_array_equal(plain[name], same[name])


def test_a_sample_replayed_again_after_restore_is_as_if_replayed_once_with_that_configuration():
    """:meth:`RobotAnchoredFeet.snapshot` / :meth:`restore` (the hold read later along a longer step):
    replaying an anchoring sample with one configuration, restoring and replaying it with another leaves the
    rules, the sample's rows and the moved holds' log as one replay with the second, and the samples after."""
    from dynik_ros.io.motion_files import read_motion_file

    rt = Retargeter.from_config("talos")
    _, measurements, _, _ = rt.step_measurements(read_motion_file(EXCERPT))
    replay, frames = rt.robot_anchor, [f.frame for f in rt.config.feet]
    q_a = rt.initial_configuration()
    q_b = q_a.copy()
    q_b[0] += 0.03  # the base 3 cm further: every sole read there is 3 cm further

    def replayed(k_moved: int | None) -> tuple[list, list]:
        replay.start()
        out = []
        for k in range(len(measurements)):
            snap = replay.snapshot(k) if k == k_moved else None
            m = replay.measurement(k, measurements[k], rt.robot, frames, q_b if snap else q_a)
            if snap is not None:
                assert replay.anchored_since(snap)
                replay.restore(snap, k)
                m = replay.measurement(k, measurements[k], rt.robot, frames, q_a)
            out.append(m)
        return out, list(replay.contact.reanchors)

    plain, log = replayed(None)
    anchoring = [
        k for k in range(1, len(measurements)) if replay.flat[k].any() and not replay.flat[k - 1].any()
    ]
    assert anchoring and log
    again, log_again = replayed(anchoring[0])
    assert log_again == log
    for m, n in zip(plain, again, strict=True):
        np.testing.assert_array_equal(m.positions, n.positions)
        np.testing.assert_array_equal(m.rotations, n.rotations)
        np.testing.assert_array_equal(m.linear_velocities, n.linear_velocities)
