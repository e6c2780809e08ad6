"""ik_node's input side: a decoded link-state sample turned into the IK's :class:`Measurements`.

A human model takes the targets' rows of the sample (indexed once while the stream's link names stay); a robot
takes the retargeter's targets (:meth:`Retargeter.stream_measurements`: the contact rules, with
``contact.anchor: robot`` the IK's configuration; a sample further than ``max_step`` from the last comes with
the IK steps between, as offline) through the online balance; ``base_velocity_source`` then replaces the
base's velocity targets (:mod:`dynik_ros.estimation.base_feedforward`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.common import ConfigError
from dynik_ros.nodes.conversions import LinkStates


class LinkStateInput:
    """Mixin of :class:`~dynik_ros.nodes.ik_node.IKNode`: link states in, measurements out."""

    def _measurements(self, links: LinkStates) -> Measurements:
        if self.retargeter is None and links.names is self._rows_of:  # the stream's names, rows known
            lin, ang = links.linear_velocities, links.angular_velocities
            both = lin is not None and ang is not None
            rows_p, rows_o = self._position_rows, self._orientation_rows
            return Measurements(
                links.positions[rows_p],
                links.rotations[rows_o],
                lin[rows_p] if both else None,
                ang[rows_o] if both else None,
            )
        poses, twists = links.poses(), links.twists()
        if self.retargeter is not None:
            if self._last_ns is None:
                self._first_ns = links.stamp_ns
                self.retargeter.reset()  # world alignment from this first sample
                if self.online_balance is not None:
                    self.online_balance.reset()
            time = (links.stamp_ns - self._first_ns) * 1e-9
            if self._first_step is not None and self._last_ns is not None:
                self._step_first_sample(time, links)
            # the IK's configuration as the last step left it (the first sample: the one it starts from, as
            # offline): with contact.anchor robot a foot turning flat in contact is held where the robot's
            # sole is (retarget/robot_anchor.py)
            robot_q = self.retargeter.initial_configuration() if self._last_ns is None else self.ik.q
            # a sample further than max_step from the last: the steps between, as offline (stream_input.py)
            last = self.retargeter.last_sample_time
            steps = self.retargeter.stream_measurements(
                poses, twists, time, robot_q, self.params["max_step"], self.params["max_dt"]
            )
            if len(steps) > 1:  # each step's dt from the one before, the first from the last sample
                before = [last] + [t for t, _ in steps[:-1]]
                self._steps_before = [
                    (t - t0, self._balanced(m, t)) for t0, (t, m) in zip(before, steps, strict=True)
                ]
                self._last_step_dt, final = self._steps_before.pop()
                return final
            return self._balanced(steps[-1][1], time)
        measurements = self.targets.measurements_from_links(poses, twists)
        # the decoder returns the same names list while the stream's names stay: index the targets' rows
        row = {name: i for i, name in enumerate(links.names)}
        self._position_rows = np.array([row[k] for k in self.targets.position_links], dtype=int)
        self._orientation_rows = np.array([row[k] for k in self.targets.orientation_links], dtype=int)
        self._rows_of = links.names
        return measurements

    def _make_base_feed_forward(self, source: str) -> Any:
        """``base_velocity_source`` (estimation/base_feedforward.py): the human model's feet and the
        kinematic contact rule on the suit's feet, or the robot's feet and the retargeter's contact."""
        from dynik_ros.estimation.base_feedforward import BaseFeedForward

        try:
            if self.retargeter is None:
                return BaseFeedForward.for_human(self.robot, self.targets, source)
            feet = [foot.frame for foot in self.retargeter.config.feet]
            return BaseFeedForward(self.robot, self.targets, source, feet)
        except (KeyError, ValueError) as exc:
            raise ConfigError("base_velocity_source", str(exc)) from None

    def _with_base_feed_forward(self, measurements: Measurements, links: LinkStates) -> Measurements:
        feed_forward = self._base_feed_forward
        if feed_forward is None or feed_forward.source == "suit":
            return measurements
        if self.retargeter is not None:
            contacts = list(self.retargeter.contact.in_contact)
        else:
            contacts = feed_forward.contacts_from_links(links.poses(), links.twists())
        return feed_forward.apply(measurements, self.ik.q, contacts, self.ik.joint_velocities)
