"""The picture's rows on the main screen's three tables: a drained batch touches only the rows
it changed (every table gets every batch, shown or not), the ages move on once a second only
for the rows on screen, and "follow" keeps the cursor on the newest activity.

A row off screen whose change is only activity (`view_columns.ACTIVITY`: a write, a heartbeat,
a reading), in a drain that changed no incident (a row's roles and tone follow the incidents),
in a table neither sorted by one of those columns nor filtered, is not built at once: the table
builds it when it comes into view, or a second later a few at a time (`catch_up`,
`LaneTable.defer`). Under a write load most changed rows are off screen, and building their
cells was most of a drain's work.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.screens.main_keys import ORDER
from lanewatch.tui.state.dashboard_store import Delta, Row, View
from lanewatch.tui.widgets import view_columns
from lanewatch.tui.widgets.lane_table import Cell, RowKey, RowSource

if TYPE_CHECKING:
    from textual.geometry import Size

    from lanewatch.tui.screens.main_chrome import MainChrome
    from lanewatch.tui.screens.main_detail_loader import DetailLoader
    from lanewatch.tui.state.dashboard_state import DashboardState
    from lanewatch.tui.widgets.lane_table import LaneTable

TICK_MARGIN = 3  # rows above and below the viewport whose ages move on each second
# Rows off screen whose cells waited this long are built, at most CATCH_UP_PER_DRAIN in each
# drain and CATCH_UP_PER_TICK each second: spread thin, not all in one turn of the UI's loop
# (all at the age tick, the 200 busy lanes of the benchmark's write load held the UI's loop
# 12-29 ms once a second).
CATCH_UP_AFTER = 1.0
CATCH_UP_PER_DRAIN = 16
CATCH_UP_PER_TICK = 128


def _settled(view: View) -> operator.attrgetter[Any] | None:
    """The fields of a namespace other than its activity in `view`; None: every change shows
    at once."""
    activity = view_columns.ACTIVITY.get(view)
    if activity is None:
        return None
    names = [f.name for f in dataclasses.fields(NamespaceView) if f.name not in activity]
    return operator.attrgetter(*names)


SETTLED = {view: _settled(view) for view in ORDER}
# The columns that show activity: a table sorted by one moves rows on every write.
ACTIVITY_COLUMNS = {
    view: {column for columns in fields.values() for column in columns}
    for view, fields in view_columns.ACTIVITY.items()
}


class RowsScreen(Protocol):
    """What the rows use of the screen that owns them (`MainScreen`)."""

    view: View
    paused: bool
    follow: bool
    chrome: MainChrome
    details: DetailLoader

    @property
    def size(self) -> Size: ...

    def table(self, view: View | None = None) -> LaneTable: ...


class MainRows:
    """Owned by the main screen (composition)."""

    def __init__(self, screen: RowsScreen, state: DashboardState) -> None:
        self.screen = screen
        self.state = state
        # Per view and row key: when one of the row's ages next shows another text.
        self._ages_due: dict[View, dict[object, float]] = {view: {} for view in ORDER}
        # Per view and row key: the namespace its cells were built from (what a change is
        # compared with before its cells may wait).
        self._built: dict[View, dict[str, NamespaceView]] = {view: {} for view in ORDER}
        self.sources = {view: self._source(view) for view in ORDER}

    def build(self, view: View, row: Row, now: float) -> tuple[Cell, ...]:
        key = row.id if isinstance(row, Incident) else row.key
        self._ages_due[view][key] = view_columns.ages_change_at(view, row, now)
        picture = self.state.picture
        if view is View.COLLISIONS:
            assert isinstance(row, Incident)
            return view_columns.collisions_row(row, now, picture.victim_label)
        assert isinstance(row, NamespaceView)
        self._built[view][row.key] = row
        if view is View.LANES:
            return view_columns.lanes_row(row, now, picture.roles(row.key))
        return view_columns.stale_row(row, now)

    def tone(self, row: Row) -> str | None:
        against = () if isinstance(row, Incident) else self.state.picture.open_against(row.key)
        return view_columns.row_tone(row, against)

    def apply(self, delta: Delta) -> None:
        """Put one drained batch on screen: only the rows it touched."""
        screen = self.screen
        now = self.state.clock()
        # An incident changed: a row's roles and tone may have, whatever its fields say.
        may_wait = not delta.touched(View.COLLISIONS)
        for view in ORDER:
            upserts = delta.upserts[view]
            removals = delta.removals[view]
            if upserts or removals:
                self._apply_view(view, upserts, removals, now, may_wait)
        if screen.follow:
            self.follow_newest()
        screen.chrome.update()
        selected = screen.table().cursor_key
        if selected is not None and selected in delta.touched(screen.view):
            screen.details.changed()
        self.catch_up(CATCH_UP_PER_DRAIN)

    def _apply_view(
        self,
        view: View,
        upserts: Mapping[str, Row],
        removals: Collection[str],
        now: float,
        may_wait: bool,
    ) -> None:
        table = self.screen.table(view)
        later = self._can_wait(view, table, upserts) if may_wait else set()
        rows = {key: self.build(view, row, now) for key, row in upserts.items() if key not in later}
        table.apply(rows, removals)
        table.set_tones({key: self.tone(upserts[key]) for key in rows})
        if later:
            table.defer(later, self.sources[view])
        due, built = self._ages_due[view], self._built[view]
        for key in removals:
            due.pop(key, None)
            built.pop(key, None)

    def _can_wait(self, view: View, table: LaneTable, upserts: Mapping[str, Row]) -> set[str]:
        """The changed rows whose cells may wait until they can be seen (the module's doc):
        the table builds those near the view at once."""
        settled = SETTLED[view]
        if settled is None or table.filter_text or table.sort_column in ACTIVITY_COLUMNS[view]:
            return set()
        built = self._built[view]
        later = set()
        for key, row in upserts.items():
            old = built.get(key)
            if old is None or not isinstance(row, NamespaceView):
                continue  # a new row: now (a row touched for its roles or tone comes with an
                # incident: `may_wait` is False for the whole drain)
            if settled(old) == settled(row):
                later.add(key)
        return later

    def _source(self, view: View) -> RowSource:
        """Builds a table's waiting rows from the picture as it is when they are asked for."""

        def rows_now(
            keys: Collection[RowKey],
        ) -> tuple[dict[RowKey, tuple[Cell, ...]], dict[RowKey, str | None]]:
            now = self.state.clock()
            rows: dict[RowKey, tuple[Cell, ...]] = {}
            tones: dict[RowKey, str | None] = {}
            for key in keys:
                row = self.state.picture.row(view, str(key))
                if row is not None:
                    rows[key], tones[key] = self.build(view, row, now), self.tone(row)
            return rows, tones

        return rows_now

    def catch_up(self, limit: int) -> None:
        """Build, in every table, at most `limit` of the rows that have waited CATCH_UP_AFTER
        for their cells, the oldest first: column widths follow the rows off screen about
        that long after."""
        for view in ORDER:
            self.screen.table(view).catch_up(CATCH_UP_AFTER, limit)

    def tick(self) -> None:
        """Once a second (and on a view switch or a resume), the ages move on: only for the
        rows on screen and a margin, so an idle dashboard costs the same with ten rows or ten
        thousand. Rows scrolled into view catch up at the next tick; rows that change, at once
        (every table gets every batch, shown or not). Only the age cells are rebuilt, and only
        for rows one of whose ages shows another text (`view_columns.ages_change_at`: "4m" stays
        "4m" for a minute)."""
        screen = self.screen
        if screen.paused or not self.state.picture.loaded:
            return
        self.catch_up(CATCH_UP_PER_TICK)
        view = screen.view
        table = screen.table()
        # A table just shown has no size yet: the screen's height instead.
        window = table.window(TICK_MARGIN, table.size.height or screen.size.height)
        now = self.state.clock()
        due = self._ages_due[view]
        cells = {}
        for key in window:
            if due.get(key, 0.0) > now:
                continue  # none of its ages shows another text yet: nothing to build
            row = self.state.picture.row(view, str(key))
            if row is not None:
                cells[key], due[key] = view_columns.ages_now(view, row, now)
        table.update_cells(cells)

    def follow_newest(self) -> None:
        view = self.screen.view
        rows = self.state.picture.rows(view)
        if not rows:
            return

        def recency(item: tuple[str, Row]) -> float:
            row = item[1]
            if isinstance(row, Incident):
                return row.last_seen
            if view is View.STALE:
                return view_columns.stale_since(row) or 0.0
            return max(row.last_write or 0.0, row.started_at or 0.0)

        key, _ = max(rows.items(), key=recency)
        self.screen.table().move_cursor(key)
