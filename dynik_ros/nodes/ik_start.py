"""ik_node's start of a robot's stream, as the offline run starts a take (``Retargeter.run``).

The offline run settles ``--settle`` s on the first sample (:meth:`Retargeter.settle`) and steps once on it,
with its step grid's first interval (:func:`~dynik_ros.retarget.ik_steps.first_step_dt`). A stream knows that
interval at its second sample: the first sample is answered with the state before its step (the initial
configuration, or the settled pose), and its step runs when the second sample comes, before that sample's
steps; from there on the published path is ``Retargeter.retarget_motion``'s (``test_stream_steps.py``, and
:func:`~dynik_ros.retarget.stream_input.stream_path` without ROS). Every stream start (configure, ``~/reset``)
starts so."""

from __future__ import annotations

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.common import wall_time
from dynik_ros.nodes.conversions import LinkStates


class StreamStart:
    """Mixin of :class:`~dynik_ros.nodes.ik_node.IKNode`: the settle and the first sample's own step."""

    _first_step: tuple[float, Measurements] | None  # a robot's first sample (time, targets), not stepped yet
    settle_time: float  # wall seconds the last settle took (it holds the node's callbacks)

    def _settle(self, first: Measurements) -> None:
        """A robot's first sample: validated, ``settle`` s of IK on it (:meth:`Retargeter.settle`), its own
        step kept for the second sample (:meth:`_step_first_sample`)."""
        first.validate(self.ik.targets, self.ik.config.rotation_tolerance)
        if self.params["settle"] > 0:
            start = wall_time()
            self.retargeter.settle(self.ik, first, self.params["settle"])
            self.settle_time = wall_time() - start
        self._first_step = (0.0, first)

    def _step_first_sample(self, time: float, links: LinkStates) -> None:
        """The first sample's IK step, its ``dt`` the offline run's (:func:`.ik_steps.first_step_dt` from
        this second sample's ``time``), before this sample's targets are computed (as offline: with
        ``contact.anchor: robot`` they read the configuration it leaves)."""
        from dynik_ros.retarget.ik_steps import first_step_dt

        t0, first = self._first_step
        self._first_step = None
        dt = first_step_dt(t0, time, self.params["max_step"], self.params["max_dt"])
        self.ik.step(self._with_base_feed_forward(first, links), dt)
