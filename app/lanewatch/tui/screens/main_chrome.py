"""Everything around the main screen's table: the header's counts, the status line, each view's
empty state and the footer's keys; each touched only when what it shows changed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar, overload

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from lanewatch.tui.screens.main_keys import ORDER
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.state.empty_hints import empty_text
from lanewatch.tui.widgets.status_line import StatusLine, StatusState
from lanewatch.tui.widgets.viewbar import ViewBar

if TYPE_CHECKING:
    from lanewatch.tui.state.dashboard_state import DashboardState
    from lanewatch.tui.widgets.lane_table import LaneTable

W = TypeVar("W", bound=Widget)

# The keys whose footer entry depends on the selection or the mode: (action, parameters).
_BY_SELECTION = ("kill", "clear", "acknowledge", "open", "export", "unmark", "sort")
GATED_ACTIONS: tuple[tuple[str, tuple[object, ...]], ...] = (
    *((action, ()) for action in _BY_SELECTION),
    *(("pause", (on,)) for on in (True, False)),
    *(("follow", (on,)) for on in (True, False)),
)


class ChromeScreen(Protocol):
    """What the chrome uses of the screen that owns it (`MainScreen`)."""

    view: View
    paused: bool
    follow: bool

    @property
    def focused(self) -> Widget | None: ...

    def live(self) -> bool: ...

    def table(self, view: View | None = None) -> LaneTable: ...

    @overload
    def query_one(self, selector: type[W]) -> W: ...

    @overload
    def query_one(self, selector: str, expect_type: type[W]) -> W: ...

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None: ...

    def refresh_bindings(self) -> None: ...


class MainChrome:
    """Owned by the main screen (composition)."""

    def __init__(self, screen: ChromeScreen, state: DashboardState) -> None:
        self.screen = screen
        self.state = state
        self._bindings_signature: tuple[object, ...] = ()
        self._empty_shown: dict[View, Text | None] = {}
        self._empty_inputs: dict[View, tuple[object, ...]] = {}

    def update(self) -> None:
        """Header counts, status line, empty states, footer: each touched only on a change."""
        screen, state = self.screen, self.state
        if not screen.live():
            return
        pic = state.picture
        table = screen.table()
        shown = {
            view: len(screen.table(view).visible_keys)
            for view in ORDER
            if screen.table(view).filter_text
        }
        screen.query_one(ViewBar).show(screen.view, pic.counts(), shown)
        screen.query_one(StatusLine).show(
            StatusState(
                loaded=pic.loaded,
                roots=len(state.roots()),
                health=pic.health,
                paused=screen.paused,
                pending=state.pending() > 0,
                follow=screen.follow,
                filter=table.filter_text,
                marks=len(table.marked),
                error=state.engine_error,
                watchdog=state.watchdog,
                note=state.demo_note,
                attribution=pic.attribution,
                default_root=state.default_root,
                reaper=state.reaper_line,
                inside_fence=state.inside_fence,
            )
        )
        for view in ORDER:
            self._update_empty(view)
        # What the footer shows depends only on which actions apply: recompose it (costly) only
        # when that changes, not on every heartbeat of the selected lane.
        signature = (screen.view, *(screen.check_action(a, p) for a, p in GATED_ACTIONS))
        if signature != self._bindings_signature:
            self._bindings_signature = signature
            screen.refresh_bindings()

    def _update_empty(self, view: View) -> None:
        screen = self.screen
        table = screen.table(view)
        # What the message depends on: a drain that changes none of it (most, under a write
        # load) builds no message. The roots are listed only under an empty table.
        loaded, rows, shown = self.state.picture.loaded, table.row_count, len(table.order.visible)
        roots = self.state.roots() if loaded and not rows else []
        inputs = (loaded, rows, shown, table.filter_text, tuple(roots))
        if inputs == self._empty_inputs.get(view):
            return
        self._empty_inputs[view] = inputs
        message = empty_text(view, loaded, rows, shown, table.filter_text, lambda: roots)
        if message == self._empty_shown.get(view, ""):
            return
        self._empty_shown[view] = message
        empty = screen.query_one(f"#empty-{view.value}", Static)
        empty.display = message is not None
        table.display = message is None
        if message is not None:
            empty.update(message)
        elif view is screen.view and screen.focused is None:
            table.focus()
