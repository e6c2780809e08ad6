"""The online CoM plan (retarget/online_balance.py) on the G1 map's synthetic walk: the target in single
support is the stance sole's centre (from the foot target's pose and the map's sole points), it reaches the
swing foot before that foot lands once the gait's gap is known, and contact-state names map onto the feet."""

from __future__ import annotations

import numpy as np
import pytest

from dynik_ros.retarget.online_balance import OnlineBalance, contacts_from_state


def test_contact_state_names_map_onto_the_feet():
    sides = ["left", "right"]
    assert contacts_from_state("left", sides).tolist() == [True, False]
    assert contacts_from_state("right", sides).tolist() == [False, True]
    assert contacts_from_state("double", sides).tolist() == [True, True]
    assert contacts_from_state("none", sides).tolist() == [False, False]
    with pytest.raises(ValueError, match="contact state"):
        contacts_from_state("hopping", sides)


def test_online_target_follows_the_stance_foot_and_meets_the_swing_foot():
    from dynik_ros.retarget.human import synthetic_human_motion
    from dynik_ros.retarget.retargeter import Retargeter

    retargeter = Retargeter.from_config("g1")
    human = retargeter.config.human
    rate = 100.0
    motion = synthetic_human_motion("walking", 4.0, rate, height=human.height, mass=human.mass)
    measurements, flags = retargeter.motion_measurements(motion)
    feet = retargeter.config.feet
    position_frames = [t.frame for t in retargeter.targets.position_targets]
    orientation_frames = [t.frame for t in retargeter.targets.orientation_targets]
    position_rows = [position_frames.index(f.frame) for f in feet]
    orientation_rows = [orientation_frames.index(f.frame) for f in feet]

    def centre(m, f: int) -> np.ndarray:
        sole = np.mean(np.asarray(feet[f].sole, float), axis=0)
        return (m.positions[position_rows[f]] + m.rotations[orientation_rows[f]] @ sole)[:2]

    plan = OnlineBalance(retargeter, retargeter.config.balance)
    contact = flags >= 0
    out = [plan.apply(t, m, c) for t, m, c in zip(motion.times, measurements, contact, strict=True)]
    singles = np.flatnonzero(contact.sum(axis=1) == 1)
    assert len(singles) > 100
    for k in singles:
        f = int(np.flatnonzero(contact[k])[0])
        np.testing.assert_allclose(out[k].com_position[:2], centre(measurements[k], f), atol=1e-12)
        assert out[k].contacts.tolist() == contact[k].tolist()
    landings = [k for k in range(1, len(contact)) if contact[k].any() and not contact[k - 1].any()]
    assert len(landings) >= 4
    for k in landings[1:]:  # the gap is known from the second flight on: the target is at the swing foot
        f = int(np.flatnonzero(contact[k])[0])
        np.testing.assert_allclose(out[k - 1].com_position[:2], centre(measurements[k - 1], f), atol=1e-9)
    assert all(o.com_position[2] == 0.0 and np.all(np.isfinite(o.com_velocity)) for o in out)
