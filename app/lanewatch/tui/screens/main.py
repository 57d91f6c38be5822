"""The main screen: Lanes, Collisions and Stale a key apart, a detail pane, a filter, a status
line. Rows change by key only (never clear-and-refill); the cursor and marks follow keys.

Its keys are `main_keys.KEYS`; Textual dispatches their actions to the screen, and each
`action_*` here hands on to a plain object the screen owns: what the keys act on (`Selection`),
the filter and the sort (`table_controls`), and the confirm-then-act flows (`ActionFlows`, the
app's, handed in)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Container, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, Static

from lanewatch.hosts import elsewhere
from lanewatch.hosts import files as far_files
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui import columns
from lanewatch.tui.actions_adapter import can_kill
from lanewatch.tui.details import Detail, far_detail, load_detail
from lanewatch.tui.empty import empty_text
from lanewatch.tui.later import call_after
from lanewatch.tui.messages import DetailLoaded, ViewPicked
from lanewatch.tui.picture import VIEW_TITLES, Delta, Picture, Row, View, view_of
from lanewatch.tui.screens.column_pick import ColumnPick
from lanewatch.tui.screens.main_keys import KEYS, ORDER
from lanewatch.tui.screens.selection import Selection
from lanewatch.tui.screens.table_controls import FilterControl, SortControl
from lanewatch.tui.screens.typeahead import TypeaheadGuard
from lanewatch.tui.widgets.detail import DetailPane, incident_renderable, namespace_renderable
from lanewatch.tui.widgets.lane_table import Cell, LaneTable
from lanewatch.tui.widgets.status import StatusLine, StatusState
from lanewatch.tui.widgets.viewbar import ViewBar

if TYPE_CHECKING:
    from lanewatch.tui.app import LanewatchApp
    from lanewatch.tui.flows import ActionFlows

DETAIL_REFRESH = 2.0  # at most one re-read of the selected row's ledger and files this often
FAR_DETAIL_REFRESH = 10.0  # the same for another host's lane: one ssh round trip each
FAR_RECENT = 32  # entries a far host lists for the pane (its RECENT_WRITES newest files)
DETAIL_REDRAW = 0.5  # while the selected row keeps changing, its pane redraws at most this often
TICK_MARGIN = 3  # rows above and below the viewport whose ages move on each second
GATED_ACTIONS = ("kill", "clear", "acknowledge", "open", "export", "unmark", "sort")
GATED_ACTIONS += ("pause", "resume", "follow", "unfollow")
# A key of these that does not apply says why, instead of doing nothing without a word.
ELSEWHERE = {
    "kill": "k kills lanes: in the Lanes view (1), or a collision's intruder (2).",
    "clear": "c clears stale namespaces: in the Stale view (3).",
    "acknowledge": "a acknowledges incidents: in the Collisions view (2).",
}
TOLD = frozenset((*ELSEWHERE, "export"))


class MainScreen(TypeaheadGuard, Screen[None]):
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (200, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = KEYS
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        ("kill", "clear", "acknowledge", "export")
    )

    def __init__(self, picture: Picture, flows: ActionFlows) -> None:
        super().__init__()
        self.flows = flows
        self.selection = Selection(picture, self.table, lambda: self.view)
        self.filtering = FilterControl(self, self.table)
        self.sorting = SortControl(self.table)
        self.view = View.LANES
        self.paused = False
        self.follow = False
        self._detail: Detail | None = None
        self._detail_key: str | None = None
        self._detail_at = 0.0
        self._detail_timer: asyncio.TimerHandle | None = None
        self._detail_content: NamespaceView | None = None  # the row as of the last re-read
        self._detail_drawn_at = float("-inf")
        self._redraw_timer: asyncio.TimerHandle | None = None
        self._bindings_signature: tuple[object, ...] = ()
        self._empty_shown: dict[View, Text | None] = {}
        self.came_from: Incident | None = None  # the incident a jump came from (backspace)
        self._visited: set[View] = {View.LANES}  # views shown once (`switch_to`)
        # Per view and row key: when one of the row's ages next shows another text.
        self._ages_due: dict[View, dict[object, float]] = {view: {} for view in ORDER}

    @property
    def lw(self) -> LanewatchApp:
        return self.app  # type: ignore[return-value]

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield ViewBar(id="viewbar")
        with Container(id="body"):
            with ContentSwitcher(initial=View.LANES.value, id="views"):
                for view in ORDER:
                    with Vertical(id=view.value, classes="view"):
                        yield LaneTable(columns.COLUMNS[view], id=f"table-{view.value}")
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
            column, reverse = columns.DEFAULT_SORT[view]
            self.table(view).sort_by(column, reverse=reverse)
        self.table(self.view).focus()
        self.update_chrome()

    def table(self, view: View | None = None) -> LaneTable:
        return self.query_one(f"#table-{(view or self.view).value}", LaneTable)

    # ------------------------------------------------------------ applying data

    def build_row(self, view: View, row: Row, now: float) -> tuple[Cell, ...]:
        key = row.id if isinstance(row, Incident) else row.key
        self._ages_due[view][key] = columns.ages_change_at(view, row, now)
        if view is View.COLLISIONS:
            assert isinstance(row, Incident)
            return columns.collisions_row(row, now, self._victim_label)
        assert isinstance(row, NamespaceView)
        if view is View.LANES:
            return columns.lanes_row(row, now, self.lw.picture.roles(row.key))
        return columns.stale_row(row, now)

    def row_tone(self, row: Row) -> str | None:
        against = () if isinstance(row, Incident) else self.lw.picture.open_against(row.key)
        return columns.row_tone(row, against)

    def _victim_label(self, key: str | None) -> str:
        return self.lw.picture.victim_label(key)

    def apply_delta(self, delta: Delta) -> None:
        """Put one drained batch on screen: only the rows it touched."""
        now = self.lw.clock()
        for view in ORDER:
            upserts = delta.upserts[view]
            removals = delta.removals[view]
            if upserts or removals:
                rows = {key: self.build_row(view, row, now) for key, row in upserts.items()}
                table = self.table(view)
                table.apply(rows, removals)
                table.set_tones({key: self.row_tone(row) for key, row in upserts.items()})
                due = self._ages_due[view]
                for key in removals:
                    due.pop(key, None)
        if self.follow:
            self._follow()
        self.update_chrome()
        key = self.table().cursor_key
        if key is not None and key in delta.touched(self.view):
            self._detail_changed()

    def tick(self) -> None:
        """Once a second (and on a view switch or a resume), the ages move on: only for the
        rows on screen and a margin, so an idle dashboard costs the same with ten rows or ten
        thousand. Rows scrolled into view catch up at the next tick; rows that change, at once
        (every table gets every batch, shown or not). Only the age cells are rebuilt, and only
        for rows one of whose ages shows another text (`columns.ages_change_at`: "4m" stays
        "4m" for a minute)."""
        if self.paused or not self.lw.picture.loaded:
            return
        table = self.table()
        top = max(0, table.scroll_offset.y - TICK_MARGIN)
        height = table.size.height or self.size.height  # a table just shown has no size yet
        window = table.visible_slice(top, top + height + 2 * TICK_MARGIN)
        now = self.lw.clock()
        due = self._ages_due[self.view]
        cells = {}
        for key in window:
            if due.get(key, 0.0) > now:
                continue  # none of its ages shows another text yet: nothing to build
            row = self.lw.picture.row(self.view, str(key))
            if row is not None:
                cells[key] = columns.age_cells(self.view, row, now)
                due[key] = columns.ages_change_at(self.view, row, now)
        table.update_cells(cells)

    def _follow(self) -> None:
        rows = self.lw.picture.rows(self.view)
        if not rows:
            return

        def recency(item: tuple[str, Row]) -> float:
            row = item[1]
            if isinstance(row, Incident):
                return row.last_seen
            if self.view is View.STALE:
                return columns.stale_since(row) or 0.0
            return max(row.last_write or 0.0, row.started_at or 0.0)

        key, _ = max(rows.items(), key=recency)
        self.table().move_cursor(key)

    # ------------------------------------------------------------------ chrome

    def update_chrome(self) -> None:
        """Header counts, status line, empty states, footer: each touched only on a change."""
        if not self.lw.main_live():
            return
        pic = self.lw.picture
        table = self.table()
        shown = {
            view: len(self.table(view).visible_keys)
            for view in ORDER
            if self.table(view).filter_text
        }
        self.query_one(ViewBar).show(self.view, pic.counts(), shown)
        self.query_one(StatusLine).show(
            StatusState(
                loaded=pic.loaded,
                roots=self.lw.root_count(),
                health=pic.health,
                paused=self.paused,
                pending=self.lw.buffer.pending,
                follow=self.follow,
                filter=table.filter_text,
                marks=len(table.marked),
                error=self.lw.engine_error,
                watchdog=self.lw.watch_problem.text if self.lw.watch_problem else None,
                note=self.lw.demo_note,
                attribution=pic.attribution,
                default_root=self.lw.default_root,
                reaper=self.lw.reaper_line,
            )
        )
        for view in ORDER:
            self._update_empty(view)
        # What the footer shows depends only on which actions apply: recompose it (costly) only
        # when that changes, not on every heartbeat of the selected lane.
        signature = (self.view, *(self.check_action(a, ()) for a in GATED_ACTIONS))
        if signature != self._bindings_signature:
            self._bindings_signature = signature
            self.refresh_bindings()

    def _update_empty(self, view: View) -> None:
        pic = self.lw.picture
        table = self.table(view)
        message = empty_text(
            view,
            pic.loaded,
            table.row_count,
            len(table.visible_keys),
            table.filter_text,
            self.lw,
        )
        if message == self._empty_shown.get(view, ""):
            return
        self._empty_shown[view] = message
        empty = self.query_one(f"#empty-{view.value}", Static)
        empty.display = message is not None
        table.display = message is None
        if message is not None:
            empty.update(message)
        elif view is self.view and self.focused is None:
            table.focus()

    # ------------------------------------------------------------------ detail

    @on(LaneTable.RowHighlighted)
    def _highlighted(self, event: LaneTable.RowHighlighted) -> None:
        if event.table is self.table():
            self.show_detail(reload=True)
            self.update_chrome()

    @on(LaneTable.MarksChanged)
    def _marks(self, event: LaneTable.MarksChanged) -> None:
        self.update_chrome()

    def selected_row(self) -> Row | None:
        return self.selection.row()

    def _detail_changed(self) -> None:
        """The selected row changed: redraw its pane now, or within DETAIL_REDRAW of the last
        drawing. A lane under a write load changes on every drain; drawing its pane (a Rich
        grid) each time cost more than the rest of the frame, and nobody reads it that fast."""
        wait = self._detail_drawn_at + DETAIL_REDRAW - self.lw.monotonic()
        if wait <= 0:
            self.show_detail(reload=True)
        elif self._redraw_timer is None:
            self._redraw_timer = call_after(self, wait, self._timed_redraw)

    def _timed_redraw(self) -> None:
        self._redraw_timer = None
        if self.lw.main_live():
            self.show_detail(reload=True)

    def show_detail(self, reload: bool = False) -> None:
        """Draw the pane for the selected row; with `reload`, also re-read its files and
        ledger (at once for a newly selected row, else at most every DETAIL_REFRESH)."""
        if not self.lw.main_live():
            return
        self._detail_drawn_at = self.lw.monotonic()
        pane = self.query_one(DetailPane)
        row = self.selected_row()
        pane.set_class(row is None, "-nothing")
        if row is None:
            pane.show("", key="nothing")
            return
        if isinstance(row, Incident):
            pane.show(incident_renderable(row, self._victim_label), key=row)
            return
        if self._detail_key != row.key:
            self._detail, self._detail_key, self._detail_at = None, row.key, 0.0
            self._detail_content = None
            reload = True
        incidents = self.lw.picture.incidents_of(row.key)
        # A heartbeat or a new sparkline sample changes nothing the pane shows: no redraw, and
        # no re-read of the namespace's files and ledger.
        content = replace(row, heartbeat_at=None, write_rate=())
        key = (content, self._detail, tuple(incidents))
        pane.show(namespace_renderable(row, self._detail, incidents), key=key)
        if reload and content != self._detail_content:
            self._detail_content = content
            self._schedule_detail_load(row.key)

    def _schedule_detail_load(self, key: str) -> None:
        every = FAR_DETAIL_REFRESH if self.lw.adapter.host_of(key) else DETAIL_REFRESH
        wait = self._detail_at + every - self.lw.monotonic()
        if wait <= 0:
            self._detail_at = self.lw.monotonic()
            # Read here, on the UI thread: the worker gets copies.
            self._load_detail(key, self.lw.root_paths(), self.lw.picture.incidents_of(key))
        elif self._detail_timer is None:
            self._detail_timer = call_after(self, wait, self._timed_detail_load)

    def _timed_detail_load(self) -> None:
        self._detail_timer = None
        if self._detail_key is not None and self.lw.main_live():
            self._schedule_detail_load(self._detail_key)

    @work(
        thread=True,
        exclusive=True,
        group="detail",
        description="read the selected namespace",
        exit_on_error=False,
    )
    def _load_detail(self, key: str, roots: list[str], incidents: list[Incident]) -> None:
        far = self.lw.adapter.host_of(key)
        if far is not None:  # its files are listed there, by its lanewatch (one ssh call)
            listed = far_files.listing(*far, key, limit=FAR_RECENT, no_meta=True)
            detail = far_detail(key, elsewhere.ledger(far[0]), listed)
        else:
            detail = load_detail(Path(key), roots=roots, incidents=incidents)
        self.lw.post_from_thread(self, DetailLoaded(detail))

    @on(DetailLoaded)
    def _detail_loaded(self, message: DetailLoaded) -> None:
        if message.detail.key == self._detail_key:
            self._detail = message.detail
            self.show_detail()

    @property
    def detail(self) -> Detail | None:
        return self._detail

    # ------------------------------------------------------------ handlers

    @on(ViewPicked)
    def _picked(self, event: ViewPicked) -> None:
        self.switch_to(event.view)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filtering.changed(event.value)
        self.update_chrome()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filtering.submitted(event.value)

    @on(LaneTable.RowSelected)
    def _selected(self, event: LaneTable.RowSelected) -> None:
        self.action_open()

    def on_screen_resume(self) -> None:
        # Changes kept merging while another screen was on top: show them now.
        self.lw.drain()
        self.tick()
        self.show_detail(reload=True)

    # ------------------------------------------------------------ keys

    def targets(self) -> list[Row]:
        """The marked rows of this view (as shown now), else the cursor row."""
        return self.selection.targets()

    def selected_incident(self) -> Incident | None:
        return self.selection.incident()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """False hides a key that never applies in this view; None greys one that does not
        apply to the selection now (the footer tells the truth)."""
        if action == "kill":
            if self.view is View.COLLISIONS:  # the row's intruding lane
                ns = self.selection.intruder()
                return True if ns is not None and can_kill(ns) else None
            if self.view is not View.LANES:
                return False
            return True if self.selection.killable() else None
        if action == "clear":
            if self.view is not View.STALE:
                return False
            return True if self.selection.clearable() else None
        if action == "acknowledge":
            if self.view is not View.COLLISIONS:
                return False
            return True if self.selection.unacknowledged() else None
        if action in ("open", "export"):
            return True if self.selection.incident() is not None else None
        if action in ("files", "copy_path"):
            if self.view is View.COLLISIONS:
                return False
            return True if isinstance(self.selected_row(), NamespaceView) else None
        if action == "back":
            return self.came_from is not None
        if action == "unmark":
            return True if self.table().marked else None
        if action == "sort":
            return True if self.table().row_count else None
        if action in ("pause", "resume"):
            return self.paused == (action == "resume")
        if action in ("follow", "unfollow"):
            return self.follow == (action == "unfollow")
        return True

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
        self.tick()
        self.filtering.show_table_filter()
        self.table().focus()
        self.show_detail(reload=True)
        self.update_chrome()

    def action_help(self) -> None:
        self.lw.show_help()

    def action_view(self, name: str) -> None:
        self.switch_to(View(name))

    def action_cycle(self, step: int) -> None:
        self.switch_to(ORDER[(ORDER.index(self.view) + step) % len(ORDER)])

    def action_filter(self) -> None:
        self.filtering.open()

    def action_escape(self) -> None:
        if not self.filtering.clear() and self.table().marked:
            self.table().clear_marks()
        self.update_chrome()

    def action_sort(self, step: int) -> None:
        self.sorting.step(step)

    def action_invert_sort(self) -> None:
        self.sorting.invert()

    def action_sort_column(self, column: str) -> None:
        self.sorting.by(column)

    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._follow()
        self.update_chrome()

    def action_unfollow(self) -> None:
        self.action_follow()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.lw.drain()
            self.tick()
        self.update_chrome()

    def action_resume(self) -> None:
        self.action_pause()

    def action_unmark(self) -> None:
        self.table().clear_marks()

    def action_toggle_detail(self) -> None:
        pane = self.query_one(DetailPane)
        pane.display = not pane.display

    def action_columns(self) -> None:
        self.app.push_screen(ColumnPick(self.table(), VIEW_TITLES[self.view]))

    def action_detail_scroll(self, direction: int) -> None:
        pane = self.query_one(DetailPane)
        if direction < 0:
            pane.scroll_page_up(animate=False)
        else:
            pane.scroll_page_down(animate=False)

    def action_rescan(self) -> None:
        self.lw.rescan()

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
            self.lw.open_incident(incident)
        else:
            self.tell_why_not("open")

    def tell_if_idle(self, key: str) -> None:
        """A key about to reach the bindings (the app calls this once the type-ahead guard let
        it through, so the view is the one the user saw): if its action does not apply to the
        selection or in this view, the binding does nothing; say why, in a short notice. Only
        from a table: a key typed in the filter is the field's. `enter` says it itself
        (`action_open`) over a table; with no focus (the view's table emptied and hid, see
        `_update_empty`) no table takes it, so it is told here too."""
        focused = self.focused
        if focused is not None and not isinstance(focused, LaneTable):
            return
        told = TOLD if focused is not None else TOLD | {"open"}
        for binding in self._bindings.key_to_bindings.get(key, ()):
            action = binding.action.partition("(")[0]
            if action not in told:
                continue
            state = self.check_action(action, ())
            if state is False:
                self.notify(ELSEWHERE[action], timeout=3)
            elif state is None:
                self.tell_why_not(action)
            return

    def tell_why_not(self, action: str) -> None:
        why = self.selection.why_not(action)
        if why:
            self.notify(why, title=f"nothing to {action}", markup=False, timeout=4)

    def action_export(self, kind: str, target: Path | None = None) -> None:
        incident = self.selection.incident()
        if incident is not None:
            self.flows.confirm_export(incident, kind, target)

    def action_trash(self) -> None:
        self.lw.open_trash()

    # -- investigating (the files view and the jumps: `tui/screens/files.py`, the timeline) --

    def action_files(self) -> None:
        row = self.selected_row()
        if isinstance(row, NamespaceView):
            self.lw.open_files(row.key)

    def action_copy_path(self) -> None:
        row = self.selected_row()
        if isinstance(row, NamespaceView):
            self.lw.copy_path(row.key)

    def action_forward_port(self) -> None:
        row = self.selected_row()
        if isinstance(row, NamespaceView):
            from lanewatch.tui.forwardhint import forward_hint

            title, message = forward_hint(row)
            self.lw.notify(message, title=title, markup=False, timeout=15)

    def action_back(self) -> None:
        if self.came_from is not None:
            incident, self.came_from = self.came_from, None
            self.refresh_bindings()
            self.lw.open_incident(self.lw.picture.incidents.get(incident.id, incident))

    def select_lane(self, key: str, came_from: Incident | None) -> None:
        """Show `key`'s row selected, in the view that holds it (a jump from a timeline)."""
        ns = self.lw.picture.namespaces.get(key)
        if ns is None:
            return
        self.switch_to(view_of(ns))
        if not self.table().move_cursor(key):  # hidden by the filter
            self.filtering.clear()
            self.table().move_cursor(key)
        self.came_from = came_from
        self.refresh_bindings()
