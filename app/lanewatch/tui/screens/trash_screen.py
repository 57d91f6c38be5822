"""The trash of every watched root, and of every other host of the dashboard (`dash --host`:
`lanewatch trash --json` there, a HOST column first): pick a cleared namespace to restore (after
a confirmation that names the host; the far `lanewatch restore` does it there)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from lanewatch.hosts.farviews import split_key
from lanewatch.inert import inert
from lanewatch.linux.procid import hostname
from lanewatch.tui.backend.actions_adapter import TrashItem
from lanewatch.tui.plumbing.messages import TrashLoaded, post_quietly
from lanewatch.tui.plumbing.thread_work import thread_work
from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard
from lanewatch.tui.state import humanize
from lanewatch.tui.widgets.lane_table import Cell, Column, LaneTable, number_key
from lanewatch.tui.widgets.view_columns import untrusted

if TYPE_CHECKING:
    from lanewatch.tui.state.dashboard_state import DashboardState

TRASH_COLUMNS = (
    Column("lane", "LANE", max_width=24),
    Column("name", "NAMESPACE", max_width=40),
    Column("cleared", "CLEARED"),
    Column("by", "BY", max_width=16),
    Column("disk", "DISK", justify="right", sort_key=number_key),  # as `du` counted it
    Column("bytes", "SIZE", justify="right", sort_key=number_key),  # the files' lengths
    Column("root", "ROOT", max_width=40),
)
HOST_COLUMN = Column("host", "HOST", max_width=24)


def host_of(item: TrashItem) -> str:
    """The host whose trash holds `item`: its name, or this machine's hostname."""
    found = split_key(item.root)
    return found[0] if found else hostname()


class TrashScreen(TypeaheadGuard, ModalScreen[TrashItem | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("r", "restore", "Restore"),
    ]
    # enter on the table selects a row, which restores it.
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(("restore", "select_cursor"))

    def __init__(self, state: DashboardState) -> None:
        super().__init__()
        self.state = state
        self.roots = state.roots()  # as they were when it opened
        self.items: dict[str, TrashItem] = {}
        self.many = False  # set on mount: other hosts in this dashboard (the HOST column)

    def compose(self) -> ComposeResult:
        with Vertical(id="trash-body") as body:
            body.border_title = "Trash"
            body.border_subtitle = "enter/r restores · esc closes"
            self.many = bool(self.state.adapter.hosts())
            columns = (HOST_COLUMN, *TRASH_COLUMNS) if self.many else TRASH_COLUMNS
            yield LaneTable(columns, id="trash-table")
            yield Static(Text("reading the trash…", style="dim"), id="trash-note", markup=False)
        # Its own footer: the keys of this box, not those of the screen under it.
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(LaneTable).focus()
        self._load()

    @thread_work("trash", "list the trash")
    def _load(self) -> None:
        errors = []
        try:
            items = self.state.adapter.trash(self.roots)
        except OSError as exc:
            items, errors = [], [str(exc)]
        far, far_errors = self.state.adapter.far_trash()  # [] and [] without other hosts
        error = "\n".join([*errors, *far_errors]) or None
        post_quietly(self, TrashLoaded(tuple([*items, *far]), error))

    @on(TrashLoaded)
    def _loaded(self, message: TrashLoaded) -> None:
        self.items = {item.id: item for item in message.items}
        rows: dict[str, tuple[Cell, ...]] = {
            item.id: (
                *((untrusted(host_of(item)),) if self.many else ()),
                untrusted(item.lane),
                untrusted(item.name),
                humanize.stamp_time(item.cleared_at),
                untrusted(item.cleared_by),
                humanize.size(item.allocated),
                humanize.size(item.bytes),
                untrusted(item.root),
            )
            for item in message.items
        }
        self.query_one(LaneTable).apply(rows)
        note = self.query_one("#trash-note", Static)
        if message.error:
            said = f"{humanize.many(len(rows), 'cleared namespace')} listed; " if rows else ""
            note.update(Text(said + inert(message.error), style="red"))
        elif not rows:
            note.update(Text("The trash is empty.", style="dim"))
        else:
            note.update(Text(f"{humanize.many(len(rows), 'cleared namespace')}", style="dim"))

    @on(LaneTable.RowSelected)
    def _selected(self, event: LaneTable.RowSelected) -> None:
        self.action_restore()

    def action_restore(self) -> None:
        key = self.query_one(LaneTable).cursor_key
        item = self.items.get(str(key)) if key is not None else None
        if item is not None:
            self.dismiss(item)

    def action_close(self) -> None:
        self.dismiss(None)
