"""Sparkline cells: a lane's writes per second, oldest first, as one styled `Text`.

The scale is shared by every row (at least `FLOOR` writes/s for a full bar), so bars compare
across lanes; an idle lane is blank. `spark_key` sorts a column of these by total activity.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from lanewatch.tui.widgets.lane_table import Cell, plain, sparkline

WIDTH = 8
FLOOR = 20.0
_LEVELS = " ▁▂▃▄▅▆▇█"


def spark_cell(rates: Sequence[int], width: int = WIDTH) -> Text:
    """A `width`-cell sparkline of `rates` (newest right), scaled to at least `FLOOR`/s."""
    high = max(FLOOR, *rates) if rates else FLOOR
    line = sparkline(rates, width, low=0.0, high=high)
    return Text(line, style="cyan", no_wrap=True, end="")


def cpu_spark_cell(percents: Sequence[int], width: int = WIDTH) -> Text:
    """A lane's CPU % per reading (newest right); a full bar is one core (more: the most)."""
    high = max(100.0, *percents) if percents else 100.0
    line = sparkline(percents, width, low=0.0, high=high)
    return Text(line, style="green", no_wrap=True, end="")


def spark_key(cell: Cell) -> tuple[int, int]:
    """Sort key: total bar height, then the newest bar (busiest and most recent last)."""
    text = plain(cell)
    levels = [_LEVELS.find(ch) for ch in text]
    total = sum(level for level in levels if level > 0)
    return (total, levels[-1] if levels else 0)
