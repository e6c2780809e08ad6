"""Human-to-humanoid retargeting with the dynamical IK (Rapetti et al. 2020, sec. 4.2-4.3).

The IK runs on the *robot* model with the human's link orientations (and a few scaled positions) as
targets. One YAML file per robot (``config/<robot>.yaml``) holds the map; see :mod:`.config`.

* :mod:`.config` -- the YAML schema (dataclasses, loading, validation, saving).
* :mod:`.registry` -- robots from ``example-robot-data`` or any URDF: :func:`available_robots`,
  :func:`load_robot`.
* :mod:`.calibration` -- rotation offsets, scale ratios and world yaw alignment.
* :mod:`.scaling` -- position scaling.
* :mod:`.foot_contact` -- the feet's contact rules (no floating, no sliding, level soles).
* :mod:`.retargeter` -- :class:`Retargeter`, the object the ik node and ``dynik-retarget`` use;
  :mod:`.offline_run` its run over a whole take.
"""

from __future__ import annotations

from dynik_ros.retarget.config import RetargetConfig, RetargetConfigError, load_retarget_config
from dynik_ros.retarget.registry import RobotSpec, available_robots, load_robot
from dynik_ros.retarget.retargeter import Retargeter

__all__ = [
    "RetargetConfig",
    "RetargetConfigError",
    "Retargeter",
    "RobotSpec",
    "available_robots",
    "load_retarget_config",
    "load_robot",
]
