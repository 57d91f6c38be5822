"""The status line: what the sources are doing (degraded, polling, overflow rescans, a missing
root), and what the view is doing (paused, filtered, following, marks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from lanewatch.inert import inert
from lanewatch.model.views import SourceHealth

HEALTH_STYLES = {
    "polling": "yellow",
    "overflow-rescan": "yellow",
    "degraded": "bold red",
    "missing": "bold red",
}


@dataclass(frozen=True, slots=True)
class StatusState:
    loaded: bool = False
    roots: int = 0
    health: tuple[SourceHealth, ...] = ()
    paused: bool = False
    pending: bool = False
    follow: bool = False
    filter: str = ""
    marks: int = 0
    error: str | None = None
    watchdog: str | None = None
    """Why the picture is not current (`tui/shell/staleness.py`): degraded until it is again."""
    note: str | None = None
    attribution: str | None = None
    default_root: str | None = None
    """Missing before the first `lanewatch run` creates it: not a fault."""
    reaper: str | None = None
    """The service's reaper: what its last pass freed, when the next is (records/reaping.py)."""
    inside_fence: bool = False
    """Run inside a normal user's fenced lane: other lanes' ports and open files are unseen."""


def health_text(health: Sequence[SourceHealth], default_root: str | None = None) -> Text:
    """The sources that are not watching normally (the default root not made yet is normal)."""
    text = Text(end="")
    for item in health:
        if item.status == "ok" or (item.status == "missing" and item.root == default_root):
            continue
        if text:
            text.append(" · ")
        text.append(item.status, style=HEALTH_STYLES.get(item.status, "red"))
        text.append(" ")
        text.append(inert(item.root))
        if item.detail:
            text.append(inert(f" ({item.detail})"), style="dim")
    return text


def status_text(state: StatusState) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    if state.paused:
        waiting = ", changes waiting" if state.pending else ""
        text.append(f" PAUSED{waiting}: p resumes ", style="bold reverse yellow")
        text.append(" ")
    if state.watchdog:
        text.append("degraded: ", style="bold red")
        text.append(state.watchdog)
        text.append("  ")
    if state.error:
        text.append("engine error: ", style="bold red")
        text.append(inert(state.error))
        text.append("  ")
    elif not state.loaded:
        text.append(f"scanning {state.roots} root{'s' if state.roots != 1 else ''}…", style="dim")
        text.append("  ")
    problems = health_text(state.health, state.default_root)
    unrun = any(h.status == "missing" and h.root == state.default_root for h in state.health)
    if unrun:
        text.append("no lane has run yet: ", style="dim")
        text.append(inert(state.default_root or ""), style="dim")
        text.append(" appears with the first", style="dim")
        text.append("  ")
    if problems:
        text.append_text(problems)
        text.append("  ")
    elif state.loaded and not state.error and not unrun:
        text.append(f"watching {state.roots} root{'s' if state.roots != 1 else ''}", style="dim")
        text.append("  ")
    if state.attribution:
        text.append("attribution: ", style="dim")
        text.append(state.attribution, style="dim" if state.attribution == "kernel" else "yellow")
        text.append("  ")
    if state.inside_fence:
        text.append("inside a lane's fence: other lanes' open files unseen", style="yellow")
        text.append("  ")
    if state.filter:
        text.append("filter: ", style="bold")
        text.append(inert(state.filter))
        text.append("  ")
    if state.follow:
        text.append("follow", style="bold cyan")
        text.append("  ")
    if state.marks:
        text.append(f"{state.marks} marked", style="bold")
        text.append("  ")
    if state.reaper:
        text.append(state.reaper, style="dim")
        text.append("  ")
    if state.note:
        text.append(inert(state.note), style="italic")
    return text


class StatusLine(Static):
    """One line above the footer."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._state = StatusState()

    @property
    def state(self) -> StatusState:
        return self._state

    def show(self, state: StatusState) -> None:
        if state != self._state:
            self._state = state
            self.update(status_text(state), layout=False)  # one docked line: its size is fixed
            self.set_class(state.paused, "-paused")
            degraded = bool(health_text(state.health, state.default_root)) or bool(state.error)
            degraded = degraded or bool(state.watchdog)
            self.set_class(degraded, "-degraded")
