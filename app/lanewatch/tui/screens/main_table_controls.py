"""The main screen's controls over the shown table's order: the filter field and the sort keys.
Each view's table keeps its own filter and sort; these act on the one shown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import events
from textual.screen import Screen
from textual.widgets import Input

from lanewatch.tui.widgets.lane_table import LaneTable


class FilterControl:
    """The filter field (`#filter`, an `Input` of `screen`) and the shown table's filter."""

    def __init__(self, screen: Screen[Any], table: Callable[[], LaneTable]) -> None:
        self.screen = screen
        self.table = table

    @property
    def field(self) -> Input:
        return self.screen.query_one("#filter", Input)

    def open(self) -> None:
        """`/`: into the filter field (a priority binding: see `screens/typeahead_guard.py`)."""
        field = self.field
        if self.screen.focused is field:
            # In the filter, `/` is a character (paths): hand it on, behind earlier keys.
            field.post_message(events.Key("slash", "/"))
            return
        field.display = True
        # Focus now, not after a refresh (`Widget.focus` is deferred): the keys typed after
        # the `/` are forwarded to the focused widget as the app dequeues them.
        self.screen.set_focus(field)

    def clear(self) -> bool:
        """Empty and hide the filter, if one is set or shown; False if there was none."""
        field, table = self.field, self.table()
        if not (table.filter_text or field.display):
            return False
        field.value = ""
        table.set_filter("")
        field.display = False
        table.focus()
        return True

    def changed(self, text: str) -> None:
        self.table().set_filter(text)

    def submitted(self, text: str) -> None:
        """Enter keeps the filter (the field stays shown while it holds one)."""
        self.field.display = bool(text)
        self.table().focus()

    def show_table_filter(self) -> None:
        """Another view is shown: the field shows that table's filter."""
        field, text = self.field, self.table().filter_text
        field.value = text
        field.display = bool(text)


class SortControl:
    """Sort keys for the shown table: next or previous column, invert, a named column."""

    def __init__(self, table: Callable[[], LaneTable]) -> None:
        self.table = table

    def step(self, step: int) -> None:
        table = self.table()
        keys = [c.key for c in table.columns]
        shown = [k for k in keys if k not in table.hidden_columns] or keys
        current = table.sort_column
        if current not in keys:
            table.sort_by(shown[0], reverse=table.sort_reverse)
            return
        index = keys.index(current)
        for _ in keys:  # over hidden columns (`C`): a sort by one shows no arrow
            index = (index + step) % len(keys)
            if keys[index] in shown:
                break
        table.sort_by(keys[index], reverse=table.sort_reverse)

    def invert(self) -> None:
        table = self.table()
        table.sort_by(table.sort_column or table.columns[0].key, reverse=not table.sort_reverse)

    def by(self, column: str) -> None:
        table = self.table()
        table.sort_by(column, reverse=table.sort_reverse)
