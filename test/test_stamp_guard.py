"""io/stamp_guard.py: lone bad stamps are refused either way, real steps of the sender's clock cost two
samples (findings of the fuzz harness: a clock stepping back 15 s silenced ik_node for 15 s; one stamp
5 s ahead was accepted and then blocked the stream for 5 s)."""

from __future__ import annotations

from dynik_ros.io.stamp_guard import ACCEPTED, FUTURE, JUMP, OUT_OF_ORDER, REBASED, STALE, StampGuard

NS = 10**9
PERIOD = NS // 120
T0 = 1000 * NS


def _feed(guard: StampGuard, stamps) -> list[str]:
    return [guard.check(s)[0] for s in stamps]


def test_a_clock_stepping_back_costs_two_samples_not_the_length_of_the_step():
    g = StampGuard()
    assert _feed(g, [T0 + k * PERIOD for k in range(5)]) == [ACCEPTED] * 5
    back = T0 - 15 * NS
    verdicts = _feed(g, [back + k * PERIOD for k in range(1800)])
    assert verdicts[:3] == [STALE, STALE, REBASED] and set(verdicts[3:]) == {ACCEPTED}


def test_one_stamp_a_few_seconds_ahead_is_refused_and_the_stream_goes_on():
    g = StampGuard(max_future=0.0)  # offline: no node clock to compare with
    assert _feed(g, [T0 + k * PERIOD for k in range(5)]) == [ACCEPTED] * 5
    assert g.check(T0 + 5 * NS)[0] == JUMP
    assert _feed(g, [T0 + k * PERIOD for k in range(5, 605)]) == [ACCEPTED] * 600


def test_late_and_repeated_messages_are_out_of_order_and_a_lone_old_one_is_stale():
    g = StampGuard()
    _feed(g, [T0 + k * PERIOD for k in range(10)])
    assert g.check(T0 + 9 * PERIOD)[0] == OUT_OF_ORDER  # repeated
    assert g.check(T0 + 5 * PERIOD)[0] == OUT_OF_ORDER  # late by 4 periods
    assert g.check(T0 - 365 * 24 * 3600 * NS)[0] == STALE  # a year back, alone
    assert g.check(T0 + 10 * PERIOD)[0] == ACCEPTED


def test_a_stream_restarted_later_or_replayed_again_is_followed_after_three_stamps():
    for shift in (3600 * NS, -3600 * NS, 2 * NS):
        g = StampGuard(max_future=0.0)
        _feed(g, [T0 + k * PERIOD for k in range(10)])
        verdicts = _feed(g, [T0 + shift + k * PERIOD for k in range(10)])
        assert verdicts[2] == REBASED and verdicts[3:] == [ACCEPTED] * 7, (shift, verdicts)


def test_the_node_clock_bounds_the_future():
    g = StampGuard(max_future=1.0)
    assert g.check(T0 + 2 * NS, now_ns=T0)[0] == FUTURE
    assert g.check(T0 + NS // 2, now_ns=T0)[0] == ACCEPTED
