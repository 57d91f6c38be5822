"""Every message the dashboard's threads and screens send each other, in one place.

Messages posted from other threads carry only immutable data. High-rate ones override
`can_replace`, so a queue of them collapses to the newest.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

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
