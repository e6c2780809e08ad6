"""mocap_node per the RH5 mocap seed (eq. 1-2): ground truth from known transform chains.

The rigid-body poses are made by :class:`dynik_ros.sim.mocap.MocapSimulator` (its own implementation of
``T_cm = T_cw T_wb T_bm``, checked against homogeneous matrices in test_sim_mocap.py) or by explicit
matrices here, from a base trajectory known in closed form; the estimator's output is compared with that
trajectory at the output's stamp. ROS tests use a real mocap_node on real DDS (private domain) and wait on
conditions only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from node_harness import Harness, mocap, ok
from scipy.spatial.transform import Rotation

from dynik_ros.nodes.base_estimation import ACCEPTED, OUTLIER, EstimatorConfig, MocapBaseEstimator
from dynik_ros.sim.mocap import MocapConfig, MocapSimulator

CAMERA = (0.5, -1.0, 0.2, 0.0, 0.0, math.radians(30.0))  # the world in the camera frame, z up
MARKER = (0.03, -0.02, 0.1, 0.0, 0.2, 0.1)  # the rigid body in the base frame


def truth(t: float) -> tuple[np.ndarray, np.ndarray]:
    """Base pose in the world: still for 0.2 s (the calibration), then walking and swaying."""
    s = max(0.0, t - 0.2)
    position = np.array([0.3 + 0.5 * s, 0.2 + 0.1 * math.sin(2.0 * s), 0.8 + 0.02 * math.sin(5.0 * s)])
    rotation = Rotation.from_euler("zyx", [0.4 + 0.3 * s, 0.03 * math.sin(4.0 * s), 0.05 * math.sin(3.0 * s)])
    return position, rotation.as_matrix()


def estimator_for_world(**overrides: Any) -> MocapBaseEstimator:
    """The estimator told where the initial base stands in the world: its robot world is then the world."""
    p0, r0 = truth(0.0)
    return MocapBaseEstimator(
        EstimatorConfig(
            rigid_body_position=np.array(MARKER[:3]),
            rigid_body_rotation=Rotation.from_euler("ZYX", MARKER[3:][::-1]).as_matrix(),
            ground_height=CAMERA[2],  # the floor (world z = 0) is at camera z = 0.2
            initial_position=(p0[0], p0[1]),
            initial_yaw=math.atan2(r0[1, 0], r0[0, 0]),
            **overrides,
        )
    )


def capture(duration: float, **config: Any) -> list:
    """Delivered mocap samples of :func:`truth`, physics at 1 kHz."""
    mocap = MocapSimulator(MocapConfig(camera_from_world=CAMERA, marker_offset=MARKER, **config))
    out = []
    for k in range(int(duration * 1000) + 1):
        t = k * 1e-3
        mocap.capture(t, *truth(t))
        out += mocap.deliver(t)
    return out


def errors(states: list) -> tuple[np.ndarray, np.ndarray]:
    """Position [m] and angle [rad] errors of base states against :func:`truth` at their stamps."""
    pos, ang = [], []
    for s in states:
        p, r = truth(s.stamp_ns * 1e-9)
        pos.append(np.linalg.norm(s.position - p))
        ang.append(Rotation.from_matrix(r.T @ s.rotation).magnitude())
    return np.array(pos), np.array(ang)


# --------------------------------------------------------------------------- the estimator (ROS-free)
def test_eq1_eq2_recover_the_base_through_camera_and_marker_offsets():
    """Noise-free: the camera -> robot-world transform and the base pose per sample are exact."""
    est = estimator_for_world(calibration_samples=20)
    states = []
    for s in capture(2.0, position_noise=0.0, rotation_noise=0.0, dropout_fraction=0.0, outlier_fraction=0.0):
        verdict, state = est.update(
            int(round(s.stamp * 1e9)), s.position, Rotation.from_quat(s.quaternion).as_matrix()
        )
        if state is not None:
            states.append(state)
    pos, ang = errors(states)
    assert len(states) > 1400 and pos.max() < 1e-9 and ang.max() < 1e-9
    # the twist (base frame) against the truth's finite difference, away from the start of the walk
    late = [s for s in states if s.stamp_ns > 0.6e9]
    for s in late[::100]:
        t = s.stamp_ns * 1e-9
        (p1, r1), (p0, _) = truth(t + 1e-4), truth(t - 1e-4)
        v_body = r1.T @ (p1 - p0) / 2e-4
        assert np.linalg.norm(s.linear_velocity - v_body) < 0.03, (t, s.linear_velocity, v_body)


def test_world_under_the_initial_base_per_the_seed():
    """Without being told where the base stands, the robot world is the floor under the initial base with
    its heading: the first pose is (0, 0, height) facing +x, and later poses are the truth seen from there."""
    est = MocapBaseEstimator(
        EstimatorConfig(
            rigid_body_position=np.array(MARKER[:3]),
            rigid_body_rotation=Rotation.from_euler("ZYX", MARKER[3:][::-1]).as_matrix(),
            ground_height=CAMERA[2],
            calibration_samples=10,
        )
    )
    p0, r0 = truth(0.0)
    yaw0 = math.atan2(r0[1, 0], r0[0, 0])
    world_from_robot = Rotation.from_euler("z", yaw0).as_matrix()
    samples = capture(1.0, position_noise=0.0, rotation_noise=0.0, dropout_fraction=0.0, outlier_fraction=0.0)
    for s in samples:
        _, state = est.update(
            int(round(s.stamp * 1e9)), s.position, Rotation.from_quat(s.quaternion).as_matrix()
        )
    assert state is not None
    p, r = truth(state.stamp_ns * 1e-9)
    expected = world_from_robot.T @ (p - np.array([p0[0], p0[1], 0.0]))
    np.testing.assert_allclose(state.position, expected, atol=1e-9)
    np.testing.assert_allclose(state.rotation, world_from_robot.T @ r, atol=1e-9)


def test_noise_dropouts_and_outliers_within_the_issue_targets():
    """0.5 mm / 0.1 deg noise, 5 % dropouts, 1 % outliers (ten times the issue's 0.1 %): RMS <= 2 mm and
    0.5 deg, and no outlier (5-30 cm off) ever comes out."""
    est = estimator_for_world()
    samples = capture(10.0, outlier_fraction=0.01, seed=3)
    states, verdicts = [], []
    for s in samples:
        verdict, state = est.update(
            int(round(s.stamp * 1e9)), s.position, Rotation.from_quat(s.quaternion).as_matrix()
        )
        verdicts.append((verdict, s.kind))
        if state is not None:
            states.append(state)
    pos, ang = errors(states)
    outliers = sum(kind == "outlier" for _, kind in verdicts[49:])  # the first 49 calibrate (robust mean)
    assert outliers > 40
    assert sum(v == OUTLIER for v, _ in verdicts) == outliers  # each refused, nothing else
    assert all(v != ACCEPTED for v, kind in verdicts if kind == "outlier")
    assert math.sqrt(np.mean(pos**2)) < 2e-3 and pos.max() < 5e-3, (math.sqrt(np.mean(pos**2)), pos.max())
    assert math.degrees(math.sqrt(np.mean(ang**2))) < 0.5


def test_a_jump_that_stays_is_followed_and_a_recalibration_keeps_the_pose():
    est = MocapBaseEstimator(EstimatorConfig(calibration_samples=1, robot_world="camera"))
    r = np.eye(3)
    for k in range(10):
        assert est.update(k * 10**6, np.array([0.0, 0.0, 1.0]), r)[0] == ACCEPTED
    # the camera frame moved by 10 cm: two poses refused, the third consistent one followed
    verdicts = [est.update((10 + k) * 10**6, np.array([0.1, 0.0, 1.0]), r)[0] for k in range(3)]
    assert verdicts == [OUTLIER, OUTLIER, "jump"] and est.last_state.position[0] == pytest.approx(0.1)
    # the same after a recalibration between: the published pose stays where it was
    est = MocapBaseEstimator(EstimatorConfig(calibration_samples=1, robot_world="camera"))
    for k in range(10):
        est.update(k * 10**6, np.array([0.0, 0.0, 1.0]), r)
    assert est.update(10 * 10**6, np.array([0.1, 0.0, 1.0]), r)[0] == OUTLIER
    moved, turned = est.recalibrate()
    assert moved == pytest.approx(0.1) and turned == pytest.approx(0.0)
    verdict, state = est.update(11 * 10**6, np.array([0.1, 0.0, 1.0]), r)
    assert verdict == ACCEPTED and np.allclose(state.position, [0.0, 0.0, 1.0], atol=1e-12)


def test_calibration_waits_for_the_robot_to_stand_still():
    """A robot settling in a harness (turning 2 deg back over its first 0.15 s, as the simulated iCub did)
    must not define the world's heading: the window slides on until it stands, and the estimate's world is
    then the true one; calibrating on the first poses would turn it by a degree."""

    def settling(t: float) -> tuple[np.ndarray, np.ndarray]:
        yaw = math.pi + math.radians(2.0) * max(0.0, 1.0 - t / 0.15)
        return np.array([0.1, -0.2, 0.6]), Rotation.from_euler("ZYX", [yaw, 0.0, 0.0]).as_matrix()

    def heading_error(**overrides: Any) -> tuple[float, int]:
        est = MocapBaseEstimator(
            EstimatorConfig(
                initial_position=(0.1, -0.2), initial_yaw=math.pi, ground_height=CAMERA[2], **overrides
            )
        )
        mocap = MocapSimulator(
            MocapConfig(
                camera_from_world=CAMERA, marker_offset=(0.0,) * 6, position_noise=0.0, rotation_noise=0.0,
                dropout_fraction=0.0, outlier_fraction=0.0,
            )
        )  # fmt: skip
        state = None
        for k in range(400):
            t = k * 1e-3
            mocap.capture(t, *settling(t))
            for sample in mocap.deliver(t):
                rotation = Rotation.from_quat(sample.quaternion).as_matrix()
                state = est.update(int(round(sample.stamp * 1e9)), sample.position, rotation)[1] or state
        _, truth_rotation = settling(1.0)
        return math.degrees(Rotation.from_matrix(truth_rotation.T @ state.rotation).magnitude()), (
            est.calibration_restarts
        )

    error, restarts = heading_error()
    assert error < 0.05 and restarts >= 1, (error, restarts)  # the first still window: 0.03 deg
    error, restarts = heading_error(still_angle=10.0, still_position=10.0)  # no stillness check
    assert error > 0.5 and restarts == 0, error


# --------------------------------------------------------------------------- mocap_node (real rclpy)
def mocap_node(h: Harness, **values: Any):
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.mocap_node import MocapNode

    p0, r0 = truth(0.0)
    defaults = {
        "rigid_body_in_base": [*MARKER[:3], *np.degrees(MARKER[3:]).tolist()],
        "ground_height": CAMERA[2],
        "initial_base_position": [float(p0[0]), float(p0[1])],
        "initial_base_yaw": math.atan2(r0[1, 0], r0[0, 0]),
        "diagnostics_period": 0.05,
    }
    node = h.add(
        MocapNode(parameter_overrides=[Parameter(k, value=v) for k, v in {**defaults, **values}.items()])
    )
    from rclpy.lifecycle import TransitionCallbackReturn

    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.last_error
    return node


class Feeder:
    """Publishes rigid-body poses to mocap_node one at a time (each waited for: best effort may drop)."""

    def __init__(self, h: Harness, node: Any):
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Odometry

        from dynik_ros.nodes.common import RELIABLE_QOS, SENSOR_QOS

        self.h, self.node = h, node
        self.odom: list = []
        self.pub = h.probe.create_publisher(PoseStamped, "/mocap/rigid_body", SENSOR_QOS)
        h.probe.create_subscription(Odometry, "/robot/base_odom", self.odom.append, RELIABLE_QOS)
        from rclpy.lifecycle import TransitionCallbackReturn

        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert h.spin_until(lambda: self.pub.get_subscription_count() >= 1)
        assert h.spin_until(lambda: node._pub.get_subscription_count() >= 1)

    def send(self, stamp_ns: int, position: np.ndarray, quaternion: np.ndarray) -> None:
        from geometry_msgs.msg import PoseStamped

        from dynik_ros.nodes.conversions import ns_to_stamp, pose_msg

        msg = PoseStamped()
        msg.header.stamp = ns_to_stamp(stamp_ns)
        msg.header.frame_id = "mocap"
        msg.pose = pose_msg(np.asarray(position), np.asarray(quaternion))
        before = self.node.received
        for _ in range(50):  # best effort: re-send if it was lost before reaching the node
            self.pub.publish(msg)
            if self.h.spin_until(lambda: self.node.received > before, timeout=2.0):
                return
        raise AssertionError("mocap_node never received the pose")

    def wait_published(self) -> None:
        assert self.h.spin_until(lambda: len(self.odom) >= self.node.published)


T0 = 1_700_000_000 * 10**9  # stamps: sample time + T0


def odom_errors(odom: list, t0: int = T0) -> tuple[np.ndarray, np.ndarray, list[float]]:
    from dynik_ros.nodes.conversions import stamp_to_ns

    pos, ang, times = [], [], []
    for m in odom:
        t = (stamp_to_ns(m.header.stamp) - t0) * 1e-9
        p, r = truth(t)
        q = m.pose.pose.orientation
        est = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix()
        x = m.pose.pose.position
        pos.append(np.linalg.norm(np.array([x.x, x.y, x.z]) - p))
        ang.append(Rotation.from_matrix(r.T @ est).magnitude())
        times.append(t)
    return np.array(pos), np.array(ang), times


def test_node_publishes_the_true_base_and_refuses_outliers(h):
    node = mocap_node(h, calibration_samples=20)
    feed = Feeder(h, node)
    samples = capture(0.8, dropout_fraction=0.0, outlier_fraction=0.02, seed=5)
    for s in samples:
        feed.send(T0 + int(round(s.stamp * 1e9)), s.position, s.quaternion)
    feed.wait_published()
    outliers = sum(s.kind == "outlier" for s in samples[19:])  # the first 19 only calibrate
    assert outliers >= 3 and node.rejections.counts["outlier"] == outliers
    assert node.published == len(samples) - 19 - outliers
    pos, ang, _ = odom_errors(feed.odom)
    assert pos.max() < 3e-3 and math.degrees(ang.max()) < 0.5, (pos.max(), math.degrees(ang.max()))
    # honest stamps: each odometry carries the capture stamp of its pose
    from dynik_ros.nodes.conversions import stamp_to_ns

    sent = {T0 + int(round(s.stamp * 1e9)) for s in samples}
    assert all(stamp_to_ns(m.header.stamp) in sent for m in feed.odom)
    assert feed.odom[0].header.frame_id == "world" and feed.odom[0].child_frame_id == "base_link"


def test_occlusion_holds_reports_and_resumes_without_a_jump(h):
    from diagnostic_msgs.msg import DiagnosticArray

    from dynik_ros.nodes.common import RELIABLE_QOS

    node = mocap_node(h, calibration_samples=20, occlusion_timeout=0.02)
    feed = Feeder(h, node)
    diagnostics: list = []
    h.probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, RELIABLE_QOS)
    samples = capture(0.9, dropout_fraction=0.0, outlier_fraction=0.0, seed=7)
    gap = [s for s in samples if 0.6 <= s.stamp < 0.65]  # ~37 captures hidden: 50 ms
    visible = [s for s in samples if s not in gap]
    before = [s for s in visible if s.stamp < 0.6]
    for s in before:
        feed.send(T0 + int(round(s.stamp * 1e9)), s.position, s.quaternion)
    feed.wait_published()
    held = len(feed.odom)
    # while occluded: nothing published, and diagnostics say so (wall-clock wait only bounds a failure)
    assert h.spin_until(lambda: node.occluded_for() > 0.0)
    assert h.spin_until(lambda: any("occluded" in d.status[0].message for d in diagnostics))
    assert len(feed.odom) == held
    for s in visible[len(before) :]:
        feed.send(T0 + int(round(s.stamp * 1e9)), s.position, s.quaternion)
    feed.wait_published()
    assert node.gaps.occlusions == 1 and abs(node.gaps.missed - len(gap)) <= 1
    pos, ang, times = odom_errors(feed.odom)
    assert pos.max() < 3e-3  # the first pose after the gap is where the body is: no hold offset, no jump
    resumed = feed.odom[held]
    assert (times[held] - 0.65) < 0.002
    # the twist across the gap is the motion's (0.5 m/s forward, rotated into the base frame): no spike
    speed = math.hypot(resumed.twist.twist.linear.x, resumed.twist.twist.linear.y)
    assert 0.3 < speed < 0.7, speed
    values = {kv.key: kv.value for kv in diagnostics[-1].status[0].values}
    assert values["occlusions"] == "1"


def test_recalibrate_service_keeps_the_published_pose(h):
    from std_srvs.srv import Trigger

    node = mocap_node(h, calibration_samples=20)
    feed = Feeder(h, node)
    client = h.probe.create_client(Trigger, "/mocap_node/recalibrate")
    assert h.spin_until(lambda: client.service_is_ready())

    def call() -> Any:
        future = client.call_async(Trigger.Request())
        assert h.spin_until(future.done)
        return future.result()

    refused = call()  # nothing published yet
    assert not refused.success and "no base pose" in refused.message
    samples = capture(0.6, position_noise=0.0, rotation_noise=0.0, dropout_fraction=0.0, outlier_fraction=0.0)
    split = len(samples) // 2
    for s in samples[:split]:
        feed.send(T0 + int(round(s.stamp * 1e9)), s.position, s.quaternion)
    # the cameras are moved and re-calibrated: the same body now appears 8 cm and 5 deg away
    shift = Rotation.from_euler("z", math.radians(5.0))

    def moved(s) -> tuple[np.ndarray, np.ndarray]:
        return shift.apply(s.position) + [0.08, 0.0, 0.0], (
            shift * Rotation.from_quat(s.quaternion)
        ).as_quat()

    feed.send(T0 + int(round(samples[split].stamp * 1e9)), *moved(samples[split]))
    assert node.rejections.counts["outlier"] == 1
    answer = call()
    assert answer.success and "moved" in answer.message, answer.message
    for s in samples[split + 1 :]:
        feed.send(T0 + int(round(s.stamp * 1e9)), *moved(s))
    feed.wait_published()
    pos, ang, _ = odom_errors(feed.odom)
    # the robot world did not move: every published pose is still the truth (no jump), within the
    # distance walked between the last accepted pose and the recalibrating one (one capture)
    assert pos.max() < 1e-3 and math.degrees(ang.max()) < 0.05, (pos.max(), math.degrees(ang.max()))
    assert node.recalibrations == 1 and node.published == len(samples) - 19 - 1


def test_prediction_to_the_receive_time(h):
    """predict_to_receive_time: poses captured tens of ms before the node clock come out moved to the
    reception stamp with the twist: still the truth at the (later) stamp they carry."""
    from dynik_ros.nodes.conversions import stamp_to_ns

    node = mocap_node(h, calibration_samples=20, predict_to_receive_time=True, max_prediction=0.05)
    feed = Feeder(h, node)
    samples = capture(0.8, position_noise=0.0, rotation_noise=0.0, dropout_fraction=0.0, outlier_fraction=0.0)
    t0 = node.get_clock().now().nanoseconds - int(0.83e9)  # the last capture >= 30 ms before the clock
    sent = []
    for s in samples:
        sent.append(t0 + int(round(s.stamp * 1e9)))
        feed.send(sent[-1], s.position, s.quaternion)
    feed.wait_published()
    stamps = np.array([stamp_to_ns(m.header.stamp) for m in feed.odom])
    captured = np.array(sent[19:])
    ahead = (stamps - captured) * 1e-9
    assert np.all(ahead >= 0.03 - 1e-9) and np.all(ahead <= 0.05 + 1e-9), (ahead.min(), ahead.max())
    walking = [m for m, t in zip(feed.odom, captured, strict=True) if (t - t0) * 1e-9 > 0.45]
    pos, _, _ = odom_errors(walking, t0)
    # constant-twist prediction over 30-50 ms of a 0.5 m/s walk: without it the error would be >= 15 mm
    assert np.max(pos) < 3e-3, np.max(pos)


def test_ik_node_extrapolates_capture_stamped_odometry_to_its_link_stamps(h):
    """Honest capture stamps, compensated at the consumer: ik_node moves the base odometry to each
    link-state stamp with the odometry's twist (base frame, REP 105)."""
    from nav_msgs.msg import Odometry
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    from dynik_ros.nodes.common import RELIABLE_QOS
    from dynik_ros.nodes.conversions import odometry_msg
    from dynik_ros.nodes.ik_node import IKNode

    solver = h.add(IKNode(parameter_overrides=[Parameter("use_base_odom", value=True)]))
    assert solver.trigger_configure() == TransitionCallbackReturn.SUCCESS, solver.last_error
    assert solver.trigger_activate() == TransitionCallbackReturn.SUCCESS
    pub = h.probe.create_publisher(Odometry, "/robot/base_odom", RELIABLE_QOS)
    assert h.spin_until(lambda: pub.get_subscription_count() >= 1)
    position = np.array([1.0, -0.5, 0.9])
    rotation = Rotation.from_euler("ZYX", [0.7, 0.1, -0.05]).as_matrix()
    v_body, w_body = np.array([0.8, 0.1, -0.05]), np.array([0.2, -0.3, 1.5])
    stamp = T0 + 123_000_000
    pub.publish(odometry_msg(stamp, "world", "Pelvis", position, rotation, v_body, w_body))
    assert h.spin_until(lambda: solver._odom is not None)
    dt = 0.04
    solver._apply_base_odom(stamp + int(dt * 1e9))  # a link-state stamp 40 ms after the capture
    np.testing.assert_allclose(solver.ik.base_position, position + rotation @ v_body * dt, atol=1e-9)
    expected = rotation @ Rotation.from_rotvec(w_body * dt).as_matrix()
    np.testing.assert_allclose(solver.ik.base_rotation, expected, atol=1e-9)
    solver.set_parameters([Parameter("base_odom_extrapolate", value=False)])
    solver._apply_base_odom(stamp + int(dt * 1e9))
    np.testing.assert_allclose(solver.ik.base_position, position, atol=1e-12)


# ------------------------------------------------- mocap_node: calibration, refusals, teleports
def test_mocap_calibrates_aligns_and_refuses_bad_poses(h):
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry

    from dynik_ros.core.quaternion import quaternion_from_rotation
    from dynik_ros.core.so3 import rotation_about
    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.conversions import ns_to_stamp, pose_msg

    node = h.add(mocap(calibration_samples=10, ground_height=0.1, initial_base_yaw=0.0))  # base 0.8 m up
    odom = h.collect(Odometry, "/robot/base_odom")
    pub = h.probe.create_publisher(PoseStamped, "/mocap/rigid_body", SENSOR_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    h.wait_matched(pub)

    def send(k: int, position, yaw: float, quat=None) -> None:
        msg = PoseStamped()
        msg.header.stamp = ns_to_stamp(10**18 + k * 10**7)
        msg.pose = pose_msg(
            np.asarray(position), quaternion_from_rotation(rotation_about("z", yaw)) if quat is None else quat
        )
        before = node.received
        pub.publish(msg)
        assert h.spin_until(lambda: node.received > before)

    for k in range(10):  # standing still at (1, 2, 0.9) facing yaw 0.5
        send(k, (1.0, 2.0, 0.9), 0.5)
    assert node.estimator.calibrated
    send(10, (1.0 + 0.01 * np.cos(0.5), 2.0 + 0.01 * np.sin(0.5), 0.9), 0.5)  # 1 m/s forward
    send(11, (math.nan, 2.0, 0.9), 0.5)
    send(12, (1.0, 2.0, 0.9), 0.5, quat=(0.0, 0.0, 0.0, 2.0))
    send(5, (1.0, 2.0, 0.9), 0.5)  # older stamp
    assert {k: v for k, v in node.rejections.counts.items() if v} == {
        "nan": 1,
        "non_rotation": 1,
        "out_of_order": 1,
    }
    assert h.spin_until(lambda: len(odom) >= 2)
    first, moved = odom[0], odom[-1]
    p = first.pose.pose.position
    assert (p.x, p.y, p.z) == pytest.approx((0.0, 0.0, 0.8), abs=1e-9)
    assert first.pose.pose.orientation.w == pytest.approx(1.0, abs=1e-9)  # heading aligned to yaw 0
    assert moved.pose.pose.position.x == pytest.approx(0.01, abs=1e-9)
    assert moved.twist.twist.linear.x > 0.1  # forward in the base frame (filtered finite difference)
    assert first.child_frame_id == "base_link" and first.header.frame_id == "world"


def test_mocap_refuses_absurd_poses_survives_a_raising_estimator_and_follows_a_teleport(h):
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Odometry

    from dynik_ros.nodes.common import SENSOR_QOS
    from dynik_ros.nodes.conversions import ns_to_stamp, pose_msg

    node = h.add(mocap(calibration_samples=2, velocity_cutoff=0.0))
    odom = h.collect(Odometry, "/robot/base_odom")
    pub = h.probe.create_publisher(PoseStamped, "/mocap/rigid_body", SENSOR_QOS)
    assert ok(node.trigger_configure()) and ok(node.trigger_activate())
    h.wait_matched(pub)

    def send(k: int, x: float) -> None:
        msg = PoseStamped()
        msg.header.stamp = ns_to_stamp(10**18 + k * 10**7)
        msg.pose = pose_msg(np.array((x, 0.0, 1.0)), (0.0, 0.0, 0.0, 1.0))
        before = node.received
        pub.publish(msg)
        assert h.spin_until(lambda: node.received > before)

    for k in range(4):
        send(k, 0.01 * k)  # 1 m/s
    send(4, 1e300)  # finite but absurd: was published with a 1e302 m/s twist
    send(5, 0.05 + 100.0)  # a lone 100 m jump
    send(6, 0.06)
    real_update = node.estimator.update
    node.estimator.update = lambda *a: 1 / 0  # a bug inside: counted, the node spins on
    send(7, 0.07)
    node.estimator.update = real_update
    for k in range(8, 11):  # the body re-appears 100 m away and stays: accepted after 3 poses
        send(k, 100.0 + 0.01 * k)
    send(11, 100.11)
    counts = node.rejections.counts
    assert counts["implausible_position"] == 1 and counts["unhandled"] == 1
    assert counts["implausible_jump"] == 3 and node.rebased == 1 and node.active
    assert h.spin_until(lambda: len(odom) >= 6)  # poses 1-3, 6, 10, 11 (0 calibrates)
    speeds = [abs(m.twist.twist.linear.x) for m in odom]
    assert max(speeds) < 2.0, speeds  # no twist across the refused poses or the teleport
    assert odom[-1].pose.pose.position.x - odom[0].pose.pose.position.x == pytest.approx(100.10, abs=1e-6)
    assert speeds[-1] == pytest.approx(1.0, abs=1e-6)
