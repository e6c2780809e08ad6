"""``~/calibrate`` and ``~/reset`` (``std_srvs/Trigger``) of the suit side: wearable_node and ik_node.

* wearable_node: ``~/calibrate`` measures a :class:`~dynik_ros.io.suit_calibration.SuitCalibration` (world
  yaw and origin, per-segment orientation offsets) from the raw samples of the last
  ``calibration_window`` seconds while the person holds ``calibration_pose`` (T-pose or N-pose), applies it
  to every later sample and writes it to ``calibration_file`` (when set), which ``configure`` loads back.
  ``~/reset`` drops it (the file stays).
* ik_node with a robot: ``~/calibrate`` recomputes the retargeting calibration (offsets, scales) from the
  averaged window of the incoming link states in T-pose, keeps the robot where it stands (the new targets
  are approached at the IK's gains and speed caps, no jump), and writes ``calibration_file`` (when set),
  loaded back at ``configure``. ``~/reset`` starts the IK over from the next sample (as after activation).

The answers come at once, from samples already received: hold the pose for the window, then call. A
refused calibration says why (moved, wrong pose with the segment and angle, no samples) and changes
nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dynik_ros.io.suit_calibration import POSES, CalibrationError, PoseWindow, SuitCalibration
from dynik_ros.nodes.common import ConfigError, ParamSpec

CALIBRATION_PARAMS = (
    ParamSpec(
        "calibration_file",
        "",
        "~/calibrate writes the calibration to this YAML file; configure loads it when it exists (empty: "
        "not saved).",
    ),
    ParamSpec(
        "calibration_window",
        1.0,
        "~/calibrate averages the samples of the last this many seconds (hold the pose that long) [s].",
        low=0.05,
        high=30.0,
    ),
    ParamSpec(
        "calibration_max_pose_error",
        30.0,
        "~/calibrate refuses when a segment is further than this from the calibration pose [deg].",
        low=1.0,
        high=180.0,
    ),
)
SUIT_CALIBRATION_PARAMS = (
    *CALIBRATION_PARAMS,
    ParamSpec("calibration_pose", "tpose", "Pose held for ~/calibrate.", choices=POSES),
)


def trigger_types() -> tuple[Any, Any]:
    """``std_srvs/Trigger`` (imported here: a clear error if ros-<distro>-std-srvs is missing)."""
    try:
        from std_srvs.srv import Trigger
    except ImportError as exc:
        raise ConfigError(
            "calibration_file", f"the services need std_srvs (ros-<distro>-std-srvs / ros-std-srvs): {exc}"
        ) from None
    return Trigger, Trigger.Response


class SuitCalibrationServices:
    """Mixin for wearable_node: the window of raw samples, the calibration applied to published ones."""

    suit_calibration: SuitCalibration | None = None

    def _setup_suit_calibration(self, p: dict[str, Any]) -> list[Any]:
        """Load ``calibration_file`` if it exists; create the services. Returns them (to destroy)."""
        self.calibration_window = PoseWindow(p["calibration_window"])
        self.suit_calibration = None
        path = p["calibration_file"]
        if path and Path(path).expanduser().is_file():
            try:
                self.suit_calibration = SuitCalibration.load(path)
            except CalibrationError as exc:
                raise ConfigError("calibration_file", str(exc)) from None
            self.get_logger().info(f"suit calibration loaded from {path} ({self.suit_calibration.pose})")
        trigger, _ = trigger_types()
        return [
            self.create_service(trigger, "~/calibrate", self._on_calibrate),
            self.create_service(trigger, "~/reset", self._on_reset_calibration),
        ]

    def _calibrated(self, sample: Any) -> Any:
        """Record the raw sample in the window and return it calibrated (the same object when there is no
        calibration). ``sample`` has names, positions, quaternions and optional velocities."""
        window = getattr(self, "calibration_window", None)
        if window is not None:
            window.append(sample.stamp_ns, sample.names, sample.positions, sample.quaternions)
        calibration = self.suit_calibration
        if calibration is None:
            return sample
        p, q, v, w = calibration.apply_quaternions(
            sample.names,
            sample.positions,
            sample.quaternions,
            sample.linear_velocities,
            sample.angular_velocities,
        )
        return type(sample)(sample.stamp_ns, sample.names, p, q, v, w)

    def _on_calibrate(self, request: Any, response: Any) -> Any:
        p = self.params
        try:
            calibration = SuitCalibration.from_window(
                self.calibration_window.average(),
                pose=p["calibration_pose"],
                max_pose_error=math.radians(p["calibration_max_pose_error"]),
            )
            saved = calibration.save(p["calibration_file"]) if p["calibration_file"] else None
        except (CalibrationError, OSError) as exc:
            response.success, response.message = False, f"calibration refused: {exc}"
            self.get_logger().error(response.message)
            return response
        self.suit_calibration = calibration
        segment, angle = calibration.largest_offset()
        response.success = True
        response.message = (
            f"{calibration.pose} calibration from {calibration.samples} samples: heading "
            f"{math.degrees(calibration.yaw):.1f} deg removed, largest segment offset {segment} "
            f"{math.degrees(angle):.1f} deg" + (f"; saved to {saved}" if saved else "")
        )
        self.get_logger().info(response.message)
        return response

    def _on_reset_calibration(self, request: Any, response: Any) -> Any:
        had = self.suit_calibration is not None
        self.suit_calibration = None
        response.success = True
        response.message = "suit calibration dropped" if had else "no suit calibration was applied"
        if had and self.params["calibration_file"]:
            response.message += f" (the file {self.params['calibration_file']} is kept)"
        self.get_logger().info(response.message)
        return response


class RetargetCalibrationServices:
    """Mixin for ik_node: ``~/calibrate`` (robot: the retargeting calibration from a held T-pose) and
    ``~/reset`` (the IK starts over from the next sample)."""

    calibration_window: PoseWindow | None = None

    def _setup_retarget_calibration(self, p: dict[str, Any]) -> list[Any]:
        self.calibration_window = PoseWindow(p["calibration_window"]) if self.retargeter is not None else None
        trigger, _ = trigger_types()
        return [
            self.create_service(trigger, "~/calibrate", self._on_calibrate),
            self.create_service(trigger, "~/reset", self._on_reset),
        ]

    def _record_for_calibration(self, links: Any) -> None:
        if self.calibration_window is not None:
            self.calibration_window.append(links.stamp_ns, links.names, links.positions, links.rotations)

    def _on_calibrate(self, request: Any, response: Any) -> Any:
        p = self.params
        if self.retargeter is None:
            response.success = False
            response.message = (
                f"{self.model_label} tracks the links as measured: calibrate the suit side instead "
                "(wearable_node's ~/calibrate)"
            )
            return response
        try:
            average = self.calibration_window.average()
            # the same stillness and T-pose checks as the suit's calibration (the result is not applied)
            SuitCalibration.from_window(
                average, "tpose", max_pose_error=math.radians(p["calibration_max_pose_error"])
            )
            poses = dict(
                zip(average.names, zip(average.positions, average.rotations, strict=True), strict=True)
            )
            calibration = self.retargeter.calibrate(poses)
            saved = calibration.save(p["calibration_file"]) if p["calibration_file"] else None
        except (CalibrationError, ValueError, KeyError, OSError) as exc:
            response.success, response.message = False, f"calibration refused: {exc}"
            self.get_logger().error(response.message)
            return response
        if self.ik is not None:
            self.retargeter.reset(self.ik.q)  # re-align onto the robot as it stands: no jump
            self._rebase_pending = True  # the IK's reference x_{k-1} is in the old alignment
        response.success = True
        response.message = (
            f"retargeting calibration of {self.model_label} from {average.samples} T-pose samples: "
            f"root scale {calibration.root_scale:.3f}" + (f"; saved to {saved}" if saved else "")
        )
        self.get_logger().info(response.message)
        return response

    def _on_reset(self, request: Any, response: Any) -> Any:
        self.restart_stream()
        response.success = True
        response.message = "IK reset: the next sample starts it over (as after activation)"
        self.get_logger().info(response.message)
        return response
