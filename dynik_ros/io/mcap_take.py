"""A whole take's fixed-layout messages written as a rosbag2 bag (mcap storage) in whole-array copies.

``dynik-retarget`` writes one JointState and one Odometry per sample, 14 400 messages on a 60 s take at
120 Hz. Through `rosbags` (:class:`dynik_ros.io.bag_writer.BagWriter`) that cost ~0.25 s CPU: importing
``rosbags.rosbag2`` and the type store (~0.15 s; the store only gives two message definitions and their
hashes) and ~7 us of Python per message in its mcap writer. Here the records of a take are laid out as
numpy rows and the file is what `rosbags`' mcap writer (0.11) makes of the same messages written sample by
sample, record for record: the same chunks (closed past 1 MiB), message indexes, summary, statistics,
metadata record and ``metadata.yaml``. ``test_mcap_take`` checks the files byte for byte against `rosbags`'
own writer and that the definitions below are the type store's.

Only what the retarget command writes is handled (no compression, rosbag2 metadata version 9, bag names a
plain YAML scalar); anything else goes through :class:`BagWriter`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_RULE = "=" * 80 + "\n"
_HEADER = "MSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n" + _RULE
_TIME = "MSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n"
_VECTOR = "float64 x\nfloat64 y\nfloat64 z\n"

# (message definition as the type store generates it for ROS 2, RIHS01 hash); checked in test_mcap_take
DEFINITIONS = {
    "sensor_msgs/msg/JointState": (
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort\n"
        + _RULE + _HEADER + _TIME,
        "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e",
    ),
    "nav_msgs/msg/Odometry": (
        "std_msgs/Header header\nstring child_frame_id\ngeometry_msgs/PoseWithCovariance pose\n"
        "geometry_msgs/TwistWithCovariance twist\n" + _RULE + _HEADER + _TIME + _RULE
        + "MSG: geometry_msgs/PoseWithCovariance\ngeometry_msgs/Pose pose\nfloat64[36] covariance\n" + _RULE
        + "MSG: geometry_msgs/Pose\ngeometry_msgs/Point position\ngeometry_msgs/Quaternion orientation\n"
        + _RULE + "MSG: geometry_msgs/Point\n" + _VECTOR + _RULE
        + "MSG: geometry_msgs/Quaternion\nfloat64 x\nfloat64 y\nfloat64 z\nfloat64 w\n" + _RULE
        + "MSG: geometry_msgs/TwistWithCovariance\ngeometry_msgs/Twist twist\nfloat64[36] covariance\n"
        + _RULE + "MSG: geometry_msgs/Twist\ngeometry_msgs/Vector3 linear\ngeometry_msgs/Vector3 angular\n"
        + _RULE + "MSG: geometry_msgs/Vector3\n" + _VECTOR,
        "RIHS01_3cc97dc7fb7502f8714462c526d369e35b603cfc34d946e3f2eda2766dfec6e0",
    ),
}  # fmt: skip

MAGIC = b"\x89MCAP\x30\r\n"
CHUNK_SIZE = 2**20  # a chunk is closed once its records pass this many bytes (rosbags' rule)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,60}")  # bag names YAML writes unquoted, on one line
_TOPIC = re.compile(r"(/[A-Za-z0-9_]+){1,4}")  # topic names written unquoted
_YAML_WORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"}


def plain_bag_name(path: Path) -> bool:
    """Whether ``path``'s name is written as it is in ``metadata.yaml`` (no quotes, no line break)."""
    return bool(_PLAIN_NAME.fullmatch(path.name)) and path.name.lower() not in _YAML_WORDS


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def _record(op: int, content: bytes) -> bytes:
    return struct.pack("<BQ", op, len(content)) + content


def write_take_bag(
    path: Path,
    topics: Sequence[tuple[str, str, np.ndarray]],
    stamps_ns: np.ndarray,
    library: str = "dynik_ros",
) -> Path:
    """A new bag directory ``path`` holding, for each sample ``k``, the message ``payloads[k]`` of each
    ``(topic, msgtype, payloads)`` in the order given, stamped (log and publish time) ``stamps_ns[k]``
    (at least one sample, none negative); ``payloads``: ``(N, size)`` uint8 CDR messages, ``msgtype`` one
    of :data:`DEFINITIONS`, ``topic`` a plain name. ``library``: the mcap header's writer name."""
    path = Path(path)
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    n, count = len(stamps), len(topics)
    if n == 0 or stamps.min() < 0 or not plain_bag_name(path):
        raise ValueError(f"{path}: write_take_bag takes a plain bag name and one or more stamps >= 0")
    if any(not _TOPIC.fullmatch(topic) for topic, _, _ in topics):
        raise ValueError(f"topics {[t for t, _, _ in topics]}: write_take_bag takes plain names")
    if path.exists():
        raise FileExistsError(f"bag '{path}' exists already; rosbag2 bags are never overwritten")
    path.mkdir(mode=0o755, parents=True)
    # one row per sample: each topic's message record (opcode, length, channel, sequence 0, log and
    # publish times, payload) side by side, so that the rows' bytes are the messages in the order written
    times = np.ascontiguousarray(stamps.astype("<u8").view(np.uint8).reshape(n, 8))
    parts, sizes = [], []
    for channel, (_, _, payloads) in enumerate(topics, start=1):
        size = payloads.shape[1]
        head = np.frombuffer(struct.pack("<BQHI", 0x05, 22 + size, channel, 0), dtype=np.uint8)
        parts += [np.broadcast_to(head, (n, 15)), times, times, payloads]
        sizes.append(31 + size)
    stream = np.concatenate(parts, axis=1).reshape(-1)
    total = n * count
    starts = np.concatenate(([0], np.cumsum(np.tile(sizes, n))))  # message m's offset in the stream

    schemas: dict[str, int] = {}
    prefixes = []  # the schema (a type's first topic) and channel records written before its first message
    for channel, (topic, msgtype, _) in enumerate(topics, start=1):
        prefix = b""
        if msgtype not in schemas:
            schemas[msgtype] = len(schemas) + 1
            prefix += _schema(schemas[msgtype], msgtype)
        prefix += _channel(channel, schemas[msgtype], topic)
        prefixes.append(prefix)
    # bytes written up to the end of message m, prefixes included (topic t's first message is message t)
    before = np.zeros(total, dtype=np.int64)  # prefix bytes written just before message m
    before[:count] = [len(p) for p in prefixes]
    written = starts[1:] + np.cumsum(before)
    message_at = written - starts[1:] + starts[:-1]  # where message m starts, prefixes included

    file = bytearray(MAGIC + _record(0x01, _string("ros2") + _string(library)))
    chunk_indexes, m = [], 0
    while m < total:  # a chunk: closed after the message that takes it past CHUNK_SIZE (rosbags' rule)
        base = int(written[m - 1]) if m else 0
        end = min(int(np.searchsorted(written, base + CHUNK_SIZE, side="right")), total - 1) + 1
        pieces, mark = [], m
        for t in range(m, min(end, count)):  # the prefixes of the topics first written in this chunk
            pieces += [stream[starts[mark] : starts[t]].tobytes(), prefixes[t]]
            mark = t
        pieces.append(stream[starts[mark] : starts[end]].tobytes())
        body = b"".join(pieces)
        index = {}  # channel: its messages' (log time, offset in the chunk), channels in first-message order
        for first in range(m, min(end, m + count)):
            ms = np.arange(first, end, count)
            pairs = np.empty((len(ms), 2), dtype="<u8")
            pairs[:, 0], pairs[:, 1] = stamps[ms // count], message_at[ms] - base
            index[first % count + 1] = pairs
        chunk_stamps = stamps[m // count : (end - 1) // count + 1]
        begin, last = int(chunk_stamps.min()), int(chunk_stamps.max())
        chunk_start = len(file)
        file += _record(0x06, struct.pack("<QQQI", begin, last, len(body), 0) + _string("")
                        + struct.pack("<Q", len(body)) + body)  # fmt: skip
        chunk_end = len(file)
        offsets = []
        for channel, pairs in index.items():
            offsets.append((channel, len(file)))
            file += _record(0x07, struct.pack("<HI", channel, pairs.nbytes) + pairs.tobytes())
        chunk_indexes.append(
            struct.pack("<QQQQI", begin, last, chunk_start, chunk_end - chunk_start, 10 * len(offsets))
            + b"".join(struct.pack("<HQ", channel, at) for channel, at in offsets)
            + struct.pack("<Q", len(file) - chunk_end)
            + _string("")
            + struct.pack("<QQ", len(body), len(body))
        )
        m = end
    return _close(path, file, topics, stamps, schemas, chunk_indexes)


def _schema(schema: int, msgtype: str) -> bytes:
    content = struct.pack("<H", schema) + _string(msgtype) + _string("ros2msg")
    return _record(0x03, content + _string(DEFINITIONS[msgtype][0]))


def _channel(channel: int, schema: int, topic: str) -> bytes:
    qos = _string("offered_qos_profiles") + _string("[]")
    content = struct.pack("<HH", channel, schema) + _string(topic) + _string("cdr")
    return _record(0x04, content + struct.pack("<I", len(qos)) + qos)


def _metadata_yaml(name: str, topics: Sequence[tuple[str, str, np.ndarray]], stamps: np.ndarray) -> str:
    """``metadata.yaml`` as rosbags writes it (ruamel's safe dump: keys sorted, the hash on its own line)."""
    start, duration = int(stamps.min()), int(stamps.max()) - int(stamps.min())
    count = len(stamps) * len(topics)
    lines = [
        "rosbag2_bagfile_information:",
        "  compression_format: ''",
        "  compression_mode: ''",
        "  custom_data: null",
        "  duration:",
        f"    nanoseconds: {duration}",
        "  files:",
        "  - duration:",
        f"      nanoseconds: {duration}",
        f"    message_count: {count}",
        f"    path: {name}.mcap",
        "    starting_time:",
        f"      nanoseconds_since_epoch: {start}",
        f"  message_count: {count}",
        "  relative_file_paths:",
        f"  - {name}.mcap",
        "  ros_distro: rosbags",
        "  starting_time:",
        f"    nanoseconds_since_epoch: {start}",
        "  storage_identifier: mcap",
        "  topics_with_message_count:",
    ]
    for topic, msgtype, _ in topics:
        lines += [
            f"  - message_count: {len(stamps)}",
            "    topic_metadata:",
            f"      name: {topic}",
            "      offered_qos_profiles: []",
            "      serialization_format: cdr",
            f"      type: {msgtype}",
            "      type_description_hash: ",
            f"        {DEFINITIONS[msgtype][1]}",
        ]
    lines.append("  version: 9")
    return "\n".join(lines) + "\n"


def _close(
    path: Path,
    file: bytearray,
    topics: Sequence[tuple[str, str, np.ndarray]],
    stamps: np.ndarray,
    schemas: dict[str, int],
    chunk_indexes: list[bytes],
) -> Path:
    """The metadata record, data end, summary (schemas, channels, chunk indexes, metadata index,
    statistics), summary offsets and footer, in rosbags' order; then ``metadata.yaml``."""
    text = _metadata_yaml(path.name, topics, stamps)
    inner = "\n".join(line[2:] for line in text.splitlines()[1:]).strip()
    metadata_start = len(file)
    entry = _string("serialized_metadata") + _string(inner)
    file += _record(0x0C, _string("rosbag2") + struct.pack("<I", len(entry)) + entry)
    metadata_end = len(file)
    file += _record(0x0F, struct.pack("<I", 0))
    schema_start = len(file)
    for msgtype, schema in schemas.items():
        file += _schema(schema, msgtype)
    channel_start = len(file)
    for channel, (topic, msgtype, _) in enumerate(topics, start=1):
        file += _channel(channel, schemas[msgtype], topic)
    chunk_start = len(file)
    for index in chunk_indexes:
        file += _record(0x08, index)
    metadata_index_start = len(file)
    file += _record(
        0x0D, struct.pack("<QQ", metadata_start, metadata_end - metadata_start) + _string("rosbag2")
    )
    statistics_start = len(file)
    n, count = len(stamps), len(topics)
    statistics = struct.pack("<QHIIIIQQI", n * count, len(schemas), count, 0, 1, len(chunk_indexes),
                             int(stamps.min()), int(stamps.max()), 10 * count)  # fmt: skip
    statistics += b"".join(struct.pack("<HQ", channel, n) for channel in range(1, count + 1))
    file += _record(0x0B, statistics)
    summary_offset_start = len(file)
    groups = ((0x03, schema_start, channel_start), (0x04, channel_start, chunk_start),
              (0x08, chunk_start, metadata_index_start), (0x0D, metadata_index_start, statistics_start),
              (0x0B, statistics_start, summary_offset_start))  # fmt: skip
    for op, begin, end in groups:
        if op in (0x0D, 0x0B) or begin != end:
            file += _record(0x0E, struct.pack("<BQQ", op, begin, end - begin))
    file += _record(0x02, struct.pack("<QQI", schema_start, summary_offset_start, 0)) + MAGIC
    with open(path / f"{path.name}.mcap", "xb") as stream:
        stream.write(file)
    temporary = path / "metadata.yaml.tmp"
    temporary.write_text(text, "utf8")
    temporary.replace(path / "metadata.yaml")
    return path
