"""``io.quantiles``' median and percentile are numpy's bit for bit (odd and even lengths, axes, NaNs,
infinities, signed zeros), and the twists of a capture no longer import ``numpy.ma``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dynik_ros.io.quantiles import median, percentile


def _same(a: object, b: object) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("shape", [(1,), (2,), (7,), (8,), (7200,), (9, 3), (10, 3), (5, 4, 3)])
def test_median_is_numpys(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    values = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 4, size=shape)
    values.flat[:: max(1, values.size // 3)] = -0.0
    for axis in [None] + list(range(values.ndim)):
        assert _same(median(values, axis=axis), np.median(values, axis=axis)), axis
        noisy = values.copy()
        noisy.flat[rng.integers(values.size)] = np.nan
        assert _same(median(noisy, axis=axis), np.median(noisy, axis=axis)), axis
    assert type(median(values)) is type(np.median(values))


def test_no_numpy_ma() -> None:
    code = (
        "import sys\n"
        "from dynik_ros.io.human_motion import smoothed_twists\n"
        "from dynik_ros.io.capture_checks import leg_stature\n"
        "import numpy as np\n"
        "t = np.arange(100) / 120.0\n"
        "p = np.zeros((100, 2, 3)); r = np.broadcast_to(np.eye(3), (100, 2, 3, 3)).copy()\n"
        "smoothed_twists(t, p, r)\n"
        "from dynik_ros.io.quantiles import percentile\n"
        "percentile(np.arange(10.0), 95); percentile(np.ones((5, 3)), 2.0, axis=0)\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf, as numpy warns
@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (50,), (7200,), (40, 3), (7, 4, 2)])
def test_percentile_is_numpys(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    values = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 4, size=shape)
    values.flat[:: max(1, values.size // 4)] = -0.0
    values.flat[1 :: max(2, values.size // 3)] = 0.0
    for q in (0, 2.0, 5, 33.3, 50, 50.0, 95, 99, 99.99, 100, 100.0):
        for axis in [None] + list(range(values.ndim)):
            assert _same(percentile(values, q, axis=axis), np.percentile(values, q, axis=axis)), (q, axis)
            odd = values.copy()
            odd.flat[rng.integers(values.size)] = np.nan
            odd.flat[rng.integers(values.size)] = np.inf
            assert _same(percentile(odd, q, axis=axis), np.percentile(odd, q, axis=axis)), (q, axis)
            odd.flat[rng.integers(values.size)] = -np.inf
            assert _same(percentile(odd, q, axis=axis), np.percentile(odd, q, axis=axis)), (q, axis)
    assert type(percentile(values, 95)) is type(np.percentile(values, 95))
    with pytest.raises(ValueError):
        percentile(values, 101)
