"""How a `LaneTable` draws: column widths (measured once per cell, given the view's free width
by `_free_width.share`), one `Strip` per row kept until the row changes, each cell's segments
shared between rows, the header, and the stacked styles of zebra, tone, mark and cursor. A
change repaints only the lines on screen whose rows changed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Region
from textual.strip import Strip

from lanewatch.tui.widgets.lane_table._cells import cell_memo_key, cell_segments
from lanewatch.tui.widgets.lane_table._column import Cell, Column, RowKey
from lanewatch.tui.widgets.lane_table._free_width import share
from lanewatch.tui.widgets.lane_table._viewport import Viewport

if TYPE_CHECKING:
    from textual.app import App
    from textual.css.styles import RenderStyles

    from lanewatch.tui.widgets.lane_table._order import RowOrder


class CursorMarks(Protocol):
    """What the painter reads of the table's cursor (`CursorKeeper`)."""

    @property
    def key(self) -> RowKey | None: ...

    @property
    def marked(self) -> set[RowKey]: ...

    @property
    def page_height(self) -> int: ...


class PaintedTable(Viewport, Protocol):
    """What the painter uses of the table that owns it (`LaneTable`)."""

    columns: tuple[Column, ...]
    order: RowOrder
    tones: dict[RowKey, str]
    row_renders: int

    @property
    def cursor(self) -> CursorMarks: ...

    @property
    def zebra_stripes(self) -> bool: ...

    @property
    def app(self) -> App[Any]: ...

    def get_component_styles(self, *names: str) -> RenderStyles: ...

    def get_component_rich_style(self, *names: str, partial: bool = False) -> Style: ...

    def refresh(self, *regions: Region) -> object: ...


_SORT_MARKS = {False: " ▲", True: " ▼"}
_SORT_MARK_WIDTH = 2
# The style of a segment that has none: Textual's NO_COLOR filter (`Monochrome`) reads every
# segment's style and fails on None, so no segment of ours is left without one.
PLAIN = Style()


def _styled(segments: list[Segment]) -> list[Segment]:
    return [s if s.style is not None else Segment(s.text, PLAIN, s.control) for s in segments]


class RowPainter:
    """Owned by a `LaneTable` (composition): it reads the table's rows, order, tones, marks
    and cursor, and its component styles."""

    def __init__(self, table: PaintedTable, cell_padding: int, cache_size: int) -> None:
        self.table = table
        self.columns: tuple[Column, ...] = table.columns
        self.pad = " " * cell_padding
        # Cell widths per row, so an auto column can shrink without re-measuring every cell.
        self.cell_widths: dict[RowKey, tuple[int, ...]] = {}
        self.content_max = [0] * len(self.columns)
        # Kept, not recomputed per row: a tick re-renders every row on screen each second.
        self._shown: list[int] = []
        self._total_width = 0
        self.hidden = frozenset()  # column keys not shown
        # One strip per row, as wide as the widest of the row and the view (`line_width`), so
        # an unscrolled view draws it as it is; cleared when that width changes.
        self.line_width = 0
        self.widths = self.compute_widths()
        self.strips: LRUCache[RowKey, Strip] = LRUCache(cache_size)
        self.pass_width: int | None = None  # set while `render_lines` draws
        # Per row, each cell's segments (None: to render): a tick that changes one age cell
        # renders that cell again and joins the others as they were.
        self.parts: LRUCache[RowKey, list[list[Segment] | None]] = LRUCache(cache_size)
        # Segments of one cell at one width: a row changed by a tick (its ages) renders again,
        # and most of its cells (state, lane, checkout, pid, host) are what they were.
        self.cells: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(4 * cache_size)
        self.header: Strip | None = None
        self.layers: dict[str, Style] = {}  # component styles, memoised per frame

    @property
    def hidden(self) -> frozenset[str]:
        """Keys of the columns not shown; set `widths` after changing it."""
        return self._hidden

    @hidden.setter
    def hidden(self, keys: frozenset[str]) -> None:
        self._hidden = keys
        self._shown = [i for i, c in enumerate(self.columns) if c.key not in keys]

    @property
    def shown(self) -> list[int]:
        """Indices of the columns shown, in order (not to be changed)."""
        return self._shown

    @property
    def widths(self) -> tuple[int, ...]:
        return self._widths

    @widths.setter
    def widths(self, widths: tuple[int, ...]) -> None:
        self._widths = widths
        self._total_width = sum(widths[i] + 2 * len(self.pad) for i in self._shown)

    # ------------------------------------------------------------------ widths

    def compute_widths(self) -> tuple[int, ...]:
        widths = []
        fills = []
        for i, (column, content) in enumerate(zip(self.columns, self.content_max, strict=True)):
            if column.key in self.hidden:
                widths.append(0)
                continue
            if column.width is not None:
                widths.append(column.width)
                continue
            # Room for the sort mark, so sorting never changes the layout.
            width = max(column.min_width, cell_len(column.label) + _SORT_MARK_WIDTH, content)
            if column.max_width is not None:
                width = min(width, column.max_width)
            if column.fill and width < content:
                fills.append((i, content))
            widths.append(width)
        pad = 2 * len(self.pad)
        if self.line_width:
            free = self.line_width - sum(widths[j] + pad for j in self.shown)
            share(self.columns, widths, self.content_max, self.shown, free)
        for i, content in fills if self.line_width else ():
            # The view's width past the columns before it, up to its widest cell: the columns
            # after a fill column move right (a scroll away), those before it stay in view.
            before = sum(widths[j] + pad for j in self.shown if j < i)
            widths[i] = max(widths[i], min(content, self.line_width - before - pad))
        return tuple(widths)

    @property
    def width_follows_view(self) -> bool:
        """Some column's width depends on the view's (a `fill`, or one that may grow)."""
        return any(c.fill or (c.width is None and c.max_width is not None) for c in self.columns)

    @property
    def total_width(self) -> int:
        return self._total_width

    def update_widths(self) -> bool:
        widths = self.compute_widths()
        if widths == self.widths:
            return False
        self.widths = widths
        self.strips.clear()
        self.parts.clear()
        self.cells.clear()
        return True

    def column_starts(self) -> list[int]:
        starts, edge, pad = [], 0, 2 * len(self.pad)
        for i in self.shown:
            starts.append(edge)
            edge += self.widths[i] + pad
        return starts

    def column_at(self, x: int) -> Column | None:
        edge = 0
        pad = 2 * len(self.pad)
        for i in self.shown:
            edge += self.widths[i] + pad
            if x < edge:
                return self.columns[i]
        return None

    # ------------------------------------------------------------------ strips

    def row(self, key: RowKey) -> Strip:
        """The row's strip, `line_width` wide."""
        strip = self.strips.get(key)
        if strip is None:
            self.table.row_renders += 1
            parts = self.parts.get(key)
            if parts is None:
                parts = [None] * len(self.columns)
                self.parts.set(key, parts)
            segments: list[Segment] = []
            row = self.table.order.rows[key]
            for i in self.shown:
                part = parts[i]
                if part is None:
                    part = parts[i] = self.cell_part(i, row[i])
                segments += part
            total = self._total_width
            if self.line_width > total:
                segments.append(Segment(" " * (self.line_width - total), PLAIN))
            strip = Strip(segments, max(total, self.line_width))
            self.strips.set(key, strip)
        return strip

    def cell_part(self, index: int, cell: Cell) -> list[Segment]:
        """The segments of one cell at its column's width, each with a style (shared between
        rows)."""
        column, width = self.columns[index], self.widths[index]
        memo = cell_memo_key(cell, width, column.justify)
        rendered = self.cells.get(memo)
        if rendered is None:
            app = self.table.app
            rendered = cell_segments(cell, width, column.justify, self.pad, app.console)
            if app.no_color:
                # Textual would draw a colour as a grey by its luminance: a red cell nearly
                # black. The bold, dim and reverse of a cell say it without.
                rendered = list(Segment.remove_color(rendered))
            rendered = _styled(rendered)
            self.cells.set(memo, rendered)
        return rendered

    def header_strip(self) -> Strip:
        if self.header is None:
            order = self.table.order
            console = self.table.app.console
            segments: list[Segment] = []
            for i in self.shown:
                column, width = self.columns[i], self.widths[i]
                label = column.label
                if column.key == order.sort_column:
                    label += _SORT_MARKS[order.sort_reverse]
                segments += cell_segments(label, width, column.justify, self.pad, console)
            self.header = Strip(_styled(segments), self.total_width)
        return self.header

    def forget(self, keys: Iterable[RowKey]) -> None:
        """Rows gone: their strips and parts."""
        for key in keys:
            self.strips.discard(key)
            self.parts.discard(key)

    # ------------------------------------------------------------------ styles

    def layer(self, name: str) -> Style:
        """A component's style holding only the properties its rules set.

        Zebra, mark and cursor stack: a layer that sets no background (a mark that only turns
        text bold) leaves the one below visible. Colours come from the full style, so
        translucent backgrounds are blended as Textual does.
        """
        style = self.layers.get(name)
        if style is None:
            table = self.table
            styles = table.get_component_styles(name)
            full = table.get_component_rich_style(name)
            style = Style(
                color=full.color if styles.has_rule("color") else None,
                bgcolor=full.bgcolor if styles.has_rule("background") else None,
            )
            style += styles.text_style
            self.layers[name] = style
        return style

    def row_style(self, key: RowKey, index: int) -> Style:
        """The stacked style of a row's line: a handful of combinations, each built once per
        pass (`layers` is cleared with each)."""
        table = self.table
        cursor = table.cursor
        zebra = index % 2 if table.zebra_stripes else -1
        tone = table.tones.get(key)
        marked, current = key in cursor.marked, key == cursor.key
        combo = f"row {zebra} {tone} {marked:d}{current:d}"
        style = self.layers.get(combo)
        if style is not None:
            return style
        style = Style()
        if zebra >= 0:
            style += self.layer("lane-table--odd-row" if zebra else "lane-table--even-row")
        if tone is not None:
            layer = self.layer(f"lane-table--{tone}")
            style += layer.without_color if table.app.no_color else layer
        if marked:
            style += self.layer("lane-table--marked")
        if current:
            style += self.layer("lane-table--cursor")
        self.layers[combo] = style
        return style

    def refresh_keys(self, keys: Iterable[RowKey], columns: Iterable[int] | None = None) -> None:
        """Repaint the lines of `keys` that are on screen, and nothing else. `columns`: the
        only cells of those rows that changed (indices; None: any): none of them in view (a
        hidden column, or scrolled off: AGE past 80 columns), no repaint at all."""
        table = self.table
        if not table.is_mounted:
            return
        top = table.scroll_offset.y
        bottom = top + table.cursor.page_height
        position = table.order.position
        lines = sorted(
            index - top + 1
            for index in (position.get(key) for key in keys)
            if index is not None and top <= index < bottom
        )
        if not lines:
            return
        width = table.scrollable_content_region.width
        if columns is not None and not self.in_view(columns, width):
            return
        # One region per run of adjacent lines: a tick changes every row on screen, and one
        # refresh of the run costs what one refresh of a line does. Whole lines: a region as
        # narrow as the changed cells costs more (Textual crops every strip of the line to it
        # before sending, and still renders and divides the whole line).
        start = previous = lines[0]
        for line in [*lines[1:], None]:
            if line is not None and line == previous + 1:
                previous = line
                continue
            table.refresh(Region(0, start, width, previous - start + 1))
            if line is not None:
                start = previous = line

    def in_view(self, columns: Iterable[int], width: int) -> bool:
        """One of `columns` (indices) is drawn in a view `width` wide at its scroll: shown
        and not scrolled off either side (its padding counts)."""
        wanted = set(columns)
        scroll_x = self.table.scroll_offset.x
        pad = 2 * len(self.pad)
        edge = -scroll_x
        for i in self._shown:
            start, edge = edge, edge + self._widths[i] + pad
            if i in wanted and edge > 0 and start < width:
                return True
        return False
