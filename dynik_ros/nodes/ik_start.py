"""ik_node's start of a robot's stream, as the offline run starts a take (``Retargeter.run``).

The offline run settles ``--settle`` s on the first sample (:meth:`Retargeter.settle`) and steps once on it,
with its step grid's first interval (:func:`~dynik_ros.retarget.ik_steps.first_step_dt`). A stream knows that
interval at its second sample: the first sample is answered with the state before its step (the initial
configuration, or the settled pose), and its step runs when the second sample comes, before that sample's
steps; from there on the published path is ``Retargeter.retarget_motion``'s (``test_stream_steps.py``, and
:func:`~dynik_ros.retarget.stream_input.stream_path` without ROS). Every stream start (configure, ``~/reset``)
starts so.

The settle runs :data:`SETTLE_CHUNK` IK steps per turn of the executor (a timer that fires at once,
:meth:`Retargeter.settle_steps`), not in the first sample's callback: that held the node's callbacks for the
whole settle (0.2-1 s wall for ``settle`` 1 on G1), and a 120 Hz stream overflowed the 10-deep reader queue
meanwhile. Samples taken during the settle wait in order in a backlog, stepped after it one per turn, so
none is lost and the path is the same."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.common import wall_time
from dynik_ros.nodes.conversions import UNHANDLED, LinkStates

SETTLE_CHUNK = 1  # IK steps of the settle (0.01 s each) per executor turn: ~3-8 ms wall on G1
BACKLOG = 2000  # samples kept while the settle runs (16 s at 120 Hz); beyond, the oldest is refused
BACKLOG_FULL = "backlog_full"  # the rejection reason of those


class StreamStart:
    """Mixin of :class:`~dynik_ros.nodes.ik_node.IKNode`: the settle and the first sample's own step."""

    _first_step: tuple[float, Measurements] | None  # a robot's first sample (time, targets), not stepped yet
    settle_time: float  # wall seconds from the first sample to its settled answer
    _settling: Iterator[None] | None = None  # the settle's remaining steps
    _settled_answer: tuple | None = None  # the first sample's (stamp, links, targets), answered once settled
    _start_timer: Any = None
    _backlog: deque

    def _clear_start(self) -> None:
        """No settle running, no sample waiting (a stream start, ``~/reset``)."""
        self._settling = None
        self._settled_answer = None
        self._backlog = deque(maxlen=BACKLOG)
        if self._start_timer is not None:
            self._start_timer.cancel()

    def _create_start_timer(self) -> Any:
        """The timer that runs the settle and the backlog (at activation; idle until a settle starts)."""
        self._start_timer = self.create_timer(0.0, self._on_start_timer)
        self._start_timer.cancel()
        return self._start_timer

    def _settle(self, first: Measurements) -> bool:
        """A robot's first sample: validated, its own step kept for the second sample
        (:meth:`_step_first_sample`); with ``settle`` > 0 the settle on it started (``True``: the first
        sample's answer waits for it, :meth:`_answer_settled`)."""
        first.validate(self.ik.targets, self.ik.config.rotation_tolerance)
        self._first_step = (0.0, first)
        if self.params["settle"] <= 0:
            return False
        self._settle_start = wall_time()
        self._settling = self.retargeter.settle_steps(self.ik, first, self.params["settle"])
        self._start_timer.reset()
        return True

    def _waits_for_start(self, data: bytes) -> bool:
        """``True`` when a settle runs or samples wait after it: ``data`` joins them, in order."""
        if self._settling is None and not self._backlog:
            return False
        if len(self._backlog) == self._backlog.maxlen:
            self._reject(BACKLOG_FULL, f"more than {BACKLOG} samples came during the settle")
        self._backlog.append(data)
        return True

    def _on_start_timer(self) -> None:
        """One turn: :data:`SETTLE_CHUNK` settle steps, or one sample of the backlog; idle when both are
        done."""
        if not self.active or self.ik is None:
            return
        if self._settling is not None:
            try:
                for _ in range(SETTLE_CHUNK):
                    if next(self._settling, StopIteration) is StopIteration:
                        self._settling = None
                        self.settle_time = wall_time() - self._settle_start
                        self._answer_settled()
                        break
            except Exception as exc:  # noqa: BLE001 - as in the sample's callback: counted, never fatal
                self._settling = self._settled_answer = self._last_ns = None  # the next sample starts over
                self._reject(UNHANDLED, f"settle: {type(exc).__name__}: {exc}")
            return
        if self._backlog:
            self._handle(self._backlog.popleft())
            return
        self._start_timer.cancel()

    def _answer_settled(self) -> None:
        stamp, links, measurements = self._settled_answer
        self._settled_answer = None
        self._answer(stamp, self.ik.q, np.zeros(self.robot.nv), links, measurements, wall_time())

    def _step_first_sample(self, time: float, links: LinkStates) -> None:
        """The first sample's IK step, its ``dt`` the offline run's (:func:`.ik_steps.first_step_dt` from
        this second sample's ``time``), before this sample's targets are computed (as offline: with
        ``contact.anchor: robot`` they read the configuration it leaves)."""
        from dynik_ros.retarget.ik_steps import first_step_dt

        t0, first = self._first_step
        self._first_step = None
        dt = first_step_dt(t0, time, self.params["max_step"], self.params["max_dt"])
        self.ik.step(self._with_base_feed_forward(first, links), dt)
