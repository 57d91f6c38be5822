"""How a `LaneTable` gives out the view's free width: one rule for every table, so a column
another screen adds (ports, CPU) fits in without its own arithmetic.

A column with an auto width is first as wide as its widest cell, within its `max_width`. When
the row is then narrower than the view, the free width goes to the columns that were cut (their
widest cell is wider than their `max_width`), by priority: lowest `Column.grow` first, then
the cut columns without a `grow`, in column order; each up to its widest cell. Nothing shrinks:
a row wider than the view scrolls, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.tui.widgets.lane_table._column import Column

NO_PRIORITY = 1_000_000  # a column without `grow` comes after every column with one


def share(
    columns: Sequence[Column],
    widths: list[int],
    contents: Sequence[int],
    shown: Sequence[int],
    free: int,
) -> None:
    """Widen `widths` in place with up to `free` cells, by the rule above."""
    if free <= 0:
        return
    cut = [
        i
        for i in shown
        if columns[i].width is None and columns[i].max_width is not None and contents[i] > widths[i]
    ]
    cut.sort(key=lambda i: (NO_PRIORITY if columns[i].grow is None else columns[i].grow, i))
    for i in cut:
        extra = min(contents[i] - widths[i], free)
        widths[i] += extra
        free -= extra
        if free <= 0:
            return
