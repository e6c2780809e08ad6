"""Position targets from human to robot size (the feet's, kept on the ground: :mod:`.foot_contact`).

All arrays hold ``N`` samples of the human links in a fixed order (the retargeter's ``links``), already
turned by the world yaw alignment and shifted so that the human root starts over the world origin.

Root (the robot base): ``p_B,xy = o_xy + k_root p_root,xy``, ``p_B,z = g_robot + k_root (p_root,z - g_human)``
and ``v_B = k_root v_root``, with ``k_root`` the ratio of the root heights in the calibration poses.

Other position targets, from their limb root (anchor ``a``, default the human root) to the link ``e``:
``p = p_B + R_root o_a + k (p_e - p_a)`` and ``v = v_B + w_root x (R_root o_a) + k (v_e - v_a)``, where
``o_a`` is the robot limb root relative to the robot root in the human root frame and ``k`` the limb
ratio (:mod:`.calibration`). For legs anchored at the hips this is exact up to the limb ratio: hips are
rigid on the pelvis in both models.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dynik_ros.retarget.calibration import Calibration
from dynik_ros.retarget.config import TargetSpec


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

    def limb_roots(self, p: np.ndarray, r: np.ndarray) -> np.ndarray:
        """Where each position target's limb root (its anchor) is on the robot, ``(N, n_p, 3)``:
        ``p_B + R_root o_a`` (module docstring; the hips for the feet)."""
        base, _ = self.root_target(p, np.zeros_like(p))
        return base[:, None] + np.einsum("nij,pj->npi", r[:, self.root], self.offset)

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
