"""The parameters of wearable_node: name, default, description and range (validated at configure)."""

from __future__ import annotations

from dynik_ros.io.xsens_stream import DATAGRAM_SETS, DEFAULT_PORT
from dynik_ros.nodes.calibration_services import SUIT_CALIBRATION_PARAMS
from dynik_ros.nodes.common import ParamSpec
from dynik_ros.nodes.wearable_sources import HUMAN_MODELS, SCENARIOS, SOURCES

WEARABLE_PARAMS = (
    ParamSpec(
        "source",
        "synthetic",
        "Where link states come from: a synthetic motion, a bag, or a live Xsens MVN network stream.",
        choices=SOURCES,
    ),
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
        0.0,
        "Longest span replayed from a bag or a file [s], 0 = all of it; the synthetic motion's length, "
        "0 = 10 s.",
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
        "file_path",
        "",
        "source:=file: capture file (Xsens .mvnx, .bvh or .npz; format from the content).",
    ),
    ParamSpec(
        "file_rate",
        1.0,
        "source:=file: playback speed (1 = as recorded, 2 = twice as fast: stamps / 2, velocities x 2).",
        low=0.01,
        high=100.0,
    ),
    ParamSpec(
        "file_floor",
        "apply",
        "source:=file: floor height from the feet: shift the take onto z = 0 or only report it.",
        choices=("apply", "report"),
    ),
    ParamSpec("file_skeleton", "", "source:=file, BVH: skeleton map name or YAML path ('' = detected)."),
    ParamSpec(
        "restamp",
        False,
        "Bag source: stamp with the node clock instead of the bag's source stamps (synthetic always is).",
    ),
    ParamSpec(
        "realtime",
        True,
        "true: publish at the sample times; false: offline, next sample once the IK output of the "
        "previous one was seen on ack_topic. The live xsens source publishes on arrival and refuses "
        "false.",
    ),
    ParamSpec("ack_topic", "/dynik/joint_states", "Offline mode: IK output whose stamps pace the replay."),
    ParamSpec(
        "ack_timeout",
        1.0,
        "Offline mode: publish the next sample anyway after this [s].",
        low=0.001,
        high=60.0,
    ),
    ParamSpec(
        "publish_shoes",
        False,
        "source:=synthetic: also publish the motion's true force/torque shoe readings (the ground "
        "reaction of its inverse dynamics) on /human/shoes/right and /human/shoes/left (WrenchStamped, "
        "foot frames, the link states' stamps): dynamics_node's input (nodes/shoe_source.py).",
    ),
    ParamSpec("frame_id", "world", "header.frame_id of the link states (the world frame)."),
    ParamSpec("start_delay", 0.0, "Wait after activation before the first sample [s].", low=0.0, high=600.0),
    ParamSpec(
        "link_states_reliable",
        False,
        "Publish /human/link_states reliable: a sample is resent until every matched reader has it "
        "(offline replays across processes; best-effort subscribers still connect).",
    ),
    ParamSpec(
        "min_subscribers",
        0,
        "Hold the first sample until this many subscriptions match /human/link_states (offline mode "
        "waits for at least one); dynik-ros run --processes sets it so no sample goes out before every "
        "consumer process is matched.",
        low=0,
        high=100,
    ),
    ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
    ParamSpec(
        "xsens_host",
        "0.0.0.0",
        "source:=xsens: local address the UDP socket binds to (0.0.0.0: every interface).",
    ),
    ParamSpec(
        "xsens_port",
        DEFAULT_PORT,
        "source:=xsens: UDP port MVN's Network Streamer sends to (MVN's default 9763).",
        low=1,
        high=65535,
    ),
    ParamSpec(
        "xsens_character",
        0,
        "source:=xsens: character (avatar) id to follow; 0 in a single-person setup.",
        low=0,
        high=255,
    ),
    ParamSpec(
        "xsens_datagrams",
        "02+21+22",
        "source:=xsens: MVN datagram types that make a sample (tick them in the Network Streamer): "
        "02 pose + 21 linear + 22 angular kinematics; 21+22 (pose from them); 02 (no twists published).",
        choices=tuple(DATAGRAM_SETS),
    ),
    ParamSpec(
        "xsens_position_unit",
        "m",
        "source:=xsens: unit of streamed positions and velocities (m today; cm for old MVN Studio "
        "senders, as the specification's section 2.5.6 still says).",
        choices=("m", "cm"),
    ),
    ParamSpec(
        "xsens_angular_unit",
        "rad/s",
        "source:=xsens: unit of streamed angular velocities (the specification gives none).",
        choices=("rad/s", "deg/s"),
    ),
    ParamSpec(
        "xsens_angular_velocity_frame",
        "world",
        "source:=xsens: frame of streamed angular velocities: world (the specification's 'global') or "
        "segment (rotated to world with the segment orientation).",
        choices=("world", "segment"),
    ),
    ParamSpec(
        "xsens_timeout",
        1.0,
        "source:=xsens: /diagnostics warns when no complete sample arrived for this long [s].",
        low=0.01,
        high=600.0,
    ),
    *SUIT_CALIBRATION_PARAMS,
)


SYNTHETIC_DEFAULT_DURATION = 10.0  # [s] the synthetic motion's length when ``duration`` is 0 (the default)


def synthetic_duration(params: dict) -> float:
    """The synthetic source's length: ``duration``, or :data:`SYNTHETIC_DEFAULT_DURATION` where it is 0
    (``duration``'s default is 0 so that a bag or a file is replayed whole unless told otherwise)."""
    return float(params["duration"]) or SYNTHETIC_DEFAULT_DURATION
