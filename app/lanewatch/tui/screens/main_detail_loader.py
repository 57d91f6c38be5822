"""The main screen's detail pane, kept current: the selected row drawn at once (or within
`DETAIL_REDRAW` of the last drawing while it keeps changing), and what the engine's view does
not hold (the stamp as written, the ledger tail, the recent writes) read off the UI thread, at
most every `DETAIL_REFRESH` (`FAR_DETAIL_REFRESH` for another host's lane: one ssh call)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from textual.message import Message
from textual.widget import Widget

from lanewatch.hosts import elsewhere
from lanewatch.hosts import farfiles as far_files
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.lane_details import Detail, far_detail, load_detail
from lanewatch.tui.plumbing.call_after import call_after
from lanewatch.tui.plumbing.messages import DetailLoaded, post_quietly
from lanewatch.tui.plumbing.thread_work import WorkerHost, in_thread
from lanewatch.tui.widgets.detail_pane import DetailPane, incident_renderable, namespace_renderable

if TYPE_CHECKING:
    from lanewatch.tui.screens.main_selection import Selection
    from lanewatch.tui.state.dashboard_state import DashboardState

W = TypeVar("W", bound=Widget)

DETAIL_REFRESH = 2.0  # at most one re-read of the selected row's ledger and files this often
FAR_DETAIL_REFRESH = 10.0  # the same for another host's lane: one ssh round trip each
FAR_RECENT = 32  # entries a far host lists for the pane (its RECENT_WRITES newest files)
DETAIL_REDRAW = 0.5  # while the selected row keeps changing, its pane redraws at most this often


class DetailScreen(WorkerHost, Protocol):
    """What the loader uses of the screen that owns it (`MainScreen`)."""

    selection: Selection

    def live(self) -> bool: ...

    def query_one(self, selector: type[W]) -> W: ...

    def call_next(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None: ...

    def post_message(self, message: Message) -> bool: ...


class DetailLoader:
    """Owned by the main screen (composition): the screen hands it the `DetailLoaded` its
    worker posts back."""

    def __init__(self, screen: DetailScreen, state: DashboardState) -> None:
        self.screen = screen
        self.state = state
        self.detail: Detail | None = None  # the slow part, for the row `_key`
        self._key: str | None = None
        self._read_at = 0.0
        self._read_timer: asyncio.TimerHandle | None = None
        self._content: NamespaceView | None = None  # the row as of the last re-read
        self._drawn_at = float("-inf")
        self._redraw_timer: asyncio.TimerHandle | None = None

    def changed(self) -> None:
        """The selected row changed: redraw its pane now, or within DETAIL_REDRAW of the last
        drawing. A lane under a write load changes on every drain; drawing its pane (a Rich
        grid) each time cost more than the rest of the frame, and nobody reads it that fast."""
        wait = self._drawn_at + DETAIL_REDRAW - self.state.monotonic()
        if wait <= 0:
            self.show(reload=True)
        elif self._redraw_timer is None:
            self._redraw_timer = call_after(self.screen, wait, self._timed_redraw)

    def _timed_redraw(self) -> None:
        self._redraw_timer = None
        if self.screen.live():
            self.show(reload=True)

    def show(self, reload: bool = False) -> None:
        """Draw the pane for the selected row; with `reload`, also re-read its files and
        ledger (at once for a newly selected row, else at most every DETAIL_REFRESH)."""
        screen = self.screen
        if not screen.live():
            return
        self._drawn_at = self.state.monotonic()
        pane = screen.query_one(DetailPane)
        row = screen.selection.row()
        pane.set_class(row is None, "-nothing")
        if row is None:
            pane.show("", key="nothing")
            return
        picture = self.state.picture
        if isinstance(row, Incident):
            pane.show(incident_renderable(row, picture.victim_label), key=row)
            return
        if self._key != row.key:
            self.detail, self._key, self._read_at = None, row.key, 0.0
            self._content = None
            reload = True
        incidents = picture.incidents_of(row.key)
        # A heartbeat or a new sparkline sample changes nothing the pane shows: no redraw, and
        # no re-read of the namespace's files and ledger.
        content = replace(row, heartbeat_at=None, write_rate=())
        key = (content, self.detail, tuple(incidents))
        pane.show(namespace_renderable(row, self.detail, incidents), key=key)
        if reload and content != self._content:
            self._content = content
            self._schedule_read(row.key)

    def _schedule_read(self, key: str) -> None:
        every = FAR_DETAIL_REFRESH if self.state.adapter.host_of(key) else DETAIL_REFRESH
        wait = self._read_at + every - self.state.monotonic()
        if wait <= 0:
            self._read_at = self.state.monotonic()
            # Read here, on the UI thread: the worker gets copies.
            incidents = self.state.picture.incidents_of(key)
            view = self.state.picture.namespaces.get(key)
            read = partial(self._read, key, self.state.roots(), incidents, view)
            in_thread(self.screen, read, "detail", "read the selected namespace")
        elif self._read_timer is None:
            self._read_timer = call_after(self.screen, wait, self._timed_read)

    def _timed_read(self) -> None:
        self._read_timer = None
        if self._key is not None and self.screen.live():
            self._schedule_read(self._key)

    def _read(
        self, key: str, roots: list[str], incidents: list[Incident], view: NamespaceView | None
    ) -> None:
        """In a worker thread: the slow part of the pane, posted back to the screen."""
        far = self.state.adapter.host_of(key)
        if far is not None:  # its files are listed there, by its lanewatch (one ssh call)
            listed = far_files.listing(*far, key, limit=FAR_RECENT, no_meta=True)
            detail = far_detail(key, elsewhere.ledger(far[0]), listed)
        else:
            detail = load_detail(Path(key), roots=roots, incidents=incidents, view=view)
        post_quietly(self.screen, DetailLoaded(detail))

    def loaded(self, detail: Detail) -> None:
        if detail.key == self._key:
            self.detail = detail
            self.show()
