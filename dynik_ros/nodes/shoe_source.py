"""Force/torque shoe readings for wearable_node's synthetic source: the ground reaction of the synthetic
motion's inverse dynamics (:mod:`dynik_ros.estimation.synthetic_dynamics`: the lower sole carries the
weight, the load moving linearly between the feet while their heights are within 2 cm), one
``geometry_msgs/WrenchStamped`` per shoe and sample, in the foot link's frame, stamped like the link
states. What ``dynamics_node`` reads on ``/human/shoes/right`` and ``/human/shoes/left``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dynik_ros.nodes.conversions import ns_to_stamp

SHOE_TOPICS = ("/human/shoes/right", "/human/shoes/left")
FEET = ("RightFoot", "LeftFoot")


class SyntheticShoes:
    """The true shoe wrenches ``(N, 2, 6)`` of a synthetic scenario, looked up by the source stamp."""

    def __init__(self, model: str, scenario: str, duration: float, rate: float, stamps_ns: np.ndarray):
        from dynik_ros.estimation.synthetic_dynamics import human_dynamics_truth

        _, truth = human_dynamics_truth(scenario, duration, rate, kind=model)
        if len(truth.times) != len(stamps_ns):
            raise ValueError(f"{len(truth.times)} shoe samples for {len(stamps_ns)} link-state samples")
        self.wrenches = truth.wrenches
        self.index = {int(s): k for k, s in enumerate(stamps_ns)}
        self.published = 0

    def messages(self, source_stamp_ns: int, stamp_ns: int) -> list[Any] | None:
        """``WrenchStamped`` (right, left) for the sample of ``source_stamp_ns``, stamped ``stamp_ns``;
        ``None`` for a stamp the synthetic motion does not have."""
        from geometry_msgs.msg import WrenchStamped

        k = self.index.get(int(source_stamp_ns))
        if k is None:
            return None
        out = []
        for f, frame in enumerate(FEET):
            msg = WrenchStamped()
            msg.header.stamp, msg.header.frame_id = ns_to_stamp(stamp_ns), frame
            force, torque = self.wrenches[k, f, :3].tolist(), self.wrenches[k, f, 3:].tolist()
            msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = force
            msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = torque
            out.append(msg)
        return out

    def publish(self, publishers: list[Any], source_stamp_ns: int, stamp_ns: int) -> bool:
        """Publish the readings of one sample on ``publishers`` (right, left); ``False`` if it has none."""
        messages = self.messages(source_stamp_ns, stamp_ns)
        if messages is None:
            return False
        for publisher, msg in zip(publishers, messages, strict=True):
            publisher.publish(msg)
        self.published += 1
        return True
