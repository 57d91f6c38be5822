"""What the screens ask of the app (`plumbing/messages.py` `ScreenRequest`), handled in one
place: the screens it opens (help, timeline, files, a file, trash), the jump back to a lane,
the clipboard, a rescan and a catch-up drain. Screens post; they never call the app."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from textual.binding import Binding, BindingType

from lanewatch.inert import inert
from lanewatch.model.roles import LEGEND
from lanewatch.model.views import Incident
from lanewatch.tui.plumbing.messages import (
    CatchUp,
    CopyPath,
    JumpToLane,
    OpenFile,
    OpenFiles,
    OpenIncident,
    OpenTrash,
    Rescan,
    ScreenRequest,
    ShowHelp,
)
from lanewatch.tui.plumbing.notifier import Notifier
from lanewatch.tui.plumbing.thread_work import WorkerHost
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.files_screen import FileScreen, FilesScreen
from lanewatch.tui.screens.help_screen import HelpScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.kill_dialog import KillConfirm
from lanewatch.tui.screens.trash_screen import TrashScreen
from lanewatch.tui.shell import clipboard_osc52
from lanewatch.tui.widgets.lane_table import LaneTable

if TYPE_CHECKING:
    from textual.screen import Screen

    from lanewatch.model.engine_api import EngineApi
    from lanewatch.tui.screens.main_screen import MainScreen
    from lanewatch.tui.shell.action_flows import ActionFlows
    from lanewatch.tui.state.dashboard_state import DashboardState
    from lanewatch.tui.state.dashboard_store import Picture


class NavigatorHost(WorkerHost, Notifier, Protocol):
    """What the navigator uses of the app that owns it (`LanewatchApp`)."""

    BINDINGS: ClassVar[list[BindingType]]
    main: MainScreen
    picture: Picture
    engine: EngineApi
    state: DashboardState
    flows: ActionFlows

    @property
    def screen(self) -> Screen[Any]: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def drain(self) -> None: ...

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any: ...

    def pop_screen(self) -> Any: ...

    def copy_to_clipboard(self, text: str) -> None: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...


class Navigator:
    """The app's answers to its screens. Owned by the app (composition: it holds the app)."""

    def __init__(self, app: NavigatorHost) -> None:
        self.app = app

    def handle(self, request: ScreenRequest) -> None:
        match request:
            case CatchUp():
                self.app.drain()
            case ShowHelp():
                self.show_help()
            case Rescan():
                self.rescan()
            case OpenTrash():
                self.open_trash()
            case OpenIncident(incident=incident):
                self.open_incident(incident)
            case OpenFiles(key=key):
                self.open_files(key)
            case OpenFile(key=key, rel=rel):
                self.app.push_screen(FileScreen(key, rel))
            case CopyPath(path=path):
                self.copy_path(path)
            case JumpToLane(key=key, came_from=came_from):
                self.jump_to_lane(key, came_from)

    def help_groups(self) -> list[tuple[str, list[BindingType]]]:
        """Every key of every screen, as the help screen lists them."""
        return [
            ("Views and rows", list(self.app.main.BINDINGS)),
            ("In a table", list(LaneTable.BINDINGS)),
            ("Incident timeline", list(IncidentScreen.BINDINGS)),
            ("Trash", list(TrashScreen.BINDINGS)),
            ("Files of a lane", [*FilesScreen.BINDINGS, *FileScreen.BINDINGS[1:]]),
            ("Confirmation (kill: the signal)", [*ConfirmScreen.BINDINGS, *KillConfirm.BINDINGS]),
            (
                "Everywhere",
                [*self.app.BINDINGS, Binding("ctrl+p", "command_palette", "Commands")],
            ),
        ]

    def show_help(self) -> None:
        picture = self.app.picture
        hint = picture.attribution_hint
        note = f"attribution: {picture.attribution}: {hint}" if hint else ""
        legend = f"The ! column of Lanes: {LEGEND} (the detail pane says it in words)."
        note = f"{legend}\n{note}" if note else legend
        self.app.push_screen(HelpScreen(self.help_groups(), note))  # type: ignore[arg-type]

    def rescan(self) -> None:
        self.app.engine.rescan()
        self.app.notify("Rescanning every root", timeout=3)

    def open_incident(self, incident: Incident) -> None:
        victim = self.app.picture.namespaces.get(incident.victim or "")
        self.app.push_screen(IncidentScreen(incident, victim, self.app.state, self.app.flows))

    def open_files(self, key: str) -> None:
        self.app.push_screen(FilesScreen(key, self.app.state))

    def open_trash(self) -> None:
        self.app.push_screen(TrashScreen(self.app.state), self.app.flows.confirm_restore)

    def jump_to_lane(self, key: str, came_from: Incident | None = None) -> None:
        """Back to the main screen with `key`'s row selected (in whichever view holds it; a
        filter that hides it is cleared); backspace there reopens `came_from`."""
        app = self.app
        while app.screen is not app.main and len(app.screen_stack) > 1:
            app.pop_screen()
        app.main.select_lane(key, came_from)

    def copy_path(self, path: str) -> None:
        """Send `path` to the clipboard (OSC 52) and, under tmux, where tmux needs it; say
        what was done, never "Copied" (`shell/clipboard_osc52.py`)."""
        app = self.app
        app.copy_to_clipboard(path)
        shown = inert(path)

        def tell() -> None:
            told = clipboard_osc52.after_osc52(shown)
            with contextlib.suppress(RuntimeError):  # the app already stopped
                app.call_from_thread(app.notify, told.message, title=told.title, markup=False)

        app.run_worker(
            tell, thread=True, group="clipboard", description="copy a path", exit_on_error=False
        )
