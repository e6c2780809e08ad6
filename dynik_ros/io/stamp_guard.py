"""Which input stamps a stream accepts: in order, not stale, not from the future, no lone jumps.

A stream's newest accepted stamp is the reference for the next one. One bad stamp must not poison it: a
message stamped a year ahead used to become the reference, after which every valid message was refused
as stale until the node was reconfigured. Rules, in order:

1. ``future``: a stamp more than ``max_future`` ahead of the node clock is refused (skipped while the node
   clock reads zero, e.g. ``use_sim_time`` before the first ``/clock``, and when ``max_future`` is 0:
   offline replays, which run ahead of the clock, check stamps against the stream only);
2. ``out_of_order`` / ``stale``: a stamp not after the reference is refused (``stale`` when older than
   ``max_age``);
3. ``stamp_jump``: a stamp more than ``max_jump`` after the reference is refused unless it is confirmed:
   once ``confirm`` consecutive jumped stamps follow each other in order (each within ``max_jump`` of the
   previous), the stream is taken to have restarted on a new time base and the last of them is accepted
   (verdict ``rebased``). A lone stray stamp is refused and the stream goes on.
"""

from __future__ import annotations

ACCEPTED, REBASED = "accepted", "rebased"
FUTURE, OUT_OF_ORDER, STALE, JUMP = "future_stamp", "out_of_order", "stale", "stamp_jump"
NS = 1_000_000_000


class StampGuard:
    """Stamp checks of the module docstring; durations in seconds, stamps and clock in integer ns."""

    def __init__(
        self, max_age: float = 0.5, max_future: float = 1.0, max_jump: float = 10.0, confirm: int = 3
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
        if last is not None and stamp_ns <= last:
            age = (last - stamp_ns) / NS
            if last - stamp_ns > self.max_age_ns:
                return STALE, f"stamp {age:.3f} s older than the newest input"
            return OUT_OF_ORDER, f"stamp not after the previous input ({age * 1e3:.3f} ms older)"
        if last is not None and stamp_ns - last > self.max_jump_ns:
            pending = self._pending
            if pending and not (0 < stamp_ns - pending[-1] <= self.max_jump_ns):
                pending.clear()
            pending.append(stamp_ns)
            if len(pending) < self.confirm:
                return JUMP, f"stamp {(stamp_ns - last) / NS:.3f} s after the newest input (unconfirmed)"
            self._pending = []
            self.last_ns = stamp_ns
            return REBASED, f"stream restarted {(stamp_ns - last) / NS:.3f} s later"
        self._pending = []
        self.last_ns = stamp_ns
        return ACCEPTED, ""
