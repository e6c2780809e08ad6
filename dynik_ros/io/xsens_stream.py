"""Xsens MVN real-time network streaming (UDP): parser, sample assembler, receiver, encoder, simulator.

numpy and the standard library only (no ROS): ``wearable_node source:=xsens`` wraps :class:`XsensReceiver`,
and ``dynik-xsens-sim`` (:func:`main`) streams a synthetic motion in the same format so that a lab can try
the pipeline without a suit.

Wire format
-----------
Source: Xsens, *MVN real-time network streaming Protocol Specification*, document MV0305P, revision N
(September 2018, the revision that added the MVN 2019 header fields),
https://www.xsens.com/hubfs/Downloads/Manuals/MVN_real-time_network_streaming_protocol_specification.pdf
(section numbers below are that document's). Units the specification leaves open or contradicts come from
two Xsens knowledge-base pages: "Network Streamer in MVN"
(https://base.xsens.com/hc/en-us/articles/360017389520-Network-Streamer-in-MVN) and "Output Parameters in
MVN" (https://base.xsens.com/hc/en-us/articles/360017524260-Output-Parameters-in-MVN).

* Transport (2.2, 2.3): UDP (TCP also exists, not used here), default port **9763** ("XME" on a phone
  keypad). All numbers are big-endian, "network byte order" (2.4, 2.5.11); floats are IEEE 32-bit.
* Header, 24 bytes (2.4.1): 6-byte ASCII ID ``"MXTP"`` + 2-digit message type (``"MXTP02"``; the type is
  text, ``0x30 0x32``), uint32 sample counter, uint8 datagram counter, uint8 number of items, uint32 time
  code (ms since the MVN clock started; *relative*, not a wall-clock time), uint8 character (avatar) id,
  uint8 number of body segments, uint8 number of props, uint8 number of finger-tracking segments (these
  three "from MVN 2019", older senders leave them 0), 2 reserved bytes, uint16 payload size (datagram size
  minus the header; lets a receiver skip unknown types).
* Split samples (2.4.1.3): when one sample does not fit a datagram (MTU ~1500 bytes) it is sent as several
  datagrams with the same sample counter; the low 7 bits of the datagram counter are the index from 0, the
  high bit (0x80) flags the last one, so a single-datagram sample has ``0x80`` and a 3-way split ``0, 1,
  0x82``. The sample counter increments by one per sample sent (the sender may skip samples).
* Type 02, pose with quaternions (2.5.3), 32 bytes per item: int32 segment id, position x, y, z,
  quaternion q1..q4 = **w, x, y, z** ("re, i, j, k"). Z-up, right-handed by default (the Network Streamer
  can be switched to Y-up; the specification gives no axis mapping for that mode, so this module expects
  Z-up and its consistency check below catches a Y-up stream when types 21/22 come along).
* Type 21, linear segment kinematics (2.7.2), 40 bytes: id, position, global velocity, global acceleration.
* Type 22, angular segment kinematics (2.7.3), 44 bytes: id, quaternion w, x, y, z, **global** angular
  velocity, global angular acceleration. Types 21 and 22 are always Z-up, right-handed.
* Segment ids (2.5.9, 3.1): id = index + 1, so **1..23** for Pelvis, L5, L3, T12, T8, Neck, Head,
  RightShoulder, RightUpperArm, RightForeArm, RightHand, LeftShoulder, LeftUpperArm, LeftForeArm, LeftHand,
  RightUpperLeg, RightLowerLeg, RightFoot, RightToe, LeftUpperLeg, LeftLowerLeg, LeftFoot, LeftToe (the
  order of :data:`SEGMENT_NAMES`, equal to ``dynik_ros.models.human.XSENS_SEGMENTS``). Items after the 23
  body segments are props and finger segments (2.5.1, table 2); their ids are accepted up to
  :data:`MAX_ITEM_ID` and skipped.
* Each character sends its own datagrams (2.4.1.6); this receiver follows one character id.

Versions and ambiguities, made parameters (:class:`StreamUnits`, default first):

* Position unit: ``"m"`` (default) or ``"cm"``. Section 2.5.6 of the specification still says "The unit is
  cm" (text carried over from MVN Studio), while the same specification's message-type table, the MVN User
  Manual and the "Network Streamer in MVN" page say type 02 positions are in metres, which is what MVN
  Analyze/Animate sends today. ``"cm"`` is for old senders; it also scales type 21 velocities (cm/s).
* Angular velocity unit: ``"rad/s"`` (default) or ``"deg/s"``. The specification gives no unit. The
  Xsens streaming example code converts the received values with ``rad2deg``, i.e. treats them as radians;
  MVN's own displays and exports use deg/s ("Output Parameters in MVN"), hence the switch.
* Angular velocity frame: ``"world"`` (default, "segment global angular velocity" in 2.7.3) or
  ``"segment"`` (the older example code's comment says "around segment x axis"): then it is rotated to
  the world frame with the type-22 orientation, ``omega_world = R(q) omega_segment``.

Everything leaving this module is SI and world-frame (MVN's Z-up frame, its origin and heading as set by
MVN's calibration): positions [m], unit quaternions in ``(x, y, z, w)`` order (pinocchio / ROS), world
linear velocity of the segment origin [m/s] and world angular velocity [rad/s] (pinocchio's
``LOCAL_WORLD_ALIGNED`` twist). Accelerations are parsed but not passed on.

Robustness: :func:`parse_datagram` raises :class:`DatagramError` (a ``ValueError`` with a short ``reason``)
for anything malformed: wrong magic, truncated, payload size or item count mismatch, unknown or repeated
segment id, non-finite number, zero or non-unit quaternion. It never raises anything else on arbitrary
bytes. :class:`SampleAssembler` merges the datagrams of one sample counter and character, and drops, with
counts, what cannot make a complete sample: late (out-of-order) or duplicate datagrams, samples overtaken
by a newer complete one, samples whose datagram types disagree.
"""

from __future__ import annotations

import argparse
import select
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from dynik_ros.io.mvn_assembler import ASSEMBLER_COUNTS, SampleAssembler, XsensSample
from dynik_ros.io.mvn_protocol import (
    ANGULAR,
    DATAGRAM_ERRORS,
    DATAGRAM_SETS,
    DEFAULT_PORT,
    HEADER_SIZE,
    ITEM_SIZES,
    LINEAR,
    POSE,
    SEGMENT_NAMES,
    SUPPORTED_TYPES,
    Datagram,
    DatagramError,
    StreamUnits,
    encode_datagram,
    encode_sample,
    parse_datagram,
)

__all__ = [  # the names this module had before the protocol and the assembler moved out
    "ANGULAR",
    "ASSEMBLER_COUNTS",
    "DATAGRAM_ERRORS",
    "DATAGRAM_SETS",
    "DEFAULT_PORT",
    "HEADER_SIZE",
    "ITEM_SIZES",
    "LINEAR",
    "POSE",
    "SEGMENT_NAMES",
    "SUPPORTED_TYPES",
    "Datagram",
    "DatagramError",
    "SampleAssembler",
    "StreamUnits",
    "XsensReceiver",
    "XsensSample",
    "encode_datagram",
    "encode_sample",
    "main",
    "parse_datagram",
    "stream_synthetic",
]


# --------------------------------------------------------------------------- receiving
class XsensReceiver:
    """Non-blocking UDP receiver: bound at construction, :meth:`poll` returns the samples completed since
    the last call (never blocks); :meth:`wait` blocks until something arrived, for a receive thread.
    ``clock`` stamps each datagram on arrival (``received_ns`` of the samples). Not thread-safe: one thread
    calls ``poll``.

    Raises:
        OSError: the socket cannot be bound (``socket.gaierror`` for a host that does not resolve).
    """

    def __init__(
        self,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        assembler: SampleAssembler | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        max_datagrams_per_poll: int = 1000,
        receive_buffer: int = 1 << 20,
    ):
        self.assembler = assembler or SampleAssembler()
        self.clock = clock
        self.max_datagrams_per_poll = max(1, int(max_datagrams_per_poll))
        self.errors = dict.fromkeys(DATAGRAM_ERRORS, 0)
        self.socket_errors = 0
        self.last_error = ""
        family, _, _, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE
        )[0]
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            except OSError:
                pass  # keep the system default
            self._sock.bind(address)
            self._sock.setblocking(False)
        except OSError:
            self._sock.close()
            raise
        self.address = self._sock.getsockname()[:2]

    @property
    def port(self) -> int:
        return int(self.address[1])

    @property
    def bad_datagrams(self) -> int:
        return sum(self.errors.values())

    def wait(self, timeout: float) -> bool:
        """Block until a datagram is queued (True) or ``timeout`` seconds passed (False); for a receive
        thread (``poll`` itself never blocks). False at once on a closed socket."""
        try:
            readable, _, _ = select.select([self._sock], [], [], timeout)
        except (OSError, ValueError):  # closed meanwhile
            return False
        return bool(readable)

    def _recv(self) -> bytes | None:
        """One queued datagram, or None when none is queued."""
        while True:
            try:
                return self._sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:  # e.g. ECONNREFUSED left by an ICMP error: count it, read on
                self.socket_errors += 1
                self.last_error = f"socket: {exc}"
                if self.socket_errors % 1000 == 0:
                    return None  # a socket that only fails: give the caller its turn back

    def poll(self) -> list[XsensSample]:
        """Read what has arrived (at most ``max_datagrams_per_poll``) and return the completed samples."""
        samples: list[XsensSample] = []
        for _ in range(self.max_datagrams_per_poll):
            data = self._recv()
            if data is None:
                break
            samples += self.feed(data, self.clock())
        return samples

    def feed(self, data: bytes, received_ns: int) -> list[XsensSample]:
        """Parse and assemble one datagram (what :meth:`poll` does for each; counts malformed ones)."""
        try:
            datagram = parse_datagram(data)
        except DatagramError as exc:
            self.errors[exc.reason] += 1
            self.last_error = str(exc)
            return []
        return self.assembler.add(datagram, received_ns)

    def drain(self) -> int:
        """Discard every queued datagram (e.g. what arrived while the node was inactive); how many."""
        n = 0
        while n < 1_000_000 and self._recv() is not None:
            n += 1
        return n

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> XsensReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- simulator
def stream_synthetic(
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    model: str = "human66",
    scenario: str = "walking",
    rate: float = 60.0,
    duration: float = 10.0,
    loop: bool = False,
    count: int | None = None,
    character_id: int = 0,
    types: Sequence[str] = DATAGRAM_SETS["02+21+22"],
    units: StreamUnits | None = None,
    log: Callable[[str], None] | None = print,
) -> int:
    """Stream a synthetic motion of the ``model`` (``dynik_ros.motion.synthetic``, the same as
    ``wearable_node source:=synthetic``) as MVN datagrams to ``host:port`` at ``rate`` Hz, paced in real
    time; ``loop`` restarts the motion (the sample counter keeps increasing), ``count`` stops after that
    many samples. Returns the number of samples sent."""
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.core.robot_model import RobotModel
    from dynik_ros.models.assets import urdf_path
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.motion.synthetic import synthesize

    robot = RobotModel.from_urdf_file(urdf_path(model))
    motion = synthesize(robot, scenario, duration, rate, list(XSENS_SEGMENTS), pelvis_height(Subject()))
    ids = np.array([SEGMENT_NAMES.index(name) + 1 for name in motion.links])
    quaternions = quaternion_from_rotation(motion.rotations)
    address = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    sent = 0
    period = 1.0 / rate
    with socket.socket(address[0], socket.SOCK_DGRAM) as sock:
        if log:
            log(
                f"streaming {model} {scenario} at {rate:g} Hz to udp://{host}:{port} (MVN types "
                f"{'+'.join(types)}, character {character_id}); Ctrl-C stops"
            )
        start = time.perf_counter()
        while count is None or sent < count:
            k = sent % len(motion) if loop else sent
            if k >= len(motion):
                break
            due = start + sent * period
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            for datagram in encode_sample(
                sent + 1,
                ids,
                motion.positions[k],
                quaternions[k],
                motion.linear_velocities[k],
                motion.angular_velocities[k],
                types=types,
                time_code=int(round(sent * period * 1000)),
                character_id=character_id,
                units=units,
            ):
                try:
                    sock.sendto(datagram, address[4])
                except OSError as exc:  # nobody listening (ICMP) or a transient error: keep streaming
                    if log and sent == 0:
                        log(f"send: {exc}")
            sent += 1
    return sent


def main(argv: Iterable[str] | None = None) -> int:
    """``dynik-xsens-sim``: a stand-in for MVN Analyze/Animate's Network Streamer."""
    parser = argparse.ArgumentParser(
        prog="dynik-xsens-sim",
        description="Stream a synthetic human motion as Xsens MVN real-time network datagrams (UDP), "
        "for wearable_node source:=xsens without a suit.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="destination address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"UDP port (default {DEFAULT_PORT})")
    parser.add_argument("--model", default="human66", choices=("human66", "human48"))
    parser.add_argument("--scenario", default="walking", choices=("walking", "running", "tpose"))
    parser.add_argument("--rate", type=float, default=60.0, help="samples per second (default 60)")
    parser.add_argument("--duration", type=float, default=10.0, help="motion length [s] (default 10)")
    parser.add_argument("--loop", action="store_true", help="restart the motion when it ends")
    parser.add_argument("--count", type=int, default=None, help="stop after this many samples")
    parser.add_argument("--character", type=int, default=0, help="character (avatar) id (default 0)")
    parser.add_argument("--datagrams", default="02+21+22", choices=tuple(DATAGRAM_SETS))
    parser.add_argument("--position-unit", default="m", choices=("m", "cm"))
    parser.add_argument("--angular-unit", default="rad/s", choices=("rad/s", "deg/s"))
    parser.add_argument("--angular-velocity-frame", default="world", choices=("world", "segment"))
    args = parser.parse_args(None if argv is None else list(argv))
    if not (args.rate > 0 and args.duration > 0) or not 0 <= args.character <= 255:
        parser.error("rate and duration must be positive, character 0..255")
    units = StreamUnits(args.position_unit, args.angular_unit, args.angular_velocity_frame)
    try:
        sent = stream_synthetic(
            args.host,
            args.port,
            model=args.model,
            scenario=args.scenario,
            rate=args.rate,
            duration=args.duration,
            loop=args.loop,
            count=args.count,
            character_id=args.character,
            types=DATAGRAM_SETS[args.datagrams],
            units=units,
        )
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"dynik-xsens-sim: {exc}", file=sys.stderr)
        return 1
    print(f"sent {sent} samples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
