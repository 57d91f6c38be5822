"""A virtualised, keyed table on Textual's Line API, built for thousands of live rows.

Textual's `DataTable` re-renders every visible cell on any change. `LaneTable` keeps one
rendered `Strip` per row key and invalidates only the rows a batch changed, so a one-cell change
costs one row render and one line repaint. Order (sort + filter) is rebuilt only when a batch
changed something that affects it; the cursor and the marks follow row keys, never indices.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from lanewatch.tui.widgets.lane_table._cells import cell_memo_key, cell_segments, measure
from lanewatch.tui.widgets.lane_table._column import Cell, Column, RowKey, plain
from lanewatch.tui.widgets.lane_table._filter import compile_filter
from lanewatch.tui.widgets.lane_table._free_width import share
from lanewatch.tui.widgets.lane_table._sort_keys import text_key

MARK_GLYPH = "•"  # in a marked row's first cell of padding (`space` marks a row)

_SORT_MARKS = {False: " ▲", True: " ▼"}
# The style of a segment that has none: Textual's NO_COLOR filter (`Monochrome`) reads every
# segment's style and fails on None, so no segment of ours is left without one.
_PLAIN = Style()


def _styled(segments: list[Segment]) -> list[Segment]:
    return [s if s.style is not None else Segment(s.text, _PLAIN, s.control) for s in segments]


_SORT_MARK_WIDTH = 2


def _nearest(keys: list[RowKey], key: RowKey, accept: Callable[[RowKey], bool]) -> RowKey | None:
    """The first accepted key after `key` in `keys`, else the last accepted one before it."""
    try:
        start = keys.index(key)
    except ValueError:
        return None
    for candidate in keys[start + 1 :]:
        if accept(candidate):
            return candidate
    for candidate in reversed(keys[:start]):
        if accept(candidate):
            return candidate
    return None


@dataclass(slots=True)
class _Batch:
    """What one `apply` or `update_cells` changed, for `LaneTable._finish`."""

    changed: list[RowKey] = field(default_factory=list)  # rows replaced in place
    recheck: set[int] = field(default_factory=set)  # auto columns whose widest may have shrunk
    grown: bool = False  # an auto column's widest cell grew
    resort: bool = False  # a new row: sort again
    resorted: list[RowKey] = field(default_factory=list)  # rows whose sort key changed
    order_changed: bool = False


class LaneTable(ScrollView, can_focus=True):
    """A keyed, virtualised table: rows are `key -> tuple of cells`, changed in batches by `apply`.

    Cells are `str` (always shown as typed, never parsed as markup) or `rich.text.Text`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "cursor_page_up", "Page up", show=False),
        Binding("pagedown", "cursor_page_down", "Page down", show=False),
        Binding("home,g", "cursor_first", "First row", show=False),
        Binding("end,G", "cursor_last", "Last row", show=False),
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

    class RowHighlighted(Message):
        """The cursor moved to another row (or the table emptied: `key` is None)."""

        def __init__(self, table: LaneTable, key: RowKey | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> LaneTable:
            return self.table

    class RowSelected(Message):
        """The user chose the cursor row (enter, or a click on the highlighted row)."""

        def __init__(self, table: LaneTable, key: RowKey) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> LaneTable:
            return self.table

    class MarksChanged(Message):
        """The set of marked rows changed."""

        def __init__(self, table: LaneTable, marked: frozenset[RowKey]) -> None:
            super().__init__()
            self.table = table
            self.marked = marked

        @property
        def control(self) -> LaneTable:
            return self.table

    class SortChanged(Message):
        """The sort column or direction changed (also from a header click)."""

        def __init__(self, table: LaneTable, column: str | None, reverse: bool) -> None:
            super().__init__()
            self.table = table
            self.column = column
            self.reverse = reverse

        @property
        def control(self) -> LaneTable:
            return self.table

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
        self._column_index = {column.key: i for i, column in enumerate(self.columns)}
        self._pad = " " * cell_padding
        self._rows: dict[RowKey, tuple[Cell, ...]] = {}
        # Cell widths per row, so an auto column can shrink without re-measuring every cell.
        self._cell_widths: dict[RowKey, tuple[int, ...]] = {}
        self._content_max = [0] * len(self.columns)
        self._hidden: frozenset[str] = frozenset()  # column keys not shown
        self._line_width = 0
        self._widths = self._compute_widths()
        self._sort_column: str | None = None
        self._sort_reverse = False
        self._sort_keys: dict[RowKey, Any] = {}
        self._filter_text = ""  # as the user typed it
        self._predicate: Callable[[Sequence[str]], bool] | None = None  # None: no filter
        self._filter_columns: tuple[int, ...] = tuple(range(len(self.columns)))
        self._ordered: list[RowKey] = []  # every row, sorted
        self._visible: list[RowKey] = []  # the rows that pass the filter, in order
        self._position: dict[RowKey, int] = {}  # key -> index in _visible
        self._cursor: RowKey | None = None
        # The row the user chose: kept while a filter hides it, so clearing the filter returns.
        self._wanted: RowKey | None = None
        self._marked: set[RowKey] = set()
        # One strip per row, as wide as the widest of the row and the view (`_line_width`), so
        # an unscrolled view draws it as it is; cleared when that width changes.
        self._strips: LRUCache[RowKey, Strip] = LRUCache(cache_size)
        self._line_width = 0
        self._pass_width: int | None = None  # set while `render_lines` draws
        # Per row, each cell's segments (None: to render): a tick that changes one age cell
        # renders that cell again and joins the others as they were.
        self._parts: LRUCache[RowKey, list[list[Segment] | None]] = LRUCache(cache_size)
        # Segments of one cell at one width: a row changed by a tick (its ages) renders again,
        # and most of its cells (state, lane, checkout, pid, host) are what they were.
        self._cells: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(4 * cache_size)
        self._header: Strip | None = None
        self._haystacks: dict[RowKey, tuple[str, ...]] = {}  # casefolded cells per row
        self._tones: dict[RowKey, str] = {}  # row key -> tone (`set_tones`)
        self._layers: dict[str, Style] = {}  # component styles, memoised per frame
        self.row_renders = 0
        """Rows rendered to strips (cache misses); for tests and benchmarks."""
        self.line_renders = 0
        """Lines asked of `render_line`; for tests and benchmarks."""
        self.set_reactive(LaneTable.zebra_stripes, zebra_stripes)

    # ----------------------------------------------------------------- reading

    @property
    def row_count(self) -> int:
        """Rows in the table, hidden by the filter or not."""
        return len(self._rows)

    @property
    def row_keys(self) -> tuple[RowKey, ...]:
        """Keys of every row, the filtered-out included, in insertion order."""
        return tuple(self._rows)

    @property
    def visible_keys(self) -> tuple[RowKey, ...]:
        """Keys of the rows shown, in display order."""
        return tuple(self._visible)

    def visible_slice(self, start: int, stop: int) -> list[RowKey]:
        """Keys of the shown rows from display index `start` up to `stop`."""
        return self._visible[start:stop]

    def get_row(self, key: RowKey) -> tuple[Cell, ...] | None:
        """The cells of a row, or None if there is no such row."""
        return self._rows.get(key)

    def has_row(self, key: RowKey) -> bool:
        return key in self._rows

    @property
    def cursor_key(self) -> RowKey | None:
        """Key of the highlighted row, or None when no row is shown."""
        return self._cursor

    @property
    def cursor_index(self) -> int | None:
        """Display index of the highlighted row."""
        return None if self._cursor is None else self._position.get(self._cursor)

    @property
    def marked(self) -> frozenset[RowKey]:
        """Marked rows, including marked rows the filter hides."""
        return frozenset(self._marked)

    @property
    def sort_column(self) -> str | None:
        return self._sort_column

    @property
    def sort_reverse(self) -> bool:
        return self._sort_reverse

    @property
    def filter_text(self) -> str:
        """The filter as given to `set_filter` (matching ignores case)."""
        return self._filter_text

    # ---------------------------------------------------------------- changing

    def apply(
        self,
        upserts: Mapping[RowKey, Sequence[Cell]] | None = None,
        removals: Iterable[RowKey] = (),
    ) -> None:
        """Apply one batch of changes: insert or replace `upserts`, then drop `removals`.

        A key in both ends up removed. A row equal to the one shown is ignored, so callers may
        resend whole rows. Only changed rows are re-rendered; the order is rebuilt only if an
        insert, a removal, a sort-key change or a filter-match change asks for it.
        """
        batch = _Batch()
        every = range(len(self.columns))
        for key, cells in (upserts or {}).items():
            row = tuple(cells)
            if len(row) != len(self.columns):
                raise ValueError(f"row {key!r} has {len(row)} cells, expected {len(self.columns)}")
            old = self._rows.get(key)
            if old != row:
                self._store(key, row, old, every, batch)
        gone = {key for key in removals if key in self._rows}
        if gone:
            self._drop(gone, batch)
        self._finish(batch)

    def update_cells(self, changes: Mapping[RowKey, Mapping[str, Cell]]) -> None:
        """Replace some cells of rows already shown, by column key (what the age tick does).

        Cheaper than `apply` with whole rows: only the given cells are compared and measured,
        the others stay as they are. Keys without a row are ignored.
        """
        batch = _Batch()
        index = self._column_index
        for key, cells in changes.items():
            old = self._rows.get(key)
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
                self._store(key, tuple(row), old, changed, batch)
        self._finish(batch)

    def _store(
        self,
        key: RowKey,
        row: tuple[Cell, ...],
        old: tuple[Cell, ...] | None,
        changed: Iterable[int],
        batch: _Batch,
    ) -> None:
        """Put `row` in place of `old` (None: a new row); only the cells at `changed` differ."""
        was_shown = key in self._position
        self._rows[key] = row
        content_max = self._content_max
        old_widths = self._cell_widths.get(key) if old is not None else None
        widths = list(old_widths) if old_widths is not None else [0] * len(row)
        for i in changed if old_widths is not None else range(len(row)):
            width = widths[i] = measure(row[i])
            if width > content_max[i]:
                content_max[i] = width
                batch.grown = True
            elif old_widths is not None and old_widths[i] == content_max[i] > width:
                batch.recheck.add(i)
        self._cell_widths[key] = tuple(widths)
        sort_index = self._column_index.get(self._sort_column or "")
        if sort_index is not None and (old is None or sort_index in changed):
            sort_key = self._sort_key(sort_index, row)
            if old is None:
                batch.resort = True
            elif self._sort_keys.get(key) != sort_key:
                batch.resorted.append(key)
            self._sort_keys[key] = sort_key
        if old is None:
            self._ordered.append(key)
            batch.order_changed = True
            return
        self._strips.discard(key)
        parts = self._parts.get(key)
        if parts is not None:
            for i in changed:
                parts[i] = None
        batch.changed.append(key)
        if changed:
            self._haystacks.pop(key, None)
            if self._predicate is not None and was_shown != self._matches(key):
                batch.order_changed = True

    def _drop(self, gone: set[RowKey], batch: _Batch) -> None:
        batch.order_changed = True
        if self._wanted in gone:
            # The chosen row vanishes: the row shown after it (or before it, at the end)
            # takes its place, as in htop.
            position = self._position
            self._wanted = _nearest(
                self._visible, self._wanted, lambda k: k in position and k not in gone
            )
        content_max = self._content_max
        for key in gone:
            del self._rows[key]
            self._strips.discard(key)
            self._parts.discard(key)
            self._haystacks.pop(key, None)
            self._sort_keys.pop(key, None)
            self._tones.pop(key, None)
            widths = self._cell_widths.pop(key)
            batch.recheck.update(i for i, w in enumerate(widths) if w == content_max[i])
        self._ordered = [key for key in self._ordered if key not in gone]
        if self._marked & gone:
            self._marked -= gone
            self.post_message(self.MarksChanged(self, frozenset(self._marked)))

    def _finish(self, batch: _Batch) -> None:
        """Widths, order and repaint after a batch of `_store`s and `_drop`s."""
        content_max = self._content_max
        for i in batch.recheck:
            content_max[i] = max((w[i] for w in self._cell_widths.values()), default=0)
        order_changed = batch.order_changed
        if (batch.grown or batch.recheck) and self._update_widths():
            order_changed = True  # every strip is stale; repaint all below
        if batch.resort or (
            batch.resorted and (order_changed or not self._still_in_order(batch.resorted))
        ):
            self._sort_ordered()
            order_changed = True
        if order_changed:
            self._rebuild()
        else:
            self._refresh_keys(batch.changed)

    def sort_by(self, column: str | None, *, reverse: bool = False) -> None:
        """Sort by a column (stable; ties keep insertion order), or None for insertion order."""
        if column is not None and column not in self._column_index:
            raise KeyError(column)
        if (column, reverse) == (self._sort_column, self._sort_reverse):
            return
        self._sort_column, self._sort_reverse = column, reverse
        self._sort_keys.clear()
        if column is None:
            self._ordered = list(self._rows)
        else:
            index = self._column_index[column]
            for key, row in self._rows.items():
                self._sort_keys[key] = self._sort_key(index, row)
            self._sort_ordered()
        self._header = None
        self._rebuild()
        self.post_message(self.SortChanged(self, column, reverse))

    def set_filter(self, text: str, columns: Iterable[str] | None = None) -> None:
        """Show only rows `text` matches (`_filter.py`): plain text is a case-insensitive
        substring of one of `columns`; `field:value`, `field:glob*` and `!term` narrow by one
        column (by key or label), all case-insensitive.

        `columns` defaults to every column; an empty `text` shows every row. The cursor stays on
        its row if that row still shows, and returns to it when a later filter shows it again.
        """
        indices = (
            tuple(range(len(self.columns)))
            if columns is None
            else tuple(self._column_index[c] for c in columns)
        )
        if (text, indices) == (self._filter_text, self._filter_columns):
            return
        self._filter_text, self._filter_columns = text, indices
        fields = {c.key.casefold(): i for i, c in enumerate(self.columns)}
        fields.update((c.label.casefold(), i) for i, c in enumerate(self.columns) if c.label)
        self._predicate = compile_filter(text, fields, indices)
        self._rebuild()

    def set_tones(self, tones: Mapping[RowKey, str | None]) -> None:
        """Set how rows read at a glance: a tone of `TONES` styles the whole row with the
        component class `lane-table--<tone>` (under the marks and the cursor); None: no tone.
        Keys without a row are ignored."""
        changed = []
        for key, tone in tones.items():
            if key not in self._rows:
                continue
            tone = tone if tone in self.TONES else None
            if self._tones.get(key) == tone:
                continue
            if tone is None:
                del self._tones[key]
            else:
                self._tones[key] = tone
            changed.append(key)
        self._refresh_keys(changed)

    def tone(self, key: RowKey) -> str | None:
        return self._tones.get(key)

    @property
    def hidden_columns(self) -> frozenset[str]:
        """Keys of the columns not shown (`set_hidden`)."""
        return self._hidden

    def set_hidden(self, keys: Iterable[str]) -> None:
        """Hide these columns (by key), show the others; at least one column stays shown.
        Hidden columns still sort and filter."""
        hidden = frozenset(k for k in keys if k in self._column_index)
        if hidden == self._hidden or len(hidden) >= len(self.columns):
            return
        self._hidden = hidden
        self._widths = self._compute_widths()
        self._strips.clear()
        self._parts.clear()
        self._rebuild()

    def move_cursor(self, key: RowKey) -> bool:
        """Highlight the row `key`; False if it is not shown."""
        if key not in self._position:
            return False
        self._set_cursor(key, chosen=True)
        return True

    def toggle_mark(self, key: RowKey | None = None) -> None:
        """Mark or unmark a row (the cursor row by default)."""
        key = self._cursor if key is None else key
        if key is None or key not in self._rows:
            return
        self._marked ^= {key}
        self._refresh_keys([key])
        self.post_message(self.MarksChanged(self, frozenset(self._marked)))

    def set_marks(self, keys: Iterable[RowKey]) -> None:
        """Replace the marks (keys without a row are ignored)."""
        marked = {key for key in keys if key in self._rows}
        if marked == self._marked:
            return
        self._refresh_keys(marked ^ self._marked)
        self._marked = marked
        self.post_message(self.MarksChanged(self, frozenset(marked)))

    def clear_marks(self) -> None:
        self.set_marks(())

    # ------------------------------------------------------------ order/cursor

    def _sort_key(self, index: int, row: tuple[Cell, ...]) -> Any:
        key = self.columns[index].sort_key or text_key
        return key(row[index])

    def _sort_ordered(self) -> None:
        # `sorted` is stable with reverse=True too; sorting from insertion order makes ties
        # keep their insertion order rather than the previous sort's.
        self._ordered = sorted(
            self._rows, key=self._sort_keys.__getitem__, reverse=self._sort_reverse
        )

    def _still_in_order(self, keys: Iterable[RowKey]) -> bool:
        """Whether rows whose sort keys changed still sit where a fresh sort puts them: strictly
        between their neighbours. Ages sorted on all move on together, so a tick rarely moves a
        row; this spares the sort and the repaint of every line. A tie, or a filter, answers
        False: the full sort orders ties by insertion."""
        if self._predicate is not None:
            return False
        ordered, position, sort_keys = self._ordered, self._position, self._sort_keys
        before = operator.gt if self._sort_reverse else operator.lt
        for key in keys:
            i = position.get(key)
            if i is None or i >= len(ordered) or ordered[i] != key:
                return False
            mine = sort_keys[key]
            if i > 0 and not before(sort_keys[ordered[i - 1]], mine):
                return False
            if i + 1 < len(ordered) and not before(mine, sort_keys[ordered[i + 1]]):
                return False
        return True

    def _matches(self, key: RowKey) -> bool:
        haystack = self._haystacks.get(key)
        if haystack is None:
            haystack = tuple(plain(cell).casefold() for cell in self._rows[key])
            self._haystacks[key] = haystack
        return self._predicate is None or self._predicate(haystack)

    def _rebuild(self) -> None:
        """Recompute the shown rows, keep the cursor on its key, repaint the view."""
        # Keep the cursor in view only if it was: a user who scrolled away with the wheel is
        # not yanked back by every new row.
        follow = self._cursor is None or self._on_screen(self._cursor)
        if self._predicate is not None:
            self._visible = [key for key in self._ordered if self._matches(key)]
        else:
            self._visible = self._ordered
        self._position = {key: i for i, key in enumerate(self._visible)}
        self.virtual_size = Size(self._total_width, len(self._visible) + 1)
        self._header = None
        self.refresh()
        self._set_cursor(self._follow_cursor(), chosen=False, scroll=follow)

    def _follow_cursor(self) -> RowKey | None:
        """The row the cursor belongs on after a change of order, filter or rows."""
        if not self._visible:
            return None
        wanted = self._wanted
        if wanted is None or wanted not in self._rows:
            cursor = self._cursor
            return cursor if cursor in self._position else self._visible[0]
        if wanted in self._position:
            return wanted
        # The chosen row is hidden by the filter: highlight its nearest shown neighbour.
        return _nearest(self._ordered, wanted, self._position.__contains__)

    def _set_cursor(self, key: RowKey | None, *, chosen: bool, scroll: bool = True) -> None:
        # Only the user chooses; a cursor moved by a filter still belongs to the chosen row.
        if chosen or self._wanted is None:
            self._wanted = key
        previous, self._cursor = self._cursor, key
        if key is not None and scroll:
            self._scroll_to_cursor()
        if key != previous:
            self._refresh_keys([k for k in (previous, key) if k is not None])
            self.post_message(self.RowHighlighted(self, key))

    @property
    def _page_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _on_screen(self, key: RowKey) -> bool:
        index = self._position.get(key)
        top = self.scroll_offset.y
        return index is not None and top <= index < top + self._page_height

    def _scroll_to_cursor(self) -> None:
        index = self.cursor_index
        if index is None or not self.is_mounted or self.size.height <= 1:
            return
        top, page = self.scroll_offset.y, self._page_height
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + page:
            self.scroll_to(y=index - page + 1, animate=False)

    def _move(self, delta: int) -> None:
        if not self._visible:
            return
        index = self.cursor_index or 0
        target = min(max(index + delta, 0), len(self._visible) - 1)
        self._set_cursor(self._visible[target], chosen=True)

    # ---------------------------------------------------------------- actions

    def action_cursor_up(self) -> None:
        self._move(-1)

    def action_cursor_down(self) -> None:
        self._move(1)

    def action_cursor_page_up(self) -> None:
        self.scroll_to(y=self.scroll_offset.y - self._page_height, animate=False)
        self._move(-self._page_height)

    def action_cursor_page_down(self) -> None:
        self.scroll_to(y=self.scroll_offset.y + self._page_height, animate=False)
        self._move(self._page_height)

    def action_cursor_first(self) -> None:
        self._move(-len(self._visible))

    def action_cursor_last(self) -> None:
        self._move(len(self._visible))

    def action_scroll_column(self, step: int) -> None:
        """Scroll sideways so the next (or previous) column starts at the left edge."""
        x = self.scroll_offset.x
        starts = self._column_starts()
        if step > 0:
            target = next((s for s in starts if s > x), None)
        else:
            target = next((s for s in reversed(starts) if s < x), 0)
        if target is not None:
            self.scroll_to(x=min(target, self.max_scroll_x), animate=False)

    def _column_starts(self) -> list[int]:
        starts, edge, pad = [], 0, 2 * len(self._pad)
        for i in self._shown:
            starts.append(edge)
            edge += self._widths[i] + pad
        return starts

    def action_select_cursor(self) -> None:
        if self._cursor is not None:
            self.post_message(self.RowSelected(self, self._cursor))

    def action_toggle_mark(self) -> None:
        self.toggle_mark()

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self._column_at(offset.x + self.scroll_offset.x)
            if column is not None:
                same = column.key == self._sort_column
                self.sort_by(column.key, reverse=same and not self._sort_reverse)
            return
        index = self.scroll_offset.y + offset.y - 1
        if 0 <= index < len(self._visible):
            key = self._visible[index]
            if key == self._cursor:
                self.post_message(self.RowSelected(self, key))
            else:
                self._set_cursor(key, chosen=True)

    def _column_at(self, x: int) -> Column | None:
        edge = 0
        pad = 2 * len(self._pad)
        for i in self._shown:
            edge += self._widths[i] + pad
            if x < edge:
                return self.columns[i]
        return None

    @property
    def _shown(self) -> list[int]:
        """Indices of the columns shown, in order."""
        hidden = self._hidden
        return [i for i, c in enumerate(self.columns) if c.key not in hidden]

    # --------------------------------------------------------------- rendering

    def _compute_widths(self) -> tuple[int, ...]:
        widths = []
        fills = []
        for i, (column, content) in enumerate(zip(self.columns, self._content_max, strict=True)):
            if column.key in self._hidden:
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
        pad = 2 * len(self._pad)
        if self._line_width:
            free = self._line_width - sum(widths[j] + pad for j in self._shown)
            share(self.columns, widths, self._content_max, self._shown, free)
        for i, content in fills if self._line_width else ():
            # The view's width past the columns before it, up to its widest cell: the columns
            # after a fill column move right (a scroll away), those before it stay in view.
            before = sum(widths[j] + pad for j in self._shown if j < i)
            widths[i] = max(widths[i], min(content, self._line_width - before - pad))
        return tuple(widths)

    @property
    def _width_follows_view(self) -> bool:
        """Some column's width depends on the view's (a `fill`, or one that may grow)."""
        return any(c.fill or (c.width is None and c.max_width is not None) for c in self.columns)

    def _width_of(self, widths: Sequence[int]) -> int:
        return sum(widths[i] + 2 * len(self._pad) for i in self._shown)

    def _update_widths(self) -> bool:
        widths = self._compute_widths()
        if widths == self._widths:
            return False
        self._widths = widths
        self._strips.clear()
        self._parts.clear()
        self._cells.clear()
        return True

    @property
    def _total_width(self) -> int:
        return self._width_of(self._widths)

    def _render_row(self, key: RowKey) -> Strip:
        """The row's strip, `_line_width` wide."""
        strip = self._strips.get(key)
        if strip is None:
            self.row_renders += 1
            parts = self._parts.get(key)
            if parts is None:
                parts = [None] * len(self.columns)
                self._parts.set(key, parts)
            segments: list[Segment] = []
            row = self._rows[key]
            for i in self._shown:
                part = parts[i]
                if part is None:
                    part = parts[i] = self._cell_part(i, row[i])
                segments += part
            total = self._total_width
            if self._line_width > total:
                segments.append(Segment(" " * (self._line_width - total)))
            strip = Strip(_styled(segments), max(total, self._line_width))
            self._strips.set(key, strip)
        return strip

    def _cell_part(self, index: int, cell: Cell) -> list[Segment]:
        """The segments of one cell at its column's width (shared between rows)."""
        column, width = self.columns[index], self._widths[index]
        memo = cell_memo_key(cell, width, column.justify)
        rendered = self._cells.get(memo)
        if rendered is None:
            rendered = cell_segments(cell, width, column.justify, self._pad, self.app.console)
            if self.app.no_color:
                # Textual would draw a colour as a grey by its luminance: a red cell nearly
                # black. The bold, dim and reverse of a cell say it without.
                rendered = list(Segment.remove_color(rendered))
            self._cells.set(memo, rendered)
        return rendered

    def _render_header(self) -> Strip:
        if self._header is None:
            segments: list[Segment] = []
            for i in self._shown:
                column, width = self.columns[i], self._widths[i]
                label = column.label
                if column.key == self._sort_column:
                    label += _SORT_MARKS[self._sort_reverse]
                segments += cell_segments(label, width, column.justify, self._pad, self.app.console)
            self._header = Strip(_styled(segments), self._total_width)
        return self._header

    def _layer(self, name: str) -> Style:
        """A component's style holding only the properties its rules set.

        Zebra, mark and cursor stack: a layer that sets no background (a mark that only turns
        text bold) leaves the one below visible. Colours come from the full style, so
        translucent backgrounds are blended as Textual does.
        """
        style = self._layers.get(name)
        if style is None:
            styles = self.get_component_styles(name)
            full = self.get_component_rich_style(name)
            style = Style(
                color=full.color if styles.has_rule("color") else None,
                bgcolor=full.bgcolor if styles.has_rule("background") else None,
            )
            style += styles.text_style
            self._layers[name] = style
        return style

    def _row_style(self, key: RowKey, index: int) -> Style:
        style = Style()
        if self.zebra_stripes:
            style += self._layer("lane-table--odd-row" if index % 2 else "lane-table--even-row")
        tone = self._tones.get(key)
        if tone is not None:
            layer = self._layer(f"lane-table--{tone}")
            style += layer.without_color if self.app.no_color else layer
        if key in self._marked:
            style += self._layer("lane-table--marked")
        if key == self._cursor:
            style += self._layer("lane-table--cursor")
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._layers.clear()  # focus, hover and theme changes reach us through a repaint
        # The same for every line of this pass, and not free to compute (~18 us) per line.
        self._pass_width = width = self.scrollable_content_region.width
        if width != self._line_width:
            self._line_width = width
            self._strips.clear()
            if self._width_follows_view and self._update_widths():
                self.virtual_size = Size(self._total_width, len(self._visible) + 1)
        try:
            return super().render_lines(crop)
        finally:
            self._pass_width = None

    def render_line(self, y: int) -> Strip:
        self.line_renders += 1
        scroll_x, scroll_y = self.scroll_offset
        width = self._pass_width
        if width is None:
            width = self.scrollable_content_region.width
        if y == 0:
            strip = self._render_header()
            style = self._layer("lane-table--header")
        else:
            index = scroll_y + y - 1
            if index >= len(self._visible):
                return Strip.blank(width, _PLAIN)
            key = self._visible[index]
            strip = self._render_row(key)
            style = self._row_style(key, index)
            if key in self._marked and self._pad and not scroll_x:
                # A glyph in the row's left padding: marked reads without colour or bold.
                strip = Strip.join([Strip([Segment(MARK_GLYPH)], 1), strip.crop(1)])
        if scroll_x or strip.cell_length != width:
            strip = strip.crop_extend(scroll_x, scroll_x + width, _PLAIN)
        return strip.apply_style(style) if style else strip

    def _refresh_keys(self, keys: Iterable[RowKey]) -> None:
        """Repaint the lines of `keys` that are on screen, and nothing else."""
        if not self.is_mounted:
            return
        top = self.scroll_offset.y
        bottom = top + self._page_height
        position = self._position
        lines = sorted(
            index - top + 1
            for index in (position.get(key) for key in keys)
            if index is not None and top <= index < bottom
        )
        if not lines:
            return
        # One region per run of adjacent lines: a tick changes every row on screen, and one
        # refresh of the run costs what one refresh of a line does.
        width = self.scrollable_content_region.width
        start = previous = lines[0]
        for line in [*lines[1:], None]:
            if line is not None and line == previous + 1:
                previous = line
                continue
            self.refresh(Region(0, start, width, previous - start + 1))
            if line is not None:
                start = previous = line

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.refresh()

    def _on_resize(self, event: events.Resize) -> None:
        self._scroll_to_cursor()
