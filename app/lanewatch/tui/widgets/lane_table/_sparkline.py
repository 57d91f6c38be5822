"""A one-line sparkline in block characters (for cells that show a rate)."""

from __future__ import annotations

import math
from collections.abc import Iterable

_SPARK_LEVELS = " ▁▂▃▄▅▆▇█"


def sparkline(
    values: Iterable[float],
    width: int | None = None,
    *,
    low: float | None = None,
    high: float | None = None,
) -> str:
    """A one-line sparkline of `values` in block characters, newest last.

    Args:
        values: The samples, oldest first.
        width: Keep only the newest `width` samples, left-padded with spaces to `width`.
        low: The value drawn as empty (default: 0, or the minimum if a value is negative).
        high: The value drawn as a full block (default: the maximum).

    Returns:
        A plain string; a value at or below `low` (or NaN) is a space, so idle shows as blank.
    """
    samples = [float(v) for v in values]
    if width is not None:
        samples = samples[-width:] if width > 0 else []
    finite = [v for v in samples if not math.isnan(v)]
    if low is None:
        low = min(0.0, *finite) if finite else 0.0
    if high is None:
        high = max(finite, default=low)
    span = high - low
    top = len(_SPARK_LEVELS) - 1
    chars = []
    for value in samples:
        if math.isnan(value) or value <= low:
            chars.append(" ")
        elif span <= 0 or value >= high:
            chars.append(_SPARK_LEVELS[top])
        else:
            # Anything above `low` gets at least the lowest bar, so a trickle is visible.
            chars.append(_SPARK_LEVELS[max(1, round((value - low) / span * top))])
    line = "".join(chars)
    return line.rjust(width) if width is not None else line
