"""Which of the main screen's keys apply now, and a word when one does not: `check` is the
screen's `check_action` (False hides a key that never applies in this view, None greys one
that does not apply to the selection now, so the footer tells the truth), `tell_if_idle` says
why a key did nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.binding import BindingsMap
from textual.widget import Widget

from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.actions_adapter import can_kill
from lanewatch.tui.plumbing.notifier import Notifier
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets.lane_table import LaneTable

if TYPE_CHECKING:
    from lanewatch.tui.screens.main_selection import Selection

# A key of these that does not apply says why, instead of doing nothing without a word.
ELSEWHERE = {
    "kill": "k kills lanes: in the Lanes view (1), or a collision's intruder (2).",
    "clear": "c clears stale namespaces: in the Stale view (3).",
    "acknowledge": "a acknowledges incidents: in the Collisions view (2).",
}
TOLD = frozenset((*ELSEWHERE, "export"))


class GatedScreen(Notifier, Protocol):
    """What the gate uses of the screen that owns it (`MainScreen`)."""

    selection: Selection
    view: View
    came_from: Incident | None
    paused: bool
    follow: bool
    _bindings: BindingsMap  # Textual's own: the screen's keys, as the footer shows them

    @property
    def focused(self) -> Widget | None: ...

    def table(self, view: View | None = None) -> LaneTable: ...


class MainKeyGate:
    """Owned by the main screen (composition)."""

    def __init__(self, screen: GatedScreen) -> None:
        self.screen = screen

    def check(self, action: str, parameters: tuple[object, ...] = ()) -> bool | None:
        screen = self.screen
        selection, view = screen.selection, screen.view
        if action == "kill":
            if view is View.COLLISIONS:  # the row's intruding lane
                ns = selection.intruder()
                return True if ns is not None and can_kill(ns) else None
            if view is not View.LANES:
                return False
            return True if selection.killable() else None
        if action == "clear":
            if view is not View.STALE:
                return False
            return True if selection.clearable() else None
        if action == "acknowledge":
            if view is not View.COLLISIONS:
                return False
            return True if selection.unacknowledged() else None
        if action in ("open", "export"):
            return True if selection.incident() is not None else None
        if action in ("files", "copy_path"):
            if view is View.COLLISIONS:
                return False
            return True if isinstance(selection.row(), NamespaceView) else None
        if action == "back":
            return screen.came_from is not None
        if action == "unmark":
            return True if screen.table().marked else None
        if action == "sort":
            return True if screen.table().row_count else None
        if action == "pause" and parameters:  # pause(True) while running, pause(False) paused
            return screen.paused != parameters[0]
        if action == "follow" and parameters:
            return screen.follow != parameters[0]
        return True

    def tell_if_idle(self, key: str) -> None:
        """A key about to reach the bindings (the app calls this once the type-ahead guard let
        it through, so the view is the one the user saw): if its action does not apply to the
        selection or in this view, the binding does nothing; say why, in a short notice. Only
        from a table: a key typed in the filter is the field's. `enter` says it itself
        (`action_open`) over a table; with no focus (the view's table emptied and hid, see
        `MainChrome`) no table takes it, so it is told here too."""
        screen = self.screen
        focused = screen.focused
        if focused is not None and not isinstance(focused, LaneTable):
            return
        told = TOLD if focused is not None else TOLD | {"open"}
        for binding in screen._bindings.key_to_bindings.get(key, ()):
            action = binding.action.partition("(")[0]
            if action not in told:
                continue
            state = self.check(action)
            if state is False:
                screen.notify(ELSEWHERE[action], timeout=3)
            elif state is None:
                self.tell_why_not(action)
            return

    def tell_why_not(self, action: str) -> None:
        why = self.screen.selection.why_not(action)
        if why:
            self.screen.notify(why, title=f"nothing to {action}", markup=False, timeout=4)
