"""One batch of row changes to a `LaneTable` (`apply`, `update_cells`): each row stored or
dropped, then, once for the batch, the widths, the order and the repaint it asks for. Only
changed rows are re-rendered; the order is rebuilt only if an insert, a removal, a sort-key
change or a filter-match change asks for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from lanewatch.tui.widgets.lane_table._cells import measure
from lanewatch.tui.widgets.lane_table._column import Cell, RowKey

if TYPE_CHECKING:
    from lanewatch.tui.widgets.lane_table._cursor import CursorKeeper
    from lanewatch.tui.widgets.lane_table._order import RowOrder
    from lanewatch.tui.widgets.lane_table._painter import RowPainter


class BatchTable(Protocol):
    """What a batch uses of the table it changes (`LaneTable`)."""

    order: RowOrder
    painter: RowPainter
    cursor: CursorKeeper
    tones: dict[RowKey, str]

    def rebuild(self) -> None: ...


@dataclass(slots=True)
class RowBatch:
    """What one `apply` or `update_cells` changed."""

    table: BatchTable
    changed: list[RowKey] = field(default_factory=list)  # rows replaced in place
    columns: set[int] = field(default_factory=set)  # the columns they changed in
    recheck: set[int] = field(default_factory=set)  # auto columns whose widest may have shrunk
    grown: bool = False  # an auto column's widest cell grew
    resort: bool = False  # a new row: sort again
    resorted: list[RowKey] = field(default_factory=list)  # rows whose sort key changed
    order_changed: bool = False

    def store(
        self,
        key: RowKey,
        row: tuple[Cell, ...],
        old: tuple[Cell, ...] | None,
        changed: Iterable[int],
    ) -> None:
        """Put `row` in place of `old` (None: a new row); only the cells at `changed` differ."""
        order, painter = self.table.order, self.table.painter
        was_shown = key in order.position
        order.rows[key] = row
        content_max = painter.content_max
        old_widths = painter.cell_widths.get(key) if old is not None else None
        widths = list(old_widths) if old_widths is not None else [0] * len(row)
        for i in changed if old_widths is not None else range(len(row)):
            width = widths[i] = measure(row[i])
            if width > content_max[i]:
                content_max[i] = width
                self.grown = True
            elif old_widths is not None and old_widths[i] == content_max[i] > width:
                self.recheck.add(i)
        painter.cell_widths[key] = tuple(widths)
        sort_index = order.column_index.get(order.sort_column or "")
        if sort_index is not None and (old is None or sort_index in changed):
            sort_key = order.sort_key(sort_index, row)
            if old is None:
                self.resort = True
            elif order.sort_keys.get(key) != sort_key:
                self.resorted.append(key)
            order.sort_keys[key] = sort_key
        if old is None:
            order.ordered.append(key)
            self.order_changed = True
            return
        painter.strips.discard(key)
        parts = painter.parts.get(key)
        if parts is not None:
            for i in changed:
                parts[i] = None
        self.changed.append(key)
        self.columns.update(changed)
        if changed:
            order.haystacks.pop(key, None)
            if order.predicate is not None and was_shown != order.matches(key):
                self.order_changed = True

    def drop(self, gone: set[RowKey]) -> None:
        table = self.table
        painter = table.painter
        self.order_changed = True
        # The chosen row vanishes: the row shown after it (or before it, at the end) takes
        # its place, as in htop.
        table.cursor.forget(gone)
        content_max = painter.content_max
        painter.forget(gone)
        for key in gone:
            table.tones.pop(key, None)
            widths = painter.cell_widths.pop(key)
            self.recheck.update(i for i, w in enumerate(widths) if w == content_max[i])
        table.order.forget(gone)
        table.cursor.drop_marks(gone)

    def finish(self) -> None:
        """Widths, order and repaint after the batch's `store`s and `drop`s."""
        table = self.table
        painter, order = table.painter, table.order
        content_max = painter.content_max
        for i in self.recheck:
            content_max[i] = max((w[i] for w in painter.cell_widths.values()), default=0)
        order_changed = self.order_changed
        if (self.grown or self.recheck) and painter.update_widths():
            order_changed = True  # every strip is stale; repaint all below
        if self.resort or (
            self.resorted and (order_changed or not order.still_in_order(self.resorted))
        ):
            order.sort()
            order_changed = True
        if order_changed:
            table.rebuild()
        else:
            painter.refresh_keys(self.changed, self.columns)
