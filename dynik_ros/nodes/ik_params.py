"""The parameters of ik_node: name, default, description and range (validated at configure)."""

from __future__ import annotations

from dynik_ros.core.velocity_qp import SOLVERS
from dynik_ros.nodes.calibration_services import RETARGET_CALIBRATION_PARAMS
from dynik_ros.nodes.common import ParamSpec

HUMAN_MODELS = ("human66", "human48")

IK_PARAMS = (
    ParamSpec(
        "model",
        "human66",
        "Human model to track with (ignored when robot is set).",
        choices=HUMAN_MODELS + ("",),
    ),
    ParamSpec("robot", "", "Robot to retarget to (e.g. 'g1', 'icub'); '' = track with the human model."),
    ParamSpec("config_file", "", "Retargeting YAML for the robot ('' = the robot's default map)."),
    ParamSpec(
        "locked_joints",
        [],
        "Joints held at their neutral value (beside the map's locked_joints and zero-velocity joints).",
    ),
    ParamSpec(
        "position_gain",
        10.0,
        "Position gain of K in eq. (9) for every target [1/s]; runtime-changeable. With a robot, the "
        "map's per-target gains stay until this is set away from 10.",
        low=0.0,
        high=1000.0,
        runtime=True,
    ),
    ParamSpec(
        "orientation_gain",
        10.0,
        "Orientation gain of K in eq. (9) for every target [1/s]; runtime-changeable. With a robot, "
        "the map's per-target gains stay until this is set away from 10.",
        low=0.0,
        high=1000.0,
        runtime=True,
    ),
    ParamSpec(
        "limit_gain",
        10.0,
        "Joint-limit gain k_g of eq. (12) [1/rad]; runtime-changeable.",
        low=1e-3,
        high=1000.0,
        runtime=True,
    ),
    ParamSpec(
        "qp_solver",
        "daqp",
        "QP solver of each IK step (core/velocity_qp.py): 'daqp' (dense active set, exact on the QP's rows; "
        "OSQP where it finds no optimum) or 'osqp' (the paper's one OSQP QP per step).",
        choices=SOLVERS,
    ),
    ParamSpec(
        "state_regularizer_weight",
        0.0,
        "Weight of the second seed's state regularizer (towards the previous state, per (rad/s)^2 of the "
        "step's mean velocity; core/regularizers.py); 0 = off.",
        low=0.0,
        high=1e6,
    ),
    ParamSpec(
        "velocity_regularizer_weight",
        0.0,
        "Weight of the second seed's velocity regularizer on body angular speeds above "
        "velocity_regularizer_threshold (eq. 4-5; per (rad/s)^2 of excess); 0 = off.",
        low=0.0,
        high=1e6,
    ),
    ParamSpec(
        "velocity_regularizer_threshold",
        4.0,
        "Body angular speed above which the velocity regularizer acts [rad/s].",
        low=0.0,
        high=1e4,
    ),
    ParamSpec(
        "balance",
        False,
        "Robot only: keep the CoM over the feet in contact (the map's balance section: CoM rows and hard "
        "support rows, retarget/online_balance.py), the contact state from contact_source.",
    ),
    ParamSpec(
        "floor_rows",
        "map",
        "Robot only: keep the feet's sole points on or above the ground by inequality rows of the IK's QP "
        "(core/floor_rows.py): 'on', 'off', or 'map' (the map's contact.floor_rows).",
        choices=("map", "on", "off"),
    ),
    ParamSpec(
        "contact_source",
        "kinematic",
        "With balance: 'kinematic' = the retargeter's foot contact; 'topic' = /human/contact_state "
        "(std_msgs/String none|left|right|double, e.g. dynamics_node).",
        choices=("kinematic", "topic"),
    ),
    ParamSpec(
        "link_states_reliable",
        False,
        "Subscribe to /human/link_states reliable (needs a reliable publisher: wearable_node "
        "link_states_reliable; dynik-ros run --processes sets both offline: no sample of a replay is lost).",
    ),
    ParamSpec(
        "output_depth",
        10,
        "History depth of /dynik/joint_states and /dynik/base_odom (reliable); 0 keeps all (dynik-ros run "
        "--processes offline: a bridge in another process gets every output however far behind it falls).",
        low=0,
        high=100000,
    ),
    ParamSpec(
        "base_velocity_source",
        "suit",
        "Velocity feed-forward of the targets on the floating base (the pelvis): 'suit' (as measured), "
        "'contacts' (the twist that keeps the feet in contact still, eq. 8-10 of the floating-base "
        "seed: for a suit without pelvis velocity; estimation/base_feedforward.py), 'none'.",
        choices=("suit", "contacts", "none"),
    ),
    ParamSpec("use_base_odom", False, "Take the base pose from /robot/base_odom instead of estimating it."),
    ParamSpec(
        "base_odom_velocity",
        True,
        "With use_base_odom: hold the IK's base twist at the odometry's (mocap_node's measured twist) "
        "instead of letting the QP move the base; runtime-changeable.",
        runtime=True,
    ),
    ParamSpec(
        "base_odom_extrapolate",
        True,
        "Move the base odometry to each link-state stamp with its twist (capture-stamped mocap feedback: "
        "the latency compensated at the consumer); runtime-changeable.",
        runtime=True,
    ),
    ParamSpec(
        "publish_base_target",
        False,
        "Robot only: publish the retargeted human root (the base's position and orientation targets, "
        "with their velocities) on /dynik/base_target, e.g. as sim_node's harness target in a closed loop.",
    ),
    ParamSpec(
        "base_odom_timeout",
        0.2,
        "Base odometry further than this from a link-state stamp is ignored [s].",
        low=0.0,
        high=10.0,
    ),
    ParamSpec(
        "max_input_age",
        0.5,
        "Inputs up to this much older than the newest are out of order; older ones are a step of the "
        "sender's clock, refused until 3 consecutive stamps confirm it [s].",
        low=0.0,
        high=3600.0,
    ),
    ParamSpec("max_dt", 0.1, "Longer gaps between stamps are clamped to this dt [s].", low=1e-4, high=10.0),
    ParamSpec(
        "max_step",
        0.02,
        "With a robot: a sample further than this from the previous one (and at most max_dt) is reached in "
        "equal IK steps of at most this length, the human links interpolated between the two samples and "
        "the contact rules run on every step, as dynik-retarget does offline [s]; 0 = one IK step a sample.",
        low=0.0,
        high=1.0,
    ),
    ParamSpec(
        "settle",
        0.0,
        "With a robot: IK seconds spent on the first sample (frozen, 0.01 s steps) before its own step, as "
        "dynik-retarget --settle (default 1) offline [s]; 0 = none, as Retargeter.retarget_motion. The "
        "settled pose is published once settled (bridge_node ramps the robot onto it within its limits); the "
        "settle runs one IK step per executor turn (~0.07 s wall per 0.2 s on G1, settle_time_ms in "
        "/diagnostics) and the samples meanwhile are stepped after it, in order (nodes/ik_start.py).",
        low=0.0,
        high=2.0,
    ),
    ParamSpec(
        "max_future_stamp",
        1.0,
        "Inputs stamped further ahead of the node clock are refused [s]; 0 = check against the stream "
        "only (offline replays run ahead of the clock; io/stamp_guard.py).",
        low=0.0,
        high=1e9,
    ),
    ParamSpec(
        "max_stamp_jump",
        0.5,
        "A stamp further than this after the newest input is refused until 3 consecutive ones confirm "
        "a new time base [s].",
        low=1e-3,
        high=1e9,
    ),
    ParamSpec(
        "max_link_distance",
        1e5,
        "Links further from the world origin are implausible [m] (io/plausibility.py); 100 km: a long "
        "outdoor walk stays inside, absurd values (1e20 m) do not.",
        low=1e-3,
        high=1e12,
    ),
    ParamSpec(
        "max_link_speed",
        50.0,
        "Link speeds above this, or per-sample jumps beyond it (plus 0.5 m), are implausible [m/s].",
        low=1e-3,
        high=1e12,
    ),
    ParamSpec(
        "max_link_angular_speed",
        100.0,
        "Link angular speeds above this, or per-sample turns beyond it (plus 1 rad), are implausible "
        "[rad/s].",
        low=1e-3,
        high=1e12,
    ),
    ParamSpec("publish_markers", True, "Publish /dynik/markers (targets, achieved frames, skeleton)."),
    ParamSpec("marker_rate", 30.0, "Maximum rate of /dynik/markers [Hz].", low=0.1, high=1000.0),
    ParamSpec(
        "metrics_rate",
        60.0,
        "Maximum rate of the accuracy evaluation (MNTE, RMSE) [Hz]; 0 = off. Lower it to save CPU.",
        low=0.0,
        high=10000.0,
    ),
    ParamSpec("publish_tf", True, "Publish world -> base on /tf (needs tf2_msgs)."),
    ParamSpec("world_frame", "world", "Fixed frame of the outputs."),
    ParamSpec("base_frame", "", "Base link frame ('' = the model's root link)."),
    ParamSpec("diagnostics_period", 1.0, "Period of /diagnostics [s].", low=0.01, high=60.0),
    *RETARGET_CALIBRATION_PARAMS,
)
