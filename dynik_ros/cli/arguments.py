"""Command-line argument types shared by the tools (``dynik-retarget``, ``dynik-ros``)."""

from __future__ import annotations

import argparse
import math
from typing import Any


def finite(minimum: float | None = None, positive: bool = False) -> Any:
    """An argparse ``type``: a finite float, ``> 0`` with ``positive``, ``>= minimum`` if given (a NaN
    swing weight ended in a traceback, a NaN heel-off or a negative settle ran silently)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if positive and value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum:g}, got {text}")
        return value

    return parse
