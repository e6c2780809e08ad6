"""Mutated ``sensor_msgs/MultiDOFJointState`` link states, as the serialized bytes a publisher sends.

ROS-free: :func:`encode_link_states` writes the message's plain little-endian CDR (XCDR1, what the ROS 2
RMWs put on the wire; a test checks it against rclpy's own serializer), so a harness publishes them raw
(``Publisher.publish(bytes)``) without building seven Python objects per link, and so the byte-level
mutations (truncation, bit flips, wrong counts) are made here too.

A clean stream (:class:`CleanStream`) is an endless synthetic walk; :func:`mutate` turns one of its
samples into one of :data:`LINK_KINDS`. Kinds in :data:`PERSISTENT_KINDS` change the stream itself from
then on (the world origin moves 100 m, the world turns half a turn, the sender's clock jumps 15 s ahead or
back): the first messages of the new regime are the "mutated" ones, the rest of the stream is clean again
in the new regime, and the ground truth follows. Everything is a function of the generator passed in: the
same seed gives the same bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dynik_ros.core.quaternion import rotation_from_quaternion

NS = 1_000_000_000
YEAR_NS = 365 * 24 * 3600 * NS
CLOCK_JUMP_NS = 15 * NS  # beyond ik_node's default max_stamp_jump (10 s)
TELEPORT_M = 100.0

SINGLE_KINDS = (
    "nan", "inf", "huge_twist", "huge_angular", "huge_position", "zero_quaternion", "scaled_quaternion",
    "short_twists", "short_transforms", "unknown_name", "missing_link", "duplicate_name", "empty",
    "future_stamp", "near_future_stamp", "past_stamp", "zero_stamp", "negative_stamp", "repeated_stamp",
    "backwards_stamp",
    "teleport", "half_turn", "garbage_bytes", "empty_bytes", "truncated", "bit_flipped",
)  # fmt: skip
"""One-off bad messages between clean ones."""
PERSISTENT_KINDS = ("teleport_persistent", "half_turn_persistent", "clock_forward", "clock_back")
"""Changes of the stream that stay: the person re-registered elsewhere, the world re-aligned, the sender's
clock re-set."""
LINK_KINDS = SINGLE_KINDS + PERSISTENT_KINDS


# ----------------------------------------------------------------------------- CDR
_ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR little endian, options 0


class _Writer:
    def __init__(self) -> None:
        self.body = bytearray()

    def align(self, n: int) -> None:
        self.body += b"\x00" * (-len(self.body) % n)

    def u32(self, value: int) -> None:
        self.align(4)
        self.body += struct.pack("<I", value & 0xFFFFFFFF)

    def string(self, text: str) -> None:
        data = text.encode("utf-8")
        self.u32(len(data) + 1)
        self.body += data + b"\x00"

    def doubles(self, values: np.ndarray, width: int, count: int | None = None) -> None:
        """A sequence of ``width``-double structs; ``count`` overrides the announced length."""
        values = np.ascontiguousarray(values, dtype="<f8").reshape(-1, width)
        self.u32(len(values) if count is None else count)
        if len(values):
            self.align(8)
            self.body += values.tobytes()


def encode_link_states(
    stamp_ns: int,
    names: Sequence[str],
    poses: np.ndarray,
    twists: np.ndarray | None = None,
    frame_id: str = "world",
    sec_nanosec: tuple[int, int] | None = None,
) -> bytes:
    """Serialized ``MultiDOFJointState``: ``poses`` ``(n, 7)`` rows ``x y z qx qy qz qw``, ``twists``
    ``(m, 6)`` rows ``vx vy vz wx wy wz`` (``m`` may differ from ``n``: that is a mutation), no wrenches.
    ``sec_nanosec`` writes a raw stamp (e.g. a negative ``sec``) instead of ``stamp_ns``."""
    w = _Writer()
    sec, nanosec = sec_nanosec if sec_nanosec is not None else divmod(int(stamp_ns), NS)
    w.body += struct.pack("<iI", sec, nanosec)
    w.string(frame_id)
    w.u32(len(names))
    for name in names:
        w.string(name)
    w.doubles(poses, 7)
    w.doubles(np.zeros((0, 6)) if twists is None else twists, 6)
    w.u32(0)  # wrench[]
    return _ENCAPSULATION + bytes(w.body)


# ----------------------------------------------------------------------------- clean stream
@dataclass
class LinkSample:
    """One sample: link names, ``(L, 7)`` poses (position, quaternion xyzw), ``(L, 6)`` world twists."""

    stamp_ns: int
    names: list[str]
    poses: np.ndarray
    twists: np.ndarray

    def encode(self) -> bytes:
        return encode_link_states(self.stamp_ns, self.names, self.poses, self.twists)

    def rotations(self) -> np.ndarray:
        return rotation_from_quaternion(self.poses[:, 3:])


def walk(seconds: float, rate: float, model: str = "human66") -> tuple[list[str], np.ndarray, np.ndarray]:
    """A synthetic walk of ``model``'s 23 links: names, ``(N, L, 7)`` poses and ``(N, L, 6)`` twists.

    ``seconds`` is rounded to a whole number of gait cycles (at least one), so that :class:`CleanStream`'s
    laps join where the walk itself would go on: a 20 s lap of the 1.1 s cycle ended 2/11 of a cycle
    early, and every seam jumped a foot 0.26 m forward (the IK then needed ~0.9 s to catch up, which the
    fuzz campaign blamed on the bad input just before)."""
    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.core.robot_model import RobotModel
    from dynik_ros.models.assets import urdf_path
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height
    from dynik_ros.motion.gait import PROGRAMMES
    from dynik_ros.motion.synthetic import synthesize

    cycle = PROGRAMMES["walking"].cycle_time
    samples = int(round(max(1, round(seconds / cycle)) * cycle * rate))
    robot = RobotModel.from_urdf_file(urdf_path(model))
    motion = synthesize(
        robot, "walking", samples / rate, rate, list(XSENS_SEGMENTS), pelvis_height(Subject())
    )
    poses = np.concatenate((motion.positions, quaternion_from_rotation(motion.rotations)), axis=2)
    twists = np.concatenate((motion.linear_velocities, motion.angular_velocities), axis=2)
    return list(motion.links), poses, twists


def _half_turn_quaternions(q: np.ndarray) -> np.ndarray:
    """``z(pi) * q`` for ``(..., 4)`` xyzw quaternions: ``(x, y, z, w) -> (-y, x, w, -z)``."""
    return np.stack((-q[..., 1], q[..., 0], q[..., 3], -q[..., 2]), axis=-1)


class CleanStream:
    """An endless walk at ``period_ns``: each lap of ``poses`` is shifted by the distance walked (no
    teleport at the seams, only a small gait-phase mismatch), then the persistent changes applied: a
    100 m shift of the world origin, a half turn of the world about z, a clock offset."""

    def __init__(
        self, names: list[str], poses: np.ndarray, twists: np.ndarray, period_ns: int, start_ns: int
    ):
        self.names, self.poses, self.twists = names, poses, twists
        self.period_ns = int(period_ns)
        pelvis = names.index("Pelvis")
        step = poses[-1, pelvis, :3] - poses[-2, pelvis, :3]
        self.lap_shift = poses[-1, pelvis, :3] - poses[0, pelvis, :3] + step
        self.lap_shift[2] = 0.0
        self.k = 0
        self.stamp_ns = int(start_ns)  # of the last sample taken
        self.teleported = False
        self.turned = False
        self.clock_offset_ns = 0

    def apply(self, kind: str) -> None:
        """A persistent change (:data:`PERSISTENT_KINDS`): teleports and turns toggle (the stream stays
        within reach of the position bounds), clock jumps add up."""
        if kind == "teleport_persistent":
            self.teleported = not self.teleported
        elif kind == "half_turn_persistent":
            self.turned = not self.turned
        elif kind == "clock_forward":
            self.clock_offset_ns += CLOCK_JUMP_NS
        elif kind == "clock_back":
            self.clock_offset_ns -= CLOCK_JUMP_NS
        else:
            raise ValueError(f"not a persistent kind: {kind}")

    def sample(self, k: int, stamp_ns: int) -> LinkSample:
        """Sample ``k`` of the endless walk, in the stream's current regime, stamped ``stamp_ns``."""
        n = len(self.poses)
        poses = self.poses[k % n].copy()
        twists = self.twists[k % n].copy()
        poses[:, :3] += (k // n) * self.lap_shift
        if self.teleported:
            poses[:, 0] += TELEPORT_M
        if self.turned:  # the world turned half a turn about z: positions, orientations, velocities
            poses[:, :2] *= -1.0
            poses[:, 3:] = _half_turn_quaternions(poses[:, 3:])
            twists[:, [0, 1, 3, 4]] *= -1.0
        return LinkSample(stamp_ns, self.names, poses, twists)

    def next(self) -> LinkSample:
        """The next clean sample (one period after the last one, plus the clock offset)."""
        self.k += 1
        self.stamp_ns += self.period_ns
        return self.sample(self.k, self.stamp_ns + self.clock_offset_ns)

    @property
    def last_stamp_ns(self) -> int:
        """Stamp of the last clean sample as sent (clock offset included)."""
        return self.stamp_ns + self.clock_offset_ns


# ----------------------------------------------------------------------------- mutations
def mutate(
    kind: str, sample: LinkSample, stamp_ns: int, last_stamp_ns: int, rng: np.random.Generator
) -> bytes:
    """The serialized message of one-off ``kind`` (:data:`SINGLE_KINDS`) made from ``sample``, stamped
    ``stamp_ns`` unless the kind is about stamps (``last_stamp_ns``: the last clean stamp sent)."""
    names = list(sample.names)
    poses, twists = sample.poses.copy(), sample.twists.copy()
    n = len(names)
    i = int(rng.integers(n))
    stamp, raw_stamp = stamp_ns, None
    if kind == "nan":
        poses[i, int(rng.integers(7))] = np.nan
    elif kind == "inf":
        twists[i, int(rng.integers(6))] = -np.inf if rng.integers(2) else np.inf
    elif kind == "huge_twist":
        twists[i, :3] = (1e30, -1e30, 1e30)
    elif kind == "huge_angular":
        twists[i, 3:] = (-1e30, 1e30, 1e30)
    elif kind == "huge_position":
        poses[i, int(rng.integers(3))] = 1e20
    elif kind == "zero_quaternion":
        poses[i, 3:] = 0.0
    elif kind == "scaled_quaternion":
        poses[i, 3:] *= 2.0
    elif kind == "short_twists":
        twists = twists[:-1]
    elif kind == "short_transforms":
        poses = poses[:-1]
    elif kind == "unknown_name":
        names[i] = "NotALink"
    elif kind == "missing_link":
        del names[i]
        poses, twists = np.delete(poses, i, axis=0), np.delete(twists, i, axis=0)
    elif kind == "duplicate_name":
        names[i] = names[(i + 1) % n]
    elif kind == "empty":
        names, poses, twists = [], poses[:0], twists[:0]
    elif kind == "future_stamp":
        stamp = last_stamp_ns + YEAR_NS
    elif kind == "near_future_stamp":  # ahead of the stream by less than a clock jump (1.5-9 s)
        stamp = last_stamp_ns + int(rng.integers(1_500_000_000, 9_000_000_000))
    elif kind == "past_stamp":
        stamp = max(last_stamp_ns - YEAR_NS, 1)
    elif kind == "zero_stamp":
        stamp = 0
    elif kind == "negative_stamp":
        raw_stamp = (-int(rng.integers(1, 2**31)), int(rng.integers(NS)))
    elif kind == "repeated_stamp":
        stamp = last_stamp_ns
    elif kind == "backwards_stamp":
        stamp = last_stamp_ns - int(rng.integers(1, 400_000_000))  # out of order or stale
    elif kind == "teleport":
        poses[:, 0] += TELEPORT_M
    elif kind == "half_turn":
        poses[:, 3:] = _half_turn_quaternions(poses[:, 3:])
    elif kind == "garbage_bytes":
        return rng.integers(0, 256, int(rng.integers(1, 2000)), dtype=np.uint8).tobytes()
    elif kind == "empty_bytes":
        return b""
    elif kind in ("truncated", "bit_flipped"):
        data = encode_link_states(stamp, names, poses, twists)
        if kind == "truncated":
            return data[: int(rng.integers(0, len(data)))]
        flipped = bytearray(data)
        for j in rng.integers(0, len(flipped), int(rng.integers(1, 9))):
            flipped[j] ^= 1 << int(rng.integers(8))
        return bytes(flipped)
    else:
        raise ValueError(f"unknown link-state mutation '{kind}'")
    return encode_link_states(stamp, names, poses, twists, sec_nanosec=raw_stamp)
