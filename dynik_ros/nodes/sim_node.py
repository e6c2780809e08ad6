"""``sim_node``: a MuJoCo humanoid behind ros2_control-style topics (:mod:`dynik_ros.sim`).

Inputs: ``<controller>/joint_trajectory`` (``JointTrajectory``, joint_trajectory_controller semantics)
and ``<controller>/commands`` (``Float64MultiArray`` in ``joints`` order, forward_command_controller),
``/dynik/base_odom`` (``Odometry``: the harness target in ``base_mode:=harness``).
Outputs: ``/joint_states`` (position, velocity, effort of every joint), ``/sim/base_pose_true``
(``PoseStamped``, world frame), the simulated mocap rigid body ``/mocap/rigid_body`` (``PoseStamped`` in
the camera frame, stamped with the capture time, delivered after the latency), ``/clock`` when
``publish_clock`` is set, ``/diagnostics`` (real-time factor, clipped and refused commands).

Physics runs while the node is active, from a timer on the steady clock: in real time (``real_time_factor``
1, catching up in chunks of at most ``max_catch_up`` s and dropping a larger debt, counted), or as fast as
``real_time_factor`` asks when publishing ``/clock`` (0 = as fast as possible); nodes with
``use_sim_time`` then follow the sim; with ``lockstep_topic`` the sim also waits for a consumer on
sim time (its JointState stamps, at most ``lockstep_lead`` behind) as Gazebo's lockstep would, so a
loaded machine slows the whole loop instead of leaving the consumer behind. Stamps are sim time on
``/clock``, else the node clock at the matching instant (time the sim dropped moves its stamps forward:
they stay on the node clock).
Commands are applied only while active; a trajectory's zero stamp means "now".
MuJoCo is imported at configure only.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from dynik_ros.core.rolling import LOG_ROWS, RollingSamples
from dynik_ros.nodes.common import (
    COMMAND_QOS,
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    ParamSpec,
    diagnostic_status,
)
from dynik_ros.nodes.conversions import (
    MessageRejected,
    float_array,
    ns_to_stamp,
    odometry_from_msg,
    pose_msg,
    stamp_to_ns,
)
from dynik_ros.nodes.node_process import run_node

NS = 1_000_000_000


def _duration_s(d: Any) -> float:
    return d.sec + d.nanosec * 1e-9


class SimNode(DynikLifecycleNode):
    """Lifecycle node running the simulated robot; see the module docstring."""

    PARAMS = (
        ParamSpec("robot", "g1", "Robot name (registry) or retargeting YAML path: its URDF is simulated."),
        ParamSpec("controller", "joint_trajectory_controller", "Controller name (topic prefix)."),
        ParamSpec("joints", [], "The controller's joints, in its order ([] = every actuated IK joint)."),
        ParamSpec("physics_rate", 1000.0, "Physics rate [Hz].", low=500.0, high=10000.0),
        ParamSpec(
            "base_mode",
            "harness",
            "'free': the base stands on the ground; 'harness': a spring-damper pulls it to the IK base pose.",
            choices=("free", "harness"),
        ),
        ParamSpec("base_target_topic", "/dynik/base_odom", "Harness target (Odometry, IK world frame)."),
        ParamSpec("harness_stiffness", 1.0e4, "Harness linear stiffness [N/m].", low=0.0, high=1e7),
        ParamSpec(
            "harness_angular_stiffness", 2.0e3, "Harness angular stiffness [N m/rad].", low=0.0, high=1e6
        ),
        ParamSpec("kp_scale", 1.0, "Scale of every position gain.", low=0.01, high=100.0),
        ParamSpec("kv_scale", 1.0, "Scale of every damping gain.", low=0.0, high=100.0),
        ParamSpec(
            "velocity_feedforward",
            False,
            "Servo velocity feed-forward (RH5 seed eq. 8): damp towards the reference's velocity, not zero.",
        ),
        ParamSpec(
            "publish_rate",
            100.0,
            "Rate of /joint_states and /sim/base_pose_true [Hz, sim time].",
            low=1.0,
            high=1000.0,
        ),  # fmt: skip
        ParamSpec("publish_clock", False, "Publish /clock with the sim time (others use use_sim_time)."),
        ParamSpec(
            "real_time_factor",
            1.0,
            "Sim seconds per wall second (0 = as fast as possible; only with publish_clock).",
            low=0.0,
            high=100.0,
        ),
        ParamSpec("step_period", 0.002, "Wall period of the physics timer [s].", low=5e-4, high=0.1),
        ParamSpec("max_catch_up", 0.05, "Most sim time stepped per timer call [s].", low=0.001, high=1.0),
        ParamSpec(
            "lockstep_topic",
            "",
            "JointState topic of the consumer the sim waits for ('' = none), e.g. /dynik/joint_states: "
            "sim time goes at most lockstep_lead past its newest stamp (Gazebo's lockstep, for /clock).",
        ),
        ParamSpec(
            "lockstep_lead", 0.1, "Most sim time ahead of the consumer's stamp [s].", low=0.001, high=10.0
        ),
        ParamSpec(
            "lockstep_timeout",
            1.0,
            "Wall time without a consumer message after which the sim runs on its own again [s].",
            low=0.01,
            high=600.0,
        ),
        ParamSpec("world_frame", "world", "Frame of /sim/base_pose_true."),
        ParamSpec("mocap", True, "Simulate the mocap rigid body."),
        ParamSpec("mocap_topic", "/mocap/rigid_body", "Mocap rigid-body topic (PoseStamped)."),
        ParamSpec(
            "mocap_reliable",
            False,
            "Publish the mocap poses reliably (default best effort, like a mocap driver's sensor stream).",
        ),
        ParamSpec("mocap_frame", "mocap", "Frame id of the mocap poses (the camera frame)."),
        ParamSpec("mocap_body", "", "Link carrying the rigid body ('' = the base link)."),
        ParamSpec("mocap_rate", 750.0, "Mocap rate [Hz] (RH5: 750).", low=1.0, high=5000.0),
        ParamSpec(
            "mocap_latency", [0.002, 0.004], "Latency range [s] (RH5: 2-4 ms).", low=0.0, high=1.0, length=2
        ),  # fmt: skip
        ParamSpec("mocap_position_noise", 0.0005, "Position noise per axis [m].", low=0.0, high=1.0),
        ParamSpec("mocap_rotation_noise", 0.1, "Rotation noise per axis [deg].", low=0.0, high=90.0),
        ParamSpec(
            "mocap_dropout_fraction", 0.05, "Fraction of captures lost to occlusion.", low=0.0, high=0.99
        ),  # fmt: skip
        ParamSpec("mocap_dropout_length", 10.0, "Mean occlusion length [captures].", low=1.0, high=1e5),
        ParamSpec("mocap_outlier_fraction", 0.001, "Fraction of outliers.", low=0.0, high=1.0),
        ParamSpec(
            "mocap_camera_from_world",
            [0.5, -1.0, 0.2, 0.0, 0.0, 30.0],
            "World frame in the camera frame: x, y, z [m], roll, pitch, yaw [deg].",
            low=-1e4,
            high=1e4,
            length=6,
        ),
        ParamSpec(
            "mocap_marker_offset",
            [0.0, 0.0, 0.1, 0.0, 0.0, 0.0],
            "Rigid body in the link frame: x, y, z [m], roll, pitch, yaw [deg].",
            low=-1e3,
            high=1e3,
            length=6,
        ),
        ParamSpec("mocap_seed", 0, "Seed of the mocap errors.", low=0, high=2**31 - 1),
        ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
    )

    def __init__(self, node_name: str = "sim_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._entities: list[Any] = []
        self._pubs: dict[str, Any] = {}
        self._timer = self._diag_timer = None
        self.sim = self.session = self.pacer = None
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._reset_counts()

    def _reset_counts(self) -> None:
        # what the tracking summary compares (sim time): commands as received (time, joints in controller
        # order), joints and base as simulated (time, joints, base error); numpy rows, allocated once the
        # model is loaded (joint count): the last LOG_ROWS / 3 commands and states (3 MB each for 30 joints)
        sim = self.sim
        rows = LOG_ROWS // 3 if sim is not None else 1
        self.command_log = RollingSamples(rows, width=1 + (len(sim.follower.joint_names) if sim else 0))
        self.state_log = RollingSamples(rows, width=2 + (len(sim.joint_names) if sim else 0))
        # the true base as published on /sim/base_pose_true: (stamp [s], x, y, z, qx, qy, qz, qw)
        self.base_log = RollingSamples(LOG_ROWS if self.sim is not None else 1, width=8)
        self.refused_targets = 0
        self.mocap_published = 0
        self.inactive_commands = 0
        self._last_rtf = (0.0, 0.0)
        self.real_time_factor = float("nan")

    # ----------------------------------------------------------------- configuration
    def _configure(self, p: dict[str, Any]) -> None:
        if p["real_time_factor"] == 0.0 and not p["publish_clock"]:
            raise ConfigError("real_time_factor", "0 (as fast as possible) needs publish_clock:=true")
        if not p["controller"].strip("/"):
            raise ConfigError("controller", "is empty")
        lat = p["mocap_latency"]
        if lat[0] > lat[1]:
            raise ConfigError("mocap_latency", f"minimum {lat[0]} above maximum {lat[1]}")
        try:
            from dynik_ros.sim.mocap import MocapConfig, MocapSimulator
            from dynik_ros.sim.session import Pacer, SimSession
            from dynik_ros.sim.simulator import SimConfig, Simulator
        except ImportError as exc:
            raise ConfigError("robot", f"the simulator needs mujoco (pip install mujoco): {exc}") from None
        config = SimConfig(
            timestep=1.0 / p["physics_rate"],
            base_mode=p["base_mode"],
            kp_scale=p["kp_scale"],
            kv_scale=p["kv_scale"],
            velocity_feedforward=p["velocity_feedforward"],
            harness_stiffness=p["harness_stiffness"],
            harness_angular_stiffness=p["harness_angular_stiffness"],
        )
        try:
            sim = Simulator.from_robot(p["robot"], config)
        except (FileNotFoundError, KeyError, ValueError) as exc:
            raise ConfigError("robot", str(exc).strip("'\"")) from None
        joints = list(p["joints"]) or list(sim.joint_names)
        unknown = [j for j in joints if j not in sim.joint_names]
        if unknown:
            raise ConfigError("joints", f"{unknown[:5]} are not actuated joints of '{p['robot']}'")
        if len(set(joints)) != len(joints):
            raise ConfigError("joints", "repeated joint names")
        self.joints = joints
        self._joint_index = np.array([sim.joint_names.index(j) for j in joints], dtype=int)
        mocap = None
        if p["mocap"]:
            cam, marker = p["mocap_camera_from_world"], p["mocap_marker_offset"]
            mocap = MocapSimulator(
                MocapConfig(
                    rate=p["mocap_rate"],
                    latency_min=lat[0],
                    latency_max=lat[1],
                    position_noise=p["mocap_position_noise"],
                    rotation_noise=math.radians(p["mocap_rotation_noise"]),
                    dropout_fraction=p["mocap_dropout_fraction"],
                    dropout_mean_length=p["mocap_dropout_length"],
                    outlier_fraction=p["mocap_outlier_fraction"],
                    camera_from_world=(*cam[:3], *np.radians(cam[3:])),
                    marker_offset=(*marker[:3], *np.radians(marker[3:])),
                    seed=p["mocap_seed"],
                )
            )
            if p["mocap_body"]:
                try:
                    sim.model.body(p["mocap_body"])
                except KeyError:
                    raise ConfigError("mocap_body", f"no link '{p['mocap_body']}' in the model") from None
        self.sim = sim
        self.session = SimSession(sim, 1.0 / p["publish_rate"], mocap, p["mocap_body"] or None)
        self.pacer = Pacer(config.timestep, p["real_time_factor"], p["max_catch_up"])
        self._reset_counts()
        controller = p["controller"].rstrip("/")
        self.trajectory_topic = f"{controller}/joint_trajectory"
        self.commands_topic = f"{controller}/commands"
        pubs = {
            "joint_states": (JointState, "/joint_states", RELIABLE_QOS),
            "base_true": (PoseStamped, "/sim/base_pose_true", RELIABLE_QOS),
            "diagnostics": (DiagnosticArray, "/diagnostics", RELIABLE_QOS),
        }
        if mocap is not None:
            pubs["mocap"] = (
                PoseStamped,
                p["mocap_topic"],
                RELIABLE_QOS if p["mocap_reliable"] else SENSOR_QOS,
            )
        if p["publish_clock"]:
            pubs["clock"] = (ClockMsg, "/clock", RELIABLE_QOS)
        self._pubs = {k: self.create_lifecycle_publisher(t, n, q) for k, (t, n, q) in pubs.items()}
        self._entities = [
            self.create_subscription(
                JointTrajectory, self.trajectory_topic, self._on_trajectory, COMMAND_QOS
            ),
            self.create_subscription(Float64MultiArray, self.commands_topic, self._on_commands, COMMAND_QOS),
        ]
        self._consumer: tuple[float, float] | None = None  # (its newest stamp [sim s], wall s received)
        self.lockstep_waits = 0
        if p["lockstep_topic"]:
            if not p["publish_clock"]:
                raise ConfigError("lockstep_topic", "needs publish_clock:=true (the consumer on sim time)")
            self._entities.append(
                self.create_subscription(JointState, p["lockstep_topic"], self._on_consumer, RELIABLE_QOS)
            )
        if p["base_mode"] == "harness":
            self._entities.append(
                self.create_subscription(Odometry, p["base_target_topic"], self._on_base_target, SENSOR_QOS)
            )
        self._clock_offset_ns = self._base_offset_ns = 0
        self._offsets: deque[tuple[float, int]] = deque(maxlen=64)  # (until sim time, offset) before changes

    def _activate(self) -> None:
        sim = self.sim
        wall = self._steady.now().nanoseconds / NS
        self.pacer.restart(wall, sim.time)
        if not self.params["publish_clock"]:
            # stamps: the node clock at the matching instant
            self._clock_offset_ns = self.get_clock().now().nanoseconds - int(round(sim.time * NS))
        self._base_offset_ns = self._clock_offset_ns
        self._last_rtf = (wall, sim.time)
        self._timer = self.create_timer(self.params["step_period"], self._on_timer, clock=self._steady)
        self._diag_timer = self.create_timer(
            self.params["diagnostics_period"], self.publish_diagnostics, clock=self._steady
        )
        self._publish_state(sim.time)

    def _deactivate(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer])
        self._timer = self._diag_timer = None

    def _release(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer, *self._entities, *self._pubs.values()])
        self._entities, self._pubs = [], {}
        self._timer = self._diag_timer = None
        self.sim = self.session = self.pacer = None

    # ----------------------------------------------------------------- time
    def stamp_ns(self, sim_time: float) -> int:
        """The message stamp of a sim time (sim time itself with /clock, else the node clock then)."""
        return self._clock_offset_ns + int(round(sim_time * NS))

    def sim_time_of(self, stamp_ns: int) -> float:
        return (stamp_ns - self._clock_offset_ns) / NS

    # ----------------------------------------------------------------- inputs
    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not self.active or self.sim is None:
            self.inactive_commands += 1
            return
        from dynik_ros.sim.trajectory import REFUSED_MALFORMED, CommandRefused

        follower, now = self.sim.follower, self.sim.time
        try:
            n = len(msg.joint_names)
            points = msg.points
            positions = [list(pt.positions) for pt in points]
            with_vel = any(len(pt.velocities) for pt in points)
            with_acc = any(len(pt.accelerations) for pt in points)
            if any(len(pos) != n for pos in positions) or (
                with_vel and any(len(pt.velocities) != n for pt in points)
            ):
                follower.counts.refused[REFUSED_MALFORMED] += 1
                raise CommandRefused(REFUSED_MALFORMED, "point lengths do not match the joint names")
            stamp = stamp_to_ns(msg.header.stamp)
            follower.set_trajectory(
                list(msg.joint_names),
                [_duration_s(pt.time_from_start) for pt in points],
                np.array(positions, dtype=float).reshape(len(points), n),
                now,
                velocities=[list(pt.velocities) for pt in points] if with_vel else None,
                accelerations=[list(pt.accelerations) for pt in points]
                if with_acc and all(len(pt.accelerations) == n for pt in points)
                else None,
                start=None if stamp == 0 else self.sim_time_of(stamp),
            )
            self._log_command(now, list(msg.joint_names), positions[-1] if positions else None)
        except CommandRefused as exc:
            self.get_logger().warning(f"trajectory refused ({exc})", throttle_duration_sec=1.0)

    def _on_commands(self, msg: Float64MultiArray) -> None:
        if not self.active or self.sim is None:
            self.inactive_commands += 1
            return
        from dynik_ros.sim.trajectory import REFUSED_MALFORMED, CommandRefused

        follower = self.sim.follower
        data = np.asarray(msg.data, dtype=float)
        try:
            if data.size != len(self.joints):
                follower.counts.refused[REFUSED_MALFORMED] += 1
                raise CommandRefused(REFUSED_MALFORMED, f"{data.size} values for {len(self.joints)} joints")
            if len(self.joints) == len(follower.joint_names) and np.array_equal(
                self._joint_index, np.arange(len(self.joints))
            ):
                follower.set_positions(data, self.sim.time)
            else:
                follower.set_trajectory(self.joints, [0.0], [data], self.sim.time)
            self._log_command(self.sim.time, self.joints, data)
        except CommandRefused as exc:
            self.get_logger().warning(f"command refused ({exc})", throttle_duration_sec=1.0)

    def _log_command(self, now: float, names: list[str], positions: Any) -> None:
        """The commanded positions (controller order, clipped like the reference; joints not named keep
        the reference) at their reception time."""
        if positions is None:
            return
        follower = self.sim.follower
        command = follower.position.copy()
        index = [follower.joint_names.index(n) for n in names]
        command[index] = np.clip(
            np.asarray(positions, dtype=float), follower.lower[index], follower.upper[index]
        )
        self.command_log.append(np.concatenate(([now], command)))

    def tracking_summary(self, min_motion: float = 0.05) -> dict[str, Any]:
        """Commanded vs simulated joints over the run (joints whose command moved by ``min_motion`` rad
        or more): delay p50 / max and RMS after the shift (:func:`dynik_ros.sim.tracking.estimate_delay`),
        mean |base - harness target|, real-time factor, command counts."""
        from dynik_ros.sim.tracking import estimate_delay

        out: dict[str, Any] = {
            "real_time_factor": self.real_time_factor,
            "robot": self.params.get("robot", ""),
        }
        if self.sim is not None:
            counts = self.sim.follower.counts
            out.update(
                commands=counts.accepted, clipped=counts.clipped_commands, refused=counts.refused_total
            )
        if len(self.command_log) < 3 or len(self.state_log) < 3:
            return out
        command_rows, state_rows = self.command_log.array(), self.state_log.array()
        send, commands = command_rows[:, 0], command_rows[:, 1:]
        times, q = state_rows[:, 0], state_rows[:, 1:-1]
        moving = np.flatnonzero(np.ptp(commands, axis=0) >= min_motion)
        out["base_error_mean_m"] = float(np.mean(state_rows[:, -1]))
        if moving.size == 0 or times[-1] - send[0] < 1.0:
            return out
        delay, rms = estimate_delay(send, commands[:, moving], times, q[:, moving], max_delay=0.3)
        out.update(
            moving_joints=int(moving.size),
            delay_p50_ms=float(np.median(delay) * 1e3),
            delay_max_ms=float(delay.max() * 1e3),
            rms_after_shift_rad=float(np.sqrt(np.mean(rms**2))),
        )
        return out

    def _on_consumer(self, msg: JointState) -> None:
        """The consumer's newest stamp; any message (a repeated stamp too) shows it is still there."""
        stamp = self.sim_time_of(stamp_to_ns(msg.header.stamp))
        if self._consumer is not None:
            stamp = max(stamp, self._consumer[0])
        self._consumer = (stamp, self._steady.now().nanoseconds / NS)

    def _lockstep_limit(self, wall: float) -> int | None:
        """Physics steps the consumer allows (None: no limit): up to ``lockstep_lead`` past its newest
        stamp, unless it was silent for ``lockstep_timeout`` (not started yet, ended or gone)."""
        consumer = self._consumer
        if consumer is None or wall - consumer[1] > self.params["lockstep_timeout"]:
            return None
        allowed = consumer[0] + self.params["lockstep_lead"] - self.sim.time
        return max(0, int(allowed / self.sim.model.opt.timestep + 1e-9))

    def _on_base_target(self, msg: Odometry) -> None:
        if self.sim is None:
            return
        try:
            _, position, rotation = odometry_from_msg(msg)
        except MessageRejected:
            self.refused_targets += 1
            return
        t = msg.twist.twist  # in the base frame (REP 105)
        linear = rotation @ np.array([t.linear.x, t.linear.y, t.linear.z])
        angular = rotation @ np.array([t.angular.x, t.angular.y, t.angular.z])
        if not self.sim.set_harness_target(position, rotation, linear, angular):
            self.refused_targets += 1

    # ----------------------------------------------------------------- stepping and outputs
    def _on_timer(self) -> None:
        if not self.active or self.sim is None:
            return
        wall = self._steady.now().nanoseconds / NS
        steps = self.pacer.steps(wall, self.sim.time)
        limit = self._lockstep_limit(wall) if self._consumer is not None else None
        if limit is not None and limit < steps:  # waiting for the consumer: the pace restarts from here
            steps = limit
            self.lockstep_waits += 1
            self.pacer.restart(wall, self.sim.time + steps * self.sim.model.opt.timestep)
        if not self.params["publish_clock"]:  # time the sim skipped: stamps stay on the node clock
            offset = self._base_offset_ns + int(round(self.pacer.dropped * NS))
            if offset != self._clock_offset_ns:  # captures before now keep the offset of their time
                self._offsets.append((self.sim.time, self._clock_offset_ns))
                self._clock_offset_ns = offset
        if steps:
            self.session.advance(steps, self._publish_state, self._publish_mocap)
            if "clock" in self._pubs:
                self._pubs["clock"].publish(ClockMsg(clock=ns_to_stamp(self.stamp_ns(self.sim.time))))
        last_wall, last_sim = self._last_rtf
        if wall - last_wall >= 0.5:
            self.real_time_factor = (self.sim.time - last_sim) / (wall - last_wall)
            self._last_rtf = (wall, self.sim.time)

    def _publish_state(self, t: float) -> None:
        sim = self.sim
        stamp = ns_to_stamp(self.stamp_ns(t))
        names, q, v, tau = sim.joint_state()
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = names
        msg.position, msg.velocity, msg.effort = float_array(q), float_array(v), float_array(tau)
        self._pubs["joint_states"].publish(msg)
        pose = PoseStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = self.params["world_frame"]
        position, _ = sim.base_pose()
        quaternion = sim.base_quaternion_xyzw()
        pose.pose = pose_msg(position, quaternion)
        self._pubs["base_true"].publish(pose)
        self.base_log.append((self.stamp_ns(t) * 1e-9, *position.tolist(), *np.asarray(quaternion).tolist()))
        base_error = float(np.linalg.norm(position - sim.harness_target[0]))
        self.state_log.append(np.concatenate(([t], sim.controlled_positions(), [base_error])))

    def _capture_stamp_ns(self, sim_time: float) -> int:
        """The stamp of a capture at ``sim_time``: with the clock offset of that time (a capture delivered
        after the sim dropped time keeps the stamp of the instant it was taken)."""
        for until, offset in self._offsets:  # oldest first: the offset of the span holding sim_time
            if sim_time <= until:
                return offset + int(round(sim_time * NS))
        return self.stamp_ns(sim_time)

    def _publish_mocap(self, sample: Any) -> None:
        msg = PoseStamped()
        msg.header.stamp = ns_to_stamp(self._capture_stamp_ns(sample.stamp))
        msg.header.frame_id = self.params["mocap_frame"]
        msg.pose = pose_msg(sample.position, sample.quaternion)
        self._pubs["mocap"].publish(msg)
        self.mocap_published += 1

    def publish_diagnostics(self) -> None:
        if not self.active or self.sim is None:
            return
        sim, counts = self.sim, self.sim.follower.counts
        position, rotation = sim.base_pose()
        tilt = math.degrees(math.acos(max(-1.0, min(1.0, rotation[2, 2]))))
        level, message = DiagnosticStatus.OK, "simulating"
        if self.real_time_factor < 0.9 * self.params["real_time_factor"]:
            level, message = DiagnosticStatus.WARN, "slower than asked"
        if tilt > 45.0:
            level, message = DiagnosticStatus.WARN, "the robot has fallen"
        values: dict[str, Any] = {
            "sim_time": sim.time,
            "real_time_factor": self.real_time_factor,
            "step_capacity_rtf": sim.stats.real_time_factor,
            "dropped_sim_time": self.pacer.dropped,
            "overruns": self.pacer.overruns,
            "commands_accepted": counts.accepted,
            "commands_clipped": counts.clipped_commands,
            "values_clipped": counts.clipped_values,
            "inactive_commands": self.inactive_commands,
            "refused_base_targets": self.refused_targets,
            "instabilities": sim.instabilities,
            "base_height": float(position[2]),
            "base_tilt_deg": tilt,
            "mocap_published": self.mocap_published,
            "lockstep_waits": self.lockstep_waits,
        }
        values.update({f"refused_{k}": v for k, v in counts.refused.items()})
        mocap = self.session.mocap
        if mocap is not None:
            values.update({"mocap_dropped": mocap.dropped, "mocap_outliers": mocap.outliers})
        msg = DiagnosticArray()
        msg.header.stamp = ns_to_stamp(self.stamp_ns(sim.time))
        msg.status = [
            diagnostic_status(f"{self.get_name()}: simulation", self.params["robot"], level, message, values)
        ]
        self._pubs["diagnostics"].publish(msg)


def main(argv: list[str] | None = None) -> int:
    return run_node(SimNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
