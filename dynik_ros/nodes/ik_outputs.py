"""ik_node's outputs per sample and its diagnostics: a mixin of :class:`dynik_ros.nodes.ik_node.IKNode`.

Per step: ``/dynik/joint_states`` and ``/dynik/base_odom`` serialized from templates
(:mod:`~dynik_ros.nodes.cdr_writer`), the world -> base transform on ``/tf`` when ``tf2_msgs`` is importable
and, with ``use_base_odom``, the base log. Once per ``diagnostics_period``: one ``DiagnosticArray`` with the
solve times, the QP's status, the tracking errors and the refused inputs by reason.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from dynik_ros.core.quaternion import rotation_from_quaternion
from dynik_ros.nodes.cdr_writer import TFMessageWriter, publish_serialized
from dynik_ros.nodes.common import RELIABLE_QOS, diagnostic_status, percentiles_ms
from dynik_ros.nodes.conversions import joint_state_msg, odometry_msg, transform_stamped

_TF_NOTICE_GIVEN = False


class IKOutputs:
    """Mixin for ik_node: ``/tf`` set-up, the per-sample outputs and the diagnostics."""

    params: dict[str, Any]
    _pub_tf: Any
    _tf_type: Any

    def _setup_tf(self) -> None:
        global _TF_NOTICE_GIVEN
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            if not _TF_NOTICE_GIVEN:
                _TF_NOTICE_GIVEN = True
                self.get_logger().warning(
                    "publish_tf is true but the Python package tf2_msgs is not importable: the world -> base "
                    "transform is NOT published on /tf (install tf2_msgs, e.g. ros-<distro>-tf2-msgs, or use "
                    "/dynik/base_odom). This notice is given once."
                )
            self.tf_available = False
            return
        self._tf_type = TFMessage
        self._pub_tf = self.create_lifecycle_publisher(TFMessage, "/tf", RELIABLE_QOS)
        self._tf_writer = TFMessageWriter(self.params["world_frame"], self.base_frame)
        self.tf_available = True

    def _publish_state(self, stamp: int, q: np.ndarray, v: np.ndarray) -> None:
        """Joint states, base odometry and /tf serialized from templates (``cdr_writer``): no Python message
        objects on the sample path."""
        nb = self.robot.base_dofs
        if self.robot.floating_base:  # q = (p, quaternion x y z w, s): no round trip through a matrix
            p, quaternion, s = q[:3], q[3:7], q[7:]
        else:
            p, quaternion, s = np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), q
        names, world = self.robot.joint_names, self.params["world_frame"]
        publish_serialized(
            self._pub_js,
            self._js_writer.serialize(stamp, s, v[nb:]),
            lambda: joint_state_msg(stamp, names, s, v[nb:]),
        )
        publish_serialized(
            self._pub_odom,
            self._odom_writer.serialize(stamp, p, quaternion, v[:3], v[3:6]),
            lambda: odometry_msg(
                stamp, world, self.base_frame, p, rotation_from_quaternion(quaternion), v[:3], v[3:6]
            ),
        )
        if self.params["use_base_odom"]:
            now = self.get_clock().now().nanoseconds * 1e-9  # when the IK answered (sim time with /clock)
            self.base_log.append((stamp * 1e-9, *p.tolist(), *quaternion.tolist(), now))
        if self._pub_tf is not None:

            def message() -> Any:  # an rclpy without serialized publishing
                rotation = rotation_from_quaternion(quaternion)
                transform = transform_stamped(stamp, world, self.base_frame, p, rotation)
                return self._tf_type(transforms=[transform])

            publish_serialized(self._pub_tf, self._tf_writer.serialize(stamp, p, quaternion), message)

    def publish_diagnostics(self) -> None:
        """One DiagnosticArray: solve-time stats (last 500 steps), QP status, MNTE/RMSE (last 100
        evaluations) and cumulative counts of refused inputs by reason."""
        if not self.active or self._pub_diag is None:
            return
        times, errors = self.solve_times.recent(500), self.errors.recent(100)  # the recent past
        st = percentiles_ms(times)

        def mean(k: int) -> float:
            return float(np.nanmean(errors[:, k])) if len(errors) else math.nan

        values: dict[str, Any] = {
            "model": self.model_label,
            "received": self.received,
            "steps": self.steps,
            "solve_time_p50_ms": st["p50"],
            "solve_time_p99_ms": st["p99"],
            "solve_time_max_ms": st["max"],
            "qp_status": self.last_qp_status,
            "qp_failures": self.qp_failures,
            "mnte": mean(1),
            "angular_velocity_rmse": mean(2),
            "position_rmse": mean(3),
            "dt_clamped": self.dt_clamped,
            "sub_steps": self.sub_steps,
            "settle_time_ms": 1e3 * self.settle_time,
            "calibration_time_ms": 1e3 * self.calibration_time,
            "held_steps": self.held_steps,
            "rebased": self.rebased,
            "returned": self.returned,
            "rejected_total": self.rejections.total,
            # readers the joint-state writer has matched: a runner waits on it before starting a source
            "output_subscribers": self._pub_js.get_subscription_count() if self._pub_js is not None else 0,
        }
        values.update({f"rejected_{k}": v for k, v in self.rejections.counts.items()})
        floor = getattr(getattr(self.ik, "extra", None), "floor", None)
        if floor is not None:  # steps whose floor rows were softened or left out (core/floor_rows.py)
            values.update({f"floor_rows_{k}": v for k, v in floor.counts.items()})
        priority = getattr(getattr(self.ik, "extra", None), "priority", None)
        if priority is not None:  # steps whose stance rows gave way to the limits (core/stance_priority.py)
            values.update({f"stance_rows_{k}": v for k, v in priority.counts.items()})
        if self.params["use_base_odom"]:
            values["base_odom_missing"] = self.base_odom_missing
            values["base_odom_ahead"] = self.base_odom_ahead
        level, message = DiagnosticStatus.OK, "tracking"
        if self.qp_failures or self.rejections.total:
            level = DiagnosticStatus.WARN
            message = f"{self.rejections.total} inputs refused, {self.qp_failures} QP failures"
            if self.rejections.last_detail:
                message += f"; last: {self.rejections.last_detail}"
        if not len(times) and self.steps == 0:
            level, message = DiagnosticStatus.WARN, "waiting for /human/link_states"
            if self.received and self._calibrate_at is not None:
                after = self.params["calibrate_after"]
                message = f"recording the stream's first {after:g} s to calibrate on its subject"
        if self.held:
            level = DiagnosticStatus.ERROR
            message = f"IK held: the last QP failed ({self.last_qp_status}); no output until it solves"
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [
            diagnostic_status(f"{self.get_name()}: dynamical IK", self.model_label, level, message, values)
        ]
        self._pub_diag.publish(msg)
