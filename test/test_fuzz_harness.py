"""The fuzz harness's own logic (benchmarks/fuzz_inputs.py): a checker that cannot fail is worthless."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_inputs.py"
_spec = importlib.util.spec_from_file_location("fuzz_inputs", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def test_wire_checks_catch_planted_bad_outputs():
    lower, upper, vmax = np.array([-1.0, -1.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0])
    checks = fuzz.WireChecks(lower, upper, vmax, command_rate=100.0)  # step cap 0.04 rad per command
    checks.command(np.array([0.0, 0.0]))
    checks.command(np.array([0.03, -0.04]))  # within the cap
    checks.joint_state(1, np.array([0.5, 0.5]), np.zeros(2))
    assert not checks.breaches
    checks.command(np.array([0.2, -0.04]))  # too fast
    checks.command(np.array([0.2, 1.5]))  # outside a limit (and too fast)
    checks.command(np.array([np.nan, 0.0]))
    checks.joint_state(2, np.array([0.0, np.inf]), np.zeros(2))
    checks.joint_state(3, np.array([0.0, -1.2]), np.zeros(2))
    assert checks.breaches == {
        "command_too_fast": 2,
        "command_outside_limits": 1,
        "command_not_finite": 1,
        "ik_output_not_finite": 1,
        "ik_output_outside_limits": 1,
    }


@pytest.mark.parametrize("kind", fuzz.LINK_KINDS)
def test_mutations_are_deterministic_and_really_mutate(kind):
    """Same seed, same mutation (messages compared as messages: CDR padding bytes are not initialised by
    the serializer, so serialized bytes of equal messages may differ there)."""
    samples = fuzz.clean_samples(0.1)
    clean = fuzz.to_msg(samples[0], 10**18)
    first, second = (
        fuzz.mutate_link_state(kind, samples[0], 10**18, np.random.default_rng(5)) for _ in range(2)
    )
    if isinstance(first, bytes):
        assert isinstance(second, bytes) and len(first) == len(second)
    else:
        assert repr(first) == repr(second) and repr(first) != repr(clean)  # repr: NaN equals NaN


def test_the_clean_stream_has_no_teleport_at_its_seams():
    stream = fuzz.CleanStream(fuzz.clean_samples(2.0))
    pelvis = stream.samples[0].names.index("Pelvis")
    positions = np.array([stream.next().positions[pelvis] for _ in range(3 * len(stream.samples))])
    steps = np.linalg.norm(np.diff(positions, axis=0), axis=1)
    assert steps.max() < 5 * np.median(steps) + 1e-3
