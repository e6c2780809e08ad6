"""The velocity history ``_past_nu`` is kept only where the rule reads it (Adams): with the trapezoid (the
retargeter's rule) or Euler it is skipped (``StepIntegration._keeps_history``), and the run is the same to
the bit as one that keeps it."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from dynik_ros.core.dynamical_ik import DynamicalIKConfig
from dynik_ros.core.step_integration import StepIntegration

EXCERPT = Path(__file__).parent / "data" / "cmu_131_01_walk_excerpt.bvh"


def _excerpt_run(integration: str, keep: bool | None, monkeypatch) -> tuple[np.ndarray, ...]:
    """``(q, nu)`` of the committed walk excerpt (every 4th frame) on G1 with the default feet (hard stance,
    floor rows: the held rows restart the history) integrated by ``integration``; ``keep``: force the
    history kept (True) or skipped (False), None: as the rule says."""
    from dynik_ros.io.motion_files import detect_format, read_motion_file
    from dynik_ros.retarget.retargeter import Retargeter

    if keep is not None:
        monkeypatch.setattr(StepIntegration, "_keeps_history", property(lambda self: keep))
    m = read_motion_file(EXCERPT, detect_format(EXCERPT))
    names = ("times", "positions", "rotations", "linear_velocities", "angular_velocities")
    m = dataclasses.replace(m, **{k: getattr(m, k)[::4] for k in names})
    rt = Retargeter.from_config("g1")
    rt.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times, measurements, contacts, _ = rt.step_measurements(m)
        ik = rt.make_ik(DynamicalIKConfig(integration=integration))
        assert ik.config.integration == integration and ik.extra.priority is not None
        q = rt.run(times, measurements, ik=ik, evaluate=False, contacts=contacts).q
    monkeypatch.undo()
    return q, ik.nu.copy(), ik._past_nu.copy()


def test_the_trapezoid_without_the_history_is_the_run_that_keeps_it(monkeypatch):
    """The trapezoid's run skipping the history (its default) writes the same joints, bit for bit, as the
    same run keeping it; its history stays zeros. Adams keeps it (its weights read it): a run with it
    skipped differs."""
    q, nu, past = _excerpt_run("trapezoidal", None, monkeypatch)
    q_kept, nu_kept, past_kept = _excerpt_run("trapezoidal", True, monkeypatch)
    np.testing.assert_array_equal(q, q_kept)
    np.testing.assert_array_equal(nu, nu_kept)
    assert not past.any() and past_kept.any()  # skipped: as reset left it; kept: the steps' velocities
    q_adams, _, past_adams = _excerpt_run("adams", None, monkeypatch)
    q_adams_skipped, _, _ = _excerpt_run("adams", False, monkeypatch)
    assert past_adams.any() and not np.array_equal(q_adams, q_adams_skipped)


@pytest.mark.parametrize("integration", ["trapezoidal", "euler", "adams"])
def test_only_adams_keeps_the_history(integration):
    """The rule decides (``_plan_integration`` reads ``_past_nu`` with Adams' weights only)."""
    from dynik_ros.retarget.retargeter import Retargeter

    rt = Retargeter.from_config("g1")
    assert rt.make_ik(DynamicalIKConfig(integration=integration))._keeps_history == (integration == "adams")
