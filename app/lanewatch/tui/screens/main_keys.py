"""The main screen's keys: bindings, what applies to the selection (`check_action`, so the
footer greys what does not), and the actions. Mixed into `MainScreen`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import events
from textual.binding import Binding, BindingType
from textual.widgets import ContentSwitcher, Input

from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.actions_adapter import can_clear, can_kill
from lanewatch.tui.picture import Row, View
from lanewatch.tui.widgets.detail import DetailPane

if TYPE_CHECKING:
    from lanewatch.tui.screens.main import MainScreen

ORDER = (View.LANES, View.COLLISIONS, View.STALE)


KEYS: list[BindingType] = [
    Binding("question_mark,f1", "help", "Help"),
    Binding("1", "view('lanes')", "Lanes", show=False),
    Binding("2", "view('collisions')", "Collisions", show=False),
    Binding("3", "view('stale')", "Stale", show=False),
    Binding("tab", "cycle(1)", "Next view"),
    Binding("shift+tab", "cycle(-1)", "Previous view", show=False),
    # A priority binding runs when the app dequeues the key, before it forwards the keys behind
    # it: they reach the filter, however fast they come (see `screens/typeahead.py`).
    Binding("slash", "filter", "Filter", priority=True),
    Binding("escape", "escape", "Clear filter / marks", show=False),
    Binding("k,f9", "kill", "Kill"),
    Binding("c,f8", "clear", "Clear"),
    Binding("a", "acknowledge", "Acknowledge"),
    Binding("enter", "open", "Timeline", show=False),
    Binding("e", "export('md')", "Export incident .md", show=False),
    Binding("E", "export('json')", "Export incident .json", show=False),
    Binding("t", "trash", "Trash / restore", show=False),
    Binding("greater_than_sign,f6", "sort(1)", "Sort next column", show=False),
    Binding("less_than_sign", "sort(-1)", "Sort previous column", show=False),
    Binding("I", "invert_sort", "Invert sort", show=False),
    Binding("f", "follow", "Follow"),
    Binding("f", "unfollow", "Unfollow"),
    Binding("p,Z", "pause", "Pause"),
    Binding("p,Z", "resume", "Resume"),
    Binding("U", "unmark", "Unmark all", show=False),
    Binding("d", "toggle_detail", "Detail pane", show=False),
    Binding("left_square_bracket", "detail_scroll(-1)", "Scroll detail up", show=False),
    Binding("right_square_bracket", "detail_scroll(1)", "Scroll detail down", show=False),
    Binding("ctrl+r", "rescan", "Rescan roots", show=False),
]


class MainKeys:
    """Selection, `check_action` and the actions of `MainScreen` (its BINDINGS are `KEYS`)."""

    # ------------------------------------------------------------- selection

    def targets(self: MainScreen) -> list[Row]:
        """The marked rows of this view (as shown now), else the cursor row."""
        table = self.table()
        marked = table.marked
        if marked:
            keys = [k for k in table.visible_keys if k in marked]
        else:
            keys = [] if table.cursor_key is None else [table.cursor_key]
        rows = (self.lw.picture.row(self.view, str(k)) for k in keys)
        return [row for row in rows if row is not None]

    def namespace_targets(self: MainScreen) -> list[NamespaceView]:
        return [row for row in self.targets() if isinstance(row, NamespaceView)]

    def incident_targets(self: MainScreen) -> list[Incident]:
        return [row for row in self.targets() if isinstance(row, Incident)]

    def selected_incident(self: MainScreen) -> Incident | None:
        row = self.selected_row()
        if isinstance(row, Incident):
            return row
        if isinstance(row, NamespaceView):
            incidents = self.lw.picture.incidents_of(row.key)
            return incidents[-1] if incidents else None
        return None

    # ------------------------------------------------------------- bindings

    def check_action(self: MainScreen, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "kill":
            if self.view is not View.LANES:
                return False
            return True if any(can_kill(ns) for ns in self.namespace_targets()) else None
        if action == "clear":
            if self.view is not View.STALE:
                return False
            return True if any(can_clear(ns) for ns in self.namespace_targets()) else None
        if action == "acknowledge":
            if self.view is not View.COLLISIONS:
                return False
            open_ = [i for i in self.incident_targets() if not i.acknowledged]
            return True if open_ else None
        if action in ("open", "export"):
            return True if self.selected_incident() is not None else None
        if action == "unmark":
            return True if self.table().marked else None
        if action == "sort":
            return True if self.table().row_count else None
        if action in ("pause", "resume"):
            return self.paused == (action == "resume")
        if action in ("follow", "unfollow"):
            return self.follow == (action == "unfollow")
        return True

    # ------------------------------------------------------------- actions

    def action_help(self: MainScreen) -> None:
        self.lw.show_help()

    def action_view(self: MainScreen, name: str) -> None:
        self.switch_to(View(name))

    def action_cycle(self: MainScreen, step: int) -> None:
        self.switch_to(ORDER[(ORDER.index(self.view) + step) % len(ORDER)])

    def switch_to(self: MainScreen, view: View) -> None:
        if view is self.view:
            return
        self.view = view
        self.mark_changed()
        self.query_one(ContentSwitcher).current = view.value
        self.tick()
        filter_input = self.query_one("#filter", Input)
        filter_input.value = self.table().filter_text
        filter_input.display = bool(self.table().filter_text)
        self.table().focus()
        self.show_detail(reload=True)
        self.update_chrome()

    def action_filter(self: MainScreen) -> None:
        filter_input = self.query_one("#filter", Input)
        if self.focused is filter_input:
            # In the filter, `/` is a character (paths): hand it on, behind earlier keys.
            filter_input.post_message(events.Key("slash", "/"))
            return
        filter_input.display = True
        # Focus now, not after a refresh (`Widget.focus` is deferred): the keys typed after
        # the `/` are forwarded to the focused widget as the app dequeues them.
        self.set_focus(filter_input)

    def action_escape(self: MainScreen) -> None:
        filter_input = self.query_one("#filter", Input)
        if self.table().filter_text or filter_input.display:
            filter_input.value = ""
            self.table().set_filter("")
            filter_input.display = False
            self.table().focus()
        elif self.table().marked:
            self.table().clear_marks()
        self.update_chrome()

    def action_sort(self: MainScreen, step: int) -> None:
        table = self.table()
        keys = [c.key for c in table.columns]
        current = table.sort_column
        index = keys.index(current) + step if current in keys else 0
        table.sort_by(keys[index % len(keys)], reverse=table.sort_reverse)

    def action_invert_sort(self: MainScreen) -> None:
        table = self.table()
        table.sort_by(table.sort_column or table.columns[0].key, reverse=not table.sort_reverse)

    def action_sort_column(self: MainScreen, column: str) -> None:
        self.table().sort_by(column, reverse=self.table().sort_reverse)

    def action_follow(self: MainScreen) -> None:
        self.follow = not self.follow
        if self.follow:
            self._follow()
        self.update_chrome()

    def action_resume(self: MainScreen) -> None:
        self.action_pause()

    def action_unfollow(self: MainScreen) -> None:
        self.action_follow()

    def action_pause(self: MainScreen) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.lw.drain()
            self.tick()
        self.update_chrome()

    def action_unmark(self: MainScreen) -> None:
        self.table().clear_marks()

    def action_toggle_detail(self: MainScreen) -> None:
        pane = self.query_one(DetailPane)
        pane.display = not pane.display

    def action_detail_scroll(self: MainScreen, direction: int) -> None:
        pane = self.query_one(DetailPane)
        if direction < 0:
            pane.scroll_page_up(animate=False)
        else:
            pane.scroll_page_down(animate=False)

    def action_rescan(self: MainScreen) -> None:
        self.lw.rescan()

    def action_kill(self: MainScreen) -> None:
        self.lw.confirm_kill([ns for ns in self.namespace_targets() if can_kill(ns)])

    def action_clear(self: MainScreen) -> None:
        self.lw.confirm_clear([ns for ns in self.namespace_targets() if can_clear(ns)])

    def action_acknowledge(self: MainScreen) -> None:
        self.lw.confirm_acknowledge([i for i in self.incident_targets() if not i.acknowledged])

    def action_open(self: MainScreen) -> None:
        incident = self.selected_incident()
        if incident is not None:
            self.lw.open_incident(incident)

    def action_export(self: MainScreen, kind: str, target: Path | None = None) -> None:
        incident = self.selected_incident()
        if incident is not None:
            self.lw.export_incident(incident, kind, target)

    def action_trash(self: MainScreen) -> None:
        self.lw.open_trash()
