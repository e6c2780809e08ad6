"""Which input stamps a stream accepts: in order, not from the future, no lone jumps either way.

A stream's newest accepted stamp is the reference for the next one. One bad stamp must not poison it, and
a sender whose clock steps must not silence the stream for the length of the step. Rules, in order:

1. ``future``: a stamp more than ``max_future`` ahead of the node clock is refused (skipped while the node
   clock reads zero, e.g. ``use_sim_time`` before the first ``/clock``, and when ``max_future`` is 0:
   offline replays, which run ahead of the clock, check stamps against the stream only);
2. within ``max_age`` before the reference: refused as ``out_of_order`` (a late or repeated message);
3. within ``max_jump`` after the reference: accepted (the normal case, and gaps of dropped samples);
4. anything else -- further ahead than ``max_jump`` or further back than ``max_age`` -- is a step of the
   stream's time base: refused (``stamp_jump`` ahead, ``stale`` back) unless ``confirm`` consecutive such
   stamps follow each other in order (each within ``max_jump`` of the previous); then the stream has
   restarted on a new time base (a sender restarted, its clock was reset, a bag replayed again) and the
   last of them is accepted (``rebased``). A lone stray stamp, either way, is refused and the stream goes
   on; a real step costs ``confirm - 1`` samples, not the length of the step. (Before: a stamp 1.5-9 s
   ahead was accepted and then blocked the stream for that long, and a clock stepping back 15 s was
   refused for 15 s.)
"""

from __future__ import annotations

ACCEPTED, REBASED = "accepted", "rebased"
FUTURE, OUT_OF_ORDER, STALE, JUMP = "future_stamp", "out_of_order", "stale", "stamp_jump"
NS = 1_000_000_000


class StampGuard:
    """Stamp checks of the module docstring; durations in seconds, stamps and clock in integer ns."""

    def __init__(
        self, max_age: float = 0.5, max_future: float = 1.0, max_jump: float = 0.5, confirm: int = 3
    ):
        self.max_age_ns = int(max_age * NS)
        self.max_future_ns = int(max_future * NS)
        self.max_jump_ns = int(max_jump * NS)
        self.confirm = max(1, int(confirm))
        self.reset()

    def reset(self) -> None:
        self.last_ns: int | None = None
        self._pending: list[int] = []

    def check(self, stamp_ns: int, now_ns: int = 0) -> tuple[str, str]:
        """``(verdict, detail)``; on ``accepted`` / ``rebased`` the stamp becomes the reference."""
        if now_ns > 0 and self.max_future_ns > 0 and stamp_ns - now_ns > self.max_future_ns:
            return FUTURE, f"stamp {(stamp_ns - now_ns) / NS:.3f} s ahead of the node clock"
        last = self.last_ns
        if last is None or 0 < stamp_ns - last <= self.max_jump_ns:
            self._pending = []
            self.last_ns = stamp_ns
            return ACCEPTED, ""
        if 0 <= last - stamp_ns <= self.max_age_ns:
            return (
                OUT_OF_ORDER,
                f"stamp not after the previous input ({(last - stamp_ns) / NS * 1e3:.3f} ms older)",
            )
        # a step of the time base: needs confirmation by the stamps that follow
        pending = self._pending
        if pending and not (0 < stamp_ns - pending[-1] <= self.max_jump_ns):
            pending.clear()
        pending.append(stamp_ns)
        step = (stamp_ns - last) / NS
        if len(pending) < self.confirm:
            if step < 0:
                return STALE, f"stamp {-step:.3f} s older than the newest input (unconfirmed step back)"
            return JUMP, f"stamp {step:.3f} s after the newest input (unconfirmed)"
        self._pending = []
        self.last_ns = stamp_ns
        return REBASED, f"stream restarted {step:+.3f} s from the previous time base"
