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


def _plain_restart_along(ik, rows, mean, columns):
    """``_restart_along`` as it was written with ``@`` (the history kept), from :mod:`.step_integration`'s
    own basis functions."""
    from dynik_ros.core.step_integration import REPEATED_DIRECTION, _cholesky_basis

    if columns is not None:
        rows = rows.copy()
        rows[:, columns] = 0.0
    gram = rows @ rows.T
    basis = _cholesky_basis(rows, gram)
    if basis is None:
        values, vectors = np.linalg.eigh(gram)
        kept = values > REPEATED_DIRECTION * values[-1]
        basis = (vectors[:, kept].T @ rows) / np.sqrt(values[kept])[:, None]
    ik.nu += basis.T @ (basis @ (mean - ik.nu))
    ik._past_nu += (mean - ik._past_nu) @ basis.T @ basis
    if columns is not None:
        ik.nu[columns] = mean[columns]
        ik._past_nu[:, columns] = mean[columns]


@pytest.mark.parametrize("integration", ["trapezoidal", "adams"])
def test_the_restart_along_the_held_rows_is_the_matmul_formula_to_the_bit(integration):
    """``_restart_along`` (its products by np.dot's C function) against the ``@`` formula on random held rows
    (independent: the Cholesky basis; repeated: eigh), with and without bound columns: ``nu`` the same to
    the bit, the history too where it is kept (Adams), untouched where not."""
    from dynik_ros.retarget.retargeter import Retargeter

    ik = Retargeter.from_config("g1").make_ik(DynamicalIKConfig(integration=integration))
    nv = ik.robot.nv
    rng = np.random.default_rng(39)
    for trial in range(200):
        rows = rng.normal(size=(12, nv)) * rng.exponential(size=(12, nv))
        if trial % 4 == 3:
            rows[6:] = rows[:6]  # repeated rows: eigh
        columns = np.sort(rng.choice(np.arange(6, nv), size=rng.integers(1, 4), replace=False))
        columns = columns if trial % 3 else None
        mean, nu, past = rng.normal(size=nv), rng.normal(size=nv), rng.normal(size=(2, nv))
        ik.nu, ik._past_nu = nu.copy(), past.copy()
        ik._restart_along(rows, mean, columns)
        got_nu, got_past = ik.nu.copy(), ik._past_nu.copy()
        ik.nu, ik._past_nu = nu.copy(), past.copy()
        _plain_restart_along(ik, rows, mean, columns)
        assert got_nu.tobytes() == ik.nu.tobytes()
        assert got_past.tobytes() == (ik._past_nu.tobytes() if integration == "adams" else past.tobytes())
