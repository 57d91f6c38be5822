"""One cell of a `LaneTable` as text and segments: made inert (control characters), measured,
fitted to its column's width. Pure functions, shared by every row (the table memoises them)."""

from __future__ import annotations

import re

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from lanewatch.tui.widgets.lane_table._column import Cell, Justify

# Untrusted strings (paths, commands) may carry control characters: a raw ESC would reach the
# terminal, and a newline would break the one-line layout. Each maps to one visible cell, so the
# spans of a `Text` stay valid after the swap.
_CONTROL = {c: "\ufffd" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_CONTROL.update({ord("\t"): " ", ord("\n"): " ", ord("\r"): " "})
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def sanitize(text: str) -> str:
    if text.isprintable() or not _CONTROL_RE.search(text):
        return text
    return text.translate(_CONTROL)


def measure(cell: Cell) -> int:
    text = cell.plain if isinstance(cell, Text) else cell
    # Most cells are printable ASCII, one cell per character: skip Rich's width tables.
    if text.isascii() and text.isprintable():
        return len(text)
    return cell_len(sanitize(text))


def fit(text: str, width: int, justify: Justify) -> str:
    """Truncate (with an ellipsis) or pad plain text to exactly `width` cells."""
    length = len(text) if text.isascii() else cell_len(text)
    if length > width:
        return set_cell_size(text, width - 1) + "…" if width > 0 else ""
    gap = width - length
    if justify == "right":
        return " " * gap + text
    if justify == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


def cell_segments(
    cell: Cell, width: int, justify: Justify, pad: str, console: Console
) -> list[Segment]:
    if not isinstance(cell, Text):
        # Plain strings are never parsed as markup: one unstyled segment, padding included.
        return [Segment(pad + fit(sanitize(cell), width, justify) + pad)]
    text = cell.copy()
    if _CONTROL_RE.search(text.plain):
        text.plain = text.plain.translate(_CONTROL)
    text.overflow = "ellipsis"
    text.no_wrap = True
    text.end = ""
    text.align(justify, width)
    # `Text.render` draws only the spans: the Text's own style (a state's colour) goes under them.
    segments = text.render(console)
    if text.style:
        segments = Segment.apply_style(segments, console.get_style(text.style))
    return [Segment(pad), *segments, Segment(pad)]


def cell_memo_key(cell: Cell, width: int, justify: Justify) -> tuple[object, ...]:
    """What a cell's segments depend on (the pad and console are the table's own)."""
    if isinstance(cell, Text):
        return (cell.plain, str(cell.style), tuple(cell.spans), width, justify)
    return (cell, width, justify)
