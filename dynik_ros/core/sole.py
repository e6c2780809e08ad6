"""The sole of a foot: its points on the centre line (a map's ``feet.*.sole``: heel, toe) widened by the
sole's half width across the foot (the foot frame's y axis): the corners that the support polygon
(:mod:`.com_objective`), the floor rows (:mod:`.floor_rows`) and the foot figures
(``retarget/foot_figures.py``) all take. A sole rolled by ``phi`` about its centre line puts one edge
``half_width * sin(phi)`` lower than the line (25 mm, 10 deg: 4.3 mm). ROS-free."""

from __future__ import annotations

from collections.abc import Sequence

Vector3 = tuple[float, float, float]


def sole_polygon(points: Sequence[Sequence[float]], half_width: float) -> tuple[Vector3, ...]:
    """The sole points widened by ``half_width`` along the foot frame's y axis (across the foot): two corners
    per point; with ``half_width`` 0 (a sole without width) each point once."""
    widths = (half_width, -half_width) if half_width else (0.0,)
    return tuple((float(x), float(y) + w, float(z)) for x, y, z in points for w in widths)
