"""``mocap_node``: optical-mocap rigid body (``/mocap/rigid_body``, ``PoseStamped``, camera frame) -> robot
base odometry (``/robot/base_odom``, ``Odometry``) for the IK's ``use_base_odom`` mode and for controllers,
per the RH5 mocap seed (Sensors 22:9853, sec. 2.2; the math in :mod:`dynik_ros.nodes.base_estimation`).

* Calibration at activation, eq. (1): the first ``calibration_samples`` poses give ``T_cr``; the robot world
  is the floor under the initial base with its heading (``robot_world``, ``world_orientation``,
  ``ground_height``, ``initial_base_position`` / ``initial_base_yaw``).
* One odometry message per accepted pose, eq. (2), with the twist (finite difference over
  ``velocity_window``, low-pass ``velocity_cutoff``), stamped with the capture stamp of the pose: consumers
  extrapolate with the twist (ik_node does, to its link-state stamps). ``predict_to_receive_time``
  publishes instead the pose predicted to the reception time (node clock), stamped with it.
* Refused and counted: NaN poses, non-unit quaternions, out-of-order stamps, physically implausible poses
  (:mod:`dynik_ros.io.plausibility`: ``max_body_distance``, ``max_body_speed`` / ``_angular_speed`` plus
  0.5 m / 1 rad) and outliers (beyond ``outlier_gate`` of the constant-twist prediction). A jump that stays
  (``jump_confirm`` consistent poses) is followed with the twist restarted.
* Occlusions (no pose for ``occlusion_timeout``): nothing is published (consumers hold the last pose),
  diagnostics say WARN while it lasts and count occlusions and lost captures; the first pose after it is
  gated against the prediction widened by the gap and the twist spans the gap (no spike).
* ``~/recalibrate`` (``std_srvs/Trigger``): eq. (1) again at the current pose, the published pose kept
  (no jump), e.g. after the mocap cameras or the rigid-body definition changed.
Anything a callback raises is counted as ``unhandled`` and never ends the node.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from dynik_ros.core.quaternion import quaternion_from_rotation, rotation_from_quaternion
from dynik_ros.core.rolling import LOG_ROWS, RollingSamples
from dynik_ros.io import plausibility
from dynik_ros.nodes.base_estimation import (
    JUMP,
    OUTLIER,
    ROBOT_WORLDS,
    WORLD_ORIENTATIONS,
    EstimatorConfig,
    GapMonitor,
    MocapBaseEstimator,
    rpy_to_rotation,
    yaw_of,
)
from dynik_ros.nodes.calibration_services import trigger_types
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    ConfigError,
    DynikLifecycleNode,
    ParamSpec,
    RejectionCounter,
    diagnostic_status,
    percentiles_ms,
)
from dynik_ros.nodes.conversions import (
    NAN,
    NON_ROTATION,
    OUT_OF_ORDER,
    UNHANDLED,
    MessageRejected,
    odometry_msg,
    pose_from_msg,
)
from dynik_ros.nodes.node_process import run_node

# best effort like SENSOR_QOS, but deep: a simulated mocap delivers a physics chunk's captures (tens) at once
BURST_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=256,
    reliability=ReliabilityPolicy.BEST_EFFORT,
    durability=DurabilityPolicy.VOLATILE,
)
OUTLIER_REASON = "outlier"  # beyond the gate of the constant-twist prediction


class MocapNode(DynikLifecycleNode):
    """Lifecycle node turning a mocap rigid body into calibrated base odometry."""

    PARAMS = (
        ParamSpec(
            "calibration_samples",
            50,
            "Poses averaged (robustly) at start-up for the camera -> robot-world transform (eq. 1).",
            low=1,
            high=100000,
        ),
        ParamSpec(
            "rigid_body_in_base",
            [0.0] * 6,
            "The tracked rigid body in the robot's base frame (T_b,imu of eq. 1-2): x, y, z [m], roll, "
            "pitch, yaw [deg] (sim_node's mocap_marker_offset).",
            low=-1e3,
            high=1e3,
            length=6,
        ),
        ParamSpec(
            "calibration_still",
            [2.0, 0.2],
            "The calibration window's halves must agree within this (the robot standing; the window slides "
            "on until they do): [mm, deg].",
            low=1e-6,
            high=1e6,
            length=2,
        ),
        ParamSpec(
            "robot_world",
            "initial_base",
            "'initial_base': eq. 1, the world on the floor under the initial base (the seed); 'camera': "
            "the mocap frame is the robot world.",
            choices=ROBOT_WORLDS,
        ),
        ParamSpec(
            "world_orientation",
            "heading",
            "Robot-world axes: the initial base's heading (z stays vertical) or its full orientation.",
            choices=WORLD_ORIENTATIONS,
        ),
        ParamSpec(
            "ground_height",
            0.0,
            "Height of the floor in the mocap frame (its z axis is up) [m].",
            low=-1e4,
            high=1e4,
        ),
        ParamSpec(
            "robot",
            "",
            "Robot name (registry) or retargeting YAML: initial_base_position / _yaw are taken from its IK "
            "start pose (the IK's world is then the robot world). '' = use the parameters.",
        ),
        ParamSpec(
            "initial_base_position",
            [0.0, 0.0],
            "Robot-world x, y of the floor point under the initial base [m].",
            low=-1e4,
            high=1e4,
            length=2,
        ),
        ParamSpec(
            "initial_base_yaw",
            0.0,
            "Initial base heading in the robot world [rad].",
            low=-math.pi,
            high=math.pi,
        ),
        ParamSpec(
            "velocity_window",
            0.02,
            "Finite difference of the twist over the poses of this window [s].",
            low=0.0,
            high=1.0,
        ),
        ParamSpec(
            "velocity_cutoff",
            10.0,
            "Low-pass cutoff of the finite-difference twist [Hz] (0 = raw).",
            low=0.0,
            high=1000.0,
        ),
        ParamSpec(
            "max_dt", 0.1, "Longer gaps between poses restart the twist estimate [s].", low=1e-4, high=10.0
        ),
        ParamSpec(
            "outlier_gate",
            [0.02, 5.0],
            "A pose further than this from the constant-twist prediction is an outlier: [m, deg].",
            low=1e-6,
            high=1e3,
            length=2,
        ),
        ParamSpec(
            "max_base_acceleration",
            [20.0, 200.0],
            "Widens the gate by a dt^2 / 2 over gaps: linear [m/s^2], angular [rad/s^2].",
            low=0.0,
            high=1e6,
            length=2,
        ),
        ParamSpec(
            "jump_confirm",
            3,
            "Consecutive consistent poses outside the gate that are followed as a real jump.",
            low=1,
            high=1000,
        ),
        ParamSpec(
            "occlusion_timeout",
            0.02,
            "No pose for this long is an occlusion: counted, WARN in diagnostics [s].",
            low=1e-4,
            high=10.0,
        ),
        ParamSpec(
            "predict_to_receive_time",
            False,
            "Publish the pose predicted with the twist to the reception time (stamped so) instead of the "
            "capture-stamped pose.",
        ),
        ParamSpec("max_prediction", 0.05, "Most latency compensated by prediction [s].", low=0.0, high=1.0),
        ParamSpec(
            "max_body_distance",
            1000.0,
            "Rigid-body poses further from the mocap origin are implausible and refused [m].",
            low=1e-3,
            high=1e12,
        ),
        ParamSpec(
            "max_body_speed",
            50.0,
            "A pose that moved faster than this (plus 0.5 m) since the last accepted one is refused [m/s].",
            low=1e-3,
            high=1e12,
        ),
        ParamSpec(
            "max_body_angular_speed",
            100.0,
            "A pose that turned faster than this (plus 1 rad) since the last accepted one is refused "
            "[rad/s].",
            low=1e-3,
            high=1e12,
        ),
        ParamSpec("world_frame", "world", "header.frame_id of the odometry."),
        ParamSpec("base_frame", "base_link", "child_frame_id of the odometry (the robot's base link)."),
        ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
    )

    def __init__(self, node_name: str = "mocap_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._sub = self._pub = self._diag_pub = self._diag_timer = self._srv = None
        self.estimator: MocapBaseEstimator | None = None
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.rejections = RejectionCounter(
            (NAN, NON_ROTATION, OUT_OF_ORDER, *plausibility.REASONS, OUTLIER_REASON, UNHANDLED)
        )
        self.received = 0
        self.published = 0
        self.rebased = 0
        self.jumps = 0
        self.recalibrations = 0
        self._last_ns: int | None = None
        self._last_receive_ns: int | None = None
        self._refused_since_report = 0
        self._occlusions_reported = 0
        self.latencies = RollingSamples(10_000)
        # what was published: (stamp [s], x, y, z, qx, qy, qz, qw), for the run's figures
        self.published_log = RollingSamples(LOG_ROWS, width=8)
        params = getattr(self, "params", None) or {}
        self.gaps = GapMonitor(params.get("occlusion_timeout", 0.02))
        self.plausible = plausibility.PlausibilityGuard(
            params.get("max_body_distance", 1000.0),
            params.get("max_body_speed", 50.0),
            params.get("max_body_angular_speed", 100.0),
        )

    def _initial_base(self, p: dict[str, Any]) -> tuple[float, float, float]:
        """x, y and heading of the initial base in the robot world: the parameters, or the IK's start pose
        of ``robot``."""
        if not p["robot"]:
            return (*p["initial_base_position"], p["initial_base_yaw"])
        try:
            from dynik_ros.retarget.registry import load_robot

            q0 = load_robot(p["robot"]).initial_configuration()
        except (FileNotFoundError, KeyError, ValueError, ImportError) as exc:
            raise ConfigError("robot", str(exc).strip("'\"")) from None
        return float(q0[0]), float(q0[1]), yaw_of(rotation_from_quaternion(q0[3:7]))

    def _configure(self, p: dict[str, Any]) -> None:
        body = p["rigid_body_in_base"]
        initial = self._initial_base(p)
        gate, accel = p["outlier_gate"], p["max_base_acceleration"]
        self.estimator = MocapBaseEstimator(
            EstimatorConfig(
                rigid_body_position=np.array(body[:3], dtype=float),
                rigid_body_rotation=rpy_to_rotation(*np.radians(body[3:])),
                calibration_samples=p["calibration_samples"],
                robot_world=p["robot_world"],
                world_orientation=p["world_orientation"],
                ground_height=p["ground_height"],
                initial_position=initial[:2],
                initial_yaw=initial[2],
                velocity_window=p["velocity_window"],
                cutoff_hz=p["velocity_cutoff"],
                max_dt=p["max_dt"],
                gate_position=gate[0],
                gate_angle=math.radians(gate[1]),
                max_acceleration=accel[0],
                max_angular_acceleration=accel[1],
                confirm=p["jump_confirm"],
                still_position=p["calibration_still"][0] * 1e-3,
                still_angle=math.radians(p["calibration_still"][1]),
            )
        )
        self._reset_counts()
        self._pub = self.create_lifecycle_publisher(Odometry, "/robot/base_odom", RELIABLE_QOS)
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        self._sub = self.create_subscription(PoseStamped, "/mocap/rigid_body", self._on_pose, BURST_QOS)
        trigger, _ = trigger_types()
        self._srv = self.create_service(trigger, "~/recalibrate", self._on_recalibrate)

    def _activate(self) -> None:
        self._diag_timer = self.create_timer(self.params["diagnostics_period"], self.publish_diagnostics)

    def _deactivate(self) -> None:
        self.destroy_entities([self._diag_timer])
        self._diag_timer = None

    def _release(self) -> None:
        self.destroy_entities([self._diag_timer, self._sub, self._pub, self._diag_pub, self._srv])
        self._sub = self._pub = self._diag_pub = self._diag_timer = self._srv = None
        self.estimator = None

    def _refuse(self, reason: str, detail: str) -> None:
        self.rejections.add(reason, detail)
        self._refused_since_report += 1
        self.get_logger().warning(f"rigid body pose refused ({reason}: {detail})", throttle_duration_sec=1.0)

    # ----------------------------------------------------------------- inputs
    def _on_pose(self, msg: PoseStamped) -> None:
        if not self.active or self.estimator is None:
            return
        self.received += 1
        try:
            self._process(msg)
        except Exception as exc:  # noqa: BLE001 - no input may end the node: count, log, keep running
            self._refuse(UNHANDLED, f"{type(exc).__name__}: {exc}")

    def _process(self, msg: PoseStamped) -> None:
        now_ns = self.get_clock().now().nanoseconds
        try:
            stamp, position, rotation = pose_from_msg(msg)
            if self._last_ns is not None and stamp <= self._last_ns:
                raise MessageRejected(
                    OUT_OF_ORDER, f"stamp {(self._last_ns - stamp) * 1e-6:.3f} ms before the previous"
                )
        except MessageRejected as exc:
            self._refuse(exc.reason, exc.detail)
            return
        self._last_receive_ns = now_ns
        gap = self.gaps.add(stamp)
        if gap:
            self.get_logger().warning(
                f"rigid body occluded for {gap * 1e3:.1f} ms (resumed)", throttle_duration_sec=1.0
            )
        dt = (stamp - self._last_ns) * 1e-9 if self._last_ns is not None else 0.0
        reason, detail = self.plausible.check(position[None], rotation[None], None, None, dt)
        if reason is not None and reason != "rebased":
            self._refuse(reason, detail)
            return
        if reason == "rebased":  # the body is somewhere else now: no velocity across the jump
            self.rebased += 1
            self.get_logger().warning(f"rigid body re-based: {detail}")
            self.estimator.restart_velocity()
        self._last_ns = stamp
        verdict, state = self.estimator.update(stamp, position, rotation)
        if verdict == OUTLIER:
            self._refuse(OUTLIER_REASON, f"pose at {stamp * 1e-9:.4f} s outside the gate of the prediction")
            return
        if verdict == JUMP:
            self.jumps += 1
            self.get_logger().warning("rigid body jumped and stayed: followed, twist restarted")
        if state is None:
            return
        self.latencies.append((now_ns - stamp) * 1e-9)
        p = self.params
        if p["predict_to_receive_time"]:
            state = state.predicted(stamp + int(min(max(now_ns - stamp, 0), p["max_prediction"] * 1e9)))
        self._publish(state)

    def _publish(self, state: Any) -> None:
        p = self.params
        self._pub.publish(
            odometry_msg(
                state.stamp_ns,
                p["world_frame"],
                p["base_frame"],
                state.position,
                state.rotation,
                state.linear_velocity,
                state.angular_velocity,
            )
        )
        self.published_log.append(
            (
                state.stamp_ns * 1e-9,
                *state.position.tolist(),
                *quaternion_from_rotation(state.rotation).tolist(),
            )
        )
        self.published += 1

    def _on_recalibrate(self, request: Any, response: Any) -> Any:
        if self.estimator is None or not self.active:
            response.success, response.message = False, "recalibration refused: mocap_node is not active"
            return response
        try:
            moved, turned = self.estimator.recalibrate()
        except RuntimeError as exc:
            response.success, response.message = False, f"recalibration refused: {exc}"
            self.get_logger().error(response.message)
            return response
        self.recalibrations += 1
        self.plausible = plausibility.PlausibilityGuard(  # its history is in the old camera coordinates
            self.params["max_body_distance"],
            self.params["max_body_speed"],
            self.params["max_body_angular_speed"],
        )
        self._last_ns = None
        response.success = True
        response.message = (
            f"camera -> robot world re-solved at the current pose (eq. 1, the published base pose kept): "
            f"moved {moved * 1e3:.1f} mm, turned {math.degrees(turned):.2f} deg"
        )
        self.get_logger().info(response.message)
        return response

    def is_ready(self) -> bool:
        """Calibrated (the pipeline runner starts the motion only then: eq. 1 wants the robot still)."""
        return self.estimator is not None and self.estimator.calibrated

    # ----------------------------------------------------------------- diagnostics
    def occluded_for(self) -> float:
        """Seconds since the last pose arrived (node clock) beyond ``occlusion_timeout``, else 0."""
        if self._last_receive_ns is None:
            return 0.0
        age = (self.get_clock().now().nanoseconds - self._last_receive_ns) * 1e-9
        return age if age > self.params["occlusion_timeout"] else 0.0

    def publish_diagnostics(self) -> None:
        if not self.active or self._diag_pub is None:
            return
        try:
            self._publish_diagnostics()
        except Exception as exc:  # noqa: BLE001 - a diagnostics problem must not end the node
            self._refuse(UNHANDLED, f"diagnostics: {type(exc).__name__}: {exc}")

    def _publish_diagnostics(self) -> None:
        calibrated = self.estimator is not None and self.estimator.calibrated
        occluded = self.occluded_for()
        gaps = self.gaps
        level, message = DiagnosticStatus.OK, "calibrated"
        if not calibrated:
            level, message = DiagnosticStatus.WARN, "calibrating (waiting for /mocap/rigid_body)"
            if self.estimator is not None and self.estimator.calibration_restarts:
                message = "calibrating: waiting for the robot to stand still"
        if occluded:
            level, message = DiagnosticStatus.WARN, f"occluded for {occluded * 1e3:.0f} ms: holding"
        elif gaps.occlusions > self._occlusions_reported:
            level = DiagnosticStatus.WARN
            message += f"; {gaps.occlusions - self._occlusions_reported} occlusions since the last report"
        if self._refused_since_report:
            level = DiagnosticStatus.WARN
            message += (
                f"; {self._refused_since_report} poses refused since the last report, last: "
                f"{self.rejections.last_detail}"
            )
        self._refused_since_report = 0
        self._occlusions_reported = gaps.occlusions
        latency = percentiles_ms(self.latencies.recent(1000) if len(self.latencies) else [])
        values: dict[str, Any] = {
            "received": self.received,
            "published": self.published,
            "calibrated": calibrated,
            "occluded_now_ms": occluded * 1e3,
            "occlusions": gaps.occlusions,
            "missed_captures": gaps.missed,
            "longest_occlusion_ms": gaps.longest * 1e3,
            "jumps": self.jumps,
            "rebased": self.rebased,
            "recalibrations": self.recalibrations,
            "calibration_restarts": self.estimator.calibration_restarts if self.estimator else 0,
            "latency_p50_ms": latency["p50"],
            "latency_max_ms": latency["max"],
        }
        values.update({f"rejected_{k}": v for k, v in self.rejections.counts.items()})
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [diagnostic_status(f"{self.get_name()}: base odometry", "mocap", level, message, values)]
        self._diag_pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    return run_node(MocapNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
