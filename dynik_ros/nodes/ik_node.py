"""``ik_node``: one dynamical-IK step (Rapetti et al. 2020) per link-state message.

Input: ``/human/link_states`` (``MultiDOFJointState``), optionally ``/robot/base_odom`` for the base pose.
Model: a human model (``model:=human66|human48``, the paper's 23-link tracking set) or a robot
(``robot:=g1|icub|...``, human links retargeted by :class:`dynik_ros.retarget.retargeter.Retargeter`).
Output: ``/dynik/joint_states``, ``/dynik/base_odom``, ``/dynik/markers``, ``/diagnostics``, the
world -> base transform on ``/tf`` when ``tf2_msgs`` is importable (:mod:`~dynik_ros.nodes.ik_outputs`), and
with ``publish_base_target`` the retargeted human root on ``/dynik/base_target`` (what the base is asked to
do, independent of any base feedback: the harness target of a simulated robot whose base the IK reads from
mocap).

``dt`` comes from the message stamps. The first message initializes the state (base at the measured root
link for a human model, retargeter calibration for a robot) and is answered with that state; a robot's IK
settles on it and takes its step as the offline run does (:mod:`~dynik_ros.nodes.ik_start`). Refused
inputs (NaN, non-rotations, unknown or missing links, wrong lengths, out-of-order or stale stamps) are
counted by reason in diagnostics and never stop the node.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState, MultiDOFJointState
from visualization_msgs.msg import MarkerArray

from dynik_ros.core.dynamical_ik import DynamicalIK, DynamicalIKConfig
from dynik_ros.core.metrics import TrackingEvaluator
from dynik_ros.core.regularizers import RegularizerConfig
from dynik_ros.core.robot_model import RobotModel
from dynik_ros.core.rolling import LOG_ROWS, RollingSamples
from dynik_ros.core.targets import InvalidMeasurementError, Measurements
from dynik_ros.core.velocity_qp import QPSettings
from dynik_ros.io import plausibility, stamp_guard
from dynik_ros.nodes.calibration_services import RetargetCalibrationServices
from dynik_ros.nodes.cdr_writer import JointStateWriter, OdometryWriter, publish_serialized
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    RejectionCounter,
    reliable_qos,
    wall_time,
)
from dynik_ros.nodes.conversions import (
    MISSING_LINKS,
    NAN,
    NON_ROTATION,
    REJECTION_REASONS,
    UNDECODABLE,
    UNHANDLED,
    WRONG_LENGTHS,
    LinkStates,
    LinkStatesDecoder,
    MessageRejected,
)
from dynik_ros.nodes.ik_balance import BalanceInput
from dynik_ros.nodes.ik_base_feedback import BaseFeedback
from dynik_ros.nodes.ik_inputs import LinkStateInput
from dynik_ros.nodes.ik_markers import MarkerBuilder
from dynik_ros.nodes.ik_outputs import IKOutputs
from dynik_ros.nodes.ik_params import IK_PARAMS
from dynik_ros.nodes.ik_start import BACKLOG_FULL, StreamStart
from dynik_ros.nodes.node_process import run_node

INVALID = "invalid"
LOCAL_REASONS = (
    INVALID,
    UNHANDLED,
    BACKLOG_FULL,
    UNDECODABLE,
    stamp_guard.FUTURE,
    stamp_guard.JUMP,
    *plausibility.REASONS,
)


class IKNode(
    LinkStateInput,
    IKOutputs,
    BalanceInput,
    BaseFeedback,
    StreamStart,
    RetargetCalibrationServices,
    MarkerBuilder,
    DynikLifecycleNode,
):
    """Lifecycle node running :class:`DynamicalIK` on the link-state stream."""

    PARAMS = IK_PARAMS

    def __init__(self, node_name: str = "ik_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._entities: list[Any] = []
        self._clear()

    # ----------------------------------------------------------------- lifecycle hooks
    def _clear(self) -> None:
        self.robot: RobotModel | None = None
        self.targets = None
        self.ik: DynamicalIK | None = None
        self.retargeter = None
        self._evaluator: TrackingEvaluator | None = None
        self._base_feed_forward = None
        self._entities = []
        self._pub_js = self._pub_odom = self._pub_markers = self._pub_diag = self._pub_tf = None
        self._pub_target = None
        # with use_base_odom: the base published per step, (stamp [s], x, y, z, qx, qy, qz, qw, clock [s])
        use_base_odom = (getattr(self, "params", None) or {}).get("use_base_odom", False)
        self.base_log = RollingSamples(LOG_ROWS if use_base_odom else 1, width=9)
        self._tf_type = None
        self._latest = None
        self.tf_available = False
        self._clear_balance()
        self.reset_statistics()

    def reset_statistics(self) -> None:
        """Clear counters and samples (also done at configure)."""
        self.rejections = RejectionCounter(REJECTION_REASONS + LOCAL_REASONS)
        self.received = 0
        self.steps = 0
        self.qp_failures = 0
        self.held = False  # the last step failed: nothing was published for it
        self.held_steps = 0
        self.rebased = 0
        self.returned = 0  # excursions undone: the stream came back (io/plausibility.py)
        self.dt_clamped = 0
        self.sub_steps = 0  # IK steps between the samples of a sparse stream (max_step)
        self.settle_time = 0.0  # wall seconds the last settle on a first sample took (parameter settle)
        self._steps_before: list = []
        self._last_step_dt = 0.0
        self.base_odom_missing = 0
        self.base_odom_ahead = 0
        self.last_qp_status = "none"
        # bounded: the last 1e5 samples (core/rolling.py)
        self.solve_times = RollingSamples()
        self.callback_times = RollingSamples()
        self.errors = RollingSamples(width=4)  # rows (stamp_ns, mnte, omega rmse, pos rmse)
        self.restart_stream()

    def restart_stream(self) -> None:
        """Forget the input stream (stamps, plausibility history, base odometry): the next sample starts
        the IK over, as after activation (``~/reset``)."""
        params = getattr(self, "params", None) or {}
        self.stamps = stamp_guard.StampGuard(
            params.get("max_input_age", 0.5),
            params.get("max_future_stamp", 1.0),
            params.get("max_stamp_jump", 0.5),
        )
        self.plausible = plausibility.PlausibilityGuard(
            params.get("max_link_distance", 1e5),
            params.get("max_link_speed", 50.0),
            params.get("max_link_angular_speed", 100.0),
            # a way back is only taken over a gap the next step can span (longer ones are clamped)
            return_window=min(params.get("max_dt", 0.1), 0.1),
        )
        self._last_ns: int | None = None
        self._rebase_pending = False  # the world frame moved: DynamicalIK.rebase at the next step
        self._excursion: tuple[int | None, dict, dict | None] | None = None  # state before a re-base
        self._stamp_refused = 0  # samples refused by the stamp guard since the last accepted one
        self._period_ns = 10**9 // 100  # the last step between accepted stamps (default 100 Hz)
        self._last_marker_ns = -(10**18)
        self._last_metrics_ns = -(10**18)
        self._odom: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._latest = None
        self._first_step: tuple[float, Measurements] | None = None  # a robot's first sample, not stepped yet
        self._clear_start()

    def _configure(self, p: dict[str, Any]) -> None:
        self._clear()
        if p["robot"]:
            self._load_robot(p)
        else:
            if not p["model"]:
                raise ConfigError("model", "set model (human66|human48) or robot")
            for name in ("config_file", "balance"):
                if p[name]:
                    raise ConfigError(name, "is only used with robot:=...; leave it off for a human model")
            self._load_human(p)
        base = p["base_frame"] or self._root_link()
        try:
            self.robot.frame_id(base)
        except KeyError as exc:
            raise ConfigError("base_frame", str(exc)) from None
        self.base_frame = base
        self._base_feed_forward = self._make_base_feed_forward(p["base_velocity_source"])
        # decode-or-reject of the link states; names read and checked once per stream
        self._decode = LinkStatesDecoder(self.known_links, self.required_links)
        self._rows_of: list[str] | None = None  # the names list the target rows below were taken from
        self._evaluator = TrackingEvaluator(self.robot, self.targets)
        self._prepare_markers()

        output_qos = reliable_qos(p["output_depth"])
        self._pub_js = self.create_lifecycle_publisher(JointState, "/dynik/joint_states", output_qos)
        self._js_writer = JointStateWriter(self.robot.joint_names)
        self._odom_writer = OdometryWriter(p["world_frame"], self.base_frame)
        self._pub_odom = self.create_lifecycle_publisher(Odometry, "/dynik/base_odom", output_qos)
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        if p["publish_markers"]:
            self._pub_markers = self.create_lifecycle_publisher(MarkerArray, "/dynik/markers", RELIABLE_QOS)
        if p["publish_tf"]:
            self._setup_tf()
        if p["publish_base_target"]:
            self._setup_base_target()
        self._entities = [
            # raw=True: the CDR bytes are read straight into numpy (link_states_from_cdr)
            self.create_subscription(
                MultiDOFJointState,
                "/human/link_states",
                self._on_link_states,
                RELIABLE_QOS if p["link_states_reliable"] else SENSOR_QOS,
                raw=True,
            )
        ]
        if p["use_base_odom"]:
            self._entities.append(
                self.create_subscription(Odometry, "/robot/base_odom", self._on_odom, SENSOR_QOS)
            )
        self._entities += self._setup_retarget_calibration(p)
        self._entities += self._setup_balance(p)

    def _load_human(self, p: dict[str, Any]) -> None:
        from dynik_ros.models.assets import human_tracking_targets, urdf_path
        from dynik_ros.models.human import XSENS_PARENT, XSENS_SEGMENTS

        self.robot = RobotModel.from_urdf_file(urdf_path(p["model"]))
        self._lock(p)
        self.targets = human_tracking_targets(p["orientation_gain"])
        self.ik = DynamicalIK(self.robot, self.targets, _ik_config(p))
        self.ik.set_gains(position_gain=p["position_gain"], orientation_gain=p["orientation_gain"])
        self.known_links = frozenset(XSENS_SEGMENTS) | frozenset(self._target_links())
        self.required_links = sorted(set(self._target_links()))
        self._skeleton_names = [(child, parent) for child, parent in XSENS_PARENT.items()]
        self.model_label = p["model"]

    def _lock(self, p: dict[str, Any]) -> None:
        try:
            for joint in p["locked_joints"]:
                self.robot.lock_joint(joint)
        except (KeyError, ValueError) as exc:
            raise ConfigError("locked_joints", str(exc)) from None

    def _load_robot(self, p: dict[str, Any]) -> None:
        try:
            from dynik_ros.retarget.retargeter import ROBOT_INTEGRATION, Retargeter
        except ImportError as exc:
            raise ConfigError(
                "robot",
                f"robot retargeting is not available in this installation (dynik_ros.retarget: {exc})",
            ) from None
        source = p["config_file"] or p["robot"]
        saved = p["calibration_file"]
        try:
            if saved and Path(saved).expanduser().is_file():
                self.retargeter = Retargeter.from_config(source, calibration=Path(saved).expanduser())
                self.get_logger().info(f"retargeting calibration loaded from {saved}")
            else:
                self.retargeter = Retargeter.from_config(source)
        except FileNotFoundError as exc:
            raise ConfigError("config_file" if p["config_file"] else "robot", str(exc)) from None
        except (KeyError, ValueError) as exc:
            raise ConfigError("config_file" if p["config_file"] else "robot", str(exc)) from None
        self.robot = self.retargeter.robot
        self._lock(p)
        self.targets = self.retargeter.targets
        self._balance_retargeter(p)
        if p["floor_rows"] != "map":  # core/floor_rows.py
            contact = dataclasses.replace(self.retargeter.config.contact, floor_rows=p["floor_rows"] == "on")
            self.retargeter.config = dataclasses.replace(self.retargeter.config, contact=contact)
        self.ik = self.retargeter.make_ik(_ik_config(p, ROBOT_INTEGRATION))
        # The map's per-target gains stay unless a gain parameter is set away from its default.
        defaults = {spec.name: spec.default for spec in self.PARAMS}
        self.ik.set_gains(
            position_gain=None if p["position_gain"] == defaults["position_gain"] else p["position_gain"],
            orientation_gain=None
            if p["orientation_gain"] == defaults["orientation_gain"]
            else p["orientation_gain"],
        )
        from dynik_ros.models.human import XSENS_SEGMENTS

        self.known_links = frozenset(XSENS_SEGMENTS) | frozenset(self.retargeter.links)
        self.required_links = list(self.retargeter.links)
        self._skeleton_names = None
        self.model_label = p["robot"]

    def _target_links(self) -> list[str]:
        return list(self.targets.position_links) + list(self.targets.orientation_links)

    def _root_link(self) -> str:
        """The body frame carried by the model's first joint (the floating base)."""
        model = self.robot.model
        for frame in model.frames:
            if frame.type == pin.FrameType.BODY and frame.parentJoint == 1:
                return str(frame.name)
        return str(model.frames[1].name)

    def _activate(self) -> None:
        self._ik_timers = [self.create_timer(self.params["diagnostics_period"], self.publish_diagnostics)]
        self._ik_timers.append(self._create_start_timer())
        if self._settling is not None or self._backlog:  # deactivated during a settle: it goes on
            self._start_timer.reset()
        if self._pub_markers is not None:
            self._ik_timers.append(self.create_timer(1.0 / self.params["marker_rate"], self._on_marker_timer))

    def _deactivate(self) -> None:
        self.destroy_entities(getattr(self, "_ik_timers", []))
        self._ik_timers = []
        self._start_timer = None

    def _release(self) -> None:
        self.destroy_entities(getattr(self, "_ik_timers", []))
        self._ik_timers = []
        self._start_timer = None
        self.destroy_entities(self._entities)
        self.destroy_entities(
            [self._pub_js, self._pub_odom, self._pub_markers, self._pub_diag, self._pub_tf, self._pub_target]
        )
        self._clear()

    def _apply_runtime(self, changes: dict[str, Any]) -> None:
        if self.ik is None:
            return
        self.ik.set_gains(
            position_gain=changes.get("position_gain"), orientation_gain=changes.get("orientation_gain")
        )
        if "limit_gain" in changes:
            self.ik.config = dataclasses.replace(self.ik.config, limit_gain=changes["limit_gain"])
        self.get_logger().info(f"gains updated: {changes}")

    # ----------------------------------------------------------------- inputs
    def _reject(self, reason: str, detail: str) -> None:
        self.rejections.add(reason, detail)
        self.get_logger().warning(f"link states refused ({reason}): {detail}", throttle_duration_sec=1.0)

    def _on_link_states(self, data: bytes) -> None:
        if not self.active or self.ik is None:
            return
        self.received += 1
        if not self._waits_for_start(data):  # a settle runs: after it, in order (ik_start.py)
            self._handle(data)

    def _handle(self, data: bytes) -> None:
        try:
            self._process(data)
        except Exception as exc:  # noqa: BLE001 - no input may end the node: count, log, keep running
            self._reject(UNHANDLED, f"{type(exc).__name__}: {exc}")

    def _process(self, data: bytes) -> None:
        start = wall_time()
        try:
            links = self._decode(data)
        except MessageRejected as exc:
            self._reject(exc.reason, exc.detail)
            return
        stamp = links.stamp_ns
        verdict, detail = self.stamps.check(stamp, self.get_clock().now().nanoseconds)
        if verdict not in (stamp_guard.ACCEPTED, stamp_guard.REBASED):
            self._stamp_refused += 1
            self._reject(verdict, detail)
            return
        if verdict == stamp_guard.REBASED:  # a new time base: step over the seam by the samples it took
            # (the confirming samples refused on the way were the stream's: their motion happened too)
            seam = self._period_ns * (1 + min(self._stamp_refused, 10))
            self._last_ns = None if self._last_ns is None else stamp - seam
            self._last_metrics_ns = -(10**18)  # a clock set back must not silence the metrics until it
            # passes the old stamps again
        self._stamp_refused = 0
        dt = min((stamp - self._last_ns) * 1e-9, self.params["max_dt"]) if self._last_ns is not None else 0.01
        reason, detail = self.plausible.check(
            links.positions, links.rotations, links.linear_velocities, links.angular_velocities, dt, stamp
        )
        if reason is not None and reason not in ("rebased", plausibility.RETURNED):
            self.stamps.last_ns = self._last_ns  # a refused sample does not move the stream's reference
            self._reject(reason, detail)
            return
        if self._record_for_calibration(links):
            return  # calibrate_after: the stream's first seconds are recorded, the IK waits for them
        if reason == plausibility.RETURNED and self._excursion is not None:
            self._undo_excursion(detail)
        elif verdict == stamp_guard.REBASED or reason == "rebased":
            self.rebased += 1
            self.get_logger().warning(f"input re-based: {detail}")
            if reason == "rebased":  # the world moved under the person: keep the posture, move the base
                self._excursion = (
                    self._last_ns,
                    self.ik.save_state(),
                    None if self.retargeter is None else self.retargeter.save_state(),
                )
                self._rebase_world()
        settling = False  # the first sample's answer waits for its settle (ik_start.py)
        try:
            self._steps_before = []  # a sparse stream's IK steps before this sample (_measurements)
            decoded = self._measurements(links)
            if self._last_ns is None:
                measurements = self._with_base_feed_forward(decoded, links)
                self._initialize(links)
                settling = self.retargeter is not None and self._settle(decoded)
                q, v = self.ik.q, np.zeros(self.robot.nv)
            else:
                dt = (stamp - self._last_ns) * 1e-9
                if dt > self.params["max_dt"]:
                    dt = self.params["max_dt"]
                    self.dt_clamped += 1
                if self._rebase_pending or not self._steps_before:
                    measurements = self._with_base_feed_forward(decoded, links)
                    if self._rebase_pending:
                        self.ik.rebase(measurements, dt)
                        self._rebase_pending = False
                    self._apply_base_odom(stamp - int(round(dt * 1e9)))  # the step integrates from there
                else:  # a sparse stream: the offline run's IK steps up to this sample (stream_input.py)
                    self._apply_base_odom(stamp - int(round(dt * 1e9)))
                    for step_dt, step in self._steps_before:
                        self.ik.step(self._with_base_feed_forward(step, links), step_dt)
                        self.sub_steps += 1
                    dt = self._last_step_dt
                    measurements = self._with_base_feed_forward(decoded, links)
                # rows of the decoded links as they are (no retargeter, no base feed-forward): the decoder
                # checked them finite and made the rotations from unit quaternions (orthonormal to 1e-15,
                # det +1), all that DynamicalIK would check again (tested in test_step_fast_paths.py)
                checked = self.retargeter is None and measurements is decoded
                q, v = self.ik.step(measurements, dt, checked=checked)
                self.steps += 1
                self.solve_times.append(self.ik.info.solve_time)
                self.last_qp_status = self.ik.info.status
                if not self.ik.info.solved:
                    self.qp_failures += 1
        except InvalidMeasurementError as exc:
            self.stamps.last_ns = self._last_ns
            self._reject(_reason_of(str(exc)), str(exc))
            return
        if self._last_ns is not None and stamp > self._last_ns:
            self._period_ns = stamp - self._last_ns
        self._last_ns = stamp
        if settling:
            self._settled_answer = (stamp, links, measurements)
            return
        self._answer(stamp, q, v, links, measurements, start)

    def _answer(
        self,
        stamp: int,
        q: np.ndarray,
        v: np.ndarray,
        links: LinkStates,
        measurements: Measurements,
        start: float,
    ) -> None:
        """Publish the state after a sample (nothing after a held step) and keep its figures."""
        self.held = self.steps > 0 and self.ik.info.held
        if self.held:  # a held step is not fresh motion: publish nothing, the bridge's stale hold engages
            self.held_steps += 1
            self.get_logger().error(
                f"IK held (QP {self.ik.info.status}): no output for this sample", throttle_duration_sec=1.0
            )
            return
        self._publish_state(stamp, q, v)
        if self._pub_target is not None:
            self._publish_base_target(stamp, measurements)
        self.emit("ik_output", stamp)
        rate = self.params["metrics_rate"]
        if rate > 0 and stamp - self._last_metrics_ns >= 0.999e9 / rate:  # 0.999: stamps rounded to ns
            self._last_metrics_ns = stamp
            error = self._evaluator.evaluate(q, v, measurements)
            self.errors.append((stamp, error.mnte, error.angular_velocity_rmse, error.position_rmse))
        self._latest = (stamp, q, links, measurements)
        self.callback_times.append(wall_time() - start)

    def _on_marker_timer(self) -> None:
        """Markers of the latest state, from their own timer: building and publishing them costs about a
        millisecond, which stays off the link-state -> command path."""
        if not self.active or self._latest is None or self._pub_markers is None:
            return
        stamp, q, links, measurements = self._latest
        if stamp != self._last_marker_ns:
            self._last_marker_ns = stamp
            try:
                publish_serialized(
                    self._pub_markers,
                    self._marker_bytes(stamp, q, links, measurements),
                    lambda: self._markers(stamp, q, links, measurements),
                )
            except Exception as exc:  # noqa: BLE001 - a marker problem must not end the node
                self._reject(UNHANDLED, f"markers: {type(exc).__name__}: {exc}")

    def _undo_excursion(self, detail: str) -> None:
        """The stream came back to where it was before the last re-base (a glitch of a few samples, not a
        moved world): the IK and the retargeter resume from their state before it, and the next step spans
        the excursion as if its samples had been refused."""
        last_ns, ik_state, retarget_state = self._excursion
        self._excursion = None
        self.ik.restore_state(ik_state)
        if self.retargeter is not None and retarget_state is not None:
            self.retargeter.restore_state(retarget_state)
        self._last_ns = last_ns
        self._rebase_pending = False
        self.returned += 1
        self.get_logger().warning(f"input back from an excursion, resumed from before it: {detail}")

    def _rebase_world(self) -> None:
        """A confirmed teleport of every link (the person re-registered, the world origin moved): the
        joints stay, the base and the IK's stored reference follow the world (``DynamicalIK.rebase``, at the
        next step). A robot's retargeter first re-aligns the new data onto the robot as it stands."""
        if self.retargeter is not None:
            self.retargeter.reset(self.ik.q)
        self._rebase_pending = True

    def _initialize(self, links: LinkStates) -> None:
        """First input: start from the measured root pose (human) or the retargeter's configuration."""
        if self.retargeter is not None:
            self.ik.reset(self.retargeter.initial_configuration())
            return
        q0 = self.robot.neutral_configuration()
        if self.base_frame in links.names and self.robot.floating_base:
            i = links.names.index(self.base_frame)
            q0 = self.robot.join(links.positions[i], links.rotations[i], q0[7:])
        self.ik.reset(q0)


def _reason_of(message: str) -> str:
    """Rejection reason of an :class:`InvalidMeasurementError` message from the core."""
    if "not finite" in message:
        return NAN
    if "not rotation" in message:
        return NON_ROTATION
    if "shape" in message:
        return WRONG_LENGTHS
    if "lacks links" in message:
        return MISSING_LINKS
    return INVALID


def _ik_config(p: dict[str, Any], integration: str = "adams") -> DynamicalIKConfig:
    """The solver options of the parameters: QP solver, limit gain and the second seed's regularizers (off
    at 0; a robot map's ``regularizers:`` section applies while both weights are 0); ``integration``: Adams
    for a human model, the retargeter's ``ROBOT_INTEGRATION`` for a robot."""
    regularizers = RegularizerConfig(
        state_weight=p["state_regularizer_weight"],
        velocity_weight=p["velocity_regularizer_weight"],
        velocity_threshold=p["velocity_regularizer_threshold"],
    )
    return DynamicalIKConfig(
        limit_gain=p["limit_gain"],
        regularizers=regularizers,
        integration=integration,
        qp=QPSettings(solver=p["qp_solver"]),
    )


def main(argv: list[str] | None = None) -> int:
    return run_node(IKNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
