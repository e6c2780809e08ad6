"""The contact rules' per-sample shortcuts (retarget/foot_contact.py, issue 9's speed target) compute what the
plain numpy formulas compute, bit for bit (signs of zeros, infinities and NaN included): they run for every
foot at every sample of a take, twice offline (``Retargeter.compute`` and the ``anchor: robot`` replay)."""

from __future__ import annotations

import math

import numpy as np

from dynik_ros.core.small_arrays import dot
from dynik_ros.retarget.contact_floats import (
    NO_RATE,
    blended_rate,
    faded,
    held,
    lowest,
    nearest,
    rate_term_needed,
)
from dynik_ros.retarget.foot_contact import _Rules


def _same_bits(a, b) -> bool:
    """Equal values, zeros of the same sign, NaN where NaN (a NaN's sign bit means nothing)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    numbers = ~np.isnan(a)
    return (
        a.shape == b.shape
        and bool(np.array_equal(a, b, equal_nan=True))
        and bool(np.array_equal(np.signbit(a[numbers]), np.signbit(b[numbers])))
    )


def _vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """3-vectors of every kind the rules may meet: ordinary values, signed zeros, huge, inf and NaN."""
    out = rng.normal(size=(count, 3)) * rng.choice([1e-3, 1.0, 1e3], size=(count, 1))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324])
    mask = rng.random((count, 3)) < 0.15
    out[mask] = rng.choice(special, size=int(mask.sum()))
    return out


def _scalars(rng: np.random.Generator, count: int) -> np.ndarray:
    """The blend weights: 0, 1 and values between (and a few past the ends)."""
    return np.where(
        rng.random(count) < 0.4, rng.choice([0.0, 1.0, -0.0], size=count), rng.uniform(-0.1, 1.1, count)
    )


def test_the_blended_rate_in_floats_is_the_numpy_formula():
    """``blended_rate`` = ``(1 - alpha) omega + rate_alpha along + alpha level_rate`` on numpy 3-vectors."""
    rng = np.random.default_rng(1)
    omega, along, level = _vectors(rng, 4000), _vectors(rng, 4000), _vectors(rng, 4000)
    level[rng.random(4000) < 0.5] = 0.0  # flat contacts: no level rate
    alpha, rate = _scalars(rng, 4000), rng.normal(size=4000) * rng.choice([0.0, 1.0, 30.0], size=4000)
    with np.errstate(all="ignore"):
        for k in range(4000):
            expected = (1.0 - alpha[k]) * omega[k] + rate[k] * along[k] + alpha[k] * level[k]
            got = blended_rate(
                omega[k].tolist(), along[k].tolist(), level[k].tolist(), float(alpha[k]), float(rate[k])
            )
            assert _same_bits(got, expected), (k, got, expected)


def test_the_held_target_and_rate_in_floats_are_the_numpy_formulas():
    """``held`` = ``anchor - lever - (1 - beta) reach`` and ``-(omega x lever) + (reach / blend if beta < 1
    else 0)`` on numpy 3-vectors (``np.cross``), beta before, at and past the end of the blend."""
    rng = np.random.default_rng(2)
    n = 4000
    anchor, lever, reach, omega = (_vectors(rng, n) for _ in range(4))
    reach[rng.random(n) < 0.5] = 0.0  # no shift into reach (contact.reach off, or none needed)
    beta = _scalars(rng, n)
    blend = rng.choice([1e-9, 0.1, 0.25], size=n)
    with np.errstate(all="ignore"):
        for k in range(n):
            target = anchor[k] - lever[k] - (1.0 - beta[k]) * reach[k]
            rate = -np.cross(omega[k], lever[k]) + (reach[k] / blend[k] if beta[k] < 1.0 else 0.0)
            got_target, got_rate = held(
                anchor[k].tolist(),
                lever[k].tolist(),
                reach[k].tolist(),
                omega[k].tolist(),
                float(beta[k]),
                float(blend[k]),
            )
            assert _same_bits(got_target, target), (k, got_target, target)
            # np.cross's own order of operations on a pair: what cross_values repeats (finite values; with
            # inf / NaN np.cross computes the same products, only its temporaries differ)
            if np.isfinite(omega[k]).all() and np.isfinite(lever[k]).all():
                assert _same_bits(got_rate, rate), (k, got_rate, rate)


def test_the_nearest_foot_link_in_floats_is_the_numpy_norm():
    """``nearest`` = ``np.linalg.norm(points - others, axis=1).min()`` on finite 2-D points given flat (a
    foot's one or two links and its footprint)."""
    rng = np.random.default_rng(3)
    for k in range(4000):
        count = int(rng.integers(1, 3))
        scale = rng.choice([1e-6, 1e-3, 1.0, 1e150])
        points, others = rng.normal(size=(2, count, 2)) * scale
        if k % 5 == 0:
            others = points.copy()  # no slide at all
        expected = float(np.linalg.norm(points - others, axis=1).min())
        got = nearest(points.ravel().tolist(), others.ravel().tolist())  # (flat: [x0, y0, x1, y1])
        assert _same_bits(got, expected), (k, got, expected)


def test_the_fading_hold_in_floats_is_the_numpy_formula():
    """``faded`` = ``target + fade delta`` and ``rate - (fade / tau) delta`` on numpy 3-vectors (a released
    foot's held offset fading out), fades from 1 to under 1e-4, release times down to the 1e-9 floor."""
    rng = np.random.default_rng(4)
    n = 4000
    target, rate, delta = (_vectors(rng, n) for _ in range(3))
    fade = np.where(rng.random(n) < 0.2, rng.choice([0.0, 1.0, 1e-5], size=n), rng.random(n))
    tau = rng.choice([1e-9, 0.15, 0.45], size=n)
    with np.errstate(all="ignore"):
        for k in range(n):
            got_target, got_rate = faded(
                target[k].tolist(), rate[k].tolist(), delta[k].tolist(), float(fade[k]), float(tau[k])
            )
            expected_target = target[k].copy()
            expected_target += fade[k] * delta[k]
            expected_rate = rate[k].copy()
            expected_rate -= (fade[k] / tau[k]) * delta[k]
            assert _same_bits(got_target, expected_target), (k, got_target, expected_target)
            assert _same_bits(got_rate, expected_rate), (k, got_rate, expected_rate)


def test_the_feet_products_by_dot_are_those_of_matmul():
    """The contact rules' products by ``np.dot`` (``dot``: the level turn ``R_h^T R_level``, the levelled
    rotation ``R_h exp(alpha turn)``, its rate ``R turn`` and the sole points ``P R^T``) are ``@``'s bit for
    bit: the same BLAS products without matmul's dispatch."""
    rng = np.random.default_rng(5)
    for k in range(3000):
        a, b = (np.linalg.qr(rng.normal(size=(3, 3)))[0] for _ in range(2))
        if k % 3 == 0:
            a, b = a * rng.choice([1e-6, 1e6]), rng.normal(size=(3, 3))
        v = rng.normal(size=3) * rng.choice([1e-9, 1.0, 1e9])
        sole = rng.normal(size=(int(rng.integers(1, 5)), 3)) * 0.1
        for got, expected in (
            (dot(a.T, b), a.T @ b),
            (dot(a, b), a @ b),
            (dot(a, v), a @ v),
            (dot(sole, a.T), sole @ a.T),
        ):
            assert _same_bits(got, expected), (k, got, expected)


def test_the_rules_derived_from_the_spec_follow_a_spec_set_later():
    """What the rules read of ``contact`` on every call (``_Rules``: blend and release times floored,
    radians, toe-off only with ``toe: flat``) is derived again whenever ``FootContact.spec`` is set (the
    maps, ``--time-scale`` and the tests set it after construction): the same as derived from that spec."""
    from dataclasses import replace

    from dynik_ros.retarget import Retargeter

    contact = Retargeter.from_config("g1").contact
    assert vars(contact.rules) == vars(_Rules(contact.spec))
    for changes in (
        {"blend_time": 0.0, "release_time": 0.45, "pivot_off": 30.0},
        {"toe": "pitch", "toe_angle": 12.0, "heel_off": 0.01, "drift_off": 0.0, "pivot_off": 0.0},
    ):
        spec = replace(contact.spec, **changes)
        before = vars(contact.rules).copy()
        contact.spec = spec
        assert contact.spec is spec
        assert vars(contact.rules) == vars(_Rules(spec)) != before


def test_the_lowest_sole_point_in_floats_is_numpy_argmin():
    """``lowest`` = ``np.argmin`` of the points' heights: the first of equal ones, the first NaN if any (one
    to four points, heights often tied: a level sole)."""
    rng = np.random.default_rng(6)
    for k in range(6000):
        points = rng.normal(size=(int(rng.integers(1, 5)), 3))
        if k % 3 == 0:
            points[:, 2] = rng.choice([0.0, -0.0, -0.035, 1.0], size=len(points))  # ties, signed zeros
        if k % 7 == 0:
            points[rng.integers(len(points)), 2] = np.nan
            if k % 2:
                points[rng.integers(len(points)), 2] = np.nan
        if k % 11 == 0:
            points[:, 2] = rng.choice([np.inf, -np.inf, 1e308], size=len(points))
        assert lowest(points.tolist()) == int(points[:, 2].argmin()), (k, points)


def test_a_replayed_measurement_is_dataclasses_replace():
    """``robot_anchor.with_rows`` (a replayed sample's measurement with its feet's rows replaced) is
    ``dataclasses.replace`` of those four fields: every other field kept, ``m`` untouched, a new object; and
    ``Measurements`` has no ``__post_init__`` that ``replace`` would run and ``with_rows`` does not."""
    from dataclasses import fields, replace

    from dynik_ros.core.targets import Measurements
    from dynik_ros.retarget.robot_anchor import with_rows

    assert not hasattr(Measurements, "__post_init__")
    rng = np.random.default_rng(7)
    m = Measurements(
        rng.normal(size=(5, 3)),
        rng.normal(size=(7, 3, 3)),
        rng.normal(size=(5, 3)),
        rng.normal(size=(7, 3)),
        com_position=rng.normal(size=3),
        com_velocity=rng.normal(size=3),
        contacts=np.array([True, False]),
        stance=np.array([False, True]),
        weight_scale=rng.random(36),
        min_gain=rng.random(36),
    )
    before = {f.name: getattr(m, f.name) for f in fields(m)}
    for linear, angular in ((rng.normal(size=(5, 3)), rng.normal(size=(7, 3))), (None, None)):
        positions, rotations = rng.normal(size=(5, 3)), rng.normal(size=(7, 3, 3))
        got = with_rows(m, positions, rotations, linear, angular)
        expected = replace(
            m, positions=positions, rotations=rotations, linear_velocities=linear, angular_velocities=angular
        )
        assert type(got) is Measurements and got is not m
        assert vars(got).keys() == vars(expected).keys()
        for name in vars(expected):
            assert getattr(got, name) is getattr(expected, name), name
        assert all(getattr(m, name) is value for name, value in before.items())


def test_the_level_rotation_is_built_again_when_the_heading_changes():
    """``FootContact._level`` (``R_z(psi_land)``, kept per foot while its heading stays) is the rotation
    built from the heading it has now, bit for bit, after every change of heading (a new float object, or
    the same value set again) and on each foot."""
    from dynik_ros.retarget import Retargeter

    contact = Retargeter.from_config("g1").contact
    rng = np.random.default_rng(8)
    for k in range(500):
        f = int(rng.integers(len(contact.feet)))
        if k % 4:  # (else the heading kept: the kept rotation)
            contact.landing_yaw[f] = float(rng.choice([0.0, -0.0, np.pi, rng.uniform(-4.0, 4.0)]))
        yaw = contact.landing_yaw[f]
        c, s = math.cos(yaw), math.sin(yaw)
        expected = np.array(((c, -s, 0.0), (s, c, 0.0), (0.0, 0.0, 1.0)))
        assert _same_bits(contact._level(f), expected), (k, yaw)


def test_the_toe_off_margin_is_taken_only_past_the_threshold_and_answers_as_the_plain_rule():
    """:func:`~dynik_ros.retarget.contact_floats.past_margin` against ``excess > threshold + margin`` for
    margins >= 0, infinite or NaN (the noise margin's values), excesses about the threshold and at it, NaN
    excesses; the margin is read only where the excess is past the threshold."""
    from dynik_ros.retarget.contact_floats import past_margin

    rng = np.random.default_rng(17)
    read = []
    for _ in range(20000):
        threshold = float(rng.choice([0.0, 0.005, 1e-3]))
        margin = float(rng.choice([0.0, np.inf, np.nan, rng.uniform(0.0, 1e-3), 1e-18]))
        excess = float(
            rng.choice([threshold, threshold + margin, np.nan, threshold + rng.normal(scale=2e-3)])
        )

        def margin_of(m=margin):
            read.append(m)
            return m

        read.clear()
        assert past_margin(excess, threshold, margin_of) == (excess > threshold + margin)
        assert bool(read) == (excess > threshold)


def test_the_blend_rate_term_is_left_out_only_where_it_changes_nothing():
    """``rate_term_needed`` false (``rate_alpha`` a zero, ``level_rate`` :data:`NO_RATE` itself):
    ``blended_rate`` with ``along`` left out (zeros) answers as with any finite ``along``, for ``0 < alpha
    <= 1`` and any omega (signed zeros, infinities, NaN). Where it is true the term is taken: a
    ``level_rate`` of equal values but another object, or a nonzero ``rate_alpha``, can change the answer (a
    zero's sign, a value)."""
    rng = np.random.default_rng(18)
    omega, along = (
        _vectors(rng, 6000),
        rng.normal(size=(6000, 3)) * rng.choice([0.0, 1e-300, 1.0, 1e3], (6000, 1)),
    )
    along[rng.random((6000, 3)) < 0.2] = -0.0
    alpha = np.where(rng.random(6000) < 0.5, 1.0, rng.uniform(1e-9, 1.0, 6000))
    differs = 0
    for k in range(6000):
        w, a, al = omega[k].tolist(), along[k].tolist(), float(alpha[k])
        for rate_alpha in (0.0, -0.0, float(rng.normal())):
            for level in (NO_RATE, (0.0, -0.0, 0.0), (-0.0, -0.0, -0.0)):
                with np.errstate(all="ignore"):
                    full = blended_rate(w, a, level, al, rate_alpha)
                    short = blended_rate(w, NO_RATE, level, al, rate_alpha)
                if not rate_term_needed(rate_alpha, level):
                    assert _same_bits(short, full), (k, w, a, al, rate_alpha)
                else:
                    differs += not _same_bits(short, full)
    assert differs > 1000  # (the cases the term is taken for do differ: the test sees a wrong shortcut)


def test_the_heel_noise_is_the_median_of_its_window():
    """``HeelToeNoise.std`` (its window's values sorted when asked) is ``np.median`` of ``|Delta^2 d|`` over
    the in-contact measured samples of the last ``WINDOW`` seconds whose two samples before are at most
    ``SPACING`` apart (and the current one ``2 SPACING`` from the first), divided by ``0.6745 sqrt(6)``; 0
    after a gap over ``SPACING``, infinite with no value: at every sample of streams of mixed rates, gaps
    and contacts."""
    from dynik_ros.retarget.heel_noise import _MEDIAN_TO_STD, SPACING, WINDOW, HeelToeNoise

    rng = np.random.default_rng(19)
    for stream in range(12):
        noise, seen, window = HeelToeNoise(), [], []
        t = 0.0
        for _ in range(1500):
            t += float(rng.choice([1 / 120, 1 / 60, 1 / 30, 0.05, 0.12], p=[0.6, 0.2, 0.1, 0.05, 0.05]))
            d = float(rng.normal(scale=0.003)) + 0.01 * (stream % 3)
            contact = bool(rng.random() < (0.9 if (int(t) % 3) else 0.2))
            noise.add(t, d, contact)
            if contact and len(seen) >= 2 and t - seen[-2][0] <= 2.0 * SPACING + 1e-9:
                if seen[-1][0] - seen[-2][0] <= SPACING + 1e-9:
                    window.append((t, abs(d - 2.0 * seen[-1][1] + seen[-2][1])))
            sparse = bool(seen) and t - seen[-1][0] > SPACING + 1e-9
            seen.append((t, d))
            values = [v for time, v in window if not time < t - WINDOW]
            if sparse:
                expected = 0.0
            elif not values:
                expected = math.inf
            else:
                expected = float(np.median(values)) / _MEDIAN_TO_STD
            assert _same_bits(noise.std(), expected), (stream, t)


def test_the_feet_floats_kept_beside_their_arrays_are_their_values():
    """The contact machine keeps the held point's and the reach shift's floats beside their arrays
    (``_anchor_xyz``, ``_reach_xyz``, read by ``held`` every held sample) and the last target as floats
    (``last``): after every sample of a G1 walk, held and released, they are the arrays' values and the
    target's."""
    from dynik_ros.cli.retarget import synthetic_motion
    from dynik_ros.retarget import Retargeter

    rt = Retargeter.from_config("g1")
    contact = rt.contact
    advance = contact.advance
    checked = {"held": 0, "released": 0}

    def advance_checked(f, k, human, target, *args, **kwargs):
        advance(f, k, human, target, *args, **kwargs)
        assert contact._anchor_xyz[f] == contact.anchor[f].tolist()
        assert contact._reach_xyz[f] == contact.reach[f].tolist()
        assert contact.last[f] == tuple(target.tolist())
        checked["held"] += contact.in_contact[f]
        checked["released"] += contact.release_delta[f] is not None

    contact.advance = advance_checked
    rt.motion_measurements(synthetic_motion("walking", 6.0, 100.0))
    assert checked["held"] > 100 and checked["released"] > 100, checked
