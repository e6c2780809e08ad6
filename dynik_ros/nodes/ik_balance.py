"""ik_node's online quasi-static balance (``balance:=true``): the CoM objective and support rows of the
core fed one sample at a time by :class:`~dynik_ros.retarget.online_balance.OnlineBalance`.

Contact state: ``contact_source:=kinematic`` takes the retargeter's kinematic foot contact (the flags of
the sample's own targets); ``contact_source:=topic`` takes ``/human/contact_state`` (``std_msgs/String``:
``none``, ``left``, ``right``, ``double``, as published by ``dynamics_node``), the latest message received
(the kinematic flags until the first one arrives; a state that is not one of the four is counted and
ignored)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.common import RELIABLE_QOS, ConfigError


class BalanceInput:
    """Mixin of :class:`~dynik_ros.nodes.ik_node.IKNode`: set-up and per-sample use of the balance."""

    def _clear_balance(self) -> None:
        self.online_balance = None
        self.contact_state: str | None = None  # the latest /human/contact_state, if used
        self.contact_states_refused = 0

    def _balance_retargeter(self, p: dict[str, Any]) -> None:
        """Before the IK is made: switch the map's balance section on (its weights and rows)."""
        if not p["balance"]:
            return
        config = self.retargeter.config
        if not config.feet:
            raise ConfigError("balance", f"the map of '{config.name}' has no feet (no support polygon)")
        # online the take's future is unknown: the plan is the causal quasi-static one (with its hard support
        # rows) even when the map asks for the offline ZMP plan (retarget/zmp_plan.py, dynik-retarget only)
        balance = replace(config.balance, enabled=True, plan="quasi_static")
        self.retargeter.config = replace(config, balance=balance)

    def _setup_balance(self, p: dict[str, Any]) -> list[Any]:
        """The online plan (after the IK is made) and the contact-state subscription, if any."""
        if not p["balance"]:
            return []
        from dynik_ros.retarget.online_balance import OnlineBalance

        self.online_balance = OnlineBalance(self.retargeter, self.retargeter.config.balance)
        if p["contact_source"] != "topic":
            return []
        from std_msgs.msg import String

        return [
            self.create_subscription(String, "/human/contact_state", self._on_contact_state, RELIABLE_QOS)
        ]

    def _on_contact_state(self, msg: Any) -> None:
        from dynik_ros.retarget.online_balance import CONTACT_STATES

        if msg.data in CONTACT_STATES:
            self.contact_state = msg.data
        else:
            self.contact_states_refused += 1
            self.get_logger().warning(
                f"/human/contact_state '{msg.data[:40]}' is not one of {CONTACT_STATES}: ignored",
                throttle_duration_sec=1.0,
            )

    def _balanced(self, measurement: Measurements, time: float) -> Measurements:
        """``measurement`` with this sample's CoM target and support (unchanged without balance)."""
        balance = self.online_balance
        if balance is None:
            return measurement
        if self.contact_state is not None:
            from dynik_ros.retarget.online_balance import contacts_from_state

            contacts = contacts_from_state(self.contact_state, balance.sides)
        else:
            contacts = np.asarray(self.retargeter.last_contacts) >= 0
        return balance.apply(time, measurement, contacts)
