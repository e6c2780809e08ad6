"""The in-process rig of the fuzz and soak harnesses: real lifecycle nodes and a probe on one executor,
over real DDS in a private domain; callbacks' exceptions are caught at the executor and counted.

The probe subscribes to what the pipeline outputs (``/dynik/joint_states``, ``/dynik/base_odom``, the
bridge's commands, ``/diagnostics``) and runs :class:`dynik_ros.testing.invariants.WireChecks` on it. Each
command is paired with the message time it was sent for through the bridge's trace hook (the bridge emits
``command`` with the input stamp right after publishing; the probe receives commands in publication
order on a reliable topic), or with the bridge's own clock reading for it when it follows the node clock.
IK outputs are turned into a tracking error by forward kinematics of the
received joints and base pose against the ground truth the harness registered for that stamp.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from dynik_ros.testing.invariants import WireChecks, orientation_error

BOUND = 4096  # entries kept in the probe's by-stamp tables (outputs waiting for their pair)


def make_executor(context: Any) -> Any:
    """rclpy's EventsExecutor where it exists (Jazzy+; far cheaper per ``spin_once``), else the
    single-threaded one."""
    try:
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)


DOMAINS = range(101, 233)  # above the test suite's (1-100) and the other benchmarks' domains


TEARDOWN_TIMEOUT = 20.0  # [s] the longest wait for one DDS teardown call (they take milliseconds)


def bounded(call: Callable[[], Any], seconds: float, what: str) -> bool:
    """Run ``call`` in a daemon thread and wait at most ``seconds``: True if it returned (its exception
    re-raised), False with a warning on stderr if it is still blocked. Once in a full test suite under load
    ``destroy_node()`` of the domain check never returned (blocked inside the RMW, with no executor or other
    thread on that node: no cause in this code); a teardown that blocks now costs a bounded wait and a
    leaked handle instead of a hung run."""
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"bounded: {what}", daemon=True).start()
    if not done.wait(seconds):
        print(f"warning: {what} still blocked after {seconds:g} s: going on without it", file=sys.stderr)
        return False
    if errors:
        raise errors[0]
    return True


def _others_on(context: Any, seconds: float = 1.5) -> tuple[list[str], bool]:
    """Names of the nodes of other processes seen in ``context``'s domain within ``seconds``, and whether
    the check's own node was destroyed (False: its teardown blocked, see :func:`bounded`; the context is
    then not to be used further)."""
    import rclpy

    node = rclpy.create_node(f"fuzz_domain_check_{os.getpid()}", context=context)
    others: list[str] = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not others:
            time.sleep(0.1)
            others = [n for n, _ in node.get_node_names_and_namespaces() if n != node.get_name()]
    finally:
        destroyed = bounded(node.destroy_node, TEARDOWN_TIMEOUT, "destroy_node() of the domain check")
    return others, destroyed


class Rig:
    """One rclpy context and executor; :meth:`spin_until` records exceptions escaping callbacks (which
    would end a node's process) in ``crashes`` (first 20 kept, all counted) and spins on.

    The ROS domain is ``domain_id``, else ``$ROS_DOMAIN_ID``, else the first of 101-232 (starting from the
    pid) where no other process's node is visible: a harness sharing a domain with another pipeline on
    this machine would feed it hostile input and check its outputs as its own."""

    def __init__(self, domain_id: int | None = None):
        import rclpy
        from rclpy.context import Context

        if domain_id is None and os.environ.get("ROS_DOMAIN_ID"):
            domain_id = int(os.environ["ROS_DOMAIN_ID"])
        start = os.getpid() % len(DOMAINS)
        candidates = (
            [domain_id]
            if domain_id is not None
            else [DOMAINS[(start + 7 * i) % len(DOMAINS)] for i in range(8)]
        )
        for domain in candidates:
            self.context = Context()
            rclpy.init(args=[], context=self.context, domain_id=domain)
            others, destroyed = _others_on(self.context)
            if not destroyed:  # that context's RMW is stuck: leave it, take a fresh one on the same domain
                self.context = Context()
                rclpy.init(args=[], context=self.context, domain_id=domain)
            if not others or domain_id is not None:
                break
            shutdown = functools.partial(rclpy.shutdown, context=self.context)
            bounded(shutdown, TEARDOWN_TIMEOUT, "rclpy.shutdown()")
        self.domain_id = domain
        self.foreign_nodes = others
        if others:
            print(f"warning: ROS domain {domain} already has nodes {others[:5]}", file=sys.stderr)
        self.executor = make_executor(self.context)
        self.nodes: list[Any] = []
        self.crashes: list[str] = []
        self.crash_count = 0

    def add(self, node: Any) -> Any:
        self.executor.add_node(node)
        self.nodes.append(node)
        return node

    def add_ik_and_bridge(
        self, controller: str, *ik_parameters: Any, robot: str = ""
    ) -> tuple[Any, Any, set[int]]:
        """ik_node (Human66, or retargeting to ``robot``: a registry name or a map's path; ``ik_parameters``
        added) and bridge_node (forward commands to ``controller``, message clock) in the rig, and the set
        the IK's output stamps are collected in."""
        from rclpy.parameter import Parameter

        from dynik_ros.nodes.bridge_node import BridgeNode
        from dynik_ros.nodes.ik_node import IKNode

        if robot:
            model = [Parameter("model", value=""), Parameter("robot", value=robot)]
        else:
            model = [Parameter("model", value="human66")]
        ik = self.add(IKNode(context=self.context, parameter_overrides=[*model, *ik_parameters]))
        bridge_parameters = [
            *model,
            Parameter("interface", value="forward_command"),
            Parameter("controller", value=controller),
            Parameter("clock", value="message"),
        ]
        bridge = self.add(BridgeNode(context=self.context, parameter_overrides=bridge_parameters))
        outputs: set[int] = set()
        ik.trace = lambda event, stamp: outputs.add(stamp) if event == "ik_output" else None
        return ik, bridge, outputs

    def spin_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while True:
            if condition():
                return True
            if time.monotonic() >= end:
                return False
            try:
                self.executor.spin_once(timeout_sec=0.005)
            except Exception as exc:  # noqa: BLE001 - out of a callback: a node process would have died
                self.crash_count += 1
                if len(self.crashes) < 20:
                    self.crashes.append(f"{type(exc).__name__}: {exc}")

    def spin_for(self, seconds: float) -> None:
        self.spin_until(lambda: False, seconds)

    def bring_up(self, *nodes: Any) -> None:
        """Configure, then activate ``nodes`` (in the order given); RuntimeError naming a failure."""
        self.configure(*nodes)
        self.activate(*nodes)

    @staticmethod
    def configure(*nodes: Any) -> None:
        for node in nodes:
            node.trigger_configure()
            if node.lifecycle_state != "inactive":
                raise RuntimeError(f"{node.get_name()}: configure failed: {node.last_error}")

    @staticmethod
    def activate(*nodes: Any) -> None:
        for node in nodes:
            node.trigger_activate()
            if node.lifecycle_state != "active":
                raise RuntimeError(f"{node.get_name()}: activate failed: {node.last_error}")

    def restart(self, *nodes: Any) -> None:
        """Deactivate, clean up, configure and activate ``nodes`` again (after a freeze)."""
        for node in nodes:
            if node.lifecycle_state == "active":
                node.trigger_deactivate()
            if node.lifecycle_state == "inactive":
                node.trigger_cleanup()
        self.bring_up(*nodes)

    def close(self) -> None:
        """Remove and destroy the nodes, shut the executor and the context down; each call bounded by
        :data:`TEARDOWN_TIMEOUT` (:func:`bounded`), so a blocked DDS teardown cannot hang the run."""
        import rclpy

        for node in self.nodes:
            try:
                self.executor.remove_node(node)
            except Exception:  # noqa: BLE001 - tearing down
                pass
            if not bounded(node.destroy_node, TEARDOWN_TIMEOUT, f"destroy_node() of {node.get_name()}"):
                return  # the context's RMW is stuck: leave the rest to the process's exit
        bounded(self.executor.shutdown, TEARDOWN_TIMEOUT, "executor.shutdown()")
        bounded(functools.partial(rclpy.shutdown, context=self.context), TEARDOWN_TIMEOUT, "rclpy.shutdown()")


def pair_command(pending: deque, values: np.ndarray, search: int = 64) -> tuple[int | None, int]:
    """``(time, missed)`` for a command received on the wire: the first of the bridge's emitted
    ``(time, command)`` entries (oldest first) whose command equals ``values`` bit for bit, within the
    next ``search`` entries; the entries before it were emitted but never received (``missed``: dropped
    by an overloaded probe's queue) and are discarded. ``(None, 0)`` and nothing discarded when none
    matches. Pairing by position instead shifted every later pair by one after one lost command, and the
    speed check then compared commands with the wrong times (false ``command_too_fast`` under load).
    Among equal consecutive commands (a hold) the earliest is taken: its ``Δt`` is then the longer one."""
    for i, (time_ns, command) in enumerate(pending):
        if i >= search:
            break
        if command is None or (command.shape == values.shape and np.array_equal(command, values)):
            for _ in range(i + 1):
                pending.popleft()
            return time_ns, i
    return None, 0


class Probe:
    """The harness's eyes on the wire (see the module docstring). ``truth[stamp]`` = ``(L, 3, 3)`` link
    rotations registered by the harness; ``errors[stamp]`` = the tracking error of the IK output for it."""

    def __init__(
        self, rig: Rig, robot: Any, links: list[str], bridge: Any, command_topic: str, track: bool = True
    ):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from dynik_ros.nodes.common import COMMAND_QOS, RELIABLE_QOS
        from dynik_ros.nodes.conversions import stamp_to_ns

        self._stamp = stamp_to_ns
        self.node = rig.add(rclpy.create_node("fuzz_probe", context=rig.context))
        self.robot = robot
        self.data = robot.model.createData()
        # ``track`` False (a robot retargeted from the links: their rotations are not its frames'): an output
        # counts as recovered once it arrives finite, its tracking error is not judged
        self.track = track
        self.frame_ids = [robot.frame_id(name) for name in links] if track else []
        self.checks = WireChecks(robot.lower, robot.upper, robot.velocity_limit)
        self.truth: OrderedDict[int, np.ndarray] = OrderedDict()
        self.errors: OrderedDict[int, float] = OrderedDict()
        self._joints: OrderedDict[int, np.ndarray] = OrderedDict()
        self._bases: OrderedDict[int, np.ndarray] = OrderedDict()
        self._order: np.ndarray | None = None
        # (time the bridge rate-limited it with, the command) per command the bridge emitted, not yet seen
        self.command_stamps: deque[tuple[int, np.ndarray | None]] = deque(maxlen=BOUND)
        self.unpaired_commands = 0
        self.missed_commands = 0  # emitted but never received (a probe falling behind a saturated machine)
        self.announced_not_received = 0
        self._stalled = False
        self.diagnostics: dict[str, dict[str, str]] = {}
        self._bridge = bridge
        self._previous_trace = bridge.trace
        bridge.trace = self._bridge_event
        node = self.node
        node.create_subscription(JointState, "/dynik/joint_states", self._on_joints, RELIABLE_QOS)
        node.create_subscription(Odometry, "/dynik/base_odom", self._on_odom, RELIABLE_QOS)
        node.create_subscription(Float64MultiArray, command_topic, self._on_command, COMMAND_QOS)
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, RELIABLE_QOS)

    # ------------------------------------------------------------------ callbacks
    def _bridge_event(self, event: str, stamp: int) -> None:
        if event in ("command", "command_repeat"):
            # the time the bridge rate-limited this command with: the input stamp (clock:=message) or its
            # node clock, which it stores right before emitting
            command = getattr(self._bridge, "last_command", None)
            self.command_stamps.append(
                (getattr(self._bridge, "_last_sent_ns", stamp), None if command is None else command.copy())
            )
        if self._previous_trace is not None:
            self._previous_trace(event, stamp)

    def _on_command(self, msg: Any) -> None:
        values = np.asarray(msg.data, dtype=float)
        stamp, missed = pair_command(self.command_stamps, values)
        self.missed_commands += missed
        if stamp is None:
            self.unpaired_commands += 1
        self.checks.command(values, stamp)

    def _on_joints(self, msg: Any) -> None:
        stamp = self._stamp(msg.header.stamp)
        position = np.asarray(msg.position, dtype=float)
        self.checks.joint_state(stamp, position, np.asarray(msg.velocity, dtype=float))
        if self._order is None or len(self._order) != len(msg.name):
            index = {n: i for i, n in enumerate(msg.name)}
            self._order = np.array([index.get(j, -1) for j in self.robot.joint_names])
        if np.all(self._order >= 0) and len(position) == len(msg.name):
            _put(self._joints, stamp, position[self._order])
            self._pair(stamp)

    def _on_odom(self, msg: Any) -> None:
        stamp = self._stamp(msg.header.stamp)
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        _put(self._bases, stamp, np.array((p.x, p.y, p.z, o.x, o.y, o.z, o.w)))
        self._pair(stamp)

    def _on_diagnostics(self, msg: Any) -> None:
        for status in msg.status:
            self.diagnostics[status.name] = {kv.key: kv.value for kv in status.values}

    def _pair(self, stamp: int) -> None:
        if stamp not in self._joints or stamp not in self._bases:
            return
        joints, base = self._joints.pop(stamp), self._bases.pop(stamp)
        truth = self.truth.get(stamp)
        if truth is None:
            return
        import pinocchio as pin

        q = np.concatenate((base, joints))
        if not np.all(np.isfinite(q)):
            _put(self.errors, stamp, float("inf"))
            return
        if not self.track:
            _put(self.errors, stamp, 0.0)
            return
        q[3:7] /= np.linalg.norm(q[3:7]) or 1.0
        pin.framesForwardKinematics(self.robot.model, self.data, q)
        rotations = np.array([self.data.oMf[i].rotation for i in self.frame_ids])
        _put(self.errors, stamp, orientation_error(rotations, truth))

    # ------------------------------------------------------------------ harness side
    def expect(self, stamp: int, rotations: np.ndarray) -> None:
        _put(self.truth, stamp, rotations)

    def settle(self, rig: Rig, stamps: list[int], announced: set[int]) -> list[float | None]:
        """Per stamp, the tracking error of its IK output as received on the wire, or None when none was
        received. ``announced``: stamps ik_node says it published (its trace hook); the wait for them is
        bounded (10 s; 1 s while outputs are missing, so that a silent node is judged in reasonable time:
        mistaking a slow delivery for a freeze would take 10 s, then a second of message time's worth of
        stretches each over 1 s late) and
        those that never arrive count in ``announced_not_received`` (then cleared: all of them are older
        than what comes next)."""
        arrived = rig.spin_until(
            lambda: not self.command_stamps and all(s in self.errors for s in stamps if s in announced),
            1.0 if self._stalled else 10.0,
        )
        self._stalled = not arrived
        out: list[float | None] = []
        for s in stamps:
            error = self.errors.get(s)
            if error is None and s in announced:
                self.announced_not_received += 1
            out.append(error)
        announced.clear()
        return out

    def restart(self, rig: Rig) -> None:
        """Before the nodes are restarted: take the commands still on their way (bounded wait); those that
        never come (a publisher destroyed with them unsent) must not shift the pairing of later ones."""
        rig.spin_until(lambda: not self.command_stamps, 5.0)
        self.unpaired_commands += len(self.command_stamps)
        self.command_stamps.clear()
        self.checks.restart()

    def diagnostic_values(self, name_part: str) -> dict[str, str]:
        """The latest key/values of the status whose name contains ``name_part`` (empty if none)."""
        return next((v for k, v in self.diagnostics.items() if name_part in k), {})


def _put(table: OrderedDict, key: int, value: Any) -> None:
    table[key] = value
    if len(table) > BOUND:
        table.popitem(last=False)


def rejected(values: dict[str, str]) -> dict[str, int]:
    """``rejected_<reason>`` counts of a diagnostics status (non-zero ones)."""
    out = {}
    for key, value in values.items():
        if key.startswith("rejected_") and key != "rejected_total":
            try:
                count = int(float(value))
            except ValueError:
                continue
            if count:
                out[key[len("rejected_") :]] = count
    return out
