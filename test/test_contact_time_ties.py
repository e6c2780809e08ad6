"""The contact rules decide the same way whether a sample lies exactly on a time boundary or a rounding error
either side of it (retarget/foot_contact.py: the footprint kept to the end of the touch-down blend, the
quiet time after a release).

On a take sampled on an exact grid the boundaries fall on samples: ``blend_time`` 0.1 s is 5 samples at 50 Hz,
10 at 100 Hz; ``release_time`` 0.15 s is 9 at 60 Hz. Whether ``t - contact_at <= blend_time`` then holds
depended on the last bit of the difference (2.08 - 1.98 = 0.10000000000000009 at 50 Hz). On the 120 Hz CMU
131_01 take resampled at 50 Hz (``dynik-retarget --ik-rate 50``) such a tie released a contact that the same
take with stamps 4e-11 s later kept, and the contacts that followed were other ones: 15 left-foot phases
instead of 11, held soles tilted 13 deg."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_feet import _measurements_with_contact, _pivoting_left_foot, _sliding_left_foot

from dynik_ros.retarget.retargeter import Retargeter


def _flags_with_stamps_scaled(motion, scale: float) -> np.ndarray:
    """The contact flags of ``motion`` with every stamp multiplied by ``scale`` (the poses unchanged)."""
    shifted = dataclasses.replace(motion, times=np.asarray(motion.times, dtype=float) * scale)
    _, flags = _measurements_with_contact(Retargeter.from_config("g1"), shifted)
    return np.asarray(flags)


@pytest.mark.parametrize("rate", [50.0, 60.0, 100.0])
@pytest.mark.parametrize("make", [_pivoting_left_foot, _sliding_left_foot], ids=["pivot", "slide"])
def test_contacts_do_not_depend_on_rounding_at_a_boundary(make, rate):
    """A foot that pivots about its ball and one that slides away (each lets go again and again by the
    footprint rule, so its contacts start and end on the grid): the stamps 1e-12 of themselves earlier or
    later (a few 1e-12 s) give the same contacts sample for sample. Before the margins they differed on
    6-8 samples at each of these rates."""
    motion = make(rate=rate)
    motion = motion[0] if isinstance(motion, tuple) else motion
    early = _flags_with_stamps_scaled(motion, 1.0 - 1e-12)
    late = _flags_with_stamps_scaled(motion, 1.0 + 1e-12)
    assert (early >= 0).any(axis=0).all()  # each foot has contacts
    assert len(np.unique(np.flatnonzero(np.diff((early[:, 0] >= 0).astype(int))))) >= 4  # let go and landed
    np.testing.assert_array_equal(early, late)
