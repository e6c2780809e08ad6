"""The human side of retargeting: the generated human model, its T-pose and synthetic human motions.

The human model's zero configuration is the calibration T-pose (every segment frame aligned with the
pelvis frame: x forward, y left, z up), see :mod:`dynik_ros.models.human`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pinocchio as pin

from dynik_ros.core.robot_model import RobotModel
from dynik_ros.motion.synthetic import Motion, NoiseSpec, synthesize

Pose = tuple[np.ndarray, np.ndarray]


@functools.lru_cache(maxsize=8)
def _human_model(kind: str, height: float, mass: float) -> RobotModel:
    from dynik_ros.models.human import Subject, human_urdf

    return RobotModel.from_urdf_string(human_urdf(kind, Subject(height=height, mass=mass)))


def human_model(kind: str = "human66", height: float = 1.75, mass: float = 75.0) -> RobotModel:
    """The generated Human66/Human48 :class:`RobotModel` of a subject (cached; do not modify it)."""
    return _human_model(kind, float(height), float(mass))


def human_tpose(height: float = 1.75, mass: float = 75.0, ground: float = 0.0) -> dict[str, Pose]:
    """World poses of the 23 human links in the model's zero configuration (T-pose, facing +x), soles on
    the ground at height ``ground``."""
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height

    model = human_model("human66", height, mass)
    q = model.neutral_configuration()
    q[2] = ground + pelvis_height(Subject(height=height, mass=mass))
    data = model.model.createData()
    pin.framesForwardKinematics(model.model, data, q)
    out = {}
    for link in XSENS_SEGMENTS:
        pose = data.oMf[model.frame_id(link)]
        out[link] = (pose.translation.copy(), pose.rotation.copy())
    return out


def synthetic_human_motion(
    scenario: str,
    duration: float,
    rate: float,
    heading_deg: float = 0.0,
    height: float = 1.75,
    mass: float = 75.0,
    noise: NoiseSpec | None = None,
    seed: int = 0,
) -> Motion:
    """A synthetic human motion (``tpose``, ``walking``, ``running``) of the 23 Xsens links, from forward
    kinematics of Human66 for a subject standing on z = 0 (:func:`dynik_ros.motion.synthetic.synthesize`)."""
    from dynik_ros.models.human import XSENS_SEGMENTS, Subject, pelvis_height

    return synthesize(
        human_model("human66", height, mass),
        scenario,
        duration=duration,
        rate=rate,
        links=list(XSENS_SEGMENTS),
        standing_height=pelvis_height(Subject(height=height, mass=mass)),
        noise=noise,
        seed=seed,
        heading=math.radians(heading_deg),
    )
