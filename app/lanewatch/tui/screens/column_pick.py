"""Hide and show the columns of the shown view (htop's F2 columns, k9s' wide toggle): a list of
the view's columns, `space` or `enter` toggles one, and the table follows at once. Hidden columns
still sort and filter (`state:hung` works on a hidden STATE)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, SelectionList

from lanewatch.tui.widgets.lane_table import LaneTable


class ColumnPick(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,C", "dismiss", "Close"),
    ]

    def __init__(self, table: LaneTable, title: str) -> None:
        super().__init__()
        self.table = table
        self.title_text = title

    def compose(self) -> ComposeResult:
        hidden = self.table.hidden_columns
        with Vertical(id="columns-body") as body:
            body.border_title = f"Columns of {self.title_text}"
            body.border_subtitle = "space toggles · esc closes"
            yield SelectionList[str](
                *(
                    (column.label or column.key, column.key, column.key not in hidden)
                    for column in self.table.columns
                ),
                id="columns-list",
            )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    @on(SelectionList.SelectedChanged)
    def _changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        shown = set(event.selection_list.selected)
        keys = {column.key for column in self.table.columns}
        if not shown:
            # At least one column stays: put the last one back.
            event.selection_list.select(self.table.columns[0].key)
            return
        self.table.set_hidden(keys - shown)
