"""Drive another process's lifecycle node through its standard services (``<node>/get_state``,
``<node>/change_state``, lifecycle_msgs), as ``ros2 lifecycle`` and ``launch_ros`` do, without ros2cli.

Used by ``dynik-ros run --processes`` to bring child node processes up and down in order, and by the
tests to check that a node process answers the standard lifecycle commands.
"""

from __future__ import annotations

import time
from typing import Any

TRANSITIONS = {"configure": 1, "cleanup": 2, "activate": 3, "deactivate": 4, "shutdown": 6}
"""lifecycle_msgs/Transition ids of the requests a user makes (shutdown from *unconfigured*; rclpy's
LifecycleNode accepts the same id from *inactive* and *active* too)."""


class LifecycleError(RuntimeError):
    """A node that does not answer, or refuses a transition; the message names the node."""


class LifecycleClient:
    """Service clients for one node's ``get_state`` and ``change_state``, spun by ``executor``."""

    def __init__(self, node: Any, executor: Any, target: str) -> None:
        from lifecycle_msgs.srv import ChangeState, GetState

        self.node, self.executor = node, executor
        self.target = target if target.startswith("/") else "/" + target
        self._get = node.create_client(GetState, f"{self.target}/get_state")
        self._change = node.create_client(ChangeState, f"{self.target}/change_state")
        self._types = (GetState, ChangeState)

    def destroy(self) -> None:
        self.node.destroy_client(self._get)
        self.node.destroy_client(self._change)

    def _call(self, client: Any, request: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                raise LifecycleError(f"{self.target}: no {client.srv_name} service after {timeout:.0f} s")
            self.executor.spin_once(timeout_sec=0.05)
        future = client.call_async(request)
        while not future.done():
            if time.monotonic() > deadline:
                client.remove_pending_request(future)
                raise LifecycleError(f"{self.target}: no answer to {what} after {timeout:.0f} s")
            self.executor.spin_once(timeout_sec=0.05)
        return future.result()

    def state(self, timeout: float = 60.0) -> str:
        """The node's current state label (``unconfigured``, ``inactive``, ``active``, ``finalized``)."""
        get_state = self._types[0]
        return str(self._call(self._get, get_state.Request(), timeout, "get_state").current_state.label)

    def change(self, transition: str, timeout: float = 120.0) -> None:
        """Request ``transition`` (a key of :data:`TRANSITIONS`); LifecycleError if refused or unanswered."""
        change_state = self._types[1]
        request = change_state.Request()
        request.transition.id = TRANSITIONS[transition]
        if not self._call(self._change, request, timeout, transition).success:
            raise LifecycleError(f"{self.target}: {transition} refused (its log says why)")
