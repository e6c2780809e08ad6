"""``wearable_node``: publishes the human link states (``/human/link_states``) from a chosen source.

Sources: ``synthetic`` (a walking / running / T-pose motion of the Human66 or Human48 model, seeded
orientation noise), ``bag`` (a ``MultiDOFJointState`` topic of a rosbag2 bag, mcap or sqlite3, read with
:func:`dynik_ros.io.bags.read_link_states`), ``file`` (a capture file: Xsens MVNX, BVH or ``.npz``, format
from the content, read and checked at configure by :mod:`dynik_ros.io.motion_files`; ``file_rate`` scales
the playback speed: stamps divided by it, velocities multiplied, so the stream stays consistent;
restamped with the node clock like the synthetic source; ``loop`` and ``duration`` apply) or
``xsens``: a live suit through the UDP real-time network
stream of Xsens MVN Analyze/Animate (:mod:`dynik_ros.io.xsens_stream`, whose docstring gives the wire
format and its sources).

Pacing: ``realtime:=true`` publishes each sample when its time comes (sample stamps relative to the first
one, after ``start_delay``). ``realtime:=false`` is the offline mode: the next sample goes out as soon as
the IK's output for the previous one is seen on ``ack_topic`` (or after ``ack_timeout``), which replays
faster than real time and makes the solver's output a deterministic function of the input.

``source:=xsens``: the UDP socket is bound at ``configure`` (``xsens_host``, ``xsens_port``; a bind error
fails the transition naming the parameter), datagrams that arrived while inactive are discarded at
``activate``, and a receive thread (blocked on the socket while active) publishes each complete sample of
character ``xsens_character`` right away (types 02 + 21 + 22 of one sample counter by default,
``xsens_datagrams``). Stamps are the node clock when the sample's last datagram was read (strictly
increasing): MVN's time code is relative to its own clock, not a ROS time. The world frame (``frame_id``)
is MVN's Z-up frame. ``realtime:=false`` is refused (a live stream cannot wait for the IK);
``loop``, ``duration``, ``rate``, ``start_delay`` and ``restamp`` do not apply. The first sample fixes the
segment set: a later sample with other segments is refused (``refused_segments``); malformed datagrams
(per reason), late, duplicate, incomplete and inconsistent samples are counted in ``/diagnostics`` and
never stop the node.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState, MultiDOFJointState

from dynik_ros.io.xsens_stream import (
    ASSEMBLER_COUNTS,
    DATAGRAM_ERRORS,
    XsensReceiver,
)
from dynik_ros.nodes.calibration_services import SuitCalibrationServices
from dynik_ros.nodes.cdr_writer import LinkStatesWriter, publish_serialized
from dynik_ros.nodes.common import (
    RELIABLE_QOS,
    SENSOR_QOS,
    ConfigError,
    DynikLifecycleNode,
    diagnostic_status,
)
from dynik_ros.nodes.conversions import header_stamp_ns, link_states_to_msg, ns_to_stamp, stamp_to_ns
from dynik_ros.nodes.node_process import run_node
from dynik_ros.nodes.wearable_params import WEARABLE_PARAMS, synthetic_duration
from dynik_ros.nodes.wearable_sources import (  # noqa: F401 - Sample and the sources are part of this module's API
    HUMAN_MODELS,
    NS,
    SCENARIOS,
    SOURCES,
    BagSource,
    FileSource,
    Sample,
    SyntheticSource,
    XsensSource,
)

XSENS_WAIT = 0.05  # [s] the receive thread's longest block on the socket, so that deactivation is quick


class WearableNode(SuitCalibrationServices, DynikLifecycleNode):
    """Lifecycle node streaming ``sensor_msgs/MultiDOFJointState`` on ``/human/link_states``."""

    PARAMS = WEARABLE_PARAMS

    def __init__(self, node_name: str = "wearable_node", **kwargs: Any):
        super().__init__(node_name, **kwargs)
        self._source: SyntheticSource | BagSource | FileSource | XsensSource | None = None
        self._iter: Iterator[Sample] | None = None
        self._pub = self._diag_pub = self._timer = self._diag_timer = self._ack_sub = None
        self._calibration_services: list[Any] = []
        self._shoes, self._shoe_pubs = None, []
        self._xsens_thread: threading.Thread | None = None
        self._xsens_stop = threading.Event()
        self._activated_ns = 0
        self._reset_stream()

    def destroy_node(self) -> None:
        """Also stops the xsens receive thread and closes its socket (a node destroyed while active)."""
        if getattr(self, "_xsens_thread", None) is not None:
            self._stop_xsens_thread()
        if isinstance(getattr(self, "_source", None), XsensSource):
            self._source.close()
        super().destroy_node()

    # ----------------------------------------------------------------- lifecycle hooks
    def _configure(self, p: dict[str, Any]) -> None:
        if p["publish_shoes"] and p["source"] != "synthetic":
            raise ConfigError("publish_shoes", f"needs source:=synthetic (the source is '{p['source']}')")
        if p["source"] == "synthetic":
            duration = synthetic_duration(p)  # 0 (the default) = 10 s
            if duration * p["rate"] < 1:
                raise ConfigError("duration", "shorter than one sample at this rate")
            self._source = SyntheticSource(
                p["model"], p["scenario"], duration, p["rate"], p["noise_orientation"], p["seed"]
            )
        elif p["source"] == "xsens":
            if not p["realtime"]:
                raise ConfigError(
                    "realtime",
                    "is false, but the live 'xsens' source cannot wait for the IK: it publishes each sample "
                    "as it arrives (use realtime:=true)",
                )
            self._source = XsensSource(p, self._now_ns)
            self.get_logger().info(
                f"listening for Xsens MVN datagrams ({p['xsens_datagrams']}, character "
                f"{p['xsens_character']}) on udp://{p['xsens_host']}:{self._source.receiver.port}"
            )
        elif p["source"] == "file":
            if not p["file_path"]:
                raise ConfigError("file_path", "is empty but source is 'file'")
            try:
                self._source = FileSource(
                    p["file_path"], p["file_rate"], p["duration"], p["file_floor"], p["file_skeleton"]
                )
            except (OSError, ValueError) as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ConfigError("file_path", reason) from None
            for notice in self._source.notices:
                self.get_logger().warning(notice)
            self.get_logger().info(f"replaying {len(self._source)} samples of {self._source.source}")
        else:
            if not p["bag_path"]:
                raise ConfigError("bag_path", "is empty but source is 'bag'")
            try:
                self._source = BagSource(p["bag_path"], p["bag_topic"], p["duration"])
            except FileNotFoundError as exc:
                raise ConfigError("bag_path", str(exc)) from None
            except ValueError as exc:
                raise ConfigError("bag_topic", str(exc)) from None
        self._calibration_services = self._setup_suit_calibration(p)
        qos = RELIABLE_QOS if p["link_states_reliable"] else SENSOR_QOS  # best-effort readers still connect
        self._shoes = self._setup_shoes(p, qos)
        self._pub = self.create_lifecycle_publisher(MultiDOFJointState, "/human/link_states", qos)
        self._diag_pub = self.create_lifecycle_publisher(DiagnosticArray, "/diagnostics", RELIABLE_QOS)
        if not p["realtime"]:
            # raw=True: only the stamp is read (rclpy would build the IK's 66-name message per sample)
            self._ack_sub = self.create_subscription(
                JointState, p["ack_topic"], self._on_ack, RELIABLE_QOS, raw=True
            )
        self._reset_stream()

    def _activate(self) -> None:
        p = self.params
        self._activated_ns = self._now_ns()
        self._rebase = True
        if isinstance(self._source, XsensSource):
            stale = self._source.receiver.drain()  # sent while inactive: too old to publish now
            if stale:
                self.get_logger().info(f"discarded {stale} datagrams received while inactive")
            self._source.receiver.assembler.reset()
            self._xsens_last_sample_ns = self._activated_ns
            self._start_xsens_thread()
        else:
            period = (self._source.period_ns / NS) if p["realtime"] else 0.01
            self._timer = self.create_timer(max(period, 0.0005), self._on_timer)
        self._diag_timer = self.create_timer(p["diagnostics_period"], self._publish_diagnostics)

    def _deactivate(self) -> None:
        self._stop_xsens_thread()
        self.destroy_entities([self._timer, self._diag_timer])
        self._timer = self._diag_timer = None

    def _release(self) -> None:
        self._stop_xsens_thread()
        self.destroy_entities([self._timer, self._diag_timer, self._ack_sub, self._pub, self._diag_pub])
        self.destroy_entities(self._calibration_services + self._shoe_pubs)
        self._shoes, self._shoe_pubs = None, []
        self._calibration_services = []
        self._pub = self._diag_pub = self._timer = self._diag_timer = self._ack_sub = None
        if isinstance(self._source, XsensSource):
            self._source.close()
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
        self._template: LinkStatesWriter | None = None  # the serialized layout of the current link set
        self.published = 0
        self.loops = 0
        self.ack_timeouts = 0
        self.finished = False
        self.source_error = ""  # why the source failed mid-stream ('' = it did not)
        # source:=xsens
        self._xsens_names: list[str] | None = None  # segment set of the first sample
        self._xsens_last_stamp = 0
        self._xsens_last_sample_ns = 0
        self._xsens_reported = 0  # refusals + bad datagrams already reported in /diagnostics
        self.xsens_refused_segments = 0
        self.xsens_internal_errors = 0
        self._xsens_problem = ""

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _peek(self) -> Sample | None:
        """The next source sample, or None when the source is exhausted (and not looping) or failed."""
        if self._pending is None and self._source is not None and not self.source_error:
            try:
                sample = self._next_sample()
            except Exception as exc:  # noqa: BLE001 - a bag deleted or cut mid-replay: the readers' errors vary
                # the stream ends here (the IK holds its last output, the bridge its stale-input hold)
                self.source_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                self.get_logger().error(
                    f"source {self.params['source']} failed after {self.published} samples, the stream ends: "
                    f"{self.source_error}"
                )
                return None
            if sample is not None and self._first_source_ns is None:
                self._first_source_ns = sample.stamp_ns
            self._pending = sample
        return self._pending

    def _next_sample(self) -> Sample | None:
        """The source iterator's next sample, restarting it once when looping."""
        if self._iter is None:
            self._iter = self._source.samples()
        sample = next(self._iter, None)
        if sample is None and self.params.get("loop") and self._first_source_ns is not None:
            self.loops += 1
            self._loop_shift_ns += self._last_source_ns + self._source.period_ns - self._first_source_ns
            self._iter = self._source.samples()
            sample = next(self._iter, None)
        return sample

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
        self._publish(sample, stamp)
        self._last_source_ns = sample.stamp_ns
        self._pending = None
        self._awaiting = stamp
        self._sent_at_ns = self._now_ns()
        return True

    def _publish(self, sample: Sample, stamp: int) -> None:
        """``sample`` on ``/human/link_states`` with ``stamp`` (ns), calibrated (``~/calibrate``)."""
        sample = self._calibrated(sample)
        twists = sample.linear_velocities is not None and sample.angular_velocities is not None
        writer = self._template
        if writer is None or writer.names != sample.names or bool(len(writer.twists)) != twists:
            writer = LinkStatesWriter(sample.names, self.params["frame_id"], twists=twists)
            self._template = writer
        data = writer.serialize(
            stamp, sample.positions, sample.quaternions, sample.linear_velocities, sample.angular_velocities
        )
        self.emit("link_states", stamp)
        if self._shoes is not None:  # the shoes first: a consumer pairs them with the link states by stamp
            self._shoes.publish(self._shoe_pubs, sample.stamp_ns, stamp)
        publish_serialized(
            self._pub,
            data,
            lambda: link_states_to_msg(
                stamp,
                sample.names,
                sample.positions,
                sample.quaternions,
                sample.linear_velocities,
                sample.angular_velocities,
                self.params["frame_id"],
            ),
        )
        self.published += 1

    def _setup_shoes(self, p: dict[str, Any], qos: Any) -> Any:
        """``publish_shoes``: the synthetic motion's true shoe readings and their publishers."""
        if not p["publish_shoes"]:
            return None
        from geometry_msgs.msg import WrenchStamped

        from dynik_ros.nodes.shoe_source import SHOE_TOPICS, SyntheticShoes

        duration = synthetic_duration(p)
        shoes = SyntheticShoes(p["model"], p["scenario"], duration, p["rate"], self._source.stamps)
        self._shoe_pubs = [self.create_lifecycle_publisher(WrenchStamped, t, qos) for t in SHOE_TOPICS]
        return shoes

    def _rebase_stamps(self, sample: Sample) -> None:
        """After (re)activation: synthetic (or restamped) streams continue from the node clock; the
        realtime schedule maps output stamps to node-clock publication times."""
        self._rebase = False
        start = self._activated_ns + int(self.params["start_delay"] * NS)
        if self.params["source"] in ("synthetic", "file") or self.params["restamp"]:
            self._offset_ns = start - (sample.stamp_ns + self._loop_shift_ns)
        self._schedule_ns = start - self._out_stamp(sample)

    def _on_timer(self) -> None:
        if not self.active or self.finished:
            return
        now = self._now_ns()
        if now < self._activated_ns + int(self.params["start_delay"] * NS):
            return
        if self.published == 0 and self._pub.get_subscription_count() < self.params["min_subscribers"]:
            # a consumer process is not matched yet (discovery): the stream starts once it is
            self._activated_ns = now - int(self.params["start_delay"] * NS)
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

    def _on_ack(self, data: bytes | JointState) -> None:
        if not self.active or self._awaiting is None:
            return
        try:
            stamp = header_stamp_ns(data) if isinstance(data, bytes) else stamp_to_ns(data.header.stamp)
        except Exception:  # noqa: BLE001 - not a JointState: no acknowledgement (ack_timeout paces then)
            return
        if stamp >= self._awaiting:
            self._awaiting = None
            self._publish_next()

    # ----------------------------------------------------------------- source:=xsens
    def _start_xsens_thread(self) -> None:
        self._stop_xsens_thread()
        self._xsens_stop = threading.Event()
        self._xsens_thread = threading.Thread(
            target=self._xsens_loop,
            args=(self._source.receiver, self._xsens_stop),
            name=f"{self.get_name()}_xsens",
            daemon=True,
        )
        self._xsens_thread.start()

    def _stop_xsens_thread(self) -> None:
        thread, self._xsens_thread = self._xsens_thread, None
        if thread is not None:
            self._xsens_stop.set()
            thread.join(timeout=2.0)

    def _xsens_loop(self, receiver: XsensReceiver, stop: threading.Event) -> None:
        """Receive thread: blocks on the socket, publishes every sample as soon as it is complete (no
        polling timer: a 1 kHz rclpy timer costs a third of a core doing nothing). Never raises."""
        while not stop.is_set():
            try:
                if not receiver.wait(XSENS_WAIT):
                    continue
                for sample in receiver.poll():
                    if stop.is_set():
                        break
                    self._publish_xsens(sample)
            except Exception as exc:  # a bug must not take the node (and the IK behind it) down
                self.xsens_internal_errors += 1
                self._xsens_problem = f"internal error: {type(exc).__name__}: {exc}"
                self.get_logger().error(self._xsens_problem, throttle_duration_sec=5.0)
                stop.wait(0.01)

    def _publish_xsens(self, xs: Any) -> None:
        if self._xsens_names is None:
            self._xsens_names = list(xs.names)
            self.get_logger().info(
                f"first Xsens sample (counter {xs.sample_counter}, character {xs.character_id}): "
                f"{len(xs.names)} segments"
                + ("" if xs.linear_velocities is not None else ", no twists (xsens_datagrams:=02)")
            )
        elif xs.names != self._xsens_names:
            self.xsens_refused_segments += 1
            missing = [n for n in self._xsens_names if n not in xs.names]
            extra = [n for n in xs.names if n not in self._xsens_names]
            self._xsens_problem = (
                f"refused_segments: sample {xs.sample_counter} lacks {missing} / adds {extra} "
                "compared with the first sample"
            )
            self.get_logger().warning(self._xsens_problem, throttle_duration_sec=5.0)
            return
        # node clock at reception; strictly increasing so that consumers never see a repeated stamp
        stamp = max(xs.received_ns, self._xsens_last_stamp + 1)
        self._xsens_last_stamp = stamp
        self._xsens_last_sample_ns = xs.received_ns
        sample = Sample(
            stamp,
            self._xsens_names,
            xs.positions,
            xs.quaternions,
            xs.linear_velocities,
            xs.angular_velocities,
        )
        self._publish(sample, stamp)

    def xsens_counts(self) -> dict[str, int]:
        """Counters of the live stream: the assembler's, malformed datagrams per reason (``bad_<reason>``),
        socket errors, refused samples; empty for the other sources."""
        if not isinstance(self._source, XsensSource):
            return {}
        receiver = self._source.receiver
        counts = {key: receiver.assembler.counts[key] for key in ASSEMBLER_COUNTS}
        counts.update({f"bad_{reason}": receiver.errors[reason] for reason in DATAGRAM_ERRORS})
        counts["bad_datagrams"] = receiver.bad_datagrams
        counts["socket_errors"] = receiver.socket_errors
        counts["refused_segments"] = self.xsens_refused_segments
        counts["internal_errors"] = self.xsens_internal_errors
        return counts

    def _xsens_status(self, values: dict[str, Any]) -> tuple[Any, str]:
        counts = self.xsens_counts()
        receiver = self._source.receiver
        values["xsens_port"] = receiver.port
        values["xsens_character"] = self.params["xsens_character"]
        values.update(counts)
        values["last_sample_age_s"] = (self._now_ns() - self._xsens_last_sample_ns) / NS
        problems = sum(
            counts[key]
            for key in (
                "bad_datagrams",
                "late",
                "duplicate",
                "incomplete",
                "inconsistent",
                "refused_segments",
            )
        )
        problems += counts["internal_errors"]
        last = self._xsens_problem or receiver.assembler.last_drop or receiver.last_error
        values["last_problem"] = last or "none"
        new, self._xsens_reported = problems - self._xsens_reported, problems
        if values["last_sample_age_s"] > self.params["xsens_timeout"]:
            return DiagnosticStatus.WARN, (
                f"no complete Xsens sample for {values['last_sample_age_s']:.1f} s "
                f"(udp port {receiver.port}, character {self.params['xsens_character']})"
            )
        if new:
            return (
                DiagnosticStatus.WARN,
                f"streaming; {new} datagrams or samples refused since the last report",
            )
        return DiagnosticStatus.OK, "streaming"

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
        message = "finished" if self.finished else "streaming"
        if isinstance(self._source, XsensSource):
            level, message = self._xsens_status(values)
        if self.source_error:
            level, message = DiagnosticStatus.ERROR, f"source failed, stream ended: {self.source_error}"
        msg = DiagnosticArray()
        msg.header.stamp = ns_to_stamp(self._now_ns())
        msg.status = [
            diagnostic_status(
                f"{self.get_name()}: link states",
                self.params["source"],
                level,
                message,
                values,
            )
        ]
        self._diag_pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    return run_node(WearableNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
