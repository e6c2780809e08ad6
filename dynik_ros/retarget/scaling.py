"""Position targets from human to robot size, and feet kept on the ground.

All arrays hold ``N`` samples of the human links in a fixed order (the retargeter's ``links``), already
turned by the world yaw alignment and shifted so that the human root starts over the world origin.

Root (the robot base): ``p_B,xy = o_xy + k_root p_root,xy``, ``p_B,z = g_robot + k_root (p_root,z - g_human)``
and ``v_B = k_root v_root``, with ``k_root`` the ratio of the root heights in the calibration poses.

Other position targets, from their limb root (anchor ``a``, default the human root) to the link ``e``:
``p = p_B + R_root o_a + k (p_e - p_a)`` and ``v = v_B + w_root x (R_root o_a) + k (v_e - v_a)``, where
``o_a`` is the robot limb root relative to the robot root in the human root frame and ``k`` the limb
ratio (:mod:`.calibration`). For legs anchored at the hips this is exact up to the limb ratio: hips are
rigid on the pelvis in both models.

Feet (:class:`FootContact`): the human sole height is the lowest of the foot and toe link origins above
the ground, less their standing clearance; with its horizontal speed it drives a contact state with
hysteresis. While in contact the robot foot target keeps the horizontal position it had when contact
started (no sliding) and the lowest of its sole points stays on the ground plane (no floating); its
velocity feed-forward is zero. After release the held offset fades out with time constant
``release_time``. Out of contact no sole point goes below the ground.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dynik_ros.retarget.calibration import Calibration
from dynik_ros.retarget.config import ContactSpec, FootSpec, TargetSpec


class PositionScaling:
    """Scaled position targets (and their velocity feed-forward) for a list of position targets."""

    def __init__(
        self,
        links: Sequence[str],
        root_link: str,
        targets: Sequence[TargetSpec],
        calibration: Calibration,
        robot_ground: float = 0.0,
    ):
        index = {name: i for i, name in enumerate(links)}
        self.root = index[root_link]
        self.k_root = float(calibration.root_scale)
        self.human_ground = float(calibration.human_ground)
        self.robot_ground = float(robot_ground)
        self.link_index = np.array([index[t.link] for t in targets], dtype=int)
        anchors = []
        for t in targets:
            anchors.append(index[t.anchor.link] if t.anchor is not None else self.root)
        self.anchor_index = np.array(anchors, dtype=int)
        self.ratio = np.array(
            [1.0 if t.link == root_link else calibration.limb_scales[t.frame] for t in targets], dtype=float
        )
        self.offset = np.array(
            [calibration.anchor_offsets.get(t.frame, np.zeros(3)) for t in targets], dtype=float
        ).reshape(-1, 3)
        self.origin = np.zeros(2)

    def root_target(self, p: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Robot root position and velocity ``(N, 3)`` from human links ``p``, ``v`` ``(N, L, 3)``."""
        k = self.k_root
        base = np.empty((p.shape[0], 3))
        base[:, :2] = self.origin + k * p[:, self.root, :2]
        base[:, 2] = self.robot_ground + k * (p[:, self.root, 2] - self.human_ground)
        return base, k * v[:, self.root]

    def targets(
        self, p: np.ndarray, r: np.ndarray, v: np.ndarray, w: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities ``(N, n_p, 3)`` of the position targets."""
        base, base_v = self.root_target(p, v)
        lever = np.einsum("nij,pj->npi", r[:, self.root], self.offset)
        ratio = self.ratio[None, :, None]
        positions = base[:, None] + lever + ratio * (p[:, self.link_index] - p[:, self.anchor_index])
        velocities = (
            base_v[:, None]
            + np.cross(w[:, self.root][:, None], lever)
            + ratio * (v[:, self.link_index] - v[:, self.anchor_index])
        )
        return positions, velocities


class FootContact:
    """Contact state machine of the feet and the ground constraint on their position targets."""

    def __init__(
        self,
        feet: Sequence[FootSpec],
        contact: ContactSpec,
        calibration: Calibration,
        links: Sequence[str],
        target_rows: Sequence[int],
        robot_ground: float = 0.0,
    ):
        index = {name: i for i, name in enumerate(links)}
        self.feet = tuple(feet)
        self.spec = contact
        self.rows = list(target_rows)
        self.human_ground = float(calibration.human_ground)
        self.robot_ground = float(robot_ground)
        self.sensor_links = [[index[f.link]] + ([index[f.toe]] if f.toe else []) for f in self.feet]
        self.clearance = [
            np.array([calibration.foot_clearance.get(links[i], 0.0) for i in group])
            for group in self.sensor_links
        ]
        self.soles = [np.array(f.sole, dtype=float).reshape(-1, 3) for f in self.feet]
        self.reset()

    def reset(self) -> None:
        n = len(self.feet)
        self.in_contact = [False] * n
        self.point = [0] * n  # index of the sole point in contact
        self.anchor = [np.zeros(3) for _ in range(n)]  # world position of that point (z on the ground)
        self.last = [np.zeros(3) for _ in range(n)]  # last target of the foot frame
        self.release_at = [0.0] * n
        self.release_delta: list[np.ndarray | None] = [None] * n

    def human_sole_heights(self, p: np.ndarray) -> np.ndarray:
        """Height of each human sole above the ground ``(N, n_feet)``: 0 when standing flat."""
        return np.stack(
            [
                (p[:, group, 2] - self.human_ground - clearance).min(axis=1)
                for group, clearance in zip(self.sensor_links, self.clearance, strict=True)
            ],
            axis=1,
        )

    def human_speeds(self, v: np.ndarray) -> np.ndarray:
        """Horizontal speed of each human foot ``(N, n_feet)``: the slower of its foot and toe links."""
        return np.stack(
            [np.linalg.norm(v[:, group, :2], axis=2).min(axis=1) for group in self.sensor_links], axis=1
        )

    def floor(self, foot_rotations: np.ndarray) -> np.ndarray:
        """Lowest allowed height ``(N, n_feet)`` of each robot foot frame with orientations
        ``(N, n_feet, 3, 3)``: its lowest sole point on the ground plane."""
        return np.stack(
            [
                self.robot_ground - (foot_rotations[:, f, 2, :] @ sole.T).min(axis=1)
                for f, sole in enumerate(self.soles)
            ],
            axis=1,
        )

    def apply(
        self,
        times: np.ndarray,
        p: np.ndarray,
        v: np.ndarray | None,
        positions: np.ndarray,
        velocities: np.ndarray,
        foot_rotations: np.ndarray,
        foot_omegas: np.ndarray,
    ) -> np.ndarray:
        """Hold / clamp the feet rows of ``positions`` and ``velocities`` ``(N, n_p, 3)`` in place.

        ``foot_rotations`` ``(N, n_feet, 3, 3)`` and ``foot_omegas`` ``(N, n_feet, 3)`` are the robot foot
        frames' orientation and angular-velocity targets. In contact the sole point touching the ground
        (the lowest one) stays where it landed; when the foot rolls onto another point (heel to toe) that
        point becomes the anchor where it is, so the frame follows the rolling without sliding. Returns
        ``(N, n_feet)``: the index of the sole point in contact, -1 when not in contact.
        """
        n = positions.shape[0]
        flags = np.full((n, len(self.feet)), -1, dtype=int)
        if not self.feet:
            return flags
        heights = self.human_sole_heights(p)
        speeds = self.human_speeds(v) if v is not None else np.zeros_like(heights)
        floor = self.floor(foot_rotations)
        spec, enabled = self.spec, self.spec.enabled
        tau = max(spec.release_time, 1e-9)
        h_list, s_list, t_list = heights.tolist(), speeds.tolist(), np.asarray(times, dtype=float).tolist()
        for f, row in enumerate(self.rows):
            # sole points in world orientation (N, m, 3) and the lowest one per sample
            points = np.einsum("nij,mj->nmi", foot_rotations[:, f], self.soles[f])
            lowest = points[..., 2].argmin(axis=1).tolist()
            for k in range(n):
                t, h, s = t_list[k], h_list[k][f], s_list[k][f]
                target = positions[k, row]
                rate = velocities[k, row]
                if self.in_contact[f]:
                    if h > spec.height_off or s > spec.speed_off:
                        self.in_contact[f] = False
                        self.release_at[f] = t
                        self.release_delta[f] = self.last[f] - target
                elif enabled and h < spec.height_on and s < spec.speed_on:
                    self.in_contact[f] = True
                    delta = self.release_delta[f]
                    if delta is not None:  # landing again while the last release still fades
                        target += delta * math.exp(-(t - self.release_at[f]) / tau)
                    j = lowest[k]
                    self.point[f] = j
                    self.anchor[f] = target + points[k, j]
                    self.anchor[f][2] = self.robot_ground
                    self.release_delta[f] = None
                if self.in_contact[f]:
                    j = lowest[k]
                    if j != self.point[f]:  # rolled onto another sole point: anchor it where it is
                        self.anchor[f] = self.last[f] + points[k, j]
                        self.anchor[f][2] = self.robot_ground
                        self.point[f] = j
                    lever = points[k, j]
                    target[:] = self.anchor[f] - lever
                    rate[:] = -np.cross(foot_omegas[k, f], lever)
                    self.last[f] = target.copy()
                    flags[k, f] = j
                    continue
                delta = self.release_delta[f]
                if delta is not None:
                    fade = math.exp(-(t - self.release_at[f]) / tau)
                    target += fade * delta
                    rate -= (fade / tau) * delta
                    if fade < 1e-4:
                        self.release_delta[f] = None
                if target[2] < floor[k, f]:
                    target[2] = floor[k, f]
                    rate[2] = max(rate[2], 0.0)
                self.last[f] = target.copy()
        return flags
