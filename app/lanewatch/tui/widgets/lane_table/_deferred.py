"""Rows whose new cells can wait until someone can see them (`LaneTable.defer`).

Under a write load most of a table's changed rows are off screen: a lane's size, files and
write sparkline move several times a second, and building those cells is most of a drain's
work. A caller that knows a change moves neither the row's place (its sort key, the filter)
nor anything else a reader needs now hands the table the keys instead of the cells. The table
asks the caller's `RowSource` for those rows only when they may be seen or read: a row within
`MARGIN` of the view at once, the others when they scroll or are laid into view, before a sort
or a filter reads every row, before `get_row`, and whenever the caller says (`build_due`: the
dashboard builds, a few at a time, the rows that have waited a second). Until then a waiting
row keeps its old cells, so column widths may lag by that long; nothing shown does. Plain data
and one callback; no Textual.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from lanewatch.tui.widgets.lane_table._column import Cell, RowKey

if TYPE_CHECKING:
    from lanewatch.tui.widgets.lane_table._order import RowOrder

MARGIN = 3  # rows above and below the view built at once (a step of the cursor shows them)

# Given keys, their rows as they are now (cells) and their tones; a key without a row is left
# out of both (it is on its way out).
RowSource = Callable[
    [Collection[RowKey]],
    tuple[Mapping[RowKey, tuple[Cell, ...]], Mapping[RowKey, str | None]],
]


class DeferTable(Protocol):
    """What the waiting rows use of their table (`LaneTable`)."""

    order: RowOrder

    def window(self, margin: int) -> list[RowKey]: ...

    def apply(
        self, upserts: Mapping[RowKey, tuple[Cell, ...]], removals: Iterable[RowKey] = ()
    ) -> None: ...

    def set_tones(self, tones: Mapping[RowKey, str | None]) -> None: ...


class DeferredRows:
    """The keys waiting for their cells, and where to get them. Owned by a `LaneTable`."""

    def __init__(self, table: DeferTable, clock: Callable[[], float] = time.monotonic) -> None:
        self.table = table
        self.clock = clock
        # Each waiting key and when it began to wait, oldest first (a key that changes again
        # keeps its place: it has waited since its first change that is not built).
        self.keys: dict[RowKey, float] = {}
        self.source: RowSource | None = None

    def add(self, keys: Iterable[RowKey], source: RowSource) -> None:
        """These rows changed; their cells may wait (those near the view are built now)."""
        self.source = source
        rows, waiting, now = self.table.order.rows, self.keys, self.clock()
        for key in keys:
            if key in rows and key not in waiting:
                waiting[key] = now
        self.in_view()

    def discard(self, keys: Iterable[RowKey]) -> None:
        """These rows were given whole or removed: nothing of theirs waits any more."""
        if self.keys:
            waiting = self.keys
            for key in keys:
                waiting.pop(key, None)

    def build_due(self, waited: float, limit: int) -> None:
        """Build at most `limit` of the rows that have waited `waited` seconds or more, the
        oldest first. Called often with a small `limit`, it spreads the catch-up of a busy
        table's rows off screen over many short turns instead of one long one."""
        if not self.keys:
            return
        since = self.clock() - waited
        due = [key for key, at in itertools.islice(self.keys.items(), limit) if at <= since]
        self.build(due)

    def in_view(self) -> None:
        """Build the waiting rows within `MARGIN` of the view (after a scroll or a resize)."""
        if self.keys:
            self.build([key for key in self.table.window(MARGIN) if key in self.keys])

    def build(self, keys: Collection[RowKey] | None = None) -> None:
        """Build `keys` (None: every waiting row) from the source, as one batch."""
        pending = self.keys
        if not pending or self.source is None:
            return
        if keys is None:
            keys, self.keys = list(pending), {}
        else:
            if not keys:
                return
            self.discard(keys)
        rows, tones = self.source(keys)
        self.table.apply(rows)
        self.table.set_tones(tones)
