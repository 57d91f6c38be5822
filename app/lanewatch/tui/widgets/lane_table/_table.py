"""A virtualised, keyed table on Textual's Line API, built for thousands of live rows.

Textual's `DataTable` re-renders every visible cell on any change. `LaneTable` keeps one
rendered `Strip` per row key and invalidates only the rows a batch changed, so a one-cell change
costs one row render and one line repaint. Order (sort + filter) is rebuilt only when a batch
changed something that affects it; the cursor and the marks follow row keys, never indices.

The widget is the face; the work is done by what it owns: `RowOrder` (`_order.py`: rows, sort,
filter, positions), `CursorKeeper` (`_cursor.py`: cursor and marks), `RowPainter`
(`_painter.py`: widths, strips, styles), `DeferredRows` (`_deferred.py`: changed rows whose cells
wait until they can be seen) and, per batch of changes, `RowBatch` (`_batch.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, TypeVar

from rich.segment import Segment
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from lanewatch.tui.widgets.lane_table._batch import RowBatch
from lanewatch.tui.widgets.lane_table._column import Cell, Column, RowKey
from lanewatch.tui.widgets.lane_table._cursor import CursorKeeper
from lanewatch.tui.widgets.lane_table._deferred import DeferredRows, RowSource
from lanewatch.tui.widgets.lane_table._order import RowOrder
from lanewatch.tui.widgets.lane_table._painter import PLAIN, RowPainter

K = TypeVar("K", bound=RowKey)  # a caller's own key type (`str`): a Mapping is invariant in it
MARK_GLYPH = "•"  # in a marked row's first cell of padding (`space` marks a row)


class LaneTable(ScrollView, can_focus=True):
    """A keyed, virtualised table: rows are `key -> tuple of cells`, changed in batches by `apply`.

    Cells are `str` (always shown as typed, never parsed as markup) or `rich.text.Text`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor('up')", "Up", show=False),
        Binding("down", "cursor('down')", "Down", show=False),
        Binding("pageup", "cursor('page_up')", "Page up", show=False),
        Binding("pagedown", "cursor('page_down')", "Page down", show=False),
        Binding("home,g", "cursor('first')", "First row", show=False),
        Binding("end,G", "cursor('last')", "Last row", show=False),
        Binding("right", "scroll_column(1)", "Scroll a column right", show=False),
        Binding("left", "scroll_column(-1)", "Scroll a column left", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("space", "toggle_mark", "Mark", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lane-table--header",
        "lane-table--cursor",
        "lane-table--marked",
        "lane-table--even-row",
        "lane-table--odd-row",
        # Tones (`set_tones`): how a row reads at a glance, by the severity of what it shows.
        "lane-table--high",
        "lane-table--medium",
        "lane-table--low",
    }
    TONES: ClassVar[frozenset[str]] = frozenset({"high", "medium", "low"})

    # Minimal on purpose: the app's look lives in styles/*.tcss.
    DEFAULT_CSS = """
    LaneTable {
        height: 1fr;
        & > .lane-table--header { text-style: bold; background: $panel; }
        & > .lane-table--cursor { background: $block-cursor-blurred-background; }
        &:focus > .lane-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
        }
        & > .lane-table--marked { text-style: bold; color: $accent; }
        & > .lane-table--even-row { background: $surface-lighten-1 50%; }
    }
    """

    zebra_stripes: reactive[bool] = reactive(False)
    """Style even and odd rows with the `--even-row` / `--odd-row` component classes."""

    class TableMessage(Message):
        """A message from this table: `control` is the table (what `@on` selectors match)."""

        def __init__(self, table: LaneTable) -> None:
            super().__init__()
            self.table = table

        @property
        def control(self) -> LaneTable:
            return self.table

    class RowHighlighted(TableMessage):
        """The cursor moved to another row (or the table emptied: `key` is None)."""

        def __init__(self, table: LaneTable, key: RowKey | None) -> None:
            super().__init__(table)
            self.key = key

    class RowSelected(TableMessage):
        """The user chose the cursor row (enter, or a click on the highlighted row)."""

        def __init__(self, table: LaneTable, key: RowKey) -> None:
            super().__init__(table)
            self.key = key

    class MarksChanged(TableMessage):
        """The set of marked rows changed."""

        def __init__(self, table: LaneTable, marked: frozenset[RowKey]) -> None:
            super().__init__(table)
            self.marked = marked

    class SortChanged(TableMessage):
        """The sort column or direction changed (also from a header click)."""

        def __init__(self, table: LaneTable, column: str | None, reverse: bool) -> None:
            super().__init__(table)
            self.column = column
            self.reverse = reverse

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        zebra_stripes: bool = False,
        cell_padding: int = 1,
        cache_size: int = 2048,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        if len({column.key for column in columns}) != len(columns):
            raise ValueError("column keys must be unique")
        self.columns: tuple[Column, ...] = tuple(columns)
        self.order = RowOrder(self.columns)
        self.cursor = CursorKeeper(self)
        self.painter = RowPainter(self, cell_padding, cache_size)
        self.tones: dict[RowKey, str] = {}  # row key -> tone (`set_tones`)
        self.deferred = DeferredRows(self)
        self.row_renders = 0
        """Rows rendered to strips (cache misses); for tests and benchmarks."""
        self.line_renders = 0
        """Lines asked of `render_line`; for tests and benchmarks."""
        self.set_reactive(LaneTable.zebra_stripes, zebra_stripes)

    # ----------------------------------------------------------------- reading

    @property
    def row_count(self) -> int:
        """Rows in the table, hidden by the filter or not."""
        return len(self.order.rows)

    @property
    def row_keys(self) -> tuple[RowKey, ...]:
        """Keys of every row, the filtered-out included, in insertion order."""
        return tuple(self.order.rows)

    @property
    def visible_keys(self) -> tuple[RowKey, ...]:
        """Keys of the rows shown, in display order."""
        return tuple(self.order.visible)

    def get_row(self, key: RowKey) -> tuple[Cell, ...] | None:
        """The cells of a row, or None if there is no such row."""
        if key in self.deferred.keys:
            self.deferred.build([key])
        return self.order.rows.get(key)

    def window(self, margin: int, height: int | None = None) -> list[RowKey]:
        """The keys of the rows in view, and `margin` rows above and below it; `height`: the
        view's, if not the table's own (a table just shown has no size yet)."""
        top = max(0, self.scroll_offset.y - margin)
        if height is None:
            height = self.scrollable_content_region.height
        return self.order.visible[top : top + height + 2 * margin]

    def has_row(self, key: RowKey) -> bool:
        return key in self.order.rows

    @property
    def cursor_key(self) -> RowKey | None:
        """Key of the highlighted row, or None when no row is shown."""
        return self.cursor.key

    @property
    def cursor_index(self) -> int | None:
        """Display index of the highlighted row."""
        return self.cursor.index

    @property
    def marked(self) -> frozenset[RowKey]:
        """Marked rows, including marked rows the filter hides."""
        return frozenset(self.cursor.marked)

    @property
    def sort_column(self) -> str | None:
        return self.order.sort_column

    @property
    def sort_reverse(self) -> bool:
        return self.order.sort_reverse

    @property
    def filter_text(self) -> str:
        """The filter as given to `set_filter` (matching ignores case)."""
        return self.order.filter_text

    @property
    def hidden_columns(self) -> frozenset[str]:
        """Keys of the columns not shown (`set_hidden`)."""
        return self.painter.hidden

    # ---------------------------------------------------------------- changing

    def apply(
        self,
        upserts: Mapping[K, Sequence[Cell]] | None = None,
        removals: Iterable[RowKey] = (),
    ) -> None:
        """Apply one batch of changes: insert or replace `upserts`, then drop `removals`.

        A key in both ends up removed. A row equal to the one shown is ignored, so callers may
        resend whole rows. Only changed rows are re-rendered; the order is rebuilt only if an
        insert, a removal, a sort-key change or a filter-match change asks for it.
        """
        batch = RowBatch(self)
        every = range(len(self.columns))
        rows = self.order.rows
        upserts = upserts or {}
        self.deferred.discard(upserts)  # given whole: nothing of theirs waits any more
        for key, cells in upserts.items():
            row = tuple(cells)
            if len(row) != len(self.columns):
                raise ValueError(f"row {key!r} has {len(row)} cells, expected {len(self.columns)}")
            old = rows.get(key)
            if old != row:
                batch.store(key, row, old, every)
        gone = {key for key in removals if key in rows}
        if gone:
            self.deferred.discard(gone)
            batch.drop(gone)
        batch.finish()

    def update_cells(self, changes: Mapping[RowKey, Mapping[str, Cell]]) -> None:
        """Replace some cells of rows already shown, by column key (what the age tick does).

        Cheaper than `apply` with whole rows: only the given cells are compared and measured,
        the others stay as they are. Keys without a row are ignored.
        """
        batch = RowBatch(self)
        index = self.order.column_index
        rows = self.order.rows
        for key, cells in changes.items():
            old = rows.get(key)
            if old is None:
                continue
            row = list(old)
            changed = []
            for column, cell in cells.items():
                i = index[column]
                if row[i] != cell:
                    row[i] = cell
                    changed.append(i)
            if changed:
                batch.store(key, tuple(row), old, changed)
        batch.finish()

    def defer(self, keys: Iterable[RowKey], source: RowSource) -> None:
        """These rows changed, but in nothing that moves them (their sort key, the filter):
        `source` builds them when they may be seen or read (`_deferred.py`). Those near the
        view are built at once."""
        self.deferred.add(keys, source)

    def catch_up(self, waited: float, limit: int) -> None:
        """Build at most `limit` of the rows that have waited `waited` seconds or more for
        their cells (`defer`), the oldest first."""
        self.deferred.build_due(waited, limit)

    def sort_by(self, column: str | None, *, reverse: bool = False) -> None:
        """Sort by a column (stable; ties keep insertion order), or None for insertion order."""
        self.deferred.build()  # every row's sort key as it is now
        if not self.order.set_sort(column, reverse):
            return
        self.painter.header = None
        self.rebuild()
        self.post_message(self.SortChanged(self, column, reverse))

    def set_filter(self, text: str, columns: Iterable[str] | None = None) -> None:
        """Show only rows `text` matches (`_filter.py`): plain text is a case-insensitive
        substring of one of `columns`; `field:value`, `field:glob*` and `!term` narrow by one
        column (by key or label), all case-insensitive.

        `columns` defaults to every column; an empty `text` shows every row. The cursor stays on
        its row if that row still shows, and returns to it when a later filter shows it again.
        """
        self.deferred.build()  # every row's cells as they are now
        if self.order.set_filter(text, columns):
            self.rebuild()

    def set_tones(self, tones: Mapping[RowKey, str | None]) -> None:
        """Set how rows read at a glance: a tone of `TONES` styles the whole row with the
        component class `lane-table--<tone>` (under the marks and the cursor); None: no tone.
        Keys without a row are ignored."""
        changed = []
        for key, tone in tones.items():
            if key not in self.order.rows:
                continue
            tone = tone if tone in self.TONES else None
            if self.tones.get(key) == tone:
                continue
            if tone is None:
                del self.tones[key]
            else:
                self.tones[key] = tone
            changed.append(key)
        self.painter.refresh_keys(changed)

    def set_hidden(self, keys: Iterable[str]) -> None:
        """Hide these columns (by key), show the others; at least one column stays shown.
        Hidden columns still sort and filter."""
        painter = self.painter
        hidden = frozenset(k for k in keys if k in self.order.column_index)
        if hidden == painter.hidden or len(hidden) >= len(self.columns):
            return
        painter.hidden = hidden
        painter.widths = painter.compute_widths()
        painter.strips.clear()
        painter.parts.clear()
        self.rebuild()

    def move_cursor(self, key: RowKey) -> bool:
        """Highlight the row `key`; False if it is not shown."""
        if key not in self.order.position:
            return False
        self.cursor.place(key, chosen=True)
        return True

    def set_marks(self, keys: Iterable[RowKey]) -> None:
        """Replace the marks (keys without a row are ignored)."""
        self.cursor.set_marks(keys)

    def rebuild(self) -> None:
        """Recompute the shown rows, keep the cursor on its key, repaint the view."""
        cursor = self.cursor
        # Keep the cursor in view only if it was: a user who scrolled away with the wheel is
        # not yanked back by every new row.
        follow = cursor.key is None or cursor.on_screen(cursor.key)
        self.order.refilter()
        self.virtual_size = Size(self.painter.total_width, len(self.order.visible) + 1)
        self.painter.header = None
        self.refresh()
        cursor.place(cursor.following(), chosen=False, scroll=follow)

    # ---------------------------------------------------------------- actions

    def action_cursor(self, where: str) -> None:
        """Up, down, page_up, page_down, first, last."""
        self.cursor.go(where)

    def action_scroll_column(self, step: int) -> None:
        """Scroll sideways so the next (or previous) column starts at the left edge."""
        x = self.scroll_offset.x
        starts = self.painter.column_starts()
        if step > 0:
            target = next((s for s in starts if s > x), None)
        else:
            target = next((s for s in reversed(starts) if s < x), 0)
        if target is not None:
            self.scroll_to(x=min(target, self.max_scroll_x), animate=False)

    def action_select_cursor(self) -> None:
        if self.cursor.key is not None:
            self.post_message(self.RowSelected(self, self.cursor.key))

    def action_toggle_mark(self, key: RowKey | None = None) -> None:
        """Mark or unmark a row (the cursor row by default)."""
        key = self.cursor.key if key is None else key
        if key is not None and key in self.order.rows:
            self.cursor.toggle_mark(key)

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self.painter.column_at(offset.x + self.scroll_offset.x)
            if column is not None:
                same = column.key == self.order.sort_column
                self.sort_by(column.key, reverse=same and not self.order.sort_reverse)
            return
        index = self.scroll_offset.y + offset.y - 1
        visible = self.order.visible
        if 0 <= index < len(visible):
            key = visible[index]
            if key == self.cursor.key:
                self.post_message(self.RowSelected(self, key))
            else:
                self.cursor.place(key, chosen=True)

    # --------------------------------------------------------------- rendering

    def render_lines(self, crop: Region) -> list[Strip]:
        # No row waits for its cells where it can be seen, whatever brought it there (a scroll,
        # rows removed above it): built before anything of this pass is computed.
        self.deferred.in_view()
        painter = self.painter
        painter.layers.clear()  # focus, hover and theme changes reach us through a repaint
        # The same for every line of this pass, and not free to compute (~18 us) per line.
        painter.pass_width = width = self.scrollable_content_region.width
        if width != painter.line_width:
            painter.line_width = width
            painter.strips.clear()
            if painter.width_follows_view and painter.update_widths():
                self.virtual_size = Size(painter.total_width, len(self.order.visible) + 1)
        try:
            return super().render_lines(crop)
        finally:
            painter.pass_width = None

    def render_line(self, y: int) -> Strip:
        self.line_renders += 1
        painter = self.painter
        scroll_x, scroll_y = self.scroll_offset
        width = painter.pass_width
        if width is None:
            width = self.scrollable_content_region.width
        if y == 0:
            strip = painter.header_strip()
            style = painter.layer("lane-table--header")
        else:
            index = scroll_y + y - 1
            visible = self.order.visible
            if index >= len(visible):
                return Strip.blank(width, PLAIN)
            key = visible[index]
            strip = painter.row(key)
            style = painter.row_style(key, index)
            if key in self.cursor.marked and painter.pad and not scroll_x:
                # A glyph in the row's left padding: marked reads without colour or bold.
                strip = Strip.join([Strip([Segment(MARK_GLYPH)], 1), strip.crop(1)])
        if scroll_x or strip.cell_length != width:
            strip = strip.crop_extend(scroll_x, scroll_x + width, PLAIN)
        return strip.apply_style(style) if style else strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.deferred.in_view()

    def _on_resize(self, event: events.Resize) -> None:
        self.deferred.in_view()
        self.cursor.scroll_to()
