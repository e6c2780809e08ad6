"""Calibration on the capture's own subject (io/skeleton_tpose.py): ground truth from Human66 forward
kinematics of subjects shorter and taller than the maps' 1.75 m model, through the BVH writer and reader and
``dynik-retarget``, and what it does to the written robot's feet."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from take_tools import written_sole_heights, xsens_ordered

from dynik_ros.cli import retarget as cli
from dynik_ros.io.bvh import builtin_skeleton_maps, write_bvh
from dynik_ros.io.skeleton_tpose import skeleton_tpose
from dynik_ros.models.segments import XSENS_SEGMENTS
from dynik_ros.motion.planted_walk import PlantedWalkSpec, planted_walk
from dynik_ros.retarget import Retargeter
from dynik_ros.retarget.calibration import calibrate
from dynik_ros.retarget.human import human_tpose

HEIGHTS = (1.55, 1.95)  # the maps' human model is 1.75 m


def _walk(height: float):
    """A Human66 subject of ``height`` walking with its feet planted on z = 0, the 23 segments in order."""
    return xsens_ordered(planted_walk(PlantedWalkSpec(steps=2), 60.0, height, 75.0))


@pytest.fixture(scope="module", params=HEIGHTS)
def subject(request):
    return request.param, _walk(request.param)


def test_the_tpose_of_a_walking_subject_is_its_models(subject):
    """From a walk alone (no T-pose in it): every segment where the subject's model T-pose has it, 0.1 mm."""
    height, motion = subject
    built, truth = skeleton_tpose(motion), human_tpose(height, 75.0, 0.0)
    for segment in XSENS_SEGMENTS:
        np.testing.assert_allclose(built[segment][0], truth[segment][0], atol=1e-4, err_msg=segment)
        np.testing.assert_allclose(built[segment][1], truth[segment][1], atol=1e-9, err_msg=segment)


def test_a_robot_calibrated_on_it_has_the_subjects_ratios(subject):
    """Root scale, leg ratios and foot clearances equal those of the calibration on the subject's own model
    T-pose (relative 1e-4), and differ from the 1.75 m model's the maps default to by the height ratio."""
    height, motion = subject
    robot = Retargeter.from_config("g1")
    built = robot.calibrate(skeleton_tpose(motion), source="skeleton")
    truth = calibrate(robot.spec, human_tpose(height, 75.0, 0.0), 0.0)
    model = calibrate(robot.spec)
    assert built.source == "skeleton"
    assert built.root_scale == pytest.approx(truth.root_scale, rel=1e-4)
    assert built.root_scale == pytest.approx(model.root_scale * 1.75 / height, rel=2e-3)
    for frame, ratio in truth.limb_scales.items():
        assert built.limb_scales[frame] == pytest.approx(ratio, rel=1e-4)
    for link, clearance in truth.foot_clearance.items():
        assert built.foot_clearance[link] == pytest.approx(clearance, abs=1e-4)


def _sole_float_mm(out, robot_name: str = "g1") -> float:
    """Highest the lowest sole point of a foot gets above the floor over the flat part of its contacts, on the
    written trajectory (forward kinematics)."""
    heights, flat = written_sole_heights(out, robot_name, 0.0)
    return 1e3 * max(0.0, float(heights[flat].max(initial=0.0)))


def test_a_tall_subjects_take_stands_the_robot_on_its_feet(tmp_path):
    """A 1.95 m subject's planted walk as a BVH file: ``dynik-retarget`` calibrates on the file's own subject
    (the 1.95 m model's root scale in calibration.yaml, 1e-3) and the held soles come down onto the floor;
    ``--subject model`` (the maps' 1.75 m, what every capture got before) puts the robot's pelvis target
    too high for its legs and the held soles stay more than twice as high above the floor."""
    names = {m.name: m.segments for m in builtin_skeleton_maps()}["mvn"]
    path = write_bvh(_walk(1.95), tmp_path / "tall.bvh", names=names, reference=human_tpose(1.95, 75.0, 0.0))
    robot = Retargeter.from_config("g1")
    truth = calibrate(robot.spec, human_tpose(1.95, 75.0, 0.0), 0.0)
    floats = {}
    for subject in ("capture", "model"):
        out = tmp_path / subject
        argv = [str(path), "--robot", "g1", "--out", str(out), "--no-bag", "--no-plots", "--quiet"]
        assert cli.main(argv + ["--subject", subject]) == 0
        saved = yaml.safe_load((out / "calibration.yaml").read_text())
        floats[subject] = _sole_float_mm(out)
        if subject == "capture":
            assert saved["root_scale"] == pytest.approx(truth.root_scale, rel=1e-3)
            assert "capture's subject" in saved["source"]
        else:
            assert saved["root_scale"] == pytest.approx(calibrate(robot.spec).root_scale, rel=1e-9)
    assert floats["capture"] < 0.5 * floats["model"], floats
