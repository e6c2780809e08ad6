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
STATES = {  # transition -> (state it starts from, state it ends in)
    "configure": ("unconfigured", "inactive"),
    "cleanup": ("inactive", "unconfigured"),
    "activate": ("inactive", "active"),
    "deactivate": ("active", "inactive"),
    "shutdown": ("unconfigured", "finalized"),
}
TRANSITIONAL = ("configuring", "cleaningup", "shuttingdown", "activating", "deactivating", "errorprocessing")
"""Labels of the states a node passes through during a transition."""
RESEND_S = 2.0
"""A request unanswered this long is checked (``get_state``) and sent again if it never arrived: Fast DDS
reports a service ready once the client's request writer matched it, and a request sent before the server
matched that writer back is lost (seen on a loaded machine: the bridge never saw its ``configure``)."""


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

    def _send(self, client: Any, request: Any, deadline: float, what: str) -> Any:
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                raise LifecycleError(f"{self.target}: no {client.srv_name} service ({what})")
            self.executor.spin_once(timeout_sec=0.05)
        return client.call_async(request)

    def _wait(self, future: Any, until: float) -> bool:
        """Spin until ``future`` is done (True) or ``until`` (False)."""
        while not future.done():
            if time.monotonic() > until:
                return False
            self.executor.spin_once(timeout_sec=0.05)
        return True

    def state(self, timeout: float = 60.0) -> str:
        """The node's current state label (``unconfigured``, ``inactive``, ``active``, ``finalized``)."""
        request = self._types[0].Request()
        deadline = time.monotonic() + timeout
        while True:  # get_state changes nothing: sent again until answered
            future = self._send(self._get, request, deadline, "get_state")
            if self._wait(future, min(deadline, time.monotonic() + RESEND_S)):
                return str(future.result().current_state.label)
            self._get.remove_pending_request(future)
            if time.monotonic() > deadline:
                raise LifecycleError(f"{self.target}: no answer to get_state after {timeout:.0f} s")

    def _settled_state(self, deadline: float) -> str:
        """:meth:`state`, asked again while the node is in a transition (a resent request refused while the
        first one is still being carried out, if the node answers its services concurrently)."""
        while True:
            state = self.state(max(1.0, deadline - time.monotonic()))
            if state not in TRANSITIONAL or time.monotonic() > deadline:
                return state
            self.executor.spin_once(timeout_sec=0.05)

    def change(self, transition: str, timeout: float = 120.0) -> None:
        """Request ``transition`` (a key of :data:`TRANSITIONS`); LifecycleError if refused or unanswered.

        An answer that is slow to come is told apart from a lost request by the node's state: still in
        the start state, the request is sent again; in the end state, it was done; in between (e.g.
        *configuring*), the answer is awaited. A resent request that is refused while the node is in the
        end state (once out of any transition) was a duplicate of one that arrived late (both queued in a
        stalled process): done."""
        request = self._types[1].Request()
        request.transition.id = TRANSITIONS[transition]
        start, goal = STATES[transition]
        deadline = time.monotonic() + timeout
        future = self._send(self._change, request, deadline, transition)
        resent = False
        while True:
            if self._wait(future, min(deadline, time.monotonic() + RESEND_S)):
                if future.result().success:
                    return
                # a resent request is refused when the first one, only late (a process stalled on a
                # loaded machine answered get_state first), already made the transition: done, not refused
                if resent and self._settled_state(deadline) == goal:
                    return
                raise LifecycleError(f"{self.target}: {transition} refused (its log says why)")
            if time.monotonic() > deadline:
                self._change.remove_pending_request(future)
                raise LifecycleError(f"{self.target}: no answer to {transition} after {timeout:.0f} s")
            state = self.state(max(1.0, deadline - time.monotonic()))
            if state == goal:
                self._change.remove_pending_request(future)
                return
            if state == start:  # the request never arrived, or is still queued in a stalled process
                self._change.remove_pending_request(future)
                future = self._send(self._change, request, deadline, transition)
                resent = True
            # else: the transition is under way, its answer is awaited
