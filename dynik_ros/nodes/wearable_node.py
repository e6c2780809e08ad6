"""``wearable_node``: publishes the human link states (``/human/link_states``) from a chosen source.

Sources: ``synthetic`` (a walking / running / T-pose motion of the Human66 or Human48 model, seeded
orientation noise) or ``bag`` (a ``MultiDOFJointState`` topic of a rosbag2 bag, mcap or sqlite3, read with
:func:`dynik_ros.io.bags.read_link_states`). A live suit comes with the next issue.

Pacing: ``realtime:=true`` publishes each sample when its time comes (sample stamps relative to the first
one, after ``start_delay``). ``realtime:=false`` is the offline mode: the next sample goes out as soon as
the IK's output for the previous one is seen on ``ack_topic`` (or after ``ack_timeout``), which replays
faster than real time and makes the solver's output a deterministic function of the input.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState, MultiDOFJointState

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.io.bags import read_link_states, seconds_to_ns
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    ParamSpec,
    diagnostic_status,
    run_node,
)
from dynik_ros.nodes.conversions import fill_link_states_msg, link_states_to_msg, ns_to_stamp, stamp_to_ns

HUMAN_MODELS = ("human66", "human48")
SCENARIOS = ("walking", "running", "tpose")
NS = 1_000_000_000


@dataclass
class Sample:
    """One source sample: stamp relative to the source (ns) and per-link arrays."""

    stamp_ns: int
    names: list[str]
    positions: np.ndarray  # (L, 3)
    quaternions: np.ndarray  # (L, 4) xyzw
    linear_velocities: np.ndarray | None
    angular_velocities: np.ndarray | None


class SyntheticSource:
    """A synthetic motion, sampled once at configure (a few MB for minutes of data)."""

    def __init__(self, model: str, scenario: str, duration: float, rate: float, noise: float, seed: int):
        from dynik_ros.core.robot_model import RobotModel
        from dynik_ros.models.assets import urdf_path
        from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
        from dynik_ros.motion.synthetic import NoiseSpec, synthesize

        robot = RobotModel.from_urdf_file(urdf_path(model))
        motion = synthesize(
            robot,
            scenario,
            duration,
            rate,
            list(XSENS_SEGMENTS),
            pelvis_height(Subject()),
            noise=NoiseSpec(orientation=noise) if noise > 0 else None,
            seed=seed,
        )
        self.names = list(motion.links)
        self.stamps = np.round(motion.times * NS).astype(np.int64)
        self.positions = motion.positions
        self.quaternions = quaternion_from_rotation(motion.rotations)
        self.linear = motion.linear_velocities
        self.angular = motion.angular_velocities
        self.period_ns = int(round(NS / rate))

    def __len__(self) -> int:
        return len(self.stamps)

    def samples(self) -> Iterator[Sample]:
        for k in range(len(self.stamps)):
            yield Sample(
                int(self.stamps[k]),
                self.names,
                self.positions[k],
                self.quaternions[k],
                self.linear[k],
                self.angular[k],
            )


class BagSource:
    """A ``MultiDOFJointState`` topic of a bag, streamed (never loaded whole)."""

    def __init__(self, path: str, topic: str, max_span: float):
        self.path, self.topic, self.max_span_ns = path, topic, int(max_span * NS)
        first = next(iter(self._samples()), None)  # opens the bag: errors surface at configure
        if first is None:
            raise ValueError(f"topic '{topic}' of bag '{path}' has no messages")
        second = next(iter(self._samples(skip=1)), None)
        step = (second.stamp_ns - first.stamp_ns) if second else NS // 100
        self.period_ns = int(min(max(step, NS // 1000), NS // 10))

    def _samples(self, skip: int = 0) -> Iterator[Sample]:
        start = None
        for index, (stamp_s, poses, twists) in enumerate(read_link_states(self.path, self.topic)):
            if index < skip:
                continue
            stamp = seconds_to_ns(stamp_s)
            start = stamp if start is None else start
            if self.max_span_ns and stamp - start > self.max_span_ns:
                return
            names = list(poses)
            positions = np.array([poses[n][0] for n in names], dtype=float).reshape(-1, 3)
            rotations = np.array([poses[n][1] for n in names], dtype=float).reshape(-1, 3, 3)
            lin = ang = None
            if twists:
                lin = np.array([twists[n][0] for n in names], dtype=float).reshape(-1, 3)
                ang = np.array([twists[n][1] for n in names], dtype=float).reshape(-1, 3)
            yield Sample(stamp, names, positions, quaternion_from_rotation(rotations), lin, ang)

    def samples(self) -> Iterator[Sample]:
        return self._samples()


class WearableNode(DynikLifecycleNode):
    """Lifecycle node streaming ``sensor_msgs/MultiDOFJointState`` on ``/human/link_states``."""

    PARAMS = (
        ParamSpec("source", "synthetic", "Where link states come from.", choices=("synthetic", "bag")),
        ParamSpec("scenario", "walking", "Synthetic motion.", choices=SCENARIOS),
        ParamSpec(
            "model",
            "human66",
            "Human model whose kinematics generate the synthetic motion.",
            choices=HUMAN_MODELS,
        ),
        ParamSpec("rate", 60.0, "Sample rate of the synthetic motion [Hz].", low=1.0, high=2000.0),
        ParamSpec(
            "duration",
            10.0,
            "Synthetic motion length [s]; for a bag, the longest span replayed (0 = all).",
            low=0.0,
            high=86400.0,
        ),
        ParamSpec("loop", False, "Restart the source when it ends (stamps keep increasing)."),
        ParamSpec(
            "noise_orientation",
            0.0,
            "Std of white orientation noise on synthetic links [rad].",
            low=0.0,
            high=1.0,
        ),
        ParamSpec("seed", 1, "Seed of the synthetic noise.", low=0, high=2**31 - 1),
        ParamSpec("bag_path", "", "rosbag2 bag (directory, .mcap or .db3) for source:=bag."),
        ParamSpec("bag_topic", "/human/link_states", "MultiDOFJointState topic read from the bag."),
        ParamSpec(
            "restamp",
            False,
            "Bag source: stamp with the node clock instead of the bag's source stamps (synthetic always is).",
        ),
        ParamSpec(
            "realtime",
            True,
            "true: publish at the sample times; false: offline, next sample once the IK output of the "
            "previous one was seen on ack_topic.",
        ),
        ParamSpec(
            "ack_topic", "/dynik/joint_states", "Offline mode: IK output whose stamps pace the replay."
        ),
        ParamSpec(
            "ack_timeout",
            1.0,
            "Offline mode: publish the next sample anyway after this [s].",
            low=0.001,
            high=60.0,
        ),
        ParamSpec("frame_id", "world", "header.frame_id of the link states (the world frame)."),
        ParamSpec(
            "start_delay", 0.0, "Wait after activation before the first sample [s].", low=0.0, high=600.0
        ),
        ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
    )

    def __init__(self, node_name: str = "wearable_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._source: SyntheticSource | BagSource | None = None
        self._iter: Iterator[Sample] | None = None
        self._pub = self._diag_pub = self._timer = self._diag_timer = self._ack_sub = None
        self._activated_ns = 0
        self._reset_stream()

    # ----------------------------------------------------------------- lifecycle hooks
    def _configure(self, p: dict[str, Any]) -> None:
        if p["source"] == "synthetic":
            if p["duration"] <= 0.0:
                raise ConfigError("duration", "must be > 0 for the synthetic source")
            if p["duration"] * p["rate"] < 1:
                raise ConfigError("duration", "shorter than one sample at this rate")
            self._source = SyntheticSource(
                p["model"], p["scenario"], p["duration"], p["rate"], p["noise_orientation"], p["seed"]
            )
        else:
            if not p["bag_path"]:
                raise ConfigError("bag_path", "is empty but source is 'bag'")
            try:
                self._source = BagSource(p["bag_path"], p["bag_topic"], p["duration"])
            except FileNotFoundError as exc:
                raise ConfigError("bag_path", str(exc)) from None
            except ValueError as exc:
                raise ConfigError("bag_topic", str(exc)) from None
        self._pub = self.create_lifecycle_publisher(MultiDOFJointState, "/human/link_states", SENSOR_QOS)
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        if not p["realtime"]:
            self._ack_sub = self.create_subscription(JointState, p["ack_topic"], self._on_ack, RELIABLE_QOS)
        self._reset_stream()

    def _activate(self) -> None:
        p = self.params
        self._activated_ns = self._now_ns()
        self._rebase = True
        period = (self._source.period_ns / NS) if p["realtime"] else 0.01
        self._timer = self.create_timer(max(period, 0.0005), self._on_timer)
        self._diag_timer = self.create_timer(p["diagnostics_period"], self._publish_diagnostics)

    def _deactivate(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer])
        self._timer = self._diag_timer = None

    def _release(self) -> None:
        self.destroy_entities([self._timer, self._diag_timer, self._ack_sub, self._pub, self._diag_pub])
        self._pub = self._diag_pub = self._timer = self._diag_timer = self._ack_sub = None
        self._source = None
        self._reset_stream()

    # ----------------------------------------------------------------- streaming
    def _reset_stream(self) -> None:
        self._iter: Iterator[Sample] | None = None
        self._pending: Sample | None = None
        self._first_source_ns: int | None = None
        self._last_source_ns = 0
        self._loop_shift_ns = 0  # added to source stamps on each loop
        self._offset_ns = 0  # added to source stamps when restamping with the node clock
        self._schedule_ns = 0  # realtime: publication time = output stamp + this
        self._rebase = True
        self._awaiting: int | None = None  # offline: the stamp whose IK output we wait for
        self._sent_at_ns = 0
        self._template: MultiDOFJointState | None = None
        self._template_names: list[str] = []
        self.published = 0
        self.loops = 0
        self.ack_timeouts = 0
        self.finished = False

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _peek(self) -> Sample | None:
        """The next source sample, or None when the source is exhausted (and not looping)."""
        if self._pending is None and self._source is not None:
            if self._iter is None:
                self._iter = self._source.samples()
            sample = next(self._iter, None)
            if sample is None and self.params.get("loop") and self._first_source_ns is not None:
                self.loops += 1
                self._loop_shift_ns += self._last_source_ns + self._source.period_ns - self._first_source_ns
                self._iter = self._source.samples()
                sample = next(self._iter, None)
            if sample is not None and self._first_source_ns is None:
                self._first_source_ns = sample.stamp_ns
            self._pending = sample
        return self._pending

    def _out_stamp(self, sample: Sample) -> int:
        return sample.stamp_ns + self._loop_shift_ns + self._offset_ns

    def _publish_next(self) -> bool:
        """Publish the next sample; False (and ``finished``) when the source is exhausted."""
        sample = self._peek()
        if sample is None:
            if not self.finished:
                self.finished = True
                self.get_logger().info(f"source exhausted after {self.published} samples")
            return False
        if self._rebase:
            self._rebase_stamps(sample)
        stamp = self._out_stamp(sample)
        msg = self._template
        if (
            msg is None
            or self._template_names != sample.names
            or (not msg.twist) != (sample.linear_velocities is None)
        ):
            msg = link_states_to_msg(
                stamp,
                sample.names,
                sample.positions,
                sample.quaternions,
                sample.linear_velocities,
                sample.angular_velocities,
                self.params["frame_id"],
            )
            self._template, self._template_names = msg, list(sample.names)
        else:  # same links as the previous sample: overwrite the numbers in place (10x faster)
            fill_link_states_msg(
                msg,
                stamp,
                sample.positions,
                sample.quaternions,
                sample.linear_velocities,
                sample.angular_velocities,
            )
        self.emit("link_states", stamp)
        self._pub.publish(msg)
        self.published += 1
        self._last_source_ns = sample.stamp_ns
        self._pending = None
        self._awaiting = stamp
        self._sent_at_ns = self._now_ns()
        return True

    def _rebase_stamps(self, sample: Sample) -> None:
        """After (re)activation: synthetic (or restamped) streams continue from the node clock; the
        realtime schedule maps output stamps to node-clock publication times."""
        self._rebase = False
        start = self._activated_ns + int(self.params["start_delay"] * NS)
        if self.params["source"] == "synthetic" or self.params["restamp"]:
            self._offset_ns = start - (sample.stamp_ns + self._loop_shift_ns)
        self._schedule_ns = start - self._out_stamp(sample)

    def _on_timer(self) -> None:
        if not self.active or self.finished:
            return
        now = self._now_ns()
        if now < self._activated_ns + int(self.params["start_delay"] * NS):
            return
        if self.params["realtime"]:
            for _ in range(3):  # catch up after a late tick, in bursts small enough for keep-last 10 queues
                sample = self._peek()
                if (
                    sample is not None
                    and not self._rebase
                    and self._out_stamp(sample) + self._schedule_ns > now
                ):
                    return
                if not self._publish_next():
                    return
            return
        if self.published == 0 and self._pending is None and self._pub.get_subscription_count() == 0:
            return  # offline: nobody listens yet (discovery); waiting keeps the replay complete
        if self._awaiting is None:
            self._publish_next()
        elif now - self._sent_at_ns > self.params["ack_timeout"] * NS:
            self.ack_timeouts += 1
            self._publish_next()

    def _on_ack(self, msg: JointState) -> None:
        if not self.active or self._awaiting is None:
            return
        if stamp_to_ns(msg.header.stamp) >= self._awaiting:
            self._awaiting = None
            self._publish_next()

    def _publish_diagnostics(self) -> None:
        if not self.active:
            return
        level = DiagnosticStatus.OK
        values = {
            "source": self.params["source"],
            "published": self.published,
            "loops": self.loops,
            "finished": self.finished,
            "ack_timeouts": self.ack_timeouts,
        }
        msg = DiagnosticArray()
        msg.header.stamp = ns_to_stamp(self._now_ns())
        msg.status = [
            diagnostic_status(
                f"{self.get_name()}: link states",
                self.params["source"],
                level,
                "finished" if self.finished else "streaming",
                values,
            )
        ]
        self._diag_pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    return run_node(WearableNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
