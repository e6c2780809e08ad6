"""dynik_ros.cli.fast_plot (the Pillow renderer of dynik-retarget's plots): pixels where the values map, the
per-column envelope against the plain min/max, and degenerate series that must not crash."""

from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from dynik_ros.cli.fast_plot import (
    ORANGE,
    Figure,
    column_envelope,
    data_range,
    log_ticks,
    nice_ticks,
    tick_label,
)
from dynik_ros.cli.retarget_plots import plot_errors, plot_joints

BOX = (40, 20, 440, 220)  # output pixels: 400 wide, 200 high


def _render(tmp_path, draw, ylim=(-1.0, 1.0), xlim=(0.0, 10.0)) -> np.ndarray:
    """A 480 x 240 figure with one axes on BOX, ``draw(ax)``, saved and read back as an int array."""
    fig = Figure(480, 240)
    draw(fig.axes(BOX, xlim, ylim))
    path = fig.save(tmp_path / "plot.png")
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def _row(value: float, ylim=(-1.0, 1.0)) -> float:
    """Output pixel row (centre) of a data value on BOX."""
    return BOX[3] - (value - ylim[0]) / (ylim[1] - ylim[0]) * (BOX[3] - BOX[1])


def _orange(pixels: np.ndarray) -> np.ndarray:
    red, blue = pixels[..., 0], pixels[..., 2]
    return (red - blue > 60) & (red > 200)


def _dark(pixels: np.ndarray) -> np.ndarray:
    return pixels.max(axis=-1) < 160  # black or grey ink, not the orange trace


def test_a_sine_is_drawn_where_its_values_map(tmp_path):
    t = np.linspace(0.0, 10.0, 40001)  # 100 samples per output column: drawn as the envelope
    y = np.sin(2 * np.pi * 0.2 * t)  # maxima at t = 1.25, 6.25; minima at 3.75, 8.75
    pixels = _render(tmp_path, lambda ax: ax.line(t, y, ORANGE))
    orange = _orange(pixels)
    rows = np.flatnonzero(orange.any(axis=1))
    assert abs(rows.min() - _row(1.0)) <= 1.5 and abs(rows.max() - _row(-1.0)) <= 1.5
    for when in (0.5, 2.0, 5.0, 7.3):
        column = round(BOX[0] + when / 10.0 * (BOX[2] - BOX[0]))
        hit = np.flatnonzero(orange[:, column])
        expected = _row(float(np.sin(2 * np.pi * 0.2 * when)))
        # the column spans the values of its samples (a steep part: a few rows), around the value
        assert hit.size and hit.min() - 1.5 <= expected <= hit.max() + 1.5 and np.ptp(hit) <= 8, (when, hit)
    assert not orange[:, : BOX[0] - 1].any() and not orange[:, BOX[2] + 2 :].any()


def test_dashed_limits_and_a_joint_at_its_limit(tmp_path):
    t = np.linspace(0.0, 10.0, 500)
    at_limit = np.full_like(t, 0.5)

    def draw(ax):
        ax.hline(0.5)
        ax.hline(-0.5)
        ax.line(t, np.where(t < 5, at_limit, 0.0), ORANGE)

    pixels = _render(tmp_path, draw)
    dark = _dark(pixels)
    right_half = slice((BOX[0] + BOX[2]) // 2 + 5, BOX[2])
    for value in (0.5, -0.5):  # (the trace covers the upper limit's left half)
        row = round(_row(value))
        ink = dark[row - 1 : row + 2, right_half].any(axis=0)
        gaps = np.count_nonzero(np.diff(ink.astype(int)) == -1)
        assert ink.mean() > 0.4 and gaps >= 20, (ink.mean(), gaps)  # dashes 4 + gaps 3 px along the row
    assert not dark[round(_row(0.0)) - 3 : round(_row(0.0)) + 4, BOX[0] : BOX[2]].any()
    # the trace at the limit lies on the limit's row (first half), at 0 in the second half
    orange = _orange(pixels)
    left = np.flatnonzero(orange[:, BOX[0] + 50])
    right = np.flatnonzero(orange[:, BOX[2] - 50])
    assert left.size and abs(left.mean() - _row(0.5)) <= 1.5
    assert right.size and abs(right.mean() - _row(0.0)) <= 1.5


def test_a_value_at_the_axis_edge_is_drawn_inside_the_box(tmp_path):
    t = np.linspace(0.0, 10.0, 50)
    pixels = _render(tmp_path, lambda ax: ax.line(t, np.full_like(t, 1.0), ORANGE))
    rows = np.flatnonzero(_orange(pixels).any(axis=1))
    assert rows.size and BOX[1] - 1 <= rows.min() and rows.max() <= BOX[1] + 1


def test_a_long_series_keeps_its_one_sample_peak(tmp_path):
    t = np.linspace(0.0, 10.0, 200_001)
    y = np.zeros_like(t)
    y[123_457] = 1.0  # one sample in 2e5, at t = 6.17 s
    pixels = _render(tmp_path, lambda ax: ax.line(t, y, ORANGE), ylim=(-0.1, 1.0))
    orange = _orange(pixels)
    column = round(BOX[0] + t[123_457] / 10.0 * (BOX[2] - BOX[0]))
    assert orange[
        round(_row(1.0, (-0.1, 1.0))) : round(_row(1.0, (-0.1, 1.0))) + 3, column - 1 : column + 2
    ].any()


def test_the_envelope_is_each_columns_plain_min_and_max():
    rng = np.random.default_rng(3)
    px = np.sort(rng.uniform(10.0, 60.0, 4000))
    y = rng.normal(size=px.size)
    y[17] = np.nan
    x, env = column_envelope(px, y)
    columns = np.unique(np.floor(px))
    assert x.size == env.size == 2 * columns.size
    for k, c in enumerate(columns):
        inside = y[np.floor(px) == c]
        assert x[2 * k] == x[2 * k + 1] == c + 0.5
        assert env[2 * k] == np.nanmin(inside) and env[2 * k + 1] == np.nanmax(inside)
    few = np.array([1.2, 3.4, 5.6])
    assert column_envelope(few, few)[0] is few  # short series: every point as it is


def test_ticks_are_round_and_inside():
    ticks, decimals = nice_ticks(-44.0, 132.0, 6)
    assert list(ticks) == [-25.0, 0.0, 25.0, 50.0, 75.0, 100.0, 125.0] and decimals == 0
    ticks, decimals = nice_ticks(0.013, 0.061, 5)
    assert decimals == 2 and ticks[0] >= 0.013 and ticks[-1] <= 0.061 and len(ticks) >= 4
    assert log_ticks(np.log10(0.004), np.log10(0.06)) == pytest.approx([0.005, 0.01, 0.02, 0.05])
    assert data_range(np.array([2.0, 2.0])) == (1.9, 2.1)
    assert data_range(np.array([np.nan])) == (0.0, 1.0)


def _toy_plots(tmp_path, n: int, q, v, errors: dict, n_orientation: int, v_max: float = 1.0) -> list:
    """The three plots of a toy fixed-base robot (``n`` joints, limits +-1, velocity limit ``v_max``) and a
    result with ``q``, ``v`` and the error arrays ``errors``; the written paths."""
    samples = len(q)
    robot = SimpleNamespace(
        name="toy", n_joints=n, floating_base=False, joint_names=[f"j{i}" for i in range(n)],
        lower=-np.ones(n), upper=np.ones(n), velocity_limit=np.full(n, v_max),
    )  # fmt: skip
    result = SimpleNamespace(
        times=np.arange(samples) / 100.0, q=q, v=v, contacts=np.zeros((samples, 2), dtype=int), **errors
    )
    retargeter = SimpleNamespace(
        config=SimpleNamespace(name="toy"),
        targets=SimpleNamespace(
            orientation_targets=[SimpleNamespace(frame=f"f{k}") for k in range(n_orientation)]
        ),
    )
    return plot_joints(tmp_path, robot, result, 10.0) + [plot_errors(tmp_path, retargeter, result)]


@pytest.mark.parametrize("samples", [1, 2, 50])
def test_the_three_plots_of_degenerate_series_are_written(tmp_path, samples):
    """One sample, a constant joint, a joint at its limit, NaN errors: no crash, the PNGs written."""
    n = 5
    times = np.arange(samples) / 100.0
    q = np.zeros((samples, n))
    q[:, 1] = 1.0  # at its upper limit all the time
    q[:, 2] = np.sin(times)
    errors = dict(
        mnte=np.zeros(samples), orientation_error=np.full((samples, 3), np.nan),
        angular_velocity_rmse=np.full(samples, np.nan), position_rmse=np.ones(samples),
    )  # fmt: skip
    written = _toy_plots(tmp_path, n, q, np.zeros((samples, n)), errors, 3, v_max=2.0)
    for path in written:
        assert Image.open(path).size[0] > 400


@pytest.mark.parametrize("extreme", [1.7e308, -1.7e308, 1e300, 1e20])
def test_extreme_finite_values_are_drawn_not_raised(tmp_path, extreme):
    """A hostile take can put huge finite numbers in the errors (a pelvis 1e20 m off) or, at worst, near the
    largest float: the ticks' span and decades must not overflow, and their labels stay short."""
    n, samples = 3, 40
    q, v = np.zeros((samples, n)), np.zeros((samples, n))
    q[10, 0], v[12, 1] = extreme, extreme
    full = np.full(samples, extreme)
    errors = dict(
        mnte=np.abs(full), orientation_error=np.stack([full] * 2, 1), angular_velocity_rmse=full,
        position_rmse=np.abs(full),
    )  # fmt: skip
    written = _toy_plots(tmp_path, n, q, v, errors, 2)
    assert all(path.stat().st_size > 0 for path in written)
    ticks, decimals = nice_ticks(*data_range(np.array([0.0, extreme])))
    assert ticks.size >= 2 and np.isfinite(ticks).all()
    assert max(len(tick_label(t, decimals)) for t in ticks) <= 9
