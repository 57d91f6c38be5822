"""The main screen: Lanes, Collisions and Stale a key apart, a detail pane, a filter, a status
line. Rows change by key only (never clear-and-refill); the cursor and marks follow keys.

Its keys are `main_keys.KEYS`; Textual dispatches their actions to the screen, and each
`action_*` here hands on to a plain object the screen owns: what the keys act on
(`main_selection.Selection`), the filter and the sort (`main_table_controls`), the rows
(`main_rows.MainRows`), the header, status line and empty views (`main_chrome.MainChrome`),
the detail pane (`main_detail_loader.DetailLoader`), which keys apply
(`main_key_gate.MainKeyGate`), and the confirm-then-act flows (`ActionFlows`, the app's,
handed in). What the app owns (another screen, the clipboard, a rescan, a catch-up) it asks
for by a message (`plumbing/messages.py` `ScreenRequest`); what it shows it reads from the
`DashboardState` the app hands it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.screen import Screen
from textual.timer import Timer, TimerCallback
from textual.widgets import ContentSwitcher, Footer, Input, Static

from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.actions_adapter import can_kill
from lanewatch.tui.plumbing.frame_timer import paced_interval
from lanewatch.tui.plumbing.messages import (
    CatchUp,
    CopyPath,
    DetailLoaded,
    OpenFiles,
    OpenIncident,
    OpenTrash,
    Rescan,
    ScreenRequest,
    ShowHelp,
    ViewPicked,
)
from lanewatch.tui.screens.column_pick import ColumnPick
from lanewatch.tui.screens.main_chrome import MainChrome
from lanewatch.tui.screens.main_detail_loader import DetailLoader
from lanewatch.tui.screens.main_key_gate import MainKeyGate
from lanewatch.tui.screens.main_keys import KEYS, ORDER
from lanewatch.tui.screens.main_rows import MainRows
from lanewatch.tui.screens.main_selection import Selection
from lanewatch.tui.screens.main_table_controls import FilterControl, SortControl
from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard
from lanewatch.tui.state.dashboard_store import VIEW_TITLES, View, view_of
from lanewatch.tui.state.forward_hint import forward_hint
from lanewatch.tui.widgets import view_columns
from lanewatch.tui.widgets.detail_pane import DetailPane
from lanewatch.tui.widgets.lane_table import LaneTable
from lanewatch.tui.widgets.status_line import StatusLine
from lanewatch.tui.widgets.viewbar import ViewBar

if TYPE_CHECKING:
    from lanewatch.tui.shell.action_flows import ActionFlows
    from lanewatch.tui.state.dashboard_state import DashboardState

# `ask(...)`: what the app does for this screen, by the message it posts.
ASKS: dict[str, type[ScreenRequest]] = {"help": ShowHelp, "trash": OpenTrash, "rescan": Rescan}


class MainScreen(TypeaheadGuard, Screen[None]):
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (200, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = KEYS
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        ("kill", "clear", "acknowledge", "export")
    )

    view: View  # the view shown: Lanes, Collisions or Stale

    def __init__(self, state: DashboardState, flows: ActionFlows) -> None:
        super().__init__()
        self.state = state  # what the app shows, read here, never written
        self.flows = flows
        self.selection = Selection(state.picture, self.table, lambda: self.view)
        self.filtering = FilterControl(self, self.table)
        self.sorting = SortControl(self.table)
        self.rows = MainRows(self, state)
        self.chrome = MainChrome(self, state)
        self.details = DetailLoader(self, state)
        self.keys = MainKeyGate(self)
        self.view = View.LANES
        self.paused = False
        self.follow = False
        self.came_from: Incident | None = None  # the incident a jump came from (backspace)
        self._visited: set[View] = {View.LANES}  # views shown once (`switch_to`)

    def set_interval(
        self,
        interval: float,
        callback: TimerCallback | None = None,
        *,
        name: str | None = None,
        repeat: int = 0,
        pause: bool = False,
    ) -> Timer:
        """As Textual's; the paint timer is paced from the last frame, not on a grid
        (`plumbing/frame_timer.py`): a change paints within a frame, not two."""
        if not repeat:
            timer = paced_interval(self, interval, callback, name=name, pause=pause)
            if timer is not None:
                return timer
        return super().set_interval(interval, callback, name=name, repeat=repeat, pause=pause)

    def live(self) -> bool:
        """Composed, and the app is not shutting down (`run_test` tears the screens down while
        the message loop still runs)."""
        return self.app.is_running and self.is_mounted and self.is_attached

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield ViewBar(id="viewbar")
        with Container(id="body"):
            with ContentSwitcher(initial=View.LANES.value, id="views"):
                for view in ORDER:
                    with Vertical(id=view.value, classes="view"):
                        yield LaneTable(view_columns.COLUMNS[view], id=f"table-{view.value}")
                        yield Static("", id=f"empty-{view.value}", classes="empty", markup=False)
            yield DetailPane(id="detail")
        yield Input(
            placeholder="filter: type to narrow, enter keeps, esc clears",
            id="filter",
            select_on_focus=False,
        )
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        for view in ORDER:
            column, reverse = view_columns.DEFAULT_SORT[view]
            self.table(view).sort_by(column, reverse=reverse)
        self.table(self.view).focus()
        self.chrome.update()

    def table(self, view: View | None = None) -> LaneTable:
        return self.query_one(f"#table-{(view or self.view).value}", LaneTable)

    # ------------------------------------------------------------ handlers

    @on(LaneTable.RowHighlighted)
    @on(LaneTable.MarksChanged)
    def _table_changed(self, event: LaneTable.RowHighlighted | LaneTable.MarksChanged) -> None:
        if isinstance(event, LaneTable.RowHighlighted):
            if event.table is not self.table():
                return
            self.details.show(reload=True)
        self.chrome.update()

    @on(DetailLoaded)
    def _detail_loaded(self, message: DetailLoaded) -> None:
        self.details.loaded(message.detail)

    @on(ViewPicked)
    def _picked(self, event: ViewPicked) -> None:
        self.switch_to(event.view)

    @on(Input.Changed, "#filter")
    @on(Input.Submitted, "#filter")
    def _filter_typed(self, event: Input.Changed | Input.Submitted) -> None:
        if isinstance(event, Input.Submitted):
            self.filtering.submitted(event.value)
            return
        self.filtering.changed(event.value)
        self.chrome.update()

    @on(LaneTable.RowSelected)
    def _selected(self, event: LaneTable.RowSelected) -> None:
        self.action_open()

    def on_screen_resume(self) -> None:
        # Changes kept merging while another screen was on top: show them now.
        self.post_message(CatchUp())
        self.rows.tick()
        self.details.show(reload=True)

    # ------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False hides a key that never applies in this view; None greys one that does not
        apply to the selection now (`MainKeyGate`)."""
        return self.keys.check(action, parameters)

    def switch_to(self, view: View) -> None:
        if view is self.view:
            return
        self.view = view
        self.mark_changed()
        self.query_one(ContentSwitcher).current = view.value
        if view not in self._visited:
            # The first look at a view starts on its first row (Collisions: the newest), not
            # on whichever row happened to arrive first and was sorted mid-list since.
            self._visited.add(view)
            shown = self.table().visible_keys
            if shown:
                self.table().move_cursor(shown[0])
        self.rows.tick()
        self.filtering.show_table_filter()
        self.table().focus()
        self.details.show(reload=True)
        self.chrome.update()

    def action_ask(self, what: str) -> None:
        """Help, the trash, a rescan: the app's to do (`ASKS`)."""
        self.post_message(ASKS[what]())

    def action_view(self, to: str | int) -> None:
        """A view by name, or the next (1) or previous (-1) one."""
        if isinstance(to, str):
            self.switch_to(View(to))
        else:
            self.switch_to(ORDER[(ORDER.index(self.view) + to) % len(ORDER)])

    def action_filter(self) -> None:
        self.filtering.open()

    def action_escape(self) -> None:
        if not self.filtering.clear() and self.table().marked:
            self.table().set_marks(())
        self.chrome.update()

    def action_sort(self, by: int | str) -> None:
        """The next (1) or previous (-1) column, or the column named (the palette)."""
        if isinstance(by, str):
            self.sorting.by(by)
        else:
            self.sorting.step(by)

    def action_invert_sort(self) -> None:
        self.sorting.invert()

    def action_follow(self, on: bool | None = None) -> None:
        """Keep the cursor on the newest activity (on), or not; None toggles (the palette)."""
        self.follow = not self.follow if on is None else on
        if self.follow:
            self.rows.follow_newest()
        self.chrome.update()

    def action_pause(self, on: bool | None = None) -> None:
        """Hold the changes (on) or show them again; None toggles (the palette)."""
        self.paused = not self.paused if on is None else on
        if not self.paused:
            self.post_message(CatchUp())
            self.rows.tick()
        self.chrome.update()

    def action_unmark(self) -> None:
        self.table().set_marks(())

    def action_columns(self) -> None:
        self.app.push_screen(ColumnPick(self.table(), VIEW_TITLES[self.view]))

    def action_detail(self, how: str) -> None:
        """The detail pane: shown or hidden ("toggle"), a page "up" or "down"."""
        pane = self.query_one(DetailPane)
        if how == "toggle":
            pane.display = not pane.display
        elif how == "up":
            pane.scroll_page_up(animate=False)
        else:
            pane.scroll_page_down(animate=False)

    def action_kill(self) -> None:
        if self.view is View.COLLISIONS:
            incident, ns = self.selection.incident(), self.selection.intruder()
            if incident is not None and ns is not None and can_kill(ns):
                self.flows.confirm_kill_intruder(ns, incident)
            return
        self.flows.confirm_kill(self.selection.killable())

    def action_clear(self) -> None:
        self.flows.confirm_clear(self.selection.clearable())

    def action_acknowledge(self) -> None:
        self.flows.confirm_acknowledge(self.selection.unacknowledged())

    def action_open(self) -> None:
        incident = self.selection.incident()
        if incident is not None:
            self.post_message(OpenIncident(incident))
        else:
            self.keys.tell_why_not("open")

    def action_export(self, kind: str, target: Path | None = None) -> None:
        incident = self.selection.incident()
        if incident is not None:
            self.flows.confirm_export(incident, kind, target)

    # -- investigating (the files view and the jumps: `screens/files_screen.py`, the timeline) --

    def action_files(self) -> None:
        row = self.selection.row()
        if isinstance(row, NamespaceView):
            self.post_message(OpenFiles(row.key))

    def action_copy_path(self) -> None:
        row = self.selection.row()
        if isinstance(row, NamespaceView):
            self.post_message(CopyPath(row.key))

    def action_forward_port(self) -> None:
        row = self.selection.row()
        if isinstance(row, NamespaceView):
            title, message = forward_hint(row)
            self.notify(message, title=title, markup=False, timeout=15)

    def action_back(self) -> None:
        if self.came_from is not None:
            incident, self.came_from = self.came_from, None
            self.refresh_bindings()
            self.post_message(OpenIncident(self.state.picture.incidents.get(incident.id, incident)))

    def select_lane(self, key: str, came_from: Incident | None) -> None:
        """Show `key`'s row selected, in the view that holds it (a jump from a timeline)."""
        ns = self.state.picture.namespaces.get(key)
        if ns is None:
            return
        self.switch_to(view_of(ns))
        if not self.table().move_cursor(key):  # hidden by the filter
            self.filtering.clear()
            self.table().move_cursor(key)
        self.came_from = came_from
        self.refresh_bindings()
