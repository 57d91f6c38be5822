"""A namespace's files (k9s habits: `l` opens it from a lane, `v` or enter views a file) and one
file's content. Reading is `tui/backend/lane_files.py`'s, in a thread: no symlink followed, no FIFO
opened, at most 64 KiB shown; every name and byte shown is inert text, never markup."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from lanewatch.hosts import elsewhere
from lanewatch.hosts import farfiles as far_files
from lanewatch.inert import inert, inert_lines
from lanewatch.tui.backend.lane_files import NsFile, list_files, read_file
from lanewatch.tui.plumbing.messages import CopyPath, FileLoaded, FilesLoaded, post_quietly
from lanewatch.tui.plumbing.thread_work import thread_work
from lanewatch.tui.state import humanize
from lanewatch.tui.widgets.lane_table import Cell, Column, LaneTable, duration_key, number_key
from lanewatch.tui.widgets.view_columns import untrusted

if TYPE_CHECKING:
    from lanewatch.tui.state.dashboard_state import DashboardState

FILE_COLUMNS = (
    Column("name", "NAME", max_width=48),
    Column("size", "SIZE", justify="right", sort_key=number_key),
    Column("writer", "LAST WRITER", max_width=24),
    Column("age", "AGE", justify="right", sort_key=duration_key),
    Column("kind", "TYPE"),
)


def _name(f: NsFile) -> Text:
    text = untrusted(f.rel)
    if f.target is not None:
        text.append(" -> " + inert(f.target), style="dim")
    return text


class FilesScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("v", "view_file", "View file"),
        Binding("y", "copy_path", "Copy path"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, key: str, state: DashboardState) -> None:
        super().__init__()
        self.key = key
        self.state = state
        self.roots = state.roots()  # as they were when it opened
        self.files: dict[str, NsFile] = {}

    def compose(self) -> ComposeResult:
        head = Text("Files of ", style="bold")
        head.append(inert(self.key))
        yield Static(head, id="files-head", markup=False)
        yield LaneTable(FILE_COLUMNS, id="files-table")
        yield Static(Text("reading…", style="dim"), id="files-note", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(LaneTable)
        table.sort_by("age")
        table.focus()
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @thread_work("files", "list files")
    def _load(self) -> None:
        far = self.state.adapter.host_of(self.key)
        if far is not None:  # on that host's disk: its lanewatch lists them (never this disk)
            post_quietly(self, FilesLoaded(far_files.listing(*far, self.key)))
            return
        post_quietly(self, FilesLoaded(list_files(Path(self.key), self.roots)))

    @on(FilesLoaded)
    def _loaded(self, message: FilesLoaded) -> None:
        now = self.state.clock()
        listing = message.listing
        self.files = {f.rel: f for f in listing.files}
        rows: dict[str, tuple[Cell, ...]] = {
            f.rel: (
                _name(f),
                humanize.size(f.size),
                untrusted(f.writer or humanize.NONE),
                humanize.ago(f.mtime, now),
                f.kind,
            )
            for f in listing.files
        }
        table = self.query_one(LaneTable)
        table.apply(rows, [k for k in table.row_keys if k not in rows])
        note = self.query_one("#files-note", Static)
        if listing.elsewhere:
            note.update(Text(inert(listing.elsewhere), style="yellow"))
        elif listing.error:
            note.update(Text(inert(listing.error), style="red"))
        else:
            more = " (stopped there: more not listed)" if listing.truncated else ""
            where = "the write history"
            if listing.host is not None:
                more += f" on host {inert(listing.host)}, listed by its lanewatch"
                where = "its write history"
            note.update(Text(f"{len(rows)} file(s){more} · last writer from {where}", "dim"))

    @on(LaneTable.RowSelected)
    def _selected(self, event: LaneTable.RowSelected) -> None:
        self.action_view_file()

    def action_view_file(self) -> None:
        key = self.query_one(LaneTable).cursor_key
        if key is None:
            return
        f = self.files.get(str(key))
        if f is not None and f.kind != "file":
            self.notify(
                inert(f"{f.rel} is a {f.kind}: only regular files are shown"),
                markup=False,
                timeout=4,
            )
            return
        far = self.state.adapter.host_of(self.key)
        if far is not None:  # listed there; its bytes are not fetched (never this disk's)
            note = elsewhere.content(far[0], f"{far[1]}/{key}")
            self.notify(inert(note), markup=False, timeout=8)
            return
        self.app.push_screen(FileScreen(self.key, str(key)))

    def action_copy_path(self) -> None:
        self.post_message(CopyPath(self.key))


class FileScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("y", "copy_path", "Copy path"),
    ]

    def __init__(self, namespace: str, rel: str) -> None:
        super().__init__()
        self.namespace = namespace
        self.rel = rel

    def compose(self) -> ComposeResult:
        yield Static(Text(inert(self.rel), style="bold"), id="file-head", markup=False)
        with VerticalScroll(id="file-body"):
            yield Static(Text("reading…", style="dim"), id="file-content", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#file-body").focus()
        self._load()

    @thread_work("file", "read a file")
    def _load(self) -> None:
        post_quietly(self, FileLoaded(read_file(Path(self.namespace), self.rel)))

    @on(FileLoaded)
    def _loaded(self, message: FileLoaded) -> None:
        c = message.content
        head = Text(inert(self.rel), style="bold")
        if c.size is not None:
            head.append(f"  {c.size} bytes", style="dim")
        if c.sha256:
            head.append(f"  sha256 {c.sha256}", style="dim")
        self.query_one("#file-head", Static).update(head)
        body = self.query_one("#file-content", Static)
        if c.text is None:
            body.update(Text(f"Not shown: {inert(c.why)}.", style="yellow"))
        elif not c.text:
            body.update(Text("(empty)", style="dim"))
        else:
            body.update(Text(inert_lines(c.text)))

    def action_copy_path(self) -> None:
        self.post_message(CopyPath(str(Path(self.namespace) / self.rel)))
