"""The sources of ``wearable_node``: one sample type and a class per ``source`` (see the node's docstring).

``SyntheticSource`` (a motion of the human model, sampled at configure), ``BagSource`` (a link-state topic of
a rosbag2 bag), ``FileSource`` (a capture file: MVNX, BVH or ``.npz``) and ``XsensSource`` (the bound UDP
socket and sample assembler of a live Xsens MVN stream). Errors a user can fix are raised as
:class:`~dynik_ros.nodes.common.ConfigError` naming the parameter.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynik_ros.core.quaternion import quaternion_from_rotation
from dynik_ros.io.bags import read_link_states
from dynik_ros.io.xsens_stream import DATAGRAM_SETS, SampleAssembler, StreamUnits, XsensReceiver
from dynik_ros.nodes.common import ConfigError

HUMAN_MODELS = ("human66", "human48")
SCENARIOS = ("walking", "running", "tpose")
SOURCES = ("synthetic", "bag", "xsens", "file")
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


class ArraySource:
    """A source held in arrays (``stamps``, ``names``, ``positions``, ``quaternions``, ``linear``,
    ``angular``), set by the subclass at configure."""

    stamps: np.ndarray
    names: list[str]
    positions: np.ndarray
    quaternions: np.ndarray
    linear: np.ndarray
    angular: np.ndarray

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


class SyntheticSource(ArraySource):
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
        for index, (stamp, poses, twists) in enumerate(
            read_link_states(self.path, self.topic, stamp_ns=True)
        ):
            if index < skip:
                continue
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


class FileSource(ArraySource):
    """A capture file (MVNX, BVH, .npz) read whole at configure and checked (floor, units, samples)."""

    def __init__(self, path: str, speed: float, max_span: float, floor: str, skeleton: str):
        from dynik_ros.io.motion_files import detect_format, read_motion_file

        fmt = detect_format(path)
        options: dict[str, Any] = {"floor": floor}
        if fmt == "bvh" and skeleton:
            options["skeleton"] = skeleton
        motion = read_motion_file(path, fmt, **options)
        self.notices = list(motion.notices)
        times = np.asarray(motion.times, dtype=float) - float(motion.times[0])
        keep = times <= max_span if max_span > 0 else np.ones(len(times), dtype=bool)
        self.names = list(motion.links)
        self.stamps = np.round(times[keep] / speed * NS).astype(np.int64)
        self.positions = motion.positions[keep]
        self.quaternions = quaternion_from_rotation(motion.rotations[keep])
        self.linear = motion.linear_velocities[keep] * speed
        self.angular = motion.angular_velocities[keep] * speed
        step = np.median(np.diff(self.stamps)) if len(self.stamps) > 1 else NS // 100
        self.period_ns = int(min(max(step, NS // 1000), NS // 10))
        self.source = motion.source


class XsensSource:
    """A live Xsens MVN network stream: the bound UDP socket and the sample assembler."""

    def __init__(self, p: dict[str, Any], clock: Any):
        units = StreamUnits(
            p["xsens_position_unit"], p["xsens_angular_unit"], p["xsens_angular_velocity_frame"]
        )
        assembler = SampleAssembler(DATAGRAM_SETS[p["xsens_datagrams"]], units, p["xsens_character"])
        host, port = p["xsens_host"], p["xsens_port"]
        try:
            self.receiver = XsensReceiver(host, port, assembler, clock=clock)
        except socket.gaierror as exc:
            raise ConfigError("xsens_host", f"'{host}' does not resolve: {exc}") from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EPERM):
                raise ConfigError(
                    "xsens_port", f"cannot bind UDP {host}:{port}: {reason} (another receiver on this port?)"
                ) from None
            raise ConfigError("xsens_host", f"cannot bind UDP {host}:{port}: {reason}") from None

    def close(self) -> None:
        self.receiver.close()
