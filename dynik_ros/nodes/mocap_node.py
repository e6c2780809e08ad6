"""``mocap_node``: optical-mocap rigid body (``/mocap/rigid_body``, ``PoseStamped``) -> robot base odometry
(``/robot/base_odom``, ``Odometry``) for the IK's ``use_base_odom`` mode and for controllers.

After activation the first ``calibration_samples`` poses calibrate the world alignment (see
:mod:`dynik_ros.nodes.base_estimation`); odometry is published from then on, one message per pose, with
the source stamp. NaN poses, non-unit quaternions, out-of-order stamps and physically implausible poses
(further than ``max_body_distance`` from the origin, or jumped beyond ``max_body_speed`` /
``max_body_angular_speed`` times the stamp interval, plus 0.5 m / 1 rad, since the last accepted pose;
:mod:`dynik_ros.io.plausibility`) are refused and counted. A jump that stays (3 consecutive poses agreeing
with each other at the new place) is accepted: odometry goes on from there with the velocity estimate
restarted. Anything else a callback raises is counted as ``unhandled`` and never ends the node.
"""

from __future__ import annotations

import math
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry

from dynik_ros.io import plausibility
from dynik_ros.nodes.base_estimation import MocapBaseEstimator, rpy_to_rotation
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    SENSOR_QOS,
    DynikLifecycleNode,
    ParamSpec,
    RejectionCounter,
    diagnostic_status,
)
from dynik_ros.nodes.conversions import (
    NAN,
    NON_ROTATION,
    OUT_OF_ORDER,
    MessageRejected,
    odometry_msg,
    pose_from_msg,
)
from dynik_ros.nodes.node_process import run_node

UNHANDLED = "unhandled"  # an exception the callback did not expect: counted, logged, never fatal


class MocapNode(DynikLifecycleNode):
    """Lifecycle node turning a mocap rigid body into calibrated base odometry."""

    PARAMS = (
        ParamSpec(
            "calibration_samples",
            50,
            "Poses averaged at start-up for the world alignment.",
            low=1,
            high=100000,
        ),
        ParamSpec(
            "base_offset",
            [0.0] * 6,
            "Pose of the robot base in the rigid-body frame: x, y, z [m], roll, pitch, yaw [rad].",
            low=-10.0,
            high=10.0,
            length=6,
        ),
        ParamSpec(
            "align_world", True, "Move the world so the calibrated base starts at initial_base_position/yaw."
        ),
        ParamSpec(
            "initial_base_position",
            [0.0, 0.0, 0.0],
            "Calibrated base position in the world [m].",
            low=-1e4,
            high=1e4,
            length=3,
        ),
        ParamSpec(
            "initial_base_yaw", 0.0, "Calibrated base heading in the world [rad].", low=-math.pi, high=math.pi
        ),
        ParamSpec(
            "velocity_cutoff",
            10.0,
            "Low-pass cutoff of the finite-difference twist [Hz] (0 = raw).",
            low=0.0,
            high=1000.0,
        ),
        ParamSpec(
            "max_dt", 0.1, "Larger gaps between poses restart the velocity estimate [s].", low=1e-4, high=10.0
        ),
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
        self._sub = self._pub = self._diag_pub = self._diag_timer = None
        self.estimator: MocapBaseEstimator | None = None
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.rejections = RejectionCounter(
            (NAN, NON_ROTATION, OUT_OF_ORDER, *plausibility.REASONS, UNHANDLED)
        )
        self.received = 0
        self.published = 0
        self.rebased = 0
        self._last_ns: int | None = None
        params = getattr(self, "params", None) or {}
        self.plausible = plausibility.PlausibilityGuard(
            params.get("max_body_distance", 1000.0),
            params.get("max_body_speed", 50.0),
            params.get("max_body_angular_speed", 100.0),
        )

    def _configure(self, p: dict[str, Any]) -> None:
        offset = p["base_offset"]
        self.estimator = MocapBaseEstimator(
            offset[:3],
            rpy_to_rotation(*offset[3:]),
            p["calibration_samples"],
            p["initial_base_position"],
            p["initial_base_yaw"],
            p["align_world"],
            p["velocity_cutoff"],
            p["max_dt"],
        )
        self._reset_counts()
        self._pub = self.create_lifecycle_publisher(Odometry, "/robot/base_odom", RELIABLE_QOS)
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        self._sub = self.create_subscription(PoseStamped, "/mocap/rigid_body", self._on_pose, SENSOR_QOS)

    def _activate(self) -> None:
        self._diag_timer = self.create_timer(self.params["diagnostics_period"], self.publish_diagnostics)

    def _deactivate(self) -> None:
        self.destroy_entities([self._diag_timer])
        self._diag_timer = None

    def _release(self) -> None:
        self.destroy_entities([self._diag_timer, self._sub, self._pub, self._diag_pub])
        self._sub = self._pub = self._diag_pub = self._diag_timer = None
        self.estimator = None

    def _refuse(self, reason: str, detail: str) -> None:
        self.rejections.add(reason, detail)
        self.get_logger().warning(f"rigid body pose refused ({reason}: {detail})", throttle_duration_sec=1.0)

    def _on_pose(self, msg: PoseStamped) -> None:
        if not self.active or self.estimator is None:
            return
        self.received += 1
        try:
            self._process(msg)
        except Exception as exc:  # noqa: BLE001 - no input may end the node: count, log, keep running
            self._refuse(UNHANDLED, f"{type(exc).__name__}: {exc}")

    def _process(self, msg: PoseStamped) -> None:
        try:
            stamp, position, rotation = pose_from_msg(msg)
            if self._last_ns is not None and stamp <= self._last_ns:
                raise MessageRejected(
                    OUT_OF_ORDER, f"stamp {(self._last_ns - stamp) * 1e-6:.3f} ms before the previous"
                )
        except MessageRejected as exc:
            self._refuse(exc.reason, exc.detail)
            return
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
        state = self.estimator.update(stamp, position, rotation)
        if state is None:
            return
        p = self.params
        self._pub.publish(
            odometry_msg(
                stamp,
                p["world_frame"],
                p["base_frame"],
                state.position,
                state.rotation,
                state.linear_velocity,
                state.angular_velocity,
            )
        )
        self.published += 1

    def publish_diagnostics(self) -> None:
        if not self.active or self._diag_pub is None:
            return
        try:
            self._publish_diagnostics()
        except Exception as exc:  # noqa: BLE001 - a diagnostics problem must not end the node
            self._refuse(UNHANDLED, f"diagnostics: {type(exc).__name__}: {exc}")

    def _publish_diagnostics(self) -> None:
        calibrated = self.estimator is not None and self.estimator.calibrated
        level = DiagnosticStatus.OK if calibrated and not self.rejections.total else DiagnosticStatus.WARN
        message = "calibrated" if calibrated else "calibrating (waiting for /mocap/rigid_body)"
        if self.rejections.total:
            message += f"; {self.rejections.total} poses refused, last: {self.rejections.last_detail}"
        values: dict[str, Any] = {
            "received": self.received,
            "published": self.published,
            "calibrated": calibrated,
            "rebased": self.rebased,
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
