"""dynamics_node's run log: the recent estimates' stamps, joint torques and contact states in fixed rings.

``dynik-ros run`` summarizes them at the end of a run (:mod:`dynik_ros.cli.dynamics_figures`). A deque of
``(stamp, torques, state)`` tuples held 36,000 small arrays (one header per estimate, ~0.7 kB each with
Human66's 66 joints); here they are three numpy rings (:class:`~dynik_ros.core.rolling.RollingSamples`):
int64 stamps, float32 torques (a summary's N m need no more digits), int8 contact-state codes
(:data:`~dynik_ros.estimation.contact_classification.STATE_NAMES`). The torque ring is laid out at the first
estimate, whose length fixes its width.
"""

from __future__ import annotations

import numpy as np

from dynik_ros.core.rolling import LOG_ROWS, RollingSamples


class TorqueLog:
    """The last ``capacity`` estimates (stamp [ns], torques, contact-state code), in arrival order."""

    def __init__(self, capacity: int = LOG_ROWS):
        self.capacity = int(capacity)
        self.stamps = RollingSamples(self.capacity, dtype=np.int64)
        self.states = RollingSamples(self.capacity, dtype=np.int8)
        self.torques: RollingSamples | None = None

    def append(self, stamp_ns: int, tau: np.ndarray, state: int) -> None:
        if self.torques is None:
            self.torques = RollingSamples(self.capacity, width=len(tau), dtype=np.float32)
        self.torques.append(tau)
        self.stamps.append(stamp_ns)
        self.states.append(state)

    def __len__(self) -> int:
        return len(self.stamps)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(stamps (N,), torques (N, n) float64, state codes (N,))`` of the retained estimates."""
        tau = self.torques.array().astype(float) if self.torques is not None else np.zeros((0, 0))
        return self.stamps.array(), tau, self.states.array()
