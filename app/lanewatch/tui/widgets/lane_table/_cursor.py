"""A `LaneTable`'s cursor and marks, by row key, never by index: the row the user chose is kept
while a filter hides it (the cursor waits on its nearest shown neighbour and returns when the
filter shows it again), a vanished row's place goes to the row after it (as in htop), and the
view scrolls to the cursor only if the cursor was in view."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from lanewatch.tui.widgets.lane_table._column import RowKey
from lanewatch.tui.widgets.lane_table._order import nearest
from lanewatch.tui.widgets.lane_table._viewport import Viewport

if TYPE_CHECKING:
    from textual.geometry import Size
    from textual.message import Message

    from lanewatch.tui.widgets.lane_table._order import RowOrder
    from lanewatch.tui.widgets.lane_table._painter import RowPainter


class CursorTable(Viewport, Protocol):
    """What the cursor uses of the table that owns it (`LaneTable`)."""

    order: RowOrder
    painter: RowPainter

    @property
    def RowHighlighted(self) -> Callable[[Any, RowKey | None], Message]: ...

    @property
    def MarksChanged(self) -> Callable[[Any, frozenset[RowKey]], Message]: ...

    @property
    def size(self) -> Size: ...

    def scroll_to(self, *, y: float | None = None, animate: bool = True) -> None: ...

    def post_message(self, message: Message) -> bool: ...


class CursorKeeper:
    """Owned by a `LaneTable` (composition): it moves the table's scroll and posts its
    `RowHighlighted` and `MarksChanged`."""

    def __init__(self, table: CursorTable) -> None:
        self.table = table
        self.order = table.order
        self.key: RowKey | None = None
        # The row the user chose: kept while a filter hides it, so clearing the filter returns.
        self.wanted: RowKey | None = None
        self.marked: set[RowKey] = set()

    @property
    def index(self) -> int | None:
        """Display index of the highlighted row."""
        return None if self.key is None else self.order.position.get(self.key)

    @property
    def page_height(self) -> int:
        return max(1, self.table.scrollable_content_region.height - 1)

    def following(self) -> RowKey | None:
        """The row the cursor belongs on after a change of order, filter or rows."""
        order = self.order
        if not order.visible:
            return None
        wanted = self.wanted
        if wanted is None or wanted not in order.rows:
            cursor = self.key
            return cursor if cursor in order.position else order.visible[0]
        if wanted in order.position:
            return wanted
        # The chosen row is hidden by the filter: highlight its nearest shown neighbour.
        return nearest(order.ordered, wanted, order.position.__contains__)

    def place(self, key: RowKey | None, *, chosen: bool, scroll: bool = True) -> None:
        # Only the user chooses; a cursor moved by a filter still belongs to the chosen row.
        if chosen or self.wanted is None:
            self.wanted = key
        previous, self.key = self.key, key
        if key is not None and scroll:
            self.scroll_to()
        if key != previous:
            table = self.table
            table.painter.refresh_keys([k for k in (previous, key) if k is not None])
            table.post_message(table.RowHighlighted(table, key))

    def on_screen(self, key: RowKey) -> bool:
        index = self.order.position.get(key)
        top = self.table.scroll_offset.y
        return index is not None and top <= index < top + self.page_height

    def scroll_to(self) -> None:
        index = self.index
        table = self.table
        if index is None or not table.is_mounted or table.size.height <= 1:
            return
        top, page = table.scroll_offset.y, self.page_height
        if index < top:
            table.scroll_to(y=index, animate=False)
        elif index >= top + page:
            table.scroll_to(y=index - page + 1, animate=False)

    def move(self, delta: int) -> None:
        visible = self.order.visible
        if not visible:
            return
        index = self.index or 0
        target = min(max(index + delta, 0), len(visible) - 1)
        self.place(visible[target], chosen=True)

    def go(self, where: str) -> None:
        """Up, down, a page up or down, the first or the last row (the table's keys)."""
        page = self.page_height
        y = self.table.scroll_offset.y
        if where in ("page_up", "page_down"):
            sign = -1 if where == "page_up" else 1
            self.table.scroll_to(y=y + sign * page, animate=False)
            self.move(sign * page)
        else:
            every = len(self.order.visible)
            steps = {"up": -1, "down": 1, "first": -every, "last": every}
            self.move(steps[where])

    def forget(self, gone: set[RowKey]) -> None:
        """Rows are about to vanish: the chosen one gives its place to the row after it."""
        if self.wanted in gone:
            position = self.order.position
            self.wanted = nearest(
                self.order.visible, self.wanted, lambda k: k in position and k not in gone
            )

    def drop_marks(self, gone: set[RowKey]) -> None:
        if self.marked & gone:
            self.marked -= gone
            self._marks_changed()

    def set_marks(self, keys: Iterable[RowKey]) -> None:
        marked = {key for key in keys if key in self.order.rows}
        if marked == self.marked:
            return
        self.table.painter.refresh_keys(marked ^ self.marked)
        self.marked = marked
        self._marks_changed()

    def toggle_mark(self, key: RowKey) -> None:
        self.marked ^= {key}
        self.table.painter.refresh_keys([key])
        self._marks_changed()

    def _marks_changed(self) -> None:
        table = self.table
        table.post_message(table.MarksChanged(table, frozenset(self.marked)))
