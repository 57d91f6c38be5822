"""Every message the dashboard's threads and screens send each other, in one place.

Messages posted from other threads carry only immutable data. High-rate ones override
`can_replace`, so a queue of them collapses to the newest. A screen asks the app for what the
app owns (another screen, the clipboard, a rescan, a drain) with a `ScreenRequest`: it bubbles
from the screen to the app, which handles every kind in one place (`shell/navigator.py`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

from textual.message import Message

from lanewatch.model.views import Incident
from lanewatch.tui.backend.actions_adapter import ActionOutcome, TrashItem
from lanewatch.tui.backend.lane_details import Detail
from lanewatch.tui.backend.lane_files import FileContent, NsListing
from lanewatch.tui.backend.report_export import IncidentReport
from lanewatch.tui.state.dashboard_store import View


@dataclass
class ChangesPending(Message):
    """The engine delivered changes; they wait in the bridge's buffer (posted from its thread)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChangesPending)


@dataclass
class EngineFailed(Message):
    """The engine could not start or stopped with an error (posted from a worker thread)."""

    error: str


@dataclass
class DetailLoaded(Message):
    """The slow part of the detail pane (stamp, ledger tail, recent writes) was read."""

    detail: Detail

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DetailLoaded)


@dataclass
class ActionsFinished(Message):
    """Kill, clear, restore or acknowledge ran (in a worker); one outcome per target."""

    verb: str
    outcomes: tuple[ActionOutcome, ...]


@dataclass
class ExportFinished(Message):
    """An incident was written to a file (or could not be)."""

    path: str
    error: str | None = None


@dataclass
class ViewPicked(Message):
    """A click on a view's name in the header."""

    view: View


@dataclass
class ReportLoaded(Message):
    """An incident's timeline report was built (in a worker)."""

    report: IncidentReport


@dataclass
class TrashLoaded(Message):
    """The trash of the watched roots was listed (in a worker)."""

    items: tuple[TrashItem, ...]
    error: str | None = None


@dataclass
class FilesLoaded(Message):
    """A namespace's files were listed (files view, from a thread)."""

    listing: NsListing


@dataclass
class FileLoaded(Message):
    """One file was read (file view, from a thread)."""

    content: FileContent


class Poster(Protocol):
    """What `post_quietly` needs of a Textual `MessagePump` (an app, a screen, a widget)."""

    def post_message(self, message: Message) -> bool: ...


def post_quietly(target: Poster, message: Message) -> None:
    """Post from any thread; a no-op once the app's loop has closed (shutdown)."""
    with contextlib.suppress(RuntimeError):  # "Event loop is closed"
        target.post_message(message)


# -- what a screen asks of the app --------------------------------------------------------------


class ScreenRequest(Message):
    """A screen asks the app for something the app owns; the app handles every kind."""


@dataclass
class CatchUp(ScreenRequest):
    """Apply the changes that waited (a dialog closed, the view was resumed)."""


@dataclass
class ShowHelp(ScreenRequest):
    """The help screen: every key of every screen."""


@dataclass
class Rescan(ScreenRequest):
    """Walk every root again."""


@dataclass
class OpenTrash(ScreenRequest):
    """The trash of every root, to restore from."""


@dataclass
class OpenIncident(ScreenRequest):
    """An incident's timeline."""

    incident: Incident


@dataclass
class OpenFiles(ScreenRequest):
    """A namespace's files (`key`: the namespace)."""

    key: str


@dataclass
class OpenFile(ScreenRequest):
    """One file of the namespace `key`, as the files view shows it."""

    key: str
    rel: str


@dataclass
class CopyPath(ScreenRequest):
    """Put a path on the clipboard and say what was done."""

    path: str


@dataclass
class JumpToLane(ScreenRequest):
    """Back to the main screen with `key`'s row selected; backspace there reopens `came_from`."""

    key: str
    came_from: Incident | None = None
