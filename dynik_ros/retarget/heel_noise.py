"""Measurement noise of the human heel-over-toe height, estimated on the stream itself (toe-off rule).

The toe-off rule (``contact.heel_off``, :mod:`dynik_ros.retarget.foot_contact`) ends a contact when the heel
rose ``heel_off`` more than the toe above their lowest in that contact, i.e. when ``d = z_heel - z_toe`` rose
about ``heel_off`` above its level. White noise of std ``sigma`` on each link's position puts noise of std
``s = sigma sqrt(2)`` on ``d``, and a fixed 5 mm is crossed by it many times a second from ``sigma`` = 2 mm.

The noise is estimated causally from the second differences of ``d`` over the measured samples of the foot
in contact during the last :data:`WINDOW` seconds: for white noise ``Delta^2 d_k = d_k - 2 d_{k-1} + d_{k-2}``
has std ``s sqrt(6)``, hence ``s_hat = median |Delta^2 d| / (0.6745 sqrt(6))`` (the median of a normal's
absolute value is 0.6745 std; the median ignores the few samples of a heel strike or a toe-off). A smooth
foot standing or rolling adds only ``d'' dt^2`` (a fraction of a millimetre at 30 Hz and more), so on clean
captures ``s_hat`` is near 0 and the rule is the plain ``heel_off`` one, without delay. Samples further
apart than :data:`SPACING` are not counted: there a walking foot's own motion makes second differences as
large as noise does (the synthetic walk at 10 Hz, noise-free: ``s_hat`` 4.7 mm, as much as white noise of 3.3
mm; at 30 Hz 1.4 mm, at 100 Hz 0.1 mm), so a stream that sparse has no estimate and the plain rule
(``s_hat = 0``). A foot has no toe-off before its first second difference in contact (``s_hat`` infinite:
the first two samples of a stream); waiting for more (5) held the first contact of takes starting
mid-stride (12 mm of slide on the CMU excerpt at 30 Hz), the plain rule there let a noisy standing subject
release a foot once at the start.
Interpolated IK steps of a sparse take (:mod:`.ik_steps`) are not measurements and are skipped too.
"""

from __future__ import annotations

import math
from collections import deque

WINDOW = 2.0  # s of the foot's in-contact samples the estimate is taken over
SPACING = 0.05  # s: samples further apart than this (streams under 20 Hz) are not counted
_MEDIAN_TO_STD = 0.6745 * math.sqrt(6.0)  # median |Delta^2 d| per std of d's white noise
_ONE = SPACING + 1e-9  # the spacing's bounds as add() compares them (the same floats, made once)
_TWO = 2.0 * SPACING + 1e-9


class HeelToeNoise:
    """Running estimate of the white-noise std of one foot's heel-over-toe height ``d`` (module docstring).

    The window's ``|Delta^2 d|`` are kept in arrival order and sorted only when :meth:`std` is asked for: the
    toe-off rule asks only when the heel has risen past ``heel_off`` (188 times on a minute's walk at 120
    Hz, against 14400 samples added), where a sorted copy kept up to date cost an insertion and a deletion
    per sample (``test_toe_off_noise``: the median is ``np.median`` of the window)."""

    def __init__(self) -> None:
        self.seen = 0  # measured samples so far, up to 2: the last two are (t0, d0), (t1, d1)
        self.t0 = self.d0 = self.t1 = self.d1 = 0.0
        self.times: deque[float] = deque()  # the times of the |Delta^2 d| in contact in the window
        self.values: deque[float] = deque()  # and those values, in the same order
        self.sparse = False  # the last interval between measured samples was longer than SPACING

    def add(self, t: float, d: float, in_contact: bool) -> None:
        """A measured sample at time ``t`` (s) of ``d`` (m); only samples in contact are counted."""
        seen = self.seen
        if seen == 2:
            t1 = self.t1
            if in_contact and t - self.t0 <= _TWO and t1 - self.t0 <= _ONE:
                self.times.append(t)
                self.values.append(abs(d - 2.0 * self.d1 + self.d0))
            self.sparse = t - t1 > _ONE
            self.t0, self.d0 = t1, self.d1
        elif seen:
            self.sparse = t - self.t1 > _ONE
            self.t0, self.d0 = self.t1, self.d1
            self.seen = 2
        else:
            self.seen = 1
        self.t1, self.d1 = t, d
        times = self.times
        if times and times[0] < t - WINDOW:
            values, start = self.values, t - WINDOW
            while times and times[0] < start:
                times.popleft()
                values.popleft()

    def std(self) -> float:
        """``s_hat`` (m); 0 on a stream sparser than :data:`SPACING`, infinite with no second difference in
        the window yet (module docstring)."""
        n = len(self.values)
        if self.sparse:
            return 0.0
        if n == 0:
            return math.inf
        values = sorted(self.values)
        median = values[n // 2] if n % 2 else 0.5 * (values[n // 2 - 1] + values[n // 2])
        return median / _MEDIAN_TO_STD
