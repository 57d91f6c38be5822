"""A `LaneTable`'s vocabulary: row keys, cells, and the `Column` that describes one."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal

from rich.text import Text

RowKey = Hashable
Cell = str | Text
Justify = Literal["left", "center", "right"]
SortKey = Callable[[Cell], Any]


def plain(cell: Cell) -> str:
    """The text of a cell, without styles."""
    return cell.plain if isinstance(cell, Text) else cell


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a `LaneTable`.

    Attributes:
        key: Identifies the column (for sorting and filtering).
        label: The header text (shown as plain text).
        width: A fixed width in cells, or None to fit the content.
        min_width: With auto width, never narrower than this.
        max_width: With auto width, never wider than this (longer cells end in "…").
        justify: Alignment of the cells and the label.
        sort_key: Maps a cell to a sort key; `text_key` if None. See `number_key`, `duration_key`.
        fill: With auto width, grow to the view's right edge past the columns before it (up to
            its widest cell; the columns after it move right): a long reason is shown whole on
            a wide terminal.
        grow: Who gets the view's free width first. When the row is narrower than the view,
            the columns cut by their `max_width` grow towards their widest cell, lowest
            `grow` first, then those without one in column order (`free_width.share`): a
            wide terminal shows whole names instead of empty columns on the right.
    """

    key: str
    label: str
    width: int | None = None
    min_width: int = 0
    max_width: int | None = None
    justify: Justify = "left"
    sort_key: SortKey | None = None
    fill: bool = False
    grow: int | None = None
