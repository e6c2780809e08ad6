"""Quasi-static balance of retargeted motions (retarget/balance.py, dynik-retarget --balance): the plan from
contact flags, the CoM of the written trajectory against the feet of the written trajectory."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynik_ros.core.com_objective import convex_hull, support_distance
from dynik_ros.core.sole import sole_polygon
from dynik_ros.retarget.balance import BalanceSpec, plan


def test_plan_moves_the_com_from_stance_foot_to_stance_foot():
    """L single support, double support, R single support: the target sits on the stance foot's centre,
    crosses on the line between the feet during the double support and arrives before the left foot
    lifts; the look-ahead drops the left foot from the support 0.1 s before it lifts."""
    times = np.arange(90) / 100.0
    flags = np.full((90, 2), -1)
    flags[:30, 0] = 0
    flags[30:60] = 0
    flags[60:, 1] = 0
    flags[60:65, 0] = 0  # the left foot lifts at 0.65 s
    centres = np.zeros((90, 2, 3))
    centres[:, 0] = (0.0, 0.1, 0.0)
    centres[:, 1] = (0.2, -0.1, 0.0)
    spec = BalanceSpec(enabled=True, lookahead=0.1, shift_time=0.2)
    support, com, velocity = plan(times, flags, centres, spec)
    np.testing.assert_allclose(com[:30, :2], np.tile([0.0, 0.1], (30, 1)))
    np.testing.assert_allclose(com[65:, :2], np.tile([0.2, -0.1], (25, 1)))
    crossing = com[30:65, :2]
    # on the segment between the two centres, monotone, done by the end of the double support
    t = (crossing[:, 0] - 0.0) / 0.2
    np.testing.assert_allclose(crossing[:, 1], 0.1 - 0.2 * t, atol=1e-12)
    assert np.all(np.diff(t) >= -1e-12) and t[0] == pytest.approx(0.0) and t[-1] == pytest.approx(1.0)
    assert not support[55:65, 0].any() and support[30:55, 0].all()  # left dropped 0.1 s before lift-off
    assert support[:20, 0].all() and support[60:, 1].all()
    assert np.all(np.isfinite(velocity)) and np.abs(velocity[:, 2]).max() == 0.0
    # no foot stays over the look-ahead (a gap without contact follows): the feet in contact now count
    gap = flags.copy()
    gap[25:35] = -1
    support, _, _ = plan(times, gap, centres, spec)
    assert support[20:25, 0].all()


def test_plan_ends_a_take_standing_at_rest_over_the_middle_of_the_feet():
    """R single support, then both feet down to the end of the take (a walk's final stand): the target
    leaves the stance foot as the double support begins and is at rest over the middle of the feet after
    ``shift_time``, not moving off the stance foot over the take's last ``shift_time`` (what the end of a
    take did before: the ZMP plan's CoM ended the planted walk 6.8 cm off the middle, still moving)."""
    times = np.arange(150) / 100.0
    flags = np.full((150, 2), -1)
    flags[:50, 1] = 0
    flags[50:] = 0  # both feet down from 0.5 s to the end (1 s)
    centres = np.zeros((150, 2, 3))
    centres[:, 0] = (0.3, 0.1, 0.0)
    centres[:, 1] = (0.3, -0.1, 0.0)
    spec = BalanceSpec(enabled=True, lookahead=0.1, shift_time=0.2)
    _, com, velocity = plan(times, flags, centres, spec)
    np.testing.assert_allclose(com[:50, :2], np.tile([0.3, -0.1], (50, 1)))
    np.testing.assert_allclose(com[70:, :2], np.tile([0.3, 0.0], (80, 1)), atol=1e-12)  # rests from 0.7 s
    assert np.abs(velocity[72:]).max() < 1e-9
    assert com[60, 1] == pytest.approx(-0.05, abs=0.006)  # half way at mid-shift, on the line


def test_sole_polygon_widens_the_heel_toe_line():
    line = ((-0.05, 0.0, -0.035), (0.12, 0.0, -0.035))
    poly = sole_polygon(line, 0.025)
    assert len(poly) == 4 and {p[1] for p in poly} == {0.025, -0.025}
    assert sole_polygon(line, 0.0) == line  # no width: the points once (no doubled floor rows)


@pytest.mark.parametrize("swing", [[], ["--swing-weight", "1"]])
def test_balanced_walk_keeps_the_com_over_the_feet_of_the_written_trajectory(tmp_path, swing):
    """dynik-retarget --balance on 3 s of the synthetic walk (G1): the CoM of every written q with a foot in
    contact is >= 1 cm inside the polygon of the feet in contact at that q (recomputed here from the
    written trajectory with pinocchio); without --balance it is not. With the maps' swing weight 0.1 as with
    ``--swing-weight 1``: the plan keeps the feet's weights (a light swing foot landed behind the target the
    CoM was led to)."""
    from dynik_ros.cli.retarget import main
    from dynik_ros.retarget.registry import load_robot

    spec = load_robot("g1")
    robot, feet = spec.robot, spec.config.feet
    half = spec.config.balance.sole_half_width
    outcomes = {}
    for balance in (False, True):
        out = tmp_path / ("balanced" if balance else "plain")
        args = ["--motion", "walking", "--duration", "3", "--rate", "100", "--robot", "g1", "--out", str(out)]
        args += ["--no-bag", "--quiet", *swing] + (["--balance"] if balance else [])
        assert main(args) == 0
        data = np.load(out / "retarget.npz")
        q, contacts = data["q"], data["contacts"]
        model, fk = robot.model, robot.model.createData()
        distances = []
        for k in range(len(q)):
            com = pin.centerOfMass(model, fk, q[k])
            pin.updateFramePlacements(model, fk)
            corners = [
                np.array(sole_polygon(f.sole, half)) @ fk.oMf[robot.frame_id(f.frame)].rotation.T
                + fk.oMf[robot.frame_id(f.frame)].translation
                for i, f in enumerate(feet)
                if contacts[k, i] >= 0
            ]
            if corners:
                distances.append(support_distance(com, convex_hull(np.concatenate(corners)[:, :2])))
        outcomes[balance] = np.array(distances)
        if balance:
            text = (out / "summary.txt").read_text()
            assert "balance: CoM >= 1 cm inside the support on 100.0 %" in text
            assert (out / "com_track.png").is_file()
    assert len(outcomes[True]) > 50
    assert outcomes[True].min() >= 0.01 - 1e-4
    assert np.mean(outcomes[False] >= 0.01) < 0.5


def test_a_plan_added_to_measurements_made_without_it_drops_the_swing_weight():
    """``Retargeter.balanced`` on measurements computed with the map's balance off (``balance.compare``,
    the benchmarks, the sim): they carry the swing weight's factors (0.1, the maps' default), which the
    plan must not keep (a light swing foot lands behind the target the CoM was led to). G1, 3 s of the
    synthetic walk: the balanced run's written CoM (pinocchio, ``support_figures``) is >= 1 cm inside the
    feet in contact on every sample; with the factors kept, 59.6 %."""
    from dynik_ros.retarget.balance import compare
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    assert rt.config.contact.swing_weight < 1.0
    result = compare(rt, synthetic_human_motion("walking", 3.0, 100.0))
    assert result.inside["plain"] < 0.5
    assert result.inside["balanced"] == 1.0, result.inside
