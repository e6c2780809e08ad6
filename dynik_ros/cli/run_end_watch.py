"""What ``dynik-ros run --processes`` watches to know a run is over (:mod:`dynik_ros.cli.run_processes`).

The runner's own node subscribes to ``/diagnostics`` (the source's "finished", each bridge's answered inputs,
each ik_node's output readers), ``/human/link_states`` and ``/dynik/joint_states`` (the newest stamps; every
IK output counted). A run ends once the source finished, the IK answered its last input and every bridge
answered every IK output, or the bridges behind hold (:meth:`EndWatcher.commanded`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

IK_STATUS_SUFFIX = ": dynamical IK"  # ik_node's /diagnostics status name is "<node>: dynamical IK"
BRIDGE_STATUS_SUFFIX = ": command bridge"  # bridge_node's: "<node>: command bridge"
BRIDGE_QUIET = 3.0  # [s] no bridge answered a further input for this long (its /diagnostics every 1 s)
BRIDGE_IDLE_REPORTS = 2  # and each bridge behind sent this many reports since the last IK output


class EndWatcher:
    """Watches, in the runner, for the source's "finished" (its /diagnostics) and the newest link-state
    and IK-output stamps."""

    def __init__(
        self, node: Any, wearable: str, command_topics: Sequence[tuple[str, type]] = (), bridges: int = 0
    ) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState, MultiDOFJointState

        from dynik_ros.nodes.common import RELIABLE_QOS, SENSOR_QOS, reliable_qos

        self.status_name = f"{wearable}: link states"
        self.finished_at: float | None = None
        self.last_input: int | None = None
        self.last_output = -1
        self.output_at = 0.0
        self.outputs = 0  # IK outputs seen
        self.watches_commands = bool(command_topics)
        self.bridges = bridges if command_topics else 0
        self.bridge_answered: dict[str, int] = {}  # bridge -> inputs it answered (fresh commands + refusals)
        self.answered_progress_at = 0.0
        self.idle_reports: dict[str, int] = {}  # bridge -> reports since the last IK output, none answering
        self.ik_readers: dict[str, int] = {}  # ik_node name -> readers its output writer matched
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, RELIABLE_QOS)
        node.create_subscription(MultiDOFJointState, "/human/link_states", self._on_input, SENSOR_QOS)
        # every IK output counted even when this process falls behind (the bridges are waited for that many)
        node.create_subscription(JointState, "/dynik/joint_states", self._on_output, reliable_qos(0))

    @staticmethod
    def _stamp(msg: Any) -> int:
        return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            if status.name == self.status_name and status.message == "finished" and self.finished_at is None:
                self.finished_at = time.monotonic()
            elif status.name.endswith(BRIDGE_STATUS_SUFFIX):
                values = {kv.key: kv.value for kv in status.values}
                try:
                    answered = int(values.get("fresh_commands", 0)) + sum(
                        int(v) for k, v in values.items() if k.startswith("rejected_")
                    )
                except ValueError:
                    continue
                if answered > self.bridge_answered.get(status.name, -1):
                    self.answered_progress_at = time.monotonic()
                    self.idle_reports[status.name] = 0
                else:
                    self.idle_reports[status.name] = self.idle_reports.get(status.name, 0) + 1
                self.bridge_answered[status.name] = answered
            elif status.name.endswith(IK_STATUS_SUFFIX):
                node = status.name[: -len(IK_STATUS_SUFFIX)]
                for kv in status.values:
                    if kv.key == "output_subscribers":
                        self.ik_readers[node] = int(kv.value)

    def _on_input(self, msg: Any) -> None:
        self.last_input = max(self.last_input or -1, self._stamp(msg))

    def _on_output(self, msg: Any) -> None:
        self.last_output = max(self.last_output, self._stamp(msg))
        self.output_at = time.monotonic()
        self.outputs += 1
        self.idle_reports = dict.fromkeys(self.idle_reports, 0)  # a new input for every bridge

    def commanded(self, now: float, answered_at: float) -> bool:
        """Every bridge answered every IK output seen (:func:`bridges_caught_up`, by the bridges' own
        /diagnostics counts), or the bridges behind hold: none answered a further input for
        ``BRIDGE_QUIET`` s since the IK answered **and** each of them sent ``BRIDGE_IDLE_REPORTS`` reports
        since the last IK output without answering more (it runs, and does not take the inputs); True at
        once without a bridge. A bridge process that sends nothing is starved on a loaded machine, not
        holding: the wait goes on (up to the run's timeout); a quiet time alone ended a run with 22 of 60
        fresh commands once. Counting the commands on the wire was wrong too: a bridge also repeats its
        last command between inputs (``command_rate`` 100 Hz against a 60 Hz stream), so the repeats made
        up the count while the bridge still had inputs queued (54 of 60 fresh)."""
        if not self.watches_commands:
            return True
        if bridges_caught_up(self.outputs, self.bridge_answered, self.bridges):
            return True
        behind = [name for name, n in self.bridge_answered.items() if n < self.outputs]
        if len(self.bridge_answered) < self.bridges or not behind:
            return False
        if any(self.idle_reports.get(name, 0) < BRIDGE_IDLE_REPORTS for name in behind):
            return False
        return now - max(answered_at, self.answered_progress_at) > BRIDGE_QUIET


def bridges_caught_up(outputs: int, answered: Mapping[str, int], bridges: int) -> bool:
    """All ``bridges`` reported (``answered``: name -> fresh commands + refused inputs, from their
    /diagnostics) and each answered at least the ``outputs`` IK outputs the runner saw."""
    return len(answered) >= bridges and all(n >= outputs for n in answered.values())
