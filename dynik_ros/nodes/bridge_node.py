"""``bridge_node``: IK joint states (``/dynik/joint_states``) -> position commands for ros2_control.

``interface:=joint_trajectory`` publishes one-point ``trajectory_msgs/JointTrajectory`` messages on
``<controller>/joint_trajectory`` (``header.stamp`` zero = start now, point at ``time_from_start``);
``interface:=forward_command`` publishes ``std_msgs/Float64MultiArray`` on ``<controller>/commands``.
Joint order is the controller's (``joints``); with ``robot:=`` and no ``joints``, the robot map's
``actuated_joints`` (a mechanism with loops: the passive joints the IK solves are never commanded). Each
fresh input is commanded at once; otherwise the last
command is repeated every ``1 / command_rate`` s. Commands are clamped to the position limits and
rate-limited to the velocity limits of the model (node clock), never NaN, and none at all while the node
is not active. After activation the command ramps over ``ramp_time`` from the robot's measured
``/joint_states`` (or the first input) to the IK output. Inputs older than ``stale_timeout`` make the
bridge hold its last command.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.nodes.cdr_writer import Float64ArrayWriter, JointTrajectoryWriter, publish_serialized
from dynik_ros.nodes.common import (
    COMMAND_QOS,
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    ParamSpec,
    RejectionCounter,
    diagnostic_status,
    reliable_qos,
)
from dynik_ros.nodes.conversions import (
    DUPLICATE_NAMES,
    NAN,
    WRONG_LENGTHS,
    JointStateDecoder,
    MessageRejected,
    float_array,
    joint_state_from_msg,
)
from dynik_ros.nodes.node_process import run_node

MISSING_JOINTS = "missing_joints"
NS = 1_000_000_000


class BridgeNode(DynikLifecycleNode):
    """Lifecycle node forwarding IK joint positions to a position controller, safely."""

    PARAMS = (
        ParamSpec(
            "controller",
            "joint_trajectory_controller",
            "Controller name: topics are <controller>/joint_trajectory or <controller>/commands.",
        ),
        ParamSpec(
            "interface",
            "joint_trajectory",
            "Command message.",
            choices=("joint_trajectory", "forward_command"),
        ),
        ParamSpec(
            "joints",
            [],
            "The controller's joints, in its order ([] = every IK joint in IK order; with robot, the map's "
            "actuated_joints if it lists them: passive loop joints are never commanded).",
        ),
        ParamSpec("urdf", "", "URDF giving the joint limits (first choice)."),
        ParamSpec("robot", "", "Robot name whose retargeting model gives the limits (second choice)."),
        ParamSpec("config_file", "", "Retargeting YAML for robot ('' = the robot's default)."),
        ParamSpec(
            "model",
            "human66",
            "Human model giving the limits when urdf and robot are empty.",
            choices=("human66", "human48", ""),
        ),
        ParamSpec(
            "command_rate",
            100.0,
            "Rate of repeated (hold / ramp) commands when no fresh input arrives [Hz].",
            low=1.0,
            high=2000.0,
        ),
        ParamSpec(
            "stale_timeout",
            0.1,
            "Hold the last command when the newest input is older than this [s].",
            low=1e-3,
            high=60.0,
        ),
        ParamSpec(
            "ramp_time",
            2.0,
            "Ramp from the measured (or first) positions to the IK output after activation [s].",
            low=0.0,
            high=600.0,
        ),
        ParamSpec(
            "time_from_start",
            0.05,
            "JointTrajectory: time_from_start of the single point [s].",
            low=0.0,
            high=10.0,
        ),
        ParamSpec("input_topic", "/dynik/joint_states", "IK joint states to forward."),
        ParamSpec(
            "input_depth",
            10,
            "History depth of the input subscription (reliable); 0 keeps all (dynik-ros run --processes "
            "offline: every IK output commanded however far behind this process falls).",
            low=0,
            high=100000,
        ),
        ParamSpec(
            "robot_state_topic", "/joint_states", "The robot's measured joint states (start of the ramp)."
        ),
        ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
        ParamSpec(
            "clock",
            "node",
            "Time base of the ramp, the rate limit and staleness: 'node' (the node clock: wall time, or "
            "/clock with use_sim_time; repeats and holds on a timer) or 'message' (the input stamps: one "
            "command per input, no timer; offline replays give identical commands run to run).",
            choices=("node", "message"),
        ),
    )

    def __init__(self, node_name: str = "bridge_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._entities: list[Any] = []
        self._pub = self._diag_pub = self._timer = self._diag_timer = None
        self.joints: list[str] = []
        self._reset_stream()
        self._reset_counts()

    # ----------------------------------------------------------------- configuration
    def _configure(self, p: dict[str, Any]) -> None:
        if not p["controller"].strip("/"):
            raise ConfigError("controller", "is empty")
        robot = self._load_model(p)
        actuated = list(self._actuated or robot.joint_names)
        joints = list(p["joints"]) or actuated
        unknown = [j for j in joints if j not in robot.joint_names]
        if unknown:
            raise ConfigError("joints", f"unknown joint names {unknown} (not in the model '{robot.name}')")
        passive = [j for j in joints if j not in actuated]
        if passive:
            raise ConfigError(
                "joints", f"{passive} are passive in the map of '{robot.name}' (not in its actuated_joints)"
            )
        if len(set(joints)) != len(joints):
            raise ConfigError("joints", "repeated joint names")
        index = [robot.joint_index(j) for j in joints]
        self.joints = joints
        # the command's serialized layout (cdr_writer): names, sizes and time_from_start fixed at configure
        if p["interface"] == "joint_trajectory":
            self._writer = JointTrajectoryWriter(joints, p["time_from_start"])
        else:
            self._writer = Float64ArrayWriter(len(joints))
        self.lower, self.upper = robot.lower[index].copy(), robot.upper[index].copy()
        self.velocity_limit = robot.velocity_limit[index].copy()
        self._reset_counts()
        self._reset_stream()
        self._measured: tuple[int, np.ndarray] | None = None
        controller = p["controller"].rstrip("/")
        if p["interface"] == "joint_trajectory":
            self.command_topic = f"{controller}/joint_trajectory"
            self.command_type = JointTrajectory
            self._pub = self.create_lifecycle_publisher(JointTrajectory, self.command_topic, COMMAND_QOS)
        else:
            self.command_topic = f"{controller}/commands"
            self.command_type = Float64MultiArray
            self._pub = self.create_lifecycle_publisher(Float64MultiArray, self.command_topic, COMMAND_QOS)
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        self._entities = [
            # raw=True: the CDR bytes are read straight into numpy (conversions.JointStateDecoder)
            self.create_subscription(
                JointState, p["input_topic"], self._on_input, reliable_qos(p["input_depth"]), raw=True
            ),
            self.create_subscription(JointState, p["robot_state_topic"], self._on_robot_state, SENSOR_QOS),
        ]

    def _load_model(self, p: dict[str, Any]) -> RobotModel:
        """The model giving the limits; with ``robot``, also its map's actuated joints (``_actuated``)."""
        self._actuated: tuple[str, ...] = ()
        if p["urdf"]:
            try:
                return RobotModel.from_urdf_file(p["urdf"])
            except (FileNotFoundError, ValueError) as exc:  # UrdfError: names the file and the fault
                raise ConfigError("urdf", str(exc)) from None
        if p["robot"]:
            try:
                from dynik_ros.retarget.retargeter import Retargeter
            except ImportError as exc:
                raise ConfigError(
                    "robot", f"robot models are not available here (dynik_ros.retarget: {exc})"
                ) from None
            try:
                retargeter = Retargeter.from_config(p["config_file"] or p["robot"])
                self._actuated = retargeter.config.actuated_joints
                return retargeter.robot
            except (FileNotFoundError, KeyError, ValueError) as exc:
                raise ConfigError("config_file" if p["config_file"] else "robot", str(exc)) from None
        if not p["model"]:
            raise ConfigError("model", "set urdf, robot or model to get the joint limits")
        from dynik_ros.models.assets import urdf_path

        return RobotModel.from_urdf_file(urdf_path(p["model"]))

    def _activate(self) -> None:
        self._reset_stream()
        self._timer = self.create_timer(1.0 / self.params["command_rate"], self._on_timer)
        self._diag_timer = self.create_timer(self.params["diagnostics_period"], self.publish_diagnostics)

    def _deactivate(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer])
        self._timer = self._diag_timer = None

    def _release(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer, *self._entities, self._pub, self._diag_pub])
        self._entities = []
        self._pub = self._diag_pub = self._timer = self._diag_timer = None
        self.joints = []

    def _message_time(self, stamp: int) -> int:
        """The message clock, kept monotonic: when the input stamps step back (the sender's clock was set
        back and ik_node followed it), the clock goes on one period after its last reading instead, so
        the rate limit never sees a negative step (it froze the command for as long as the step)."""
        time = stamp + self._stamp_offset
        if self._last_message_time is not None and time <= self._last_message_time:
            self._stamp_offset += self._last_message_time + self._message_period - time
            time = stamp + self._stamp_offset
        elif self._last_message_time is not None:
            self._message_period = time - self._last_message_time
        self._last_message_time = time
        return time

    def _reset_stream(self) -> None:
        self._stamp_offset = 0
        self._last_message_time: int | None = None
        self._message_period = NS // 100
        self._target: np.ndarray | None = None
        self._target_stamp = 0
        self._target_received_ns = 0
        self._ramp_start_ns: int | None = None
        self._ramp_from: np.ndarray | None = None
        self._last_command: np.ndarray | None = None
        self._last_sent_ns = 0
        self._holding = False
        self._index_cache: tuple[list[str], np.ndarray] | None = None
        self._decode = JointStateDecoder()  # input names read once per stream

    def _reset_counts(self) -> None:
        self.rejections = RejectionCounter((NAN, MISSING_JOINTS, WRONG_LENGTHS, DUPLICATE_NAMES))
        self.commands_sent = 0
        self.fresh_commands = 0
        self.hold_events = 0
        self.clamped = 0
        self.rate_limited = 0
        self.last_command: np.ndarray | None = None

    # ----------------------------------------------------------------- inputs
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _select(self, names: list[str], values: np.ndarray) -> np.ndarray:
        cached = self._index_cache
        if cached is None or (cached[0] is not names and cached[0] != names):  # the decoder reuses its list
            key = names
            lookup = {n: i for i, n in enumerate(names)}
            missing = [j for j in self.joints if j not in lookup]
            if missing:
                raise MessageRejected(MISSING_JOINTS, f"joints {missing[:5]} absent from the input")
            self._index_cache = (key, np.array([lookup[j] for j in self.joints], dtype=int))
        return values[self._index_cache[1]]

    def _on_robot_state(self, msg: JointState) -> None:
        try:
            stamp, names, positions, _ = joint_state_from_msg(msg)
            lookup = {n: i for i, n in enumerate(names)}
            if all(j in lookup for j in self.joints):
                when = stamp if self.params.get("clock") == "message" else self._now_ns()
                self._measured = (when, positions[[lookup[j] for j in self.joints]])
        except Exception:  # noqa: BLE001 - the robot's own joint states: only used for the ramp start
            pass

    def _on_input(self, data: bytes | JointState) -> None:
        if not self.active:
            return
        try:
            if isinstance(data, JointState):  # a message handed over in-process
                stamp, names, positions, _ = joint_state_from_msg(data)
            else:
                stamp, names, positions, _ = self._decode(data)
            target = self._select(names, positions)
        except MessageRejected as exc:
            self.rejections.add(exc.reason, exc.detail)
            self.get_logger().warning(f"joint states refused ({exc})", throttle_duration_sec=1.0)
            return
        except Exception as exc:  # noqa: BLE001 - no input may end the node
            self.rejections.add(WRONG_LENGTHS, f"{type(exc).__name__}: {exc}")
            return
        now = self._message_time(stamp) if self.params["clock"] == "message" else self._now_ns()
        self._target, self._target_stamp, self._target_received_ns = target, stamp, now
        self._send(now, fresh=True)

    def _on_timer(self) -> None:
        if not self.active or self.params["clock"] == "message":
            return  # message time only advances with the input: nothing to repeat between inputs
        now = self._now_ns()
        if now - self._last_sent_ns >= 0.9 * NS / self.params["command_rate"]:
            self._send(now, fresh=False)

    # ----------------------------------------------------------------- commands
    def _send(self, now: int, fresh: bool) -> None:
        if self._target is None:
            return  # nothing to command before the first input
        p = self.params
        stale = now - self._target_received_ns > p["stale_timeout"] * NS
        if stale and self._last_command is not None:
            if not self._holding:
                self._holding = True
                self.hold_events += 1
                self.get_logger().warning(
                    f"input older than stale_timeout={p['stale_timeout']} s: holding the last command"
                )
            command = self._last_command
        else:
            self._holding = False
            if self._ramp_start_ns is None:
                self._ramp_start_ns = now
                measured = self._measured
                fresh_measure = measured is not None and now - measured[0] < 1.0 * NS
                self._ramp_from = measured[1].copy() if fresh_measure else self._target.copy()
                if self._last_command is None:  # the first command is rate-limited from the start pose too
                    self._last_command = np.clip(self._ramp_from, self.lower, self.upper)
                    self._last_sent_ns = now - int(NS / p["command_rate"])
            alpha = (
                1.0 if p["ramp_time"] <= 0 else min(1.0, (now - self._ramp_start_ns) / (p["ramp_time"] * NS))
            )
            blend = alpha * alpha * (3.0 - 2.0 * alpha)
            desired = self._ramp_from + blend * (self._target - self._ramp_from)
            command = np.clip(desired, self.lower, self.upper)
            if np.any(command != desired):
                self.clamped += 1
            if self._last_command is not None:
                dt = min((now - self._last_sent_ns) / NS, self._longest_step())
                step = self.velocity_limit * max(dt, 0.0)
                limited = np.clip(command, self._last_command - step, self._last_command + step)
                if np.any(limited != command):
                    self.rate_limited += 1
                command = limited
        if not np.all(np.isfinite(command)):
            self.get_logger().error("non-finite command suppressed", throttle_duration_sec=1.0)
            return
        self._publish(command)
        self._last_command = command
        self.last_command = command
        self._last_sent_ns = now
        self.commands_sent += 1
        if fresh and not self._holding:
            self.fresh_commands += 1
            self.emit("command", self._target_stamp)
            if self._timer is not None:
                self._timer.reset()  # a healthy stream never wakes the repeat timer
        else:
            self.emit("command_repeat", self._target_stamp)

    def _longest_step(self) -> float:
        """The longest time one command may move over at the velocity limits [s]. On the node clock, two
        command periods (a timer that fired late). On the message clock the inputs are the only ticks, so
        the time between two of them is the robot's: up to ``stale_timeout``, the widest gap a healthy
        stream has (two command periods capped a 30 Hz stream's 0.033 s at 0.02 s, and the commands fell
        further behind the IK's output on every sample: a G1 knee 0.17 rad on the CMU excerpt)."""
        p = self.params
        periods = 2.0 / p["command_rate"]
        return max(periods, p["stale_timeout"]) if p["clock"] == "message" else periods

    def _publish(self, command: np.ndarray) -> None:
        """The command serialized from a template (``cdr_writer``); a message on an older rclpy."""
        writer = self._writer
        if writer is None or len(writer.positions if hasattr(writer, "positions") else writer.data) != len(
            command
        ):
            writer = self._writer = self._make_writer(len(command))
        data = writer.serialize(command)
        publish_serialized(self._pub, data, lambda: self._message(command))

    def _make_writer(self, count: int) -> Any:
        if self.params["interface"] == "joint_trajectory":
            return JointTrajectoryWriter(self.joints, self.params["time_from_start"])
        return Float64ArrayWriter(count)

    def _message(self, command: np.ndarray) -> Any:
        if self.params["interface"] == "joint_trajectory":
            msg = JointTrajectory()
            msg.joint_names = self.joints  # header.stamp zero: start now
            t = self.params["time_from_start"]
            sec = int(t)
            point = JointTrajectoryPoint(
                time_from_start=Duration(sec=sec, nanosec=int(round((t - sec) * NS)))
            )
            point.positions = float_array(command)
            msg.points = [point]
        else:
            msg = Float64MultiArray()
            msg.data = float_array(command)
        return msg

    def publish_diagnostics(self) -> None:
        if not self.active or self._diag_pub is None:
            return
        level, message = DiagnosticStatus.OK, "commanding"
        if self._target is None:
            level, message = DiagnosticStatus.WARN, f"waiting for {self.params['input_topic']}"
        elif self._holding:
            level, message = DiagnosticStatus.WARN, "input stale: holding the last command"
        values: dict[str, Any] = {
            "command_topic": self.command_topic,
            "joints": len(self.joints),
            "commands_sent": self.commands_sent,
            "fresh_commands": self.fresh_commands,
            "hold_events": self.hold_events,
            "holding": self._holding,
            "clamped": self.clamped,
            "rate_limited": self.rate_limited,
        }
        values.update({f"rejected_{k}": v for k, v in self.rejections.counts.items()})
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [
            diagnostic_status(
                f"{self.get_name()}: command bridge", self.command_topic, level, message, values
            )
        ]
        self._diag_pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    return run_node(BridgeNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
