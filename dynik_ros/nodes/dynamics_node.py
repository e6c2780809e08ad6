"""``dynamics_node``: human joint torques and foot wrenches from the suit and the shoes (issue 13), a thin
lifecycle adapter around :class:`dynik_ros.estimation.dynamics_pipeline.HumanDynamicsPipeline`.

Input: ``/human/link_states`` (``MultiDOFJointState`` with twists, what ``ik_node`` reads) and, when
``use_shoes``, one ``geometry_msgs/WrenchStamped`` per shoe (``right_shoe_topic``, ``left_shoe_topic``;
the wrench the ground exerts on the foot, in the foot link's frame: ``frame_id`` empty or the link name).
Output, one sample behind the suit (central differences): ``/human/joint_torques`` (``JointState``:
position, velocity, effort), ``/human/foot_wrench/RightFoot`` and ``/human/foot_wrench/LeftFoot``
(``WrenchStamped``, estimated), ``/human/contact_state`` (``std_msgs/String``: none, right, left, double)
and ``/diagnostics``. Refused inputs are counted by reason and never stop the node.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState, MultiDOFJointState
from std_msgs.msg import String

from dynik_ros.core.rolling import RollingSamples
from dynik_ros.estimation.contact_classification import STATE_NAMES
from dynik_ros.estimation.dynamics_pipeline import FEET, HumanDynamicsPipeline, PipelineConfig, ShoeBuffer
from dynik_ros.estimation.map_dynamics import MapCovariances
from dynik_ros.estimation.suit_kinematics import SuitSample
from dynik_ros.io import stamp_guard
from dynik_ros.nodes.cdr_writer import JointStateWriter, WrenchStampedWriter, publish_serialized
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    ParamSpec,
    RejectionCounter,
    diagnostic_status,
    percentiles_ms,
    wall_time,
)
from dynik_ros.nodes.conversions import (
    REJECTION_REASONS,
    UNDECODABLE,
    UNHANDLED,
    MessageRejected,
    decode_link_states,
    float_array,
    ns_to_stamp,
    stamp_to_ns,
)
from dynik_ros.nodes.dynamics_log import TorqueLog
from dynik_ros.nodes.node_process import run_node

NO_TWISTS = "no_twists"
SHOE_NAN, SHOE_FRAME, SHOE_STAMP = "shoe_nan", "shoe_frame", "shoe_out_of_order"
LOCAL_REASONS = (
    UNHANDLED, UNDECODABLE, NO_TWISTS, SHOE_NAN, SHOE_FRAME, SHOE_STAMP,
    stamp_guard.FUTURE, stamp_guard.JUMP, stamp_guard.OUT_OF_ORDER, stamp_guard.STALE,
)  # fmt: skip

DEFAULTS = MapCovariances()
PARAMS = (
    ParamSpec(
        "model", "human66", "Human model the torques are estimated on.", choices=("human66", "human48")
    ),
    ParamSpec("height", 1.75, "Subject body height [m] (scales the model).", low=0.5, high=2.5),
    ParamSpec("mass", 75.0, "Subject body mass [kg] (scales the model).", low=5.0, high=300.0),
    ParamSpec("ground_height", 0.0, "Height of the ground in the suit's world [m].", low=-100.0, high=100.0),
    ParamSpec(
        "link_states_reliable",
        False,
        "Subscribe to /human/link_states and the shoes reliable (needs reliable publishers: wearable_node "
        "link_states_reliable; every sample estimated, as the pipeline human66_dynamics does).",
    ),
    ParamSpec("use_shoes", True, "Subscribe to the force/torque shoes (without: kinematic contact only)."),
    ParamSpec("right_shoe_topic", "/human/shoes/right", "WrenchStamped of the right shoe (foot frame)."),
    ParamSpec("left_shoe_topic", "/human/shoes/left", "WrenchStamped of the left shoe (foot frame)."),
    ParamSpec(
        "max_shoe_age",
        0.02,
        "A shoe reading further than this from a suit sample is not used [s].",
        low=0.0,
        high=1.0,
    ),  # fmt: skip
    ParamSpec(
        "base_velocity",
        "suit",
        "Base twist: the suit's pelvis twist, or eq. 8-10 from the feet in contact.",
        choices=("suit", "contacts"),
    ),  # fmt: skip
    ParamSpec("contact_on_fraction", 0.10, "Shoe contact starts above this share of the weight.", 0.0, 1.0),
    ParamSpec("contact_off_fraction", 0.05, "Shoe contact ends below this share of the weight.", 0.0, 1.0),
    ParamSpec("variance_model", DEFAULTS.model, "MAP: variance of the model equation (eq. 1).", 1e-12, 1e12),
    ParamSpec(
        "variance_prior", DEFAULTS.prior_torque, "MAP: prior variance of torques, wrenches.", 1e-12, 1e12
    ),
    ParamSpec(
        "variance_linear_acceleration",
        DEFAULTS.linear_acceleration,
        "MAP: variance of the suit's linear accelerations [(m/s^2)^2].",
        1e-12,
        1e12,
    ),  # fmt: skip
    ParamSpec(
        "variance_angular_acceleration",
        DEFAULTS.angular_acceleration,
        "MAP: variance of the suit's angular accelerations [(rad/s^2)^2].",
        1e-12,
        1e12,
    ),  # fmt: skip
    ParamSpec(
        "variance_joint_acceleration",
        DEFAULTS.joint_acceleration,
        "MAP: variance of the joint accelerations [(rad/s^2)^2].",
        1e-12,
        1e12,
    ),  # fmt: skip
    ParamSpec("variance_force", DEFAULTS.force, "MAP: variance of the shoe forces [N^2].", 1e-12, 1e12),
    ParamSpec(
        "variance_moment", DEFAULTS.moment, "MAP: variance of the shoe moments [(N m)^2].", 1e-12, 1e12
    ),
    ParamSpec(
        "max_input_age", 0.5, "Stamps up to this much older than the newest are out of order [s].", 0.0, 10.0
    ),
    ParamSpec(
        "max_future_stamp", 1.0, "Stamps further ahead of the clock are refused (0: off) [s].", 0.0, 3600.0
    ),
    ParamSpec("max_stamp_jump", 0.5, "A larger step of the stamps needs confirmation [s].", 0.01, 3600.0),
    ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
)


class DynamicsNode(DynikLifecycleNode):
    """Lifecycle node running :class:`HumanDynamicsPipeline` on the link-state stream."""

    PARAMS = PARAMS

    def __init__(self, node_name: str = "dynamics_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._entities: list[Any] = []
        self.pipeline: HumanDynamicsPipeline | None = None
        self._origin_ns: int | None = None
        self.reset_statistics()

    def reset_statistics(self) -> None:
        self.rejections = RejectionCounter(REJECTION_REASONS + LOCAL_REASONS)
        self.received = 0
        self.estimates = 0
        self.shoes_received = [0, 0]
        self.shoes_missing = 0
        self.step_times = RollingSamples()
        self.step_cpu_times = RollingSamples()  # CPU time of the callback's thread (time.thread_time)
        self.torque_log = TorqueLog()  # the recent estimates: what dynik-ros run summarizes
        self.last_state = "none"
        self.shoe_buffer = ShoeBuffer(self.params.get("max_shoe_age", 0.02))

    # ----------------------------------------------------------------- lifecycle hooks
    def _configure(self, p: dict[str, Any]) -> None:
        from dynik_ros.retarget.human import human_model

        self.reset_statistics()
        if not p["contact_off_fraction"] < p["contact_on_fraction"]:
            raise ConfigError("contact_off_fraction", "must be below contact_on_fraction (hysteresis)")
        if p["use_shoes"] and p["right_shoe_topic"] == p["left_shoe_topic"]:
            raise ConfigError("left_shoe_topic", "must differ from right_shoe_topic")
        prior = p["variance_prior"]
        covariances = MapCovariances(
            model=p["variance_model"], prior_torque=prior, prior_wrench=prior,
            linear_acceleration=p["variance_linear_acceleration"],
            angular_acceleration=p["variance_angular_acceleration"],
            joint_acceleration=p["variance_joint_acceleration"],
            force=p["variance_force"], moment=p["variance_moment"],
        )  # fmt: skip
        config = PipelineConfig(
            p["height"], p["mass"], p["ground_height"], p["base_velocity"],
            p["contact_on_fraction"], p["contact_off_fraction"], covariances,
        )  # fmt: skip
        robot = human_model(p["model"], p["height"], p["mass"])
        self.pipeline = HumanDynamicsPipeline(robot, config)
        self.known_links = frozenset(self.pipeline.links)
        self.required_links = list(self.pipeline.links)
        self.stamps = stamp_guard.StampGuard(p["max_input_age"], p["max_future_stamp"], p["max_stamp_jump"])
        self._pub_torques = self.create_lifecycle_publisher(JointState, "/human/joint_torques", RELIABLE_QOS)
        self._pub_wrenches = [
            self.create_lifecycle_publisher(WrenchStamped, f"/human/foot_wrench/{foot}", RELIABLE_QOS)
            for foot in FEET
        ]
        self._pub_contact = self.create_lifecycle_publisher(String, "/human/contact_state", RELIABLE_QOS)
        # the outputs serialized from templates (cdr_writer): the names, frames and the three contact
        # states never change, only the stamp and the numbers
        self._torque_writer: JointStateWriter | None = None  # laid out at the first estimate (its names)
        self._torque_names: tuple[str, ...] = ()
        self._wrench_writers = [WrenchStampedWriter(foot) for foot in FEET]
        self._contact_bytes = {n: bytes(serialize_message(String(data=n))) for n in STATE_NAMES.values()}
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        qos = RELIABLE_QOS if p["link_states_reliable"] else SENSOR_QOS
        self._entities = [
            self.create_subscription(
                MultiDOFJointState, "/human/link_states", self._on_link_states, qos, raw=True
            )
        ]
        if p["use_shoes"]:
            for f, topic in enumerate((p["right_shoe_topic"], p["left_shoe_topic"])):
                self._entities.append(
                    self.create_subscription(
                        WrenchStamped, topic, lambda msg, f=f: self._on_shoe(f, msg), qos
                    )
                )

    def _activate(self) -> None:
        self.pipeline.reset()
        self._origin_ns = None
        self.shoe_buffer.clear()
        self.stamps.reset()
        self._diag_timers = [self.create_timer(self.params["diagnostics_period"], self.publish_diagnostics)]

    def _deactivate(self) -> None:
        self.destroy_entities(getattr(self, "_diag_timers", []))
        self._diag_timers = []

    def _release(self) -> None:
        self.destroy_entities(getattr(self, "_diag_timers", []))
        publishers = [getattr(self, n, None) for n in ("_pub_torques", "_pub_contact", "_pub_diag")]
        self.destroy_entities(self._entities + publishers + list(getattr(self, "_pub_wrenches", [])))
        self._entities, self._diag_timers, self._pub_wrenches = [], [], []
        self._pub_torques = self._pub_contact = self._pub_diag = None
        self.pipeline = None

    # ----------------------------------------------------------------- inputs
    def _reject(self, reason: str, detail: str) -> None:
        self.rejections.add(reason, detail)
        self.get_logger().warning(f"input refused ({reason}): {detail}", throttle_duration_sec=1.0)

    def _on_shoe(self, foot: int, msg: WrenchStamped) -> None:
        if not self.active:
            return
        try:
            frame = msg.header.frame_id
            if frame not in ("", FEET[foot]):
                self._reject(SHOE_FRAME, f"{FEET[foot]} shoe in frame '{frame}', expected '{FEET[foot]}'")
                return
            f, m = msg.wrench.force, msg.wrench.torque
            wrench = np.array([f.x, f.y, f.z, m.x, m.y, m.z], dtype=float)
            if not np.all(np.isfinite(wrench)):
                self._reject(SHOE_NAN, f"{FEET[foot]} shoe wrench not finite")
                return
            if not self.shoe_buffer.add(foot, stamp_to_ns(msg.header.stamp), wrench):
                self._reject(SHOE_STAMP, f"{FEET[foot]} shoe stamp not after the previous one")
                return
            self.shoes_received[foot] += 1
        except Exception as exc:  # noqa: BLE001 - no input may end the node
            self._reject(UNHANDLED, f"{type(exc).__name__}: {exc}")

    def shoes_at(self, sample: SuitSample) -> np.ndarray:
        """``(2, 6)``: each shoe's reading nearest the sample's stamp within ``max_shoe_age``, NaN rows
        otherwise (counted in ``shoes_missing``)."""
        out = self.shoe_buffer.at(sample.stamp_ns)
        if not np.isfinite(out).all():
            self.shoes_missing += 1
        return out

    def _on_link_states(self, data: bytes) -> None:
        if not self.active or self.pipeline is None:
            return
        try:
            self._process(data)
        except Exception as exc:  # noqa: BLE001 - no input may end the node: count, log, keep running
            self._reject(UNHANDLED, f"{type(exc).__name__}: {exc}")

    def _process(self, data: bytes) -> None:
        start, start_cpu = wall_time(), time.thread_time()
        self.received += 1
        try:
            links = decode_link_states(data, self.known_links, self.required_links)
        except MessageRejected as exc:
            self._reject(exc.reason, exc.detail)
            return
        if links.linear_velocities is None:
            self._reject(NO_TWISTS, "link states without twists: the dynamics need link velocities")
            return
        verdict, detail = self.stamps.check(links.stamp_ns, self.get_clock().now().nanoseconds)
        if verdict not in (stamp_guard.ACCEPTED, stamp_guard.REBASED):
            self._reject(verdict, detail)
            return
        if verdict == stamp_guard.REBASED:
            self.pipeline.reset()  # differences across the seam would be meaningless
            self._origin_ns = None
        if self._origin_ns is None:  # sample times from here: epoch seconds in a float keep only ~0.2 us,
            self._origin_ns = links.stamp_ns  # a 1e-5 relative error of every difference at 60 Hz
        order = [links.names.index(name) for name in self.pipeline.links]
        sample = SuitSample(
            (links.stamp_ns - self._origin_ns) * 1e-9,
            links.positions[order],
            links.rotations[order],
            links.linear_velocities[order],
            links.angular_velocities[order],
            links.stamp_ns,
        )
        output = self.pipeline.push(sample, self.shoes_at if self.params["use_shoes"] else None)
        if output is None:
            return
        self.estimates += 1
        self._publish(output)
        self.step_times.append(wall_time() - start)
        self.step_cpu_times.append(time.thread_time() - start_cpu)

    def _publish(self, output: Any) -> None:
        """Joint torques, foot wrenches and the contact state, serialized from templates (no Python message
        objects per sample; the messages are built only for an rclpy without ``publish_raw``)."""
        stamp_ns, names = output.stamp_ns, tuple(output.joint_names)
        if self._torque_writer is None or names != self._torque_names:
            self._torque_writer, self._torque_names = JointStateWriter(names, efforts=True), names
        publish_serialized(
            self._pub_torques,
            self._torque_writer.serialize(stamp_ns, output.q[7:], output.v[6:], output.tau),
            lambda: _torque_msg(output),
        )
        for foot, publisher, wrench_writer, wrench in zip(
            FEET, self._pub_wrenches, self._wrench_writers, output.wrenches, strict=True
        ):
            publish_serialized(
                publisher,
                wrench_writer.serialize(stamp_ns, wrench),
                lambda f=foot, w=wrench: _wrench_msg(stamp_ns, f, w),
            )
        self.last_state = STATE_NAMES[output.state]
        self.torque_log.append(output.stamp_ns, output.tau, output.state)
        publish_serialized(
            self._pub_contact, self._contact_bytes[self.last_state], lambda: String(data=self.last_state)
        )

    def publish_diagnostics(self) -> None:
        if not self.active or self._pub_diag is None:
            return
        times = percentiles_ms(self.step_times.recent(500))
        cpu = percentiles_ms(self.step_cpu_times.recent(500))
        values: dict[str, Any] = {
            "received": self.received,
            "estimates": self.estimates,
            "step_time_p50_ms": times["p50"],
            "step_time_p99_ms": times["p99"],
            "step_cpu_p50_ms": cpu["p50"],
            "step_cpu_p99_ms": cpu["p99"],
            "contact_state": self.last_state,
            "shoes_received_right": self.shoes_received[0],
            "shoes_received_left": self.shoes_received[1],
            "shoes_missing": self.shoes_missing,
            "rejected_total": self.rejections.total,
        }
        values.update({f"rejected_{k}": v for k, v in self.rejections.counts.items()})
        level, message = DiagnosticStatus.OK, "estimating"
        if self.rejections.total:
            level = DiagnosticStatus.WARN
            message = f"{self.rejections.total} inputs refused; last: {self.rejections.last_detail}"
        if self.estimates == 0:
            level, message = DiagnosticStatus.WARN, "waiting for /human/link_states"
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [
            diagnostic_status(
                f"{self.get_name()}: human dynamics", self.params["model"], level, message, values
            )
        ]
        self._pub_diag.publish(msg)


def _torque_msg(output: Any) -> JointState:
    """The ``/human/joint_torques`` message built field by field (rclpy without ``publish_raw``)."""
    msg = JointState()
    msg.header.stamp = ns_to_stamp(output.stamp_ns)
    msg.name = list(output.joint_names)
    msg.position = float_array(output.q[7:])
    msg.velocity = float_array(output.v[6:])
    msg.effort = float_array(output.tau)
    return msg


def _wrench_msg(stamp_ns: int, foot: str, wrench: np.ndarray) -> WrenchStamped:
    """A ``/human/foot_wrench/<foot>`` message built field by field (rclpy without ``publish_raw``)."""
    w = WrenchStamped()
    w.header.stamp, w.header.frame_id = ns_to_stamp(stamp_ns), foot
    w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = wrench[:3].tolist()
    w.wrench.torque.x, w.wrench.torque.y, w.wrench.torque.z = wrench[3:].tolist()
    return w


def main(argv: list[str] | None = None) -> int:
    return run_node(DynamicsNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
