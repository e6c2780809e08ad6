"""``~/calibrate`` and ``~/reset`` (``std_srvs/Trigger``) of the suit side: wearable_node and ik_node.

* wearable_node: ``~/calibrate`` measures a :class:`~dynik_ros.io.suit_calibration.SuitCalibration` (world
  yaw and origin, per-segment orientation offsets) from the raw samples of the last
  ``calibration_window`` seconds while the person holds ``calibration_pose`` (T-pose or N-pose), applies it
  to every later sample and writes it to ``calibration_file`` (when set), which ``configure`` loads back.
  ``~/reset`` drops it (the file stays).
* ik_node with a robot: ``~/calibrate`` recomputes the retargeting calibration (offsets, scales) from the
  window of the incoming link states: averaged in T-pose (``calibration_pose`` ``tpose``), or, with
  ``motion``, the stream's own subject in T-pose built from any motion by
  :func:`~dynik_ros.io.skeleton_tpose.skeleton_tpose` (the rigid segment offsets are in every sample; the
  ankle heights are the window's lowest foot heights, so the window must include standing), as
  ``dynik-retarget`` calibrates a capture. It keeps the robot where it stands (the new targets are approached
  at the IK's gains and speed caps, no jump), and writes ``calibration_file`` (when set), loaded back at
  ``configure``. ``calibrate_after`` N (s) does the ``motion`` calibration once per configure, on the
  stream's first N s: the IK waits for them (nothing is published), then starts on the calibrated subject as
  at any stream start (a refused calibration is logged and the IK starts on the one it had).
  ``~/reset`` starts the IK over from the next sample (as after activation).

The answers come at once, from samples already received: hold the pose for the window, then call. A
refused calibration says why (moved, wrong pose with the segment and angle, no samples) and changes
nothing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dynik_ros.io.skeleton_tpose import MIN_SAMPLES, skeleton_tpose
from dynik_ros.io.suit_calibration import POSES, CalibrationError, PoseWindow, SuitCalibration
from dynik_ros.nodes.common import ConfigError, ParamSpec, wall_time

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
        "~/calibrate uses the samples of the last this many seconds (hold the pose that long; ik_node's "
        "calibration_pose motion: any motion that includes standing) [s].",
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
MOTION = "motion"  # ik_node's calibration on the stream's own subject (io/skeleton_tpose.py)
RETARGET_CALIBRATION_PARAMS = (
    *CALIBRATION_PARAMS,
    ParamSpec(
        "calibration_pose",
        "tpose",
        "Robot: what the ~/calibrate window holds: 'tpose' (a held T-pose, averaged) or 'motion' (any "
        "motion that includes standing: the stream's subject in T-pose from its rigid segments, "
        "io/skeleton_tpose.py, as dynik-retarget calibrates a capture).",
        choices=("tpose", MOTION),
    ),
    ParamSpec(
        "calibrate_after",
        0.0,
        "Robot: the IK waits for the stream's first this many seconds (nothing published), calibrates once "
        "on their subject (calibration_pose 'motion'; they must include standing) and starts there [s]; "
        "0 = never (at most the last 2000 samples count: 16 s at 120 Hz).",
        low=0.0,
        high=10.0,
    ),
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
    """Mixin for ik_node: ``~/calibrate`` (robot: the retargeting calibration from a held T-pose or the
    stream's subject), ``calibrate_after`` and ``~/reset`` (the IK starts over from the next sample)."""

    calibration_window: PoseWindow | None = None
    calibration_time = 0.0  # wall seconds the last calibration took (it holds the node's callbacks)
    _calibrate_at: int | None = None  # calibrate_after waiting: the stamp to calibrate at (-1: none yet)

    def _setup_retarget_calibration(self, p: dict[str, Any]) -> list[Any]:
        after = p["calibrate_after"]
        if after > 0 and self.retargeter is None:
            raise ConfigError("calibrate_after", "is only used with robot:=...; leave it 0 for a human model")
        self.calibration_window = None
        if self.retargeter is not None:
            self.calibration_window = PoseWindow(max(p["calibration_window"], after))
        self._calibrate_at = -1 if after > 0 else None  # armed once per configure
        trigger, _ = trigger_types()
        return [
            self.create_service(trigger, "~/calibrate", self._on_calibrate),
            self.create_service(trigger, "~/reset", self._on_reset),
        ]

    def _record_for_calibration(self, links: Any) -> bool:
        """Every accepted sample into the window. With ``calibrate_after``: ``True`` (the sample is only
        recorded, the IK waits) until the sample ``calibrate_after`` s after the stream's first, which
        calibrates on the samples up to it and then starts the IK as a stream's first sample does (so from
        there on the path is the offline run's on those samples with that calibration)."""
        if self.calibration_window is None:
            return False
        self.calibration_window.append(links.stamp_ns, links.names, links.positions, links.rotations)
        if self._calibrate_at is None:
            return False
        after = self.params["calibrate_after"]
        if self._calibrate_at < 0:
            self._calibrate_at = links.stamp_ns + round(after * 1e9)
        if links.stamp_ns < self._calibrate_at:
            return True
        self._calibrate_at = None
        done, message = self._calibrate_retargeting(MOTION, after)
        log = self.get_logger().info if done else self.get_logger().error
        log(f"calibrate_after {after:g} s: {message}")
        return False

    def _calibrate_retargeting(self, pose: str, seconds: float) -> tuple[bool, str]:
        """Calibrate the retargeter on the window's last ``seconds`` (``pose``: module docstring); a running
        stream is re-aligned onto the robot as it stands. ``(done, message)``; a refusal (no or too few
        samples, a segment missing, not a still T-pose, the file not writable) says why and changes
        nothing."""
        from dynik_ros.retarget.calibration import calibrate, check_calibration

        p = self.params
        start = wall_time()
        try:
            if pose == MOTION:
                window = self.calibration_window.samples(seconds)
                poses = skeleton_tpose(window, min_samples=MIN_SAMPLES)
                what = f"the stream's subject (skeleton_tpose of {window.samples} samples)"
            else:
                average = self.calibration_window.average(seconds)
                # the same stillness and T-pose checks as the suit's calibration (the result is not applied)
                SuitCalibration.from_window(
                    average, "tpose", max_pose_error=math.radians(p["calibration_max_pose_error"])
                )
                poses = dict(
                    zip(average.names, zip(average.positions, average.rotations, strict=True), strict=True)
                )
                what = f"{average.samples} T-pose samples"
            calibration = calibrate(self.retargeter.spec, poses, source=what if pose == MOTION else None)
            check_calibration(self.retargeter.spec, calibration)  # what set_calibration checks, before saving
            saved = calibration.save(p["calibration_file"]) if p["calibration_file"] else None
        except (CalibrationError, ValueError, KeyError, OSError) as exc:
            return False, f"calibration refused: {exc}"
        self.retargeter.set_calibration(calibration)
        if self._last_ns is not None:  # a stream runs: re-align it onto the robot as it stands, no jump
            self.retargeter.reset(self.ik.q)
            self._rebase_pending = True  # the IK's reference x_{k-1} is in the old alignment
        self.calibration_time = wall_time() - start
        return True, (
            f"retargeting calibration of {self.model_label} from {what}: root scale "
            f"{calibration.root_scale:.3f}, human root {calibration.human_root_height:.3f} m above the floor"
            + (f"; saved to {saved}" if saved else "")
        )

    def _on_calibrate(self, request: Any, response: Any) -> Any:
        if self.retargeter is None:
            response.success = False
            response.message = (
                f"{self.model_label} tracks the links as measured: calibrate the suit side instead "
                "(wearable_node's ~/calibrate)"
            )
            return response
        response.success, response.message = self._calibrate_retargeting(
            self.params["calibration_pose"], self.params["calibration_window"]
        )
        (self.get_logger().info if response.success else self.get_logger().error)(response.message)
        return response

    def _on_reset(self, request: Any, response: Any) -> Any:
        self.restart_stream()
        response.success = True
        response.message = "IK reset: the next sample starts it over (as after activation)"
        self.get_logger().info(response.message)
        return response
