"""ik_node's base with a robot's external base estimate (mocap_node's ``/robot/base_odom``) and the base
target it publishes (``/dynik/base_target``): a mixin of :class:`dynik_ros.nodes.ik_node.IKNode`.

* ``use_base_odom``: the newest odometry is kept with its twist; before each IK step the base is set to
  it, moved with its twist (``base_odom_extrapolate``) to the start of the step (the previous link-state
  stamp: the step integrates from there to the current one). mocap_node stamps its odometry with the
  capture time, so this is where its latency is compensated. When the IK lags (its input queued more than
  ``base_odom_timeout`` behind the odometry) the base is taken as it is (``base_odom_ahead``): the
  commands act on the robot as it is now. Odometry older than the stamp by more than the timeout is
  ignored (``base_odom_missing``) and the IK estimates the base itself. With ``base_odom_velocity`` the
  step's base twist is held at the odometry's (:meth:`DynamicalIK.set_base_velocity`): the joints are
  solved for the base moving as measured, not as the QP would move it.
* ``publish_base_target`` (robot only): the retargeted human root -- the position and orientation targets
  of the map's root frame with their velocities -- as ``Odometry``, one per output. It depends on the human
  only, never on the base feedback, so a simulated robot's harness can follow it while the IK's base comes
  from the mocap that watches that robot (no circle).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pinocchio as pin
from nav_msgs.msg import Odometry

from dynik_ros.core.targets import Measurements
from dynik_ros.nodes.common import RELIABLE_QOS, ConfigError
from dynik_ros.nodes.conversions import odometry_from_msg, odometry_msg


class BaseFeedback:
    """Mixin for ik_node: base odometry in, base target out (see the module docstring)."""

    params: dict[str, Any]
    _odom: Any
    _pub_target: Any

    def _setup_base_target(self) -> None:
        """The base's rows in the retargeter's measurements (its position and orientation targets)."""
        if self.retargeter is None:
            raise ConfigError(
                "publish_base_target", "needs a robot (robot:=...): a human model has no target"
            )
        root = self.retargeter.config.root.frame
        positions = [t.frame for t in self.targets.position_targets]
        orientations = [t.frame for t in self.targets.orientation_targets]
        if root not in positions:
            raise ConfigError("publish_base_target", f"the map has no position target on its root '{root}'")
        self._target_rows = (
            positions.index(root),
            orientations.index(root) if root in orientations else None,
        )
        self._pub_target = self.create_lifecycle_publisher(Odometry, "/dynik/base_target", RELIABLE_QOS)

    def _publish_base_target(self, stamp: int, measurements: Measurements) -> None:
        """The root's targets as Odometry (twist in the target frame, REP 105); without an orientation
        target the IK's base orientation stands in."""
        i, j = self._target_rows
        position = measurements.positions[i]
        rotation = measurements.rotations[j] if j is not None else self.ik.base_rotation
        zero = np.zeros(3)
        linear = measurements.linear_velocities[i] if measurements.linear_velocities is not None else zero
        angular = (
            measurements.angular_velocities[j]
            if j is not None and measurements.angular_velocities is not None
            else zero
        )
        self._pub_target.publish(
            odometry_msg(
                stamp,
                self.params["world_frame"],
                self.base_frame,
                position,
                rotation,
                rotation.T @ linear,
                rotation.T @ angular,
            )
        )

    def _on_odom(self, msg: Odometry) -> None:
        try:
            stamp, position, rotation = odometry_from_msg(msg)
            t = msg.twist.twist  # base frame (REP 105)
            twist = np.array([t.linear.x, t.linear.y, t.linear.z, t.angular.x, t.angular.y, t.angular.z])
            if not np.all(np.isfinite(twist)):
                twist = np.zeros(6)
            self._odom = (stamp, position, rotation, twist)
        except Exception as exc:  # noqa: BLE001 - MessageRejected or anything else: never fatal
            self.get_logger().warning(f"base odometry refused: {exc}", throttle_duration_sec=2.0)

    def _apply_base_odom(self, stamp: int) -> None:
        """The newest odometry, moved with its twist to ``stamp`` when within ``base_odom_timeout`` of it;
        as it is when ``stamp`` is older still (the IK lags: its commands act on the robot as it is now);
        ignored (the base estimated, counted) when it is older than ``stamp`` by more than the timeout."""
        if not self.params["use_base_odom"]:
            return
        odom, timeout = self._odom, self.params["base_odom_timeout"] * 1e9
        if odom is None or stamp - odom[0] > timeout:
            self.base_odom_missing += 1
            self.get_logger().warning(
                "no base odometry close to the link-state stamps: the base is estimated",
                throttle_duration_sec=2.0,
            )
            return
        position, rotation = odom[1], odom[2]
        if odom[0] - stamp > timeout:
            self.base_odom_ahead += 1
        elif self.params["base_odom_extrapolate"]:  # to the link-state stamp with the odometry's twist
            dt = (stamp - odom[0]) * 1e-9
            position = position + rotation @ odom[3][:3] * dt
            rotation = rotation @ pin.exp3(odom[3][3:] * dt)
        self.ik.set_base_pose(position, rotation)
        if self.params["base_odom_velocity"]:  # the twist as measured, in the world frame (nu's base rows)
            self.ik.set_base_velocity(odom[2] @ odom[3][:3], odom[2] @ odom[3][3:])
