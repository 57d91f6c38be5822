"""The command palette (ctrl+p): only what fits the current view and selection.

Every entry is an action of the main screen, offered only when its `check_action` says it
applies. Labels are built with `Content` (never markup), because they carry lane names.
The palette orders hits by score alone: ours score above 1 (Textual's own commands, Theme,
Maximize, Screenshot, score at most 1), so the dashboard's commands come first, in the order
`entries` gives them when nothing is typed, best match first when something is.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from textual.command import Hit, Hits, Provider
from textual.content import Content

from lanewatch.inert import inert
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.actions_adapter import target_label
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.state.dashboard_store import VIEW_TITLES, View

AHEAD = 1.0  # added to our scores: Textual's own commands score 0 to 1


def _quote(name: str) -> str:
    return repr(name)


def entries(screen: MainScreen) -> Iterator[tuple[str, str, str]]:
    """(label, action, help) for each command that applies now."""
    row = screen.selection.row()
    targets = screen.selection.targets()
    many = len(targets) > 1

    def ok(action: str) -> bool:
        return screen.check_action(action, ()) is True

    if ok("kill"):
        what = f"{len(targets)} marked lanes" if many else None
        if what is None and isinstance(row, NamespaceView):
            what = f"lane {_quote(target_label(row))} (pid {row.pid})"
        yield (
            f"Kill {what}",
            "kill",
            "A signal (TERM, INT, HUP or KILL) to its group, after a confirmation",
        )
    if ok("clear"):
        what = f"{len(targets)} marked namespaces" if many else None
        if what is None and isinstance(row, NamespaceView):
            what = f"namespace {_quote(target_label(row))}"
        yield f"Clear {what}", "clear", "Move it into the root's trash, after a confirmation"
    if ok("acknowledge"):
        label = f"{len(targets)} incidents" if many else "incident"
        if isinstance(row, Incident) and not many:
            label = f"incident {row.id} ({row.kind})"
        yield f"Acknowledge {label}", "acknowledge", "Mark as seen; it stays on disk"
    if ok("open"):
        incident = screen.selection.incident()
        if incident is not None:
            yield f"Open timeline of {incident.kind} {incident.id}", "open", "Evidence timeline"
            yield "Export incident as Markdown", "export('md')", "Into the state folder's exports/"
            yield "Export incident as JSON", "export('json')", "Into the state folder's exports/"
    yield "Restore from trash…", "ask('trash')", "List cleared namespaces of the watched roots"
    for view in View:
        if view is not screen.view:
            yield f"Show {VIEW_TITLES[view]}", f"view('{view.value}')", "Switch view"
    table = screen.table()
    if table.row_count:
        for column in table.columns:
            if column.key != table.sort_column:
                yield f"Sort by {column.label.lower()}", f"sort('{column.key}')", ""
        yield "Invert sort order", "invert_sort", ""
    yield ("Resume updates" if screen.paused else "Pause updates"), "pause", ""
    yield ("Stop following" if screen.follow else "Follow newest activity"), "follow", ""
    if table.filter_text:
        yield "Clear the filter", "escape", ""
    else:
        yield "Filter rows…", "filter", ""
    if ok("unmark"):
        yield "Unmark all rows", "unmark", ""
    yield "Toggle the detail pane", "detail('toggle')", ""
    yield "Hide or show columns…", "columns", "Pick the columns of this view"
    yield "Rescan every root", "ask('rescan')", "Ask the engine for a full rescan"
    yield "Help: every key", "ask('help')", ""


class LanewatchCommands(Provider):
    """Commands that fit the main screen's current view and selection."""

    def _entries(self) -> list[tuple[str, str, str]]:
        main = self.screen if isinstance(self.screen, MainScreen) else None
        if main is None:
            main = next(
                (s for s in reversed(self.app.screen_stack) if isinstance(s, MainScreen)), None
            )
        if main is None:
            return []
        return [(inert(label), action, help) for label, action, help in entries(main)]

    def _runner(self, action: str):  # type: ignore[no-untyped-def]
        screen = next(s for s in reversed(self.app.screen_stack) if isinstance(s, MainScreen))
        return partial(screen.run_action, action)

    async def discover(self) -> Hits:
        for n, (label, action, help) in enumerate(self._entries()):
            yield Hit(
                AHEAD + 1 - n / 1000, Content(label), self._runner(action), label, help or None
            )

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for label, action, help in self._entries():
            score = matcher.match(label)
            if score > 0:
                yield Hit(AHEAD + score, Content(label), self._runner(action), label, help or None)
