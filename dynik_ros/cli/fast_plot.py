"""A small raster plotter on Pillow for ``dynik-retarget``'s default plots.

Why not matplotlib: its import and its per-artist work (tick objects, text layout) cost ~3.5 s of CPU for
the three PNGs of a 60 s take, more than a third of the retargeting itself. Here a figure is one Pillow image
drawn at ``scale`` times its size and reduced at the end (antialiasing); long series are drawn as their
min/max per pixel column (:func:`column_envelope`), so no peak is lost however long the take.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Color = tuple[int, ...]
BLACK: Color = (0, 0, 0)
GREY: Color = (90, 90, 90)
WHITE: Color = (255, 255, 255)
# matplotlib's default colour cycle (tab10), so the plots keep the colours users know
TAB10: list[Color] = [
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
]  # fmt: skip
ORANGE, BLUE, RED = TAB10[1], TAB10[0], TAB10[3]


@cache
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans as matplotlib ships it (found without importing matplotlib), else Pillow's own font."""
    spec = importlib.util.find_spec("matplotlib")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / "mpl-data" / "fonts" / "ttf" / "DejaVuSans.ttf"
        if path.is_file():
            return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size)


def nice_ticks(lo: float, hi: float, count: int = 5) -> tuple[np.ndarray, int]:
    """About ``count`` round tick values (steps 1, 2, 2.5, 5 x 10^k) inside [lo, hi], and the decimals their
    labels need."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return np.array([lo]) if math.isfinite(lo) else np.array([]), 0
    span = hi - lo
    if math.isfinite(span):
        power = 10.0 ** math.floor(math.log10(span / max(1, count)))
    else:  # (hi - lo overflows near the largest floats: its logarithm from the halves)
        power = 10.0 ** math.floor(math.log10(hi / 2 - lo / 2) + math.log10(2 / max(1, count)))
    for step in (m * power for m in (1, 2, 2.5, 5, 10, 20)):  # the finest step giving <= count + 1 ticks
        first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
        if last - first + 1 <= count + 1:
            break
    ticks = np.arange(first, last + 1) * step
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    if abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1
    return ticks, decimals


def tick_label(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals, never "-0"; from a million up in three significant digits
    (1e+20, not its twenty-one)."""
    text = f"{value:.3g}" if abs(value) >= 1e6 else f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis spanning 10^lo..10^hi: the decades, or 1-2-5 of each decade if few decades fit."""
    decades = range(max(math.floor(lo), -323), min(math.ceil(hi), 308) + 1)  # (10.0**309 overflows)
    for mantissas in ((1.0,), (1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10))):
        ticks = [
            m * 10.0**k for k in decades for m in mantissas if lo - 1e-9 <= math.log10(m) + k <= hi + 1e-9
        ]
        if len(ticks) >= 3:
            return ticks
    return ticks


def data_range(*arrays: np.ndarray | float, pad: float = 0.05) -> tuple[float, float]:
    """Finite min and max of all ``arrays``, widened by ``pad`` of the span (a constant: +-1, or 5 %)."""
    finite = [a[np.isfinite(a)] for a in (np.atleast_1d(np.asarray(x, dtype=float)) for x in arrays)]
    values = np.concatenate(finite) if finite else np.empty(0)
    if values.size == 0:
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo
    if span <= 1e-12 * max(1.0, abs(lo)):
        half = 0.05 * abs(lo) if lo != 0 else 1.0
        return lo - half, hi + half
    return lo - pad * span, hi + pad * span


def column_envelope(px: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points of a series whose x pixel positions ``px`` rise: where a pixel column holds more than 2 samples,
    its min and max only (NaN where all are NaN), at the column's centre, so a long series draws as fast as a
    short one and keeps every peak."""
    column = np.floor(px).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, column[1:] != column[:-1]])
    if len(px) <= 2 * len(starts):
        return px, y
    with np.errstate(invalid="ignore"):
        low, high = np.fmin.reduceat(y, starts), np.fmax.reduceat(y, starts)
    x = np.repeat(column[starts] + 0.5, 2)
    return x, np.column_stack([low, high]).ravel()


class Figure:
    """One PNG: a white image ``scale`` times larger than ``width`` x ``height``; all coordinates given in
    output pixels."""

    def __init__(self, width: int, height: int, scale: int = 2) -> None:
        self.width, self.height, self.scale = width, height, scale
        self.image = Image.new("RGB", (width * scale, height * scale), WHITE)
        self.draw = ImageDraw.Draw(self.image, "RGBA")  # RGBA: fills with alpha blend onto the image

    def text(
        self, x: float, y: float, text: str, size: float, anchor: str = "mm", color: Color = BLACK
    ) -> None:
        """``text`` at (x, y); ``anchor`` as Pillow's (e.g. "mm" centred, "rm" right-middle, "mt" top)."""
        s = self.scale
        self.draw.text((x * s, y * s), text, fill=color, font=font(round(size * s)), anchor=anchor)

    def text_width(self, text: str, size: float) -> float:
        return font(round(size * self.scale)).getlength(text) / self.scale

    def vertical_text(self, x: float, y: float, text: str, size: float, color: Color = BLACK) -> None:
        """``text`` turned 90 degrees (reading upwards), centred on (x, y)."""
        face = font(round(size * self.scale))
        left, top, right, bottom = face.getbbox(text)
        mask = Image.new("L", (right - left + 2, bottom - top + 2), 0)
        ImageDraw.Draw(mask).text((1 - left, 1 - top), text, fill=255, font=face)
        mask = mask.rotate(90, expand=True)
        at = (round(x * self.scale - mask.width / 2), round(y * self.scale - mask.height / 2))
        self.image.paste(color, (*at, at[0] + mask.width, at[1] + mask.height), mask)

    def legend_size(
        self, entries: Sequence[tuple[str, Color]], size: float, ncol: int
    ) -> tuple[float, float]:
        """Width and height of :meth:`legend`'s box."""
        rows = math.ceil(len(entries) / ncol)
        widths = [self._column_width(entries[c * rows : (c + 1) * rows], size) for c in range(ncol)]
        return sum(widths) + 2, rows * 1.45 * size + 10

    def _column_width(self, entries: Sequence[tuple[str, Color]], size: float) -> float:
        return 18 + 4 + max((self.text_width(label, size) for label, _ in entries), default=0) + 8

    def legend(
        self, left: float, top: float, entries: Sequence[tuple[str, Color]], size: float = 9.0, ncol: int = 1
    ) -> None:
        """A framed legend with its upper left corner at (left, top): a short line of each colour and its
        label, ``ncol`` columns."""
        s = self.scale
        rows = math.ceil(len(entries) / ncol)
        width, height = self.legend_size(entries, size, ncol)
        box = (left * s, top * s, (left + width) * s, (top + height) * s)
        self.draw.rectangle(box, fill=(255, 255, 255, 220), outline=(190, 190, 190), width=s)
        x = left + 5
        for c in range(ncol):
            column = entries[c * rows : (c + 1) * rows]
            for r, (label, color) in enumerate(column):
                y = top + 5 + (r + 0.5) * 1.45 * size
                self.draw.line((x * s, y * s, (x + 18) * s, y * s), fill=color, width=round(1.5 * s))
                self.text(x + 22, y, label, size, anchor="lm")
            x += self._column_width(column, size)

    def axes(
        self, box: Sequence[float], xlim: tuple[float, float], ylim: tuple[float, float], log_y: bool = False
    ) -> Axes:
        return Axes(self, box, xlim, ylim, log_y)

    def save(self, path: Path) -> Path:
        """Reduced to the output size (box filter: the antialiasing) and written as PNG (fast compression)."""
        image = self.image.reduce(self.scale) if self.scale > 1 else self.image
        image.save(path, compress_level=3)
        return path


class Axes:
    """A plotting box of a :class:`Figure`, data limits ``xlim`` and ``ylim`` (log10 values if ``log_y``)."""

    def __init__(
        self, figure: Figure, box: Sequence[float], xlim: tuple[float, float], ylim: tuple[float, float],
        log_y: bool = False,
    ) -> None:  # fmt: skip
        s = figure.scale
        self.figure, self.draw, self.log_y = figure, figure.draw, log_y
        self.x0, self.y0, self.x1, self.y1 = (v * s for v in box)
        self.xlim = xlim if xlim[1] > xlim[0] else (xlim[0] - 0.5, xlim[0] + 0.5)
        self.ylim = ylim if ylim[1] > ylim[0] else (ylim[0] - 0.5, ylim[0] + 0.5)

    def px(self, x: np.ndarray | float) -> np.ndarray:
        """Image columns (at the figure's scale) of data ``x``, kept inside the box."""
        x = np.asarray(x, dtype=float)
        u = self.x0 + (x - self.xlim[0]) / (self.xlim[1] - self.xlim[0]) * (self.x1 - self.x0)
        return np.clip(u, self.x0, self.x1)

    def py(self, y: np.ndarray | float) -> np.ndarray:
        """Image rows (at the figure's scale) of data ``y``, kept inside the box (up is smaller rows)."""
        y = np.asarray(y, dtype=float)
        if self.log_y:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.log10(np.where(y > 0, y, np.nan))
        v = self.y1 - (y - self.ylim[0]) / (self.ylim[1] - self.ylim[0]) * (self.y1 - self.y0)
        return np.clip(v, self.y0, self.y1)

    def _polyline(self, u: np.ndarray, v: np.ndarray, color: Color, width: float) -> None:
        """Image-pixel polyline, broken where a coordinate is NaN."""
        ok = np.isfinite(u) & np.isfinite(v)
        edges = np.flatnonzero(np.diff(np.r_[0, ok.astype(np.int8), 0]))
        w = max(1, round(width * self.figure.scale))
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            if b - a == 1:
                r = w / 2
                self.draw.ellipse((u[a] - r, v[a] - r, u[a] + r, v[a] + r), fill=color)
                continue
            points = np.column_stack([u[a:b], v[a:b]]).ravel().tolist()
            self.draw.line(points, fill=color, width=w, joint="curve" if w > 2 else None)

    def line(
        self, x: np.ndarray, y: np.ndarray, color: Color, width: float = 1.0, rising: bool = True
    ) -> None:
        """Series ``y`` over ``x``; when ``x`` rises (a time axis), as its per-column envelope."""
        u, v = self.px(x), np.asarray(y, dtype=float)
        if rising and len(u) > 2:
            u, v = column_envelope(u, v)
        self._polyline(u, self.py(v), color, width)

    def _dashes(self, a: float, b: float, dash: float = 4.0, gap: float = 3.0) -> list[tuple[float, float]]:
        s = self.figure.scale
        starts = np.arange(a, b, (dash + gap) * s)
        return [(p, min(p + dash * s, b)) for p in starts]

    def hline(self, y: float, color: Color = BLACK, width: float = 0.8, dashed: bool = True) -> None:
        """A horizontal line across the box at data ``y`` (dashed: the joint limits)."""
        v = float(self.py(y))
        w = max(1, round(width * self.figure.scale))
        for a, b in self._dashes(self.x0, self.x1) if dashed else [(self.x0, self.x1)]:
            self.draw.line((a, v, b, v), fill=color, width=w)

    def vline(self, x: float, color: Color = BLACK, width: float = 0.8, dashed: bool = True) -> None:
        """A vertical line across the box at data ``x``."""
        u = float(self.px(x))
        w = max(1, round(width * self.figure.scale))
        for a, b in self._dashes(self.y0, self.y1) if dashed else [(self.y0, self.y1)]:
            self.draw.line((u, a, u, b), fill=color, width=w)

    def fill_between(self, x: np.ndarray, low: np.ndarray, high: np.ndarray, color: Color) -> None:
        """The band between two curves over ``x`` (``color`` may carry an alpha)."""
        u = self.px(x)
        points = np.r_[np.column_stack([u, self.py(high)]), np.column_stack([u, self.py(low)])[::-1]]
        self.draw.polygon(points.ravel().tolist(), fill=color)

    def xspans(self, x: np.ndarray, where: np.ndarray, color: Color) -> None:
        """Full-height bands over the runs of ``x`` where ``where`` holds (e.g. a foot in contact)."""
        edges = np.flatnonzero(np.diff(np.r_[0, np.asarray(where, dtype=np.int8), 0]))
        u = self.px(x)
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            self.draw.rectangle((u[a], self.y0, max(u[b - 1], u[a] + 1), self.y1), fill=color)

    def decorate(
        self,
        title: str = "",
        xlabel: str = "",
        ylabel: str = "",
        size: float = 10.0,
        xticklabels: bool = True,
        ticks: tuple[int, int] = (8, 6),
    ) -> None:
        """Frame, ticks with their values, title above, labels below and left."""
        s, fig = self.figure.scale, self.figure
        bx0, by0, bx1, by1 = self.x0 / s, self.y0 / s, self.x1 / s, self.y1 / s
        tick = 3.5 * s
        xt, xd = nice_ticks(*self.xlim, ticks[0])
        for value in xt:
            u = float(self.px(value))
            self.draw.line((u, self.y1, u, self.y1 + tick), fill=BLACK, width=s)
            if xticklabels:
                fig.text(u / s, by1 + 5, tick_label(value, xd), size, anchor="mt")
        if self.log_y:
            yt = log_ticks(*self.ylim)
            labels = [f"{value:g}" for value in yt]
            yt = np.asarray(yt)
        else:
            yt, yd = nice_ticks(*self.ylim, ticks[1])
            labels = [tick_label(value, yd) for value in yt]
        widest = 0.0
        for value, label in zip(yt, labels, strict=True):
            v = float(self.py(value))
            self.draw.line((self.x0 - tick, v, self.x0, v), fill=BLACK, width=s)
            fig.text(bx0 - 5, v / s, label, size, anchor="rm")
            widest = max(widest, fig.text_width(label, size))
        self.draw.rectangle((self.x0, self.y0, self.x1, self.y1), outline=BLACK, width=s)
        if title:
            fig.text((bx0 + bx1) / 2, by0 - 4, title, size + 1, anchor="md")
        if xlabel:
            fig.text(
                (bx0 + bx1) / 2, by1 + (7 + 1.3 * size if xticklabels else 6), xlabel, size + 1, anchor="mt"
            )
        if ylabel:
            fig.vertical_text(bx0 - widest - 8 - 0.7 * size, (by0 + by1) / 2, ylabel, size + 1)

    def legend(
        self, entries: Sequence[tuple[str, Color]], size: float = 9.0, ncol: int = 1, right: bool = True
    ) -> None:
        """A framed legend in the box's upper right (or left) corner."""
        s = self.figure.scale
        width, _ = self.figure.legend_size(entries, size, ncol)
        left = self.x1 / s - 6 - width if right else self.x0 / s + 6
        self.figure.legend(left, self.y0 / s + 6, entries, size, ncol)
