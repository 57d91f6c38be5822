"""The message log (`m`, as lazygit's command log): every notice of this session whole, the
newest at the bottom, with its time and severity. Toasts are one line; the rest is here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from lanewatch.tui.state import humanize
from lanewatch.tui.state.notice_log import Notice

SEVERITY_STYLES = {"information": "green", "warning": "yellow", "error": "bold red"}


def log_renderable(notices: Sequence[Notice]) -> Group:
    if not notices:
        return Group(Text("No messages yet.", style="dim"))
    parts = []
    for notice in notices:
        head = Text(humanize.clock(notice.time), style="dim")
        head.append(f"  {notice.severity:<13}", style=SEVERITY_STYLES.get(notice.severity, ""))
        head.append(notice.title or "", style="bold")
        parts.append(head)
        parts.append(Text(notice.message, style=""))  # inert already (`LanewatchApp.notify`)
        parts.append(Text(""))
    return Group(*parts)


class MessageLog(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,m", "app.pop_screen", "Back"),
    ]

    def __init__(self, notices: Sequence[Notice]) -> None:
        super().__init__()
        self.notices = list(notices)

    def compose(self) -> ComposeResult:
        yield Static(Text("Messages (newest last)", style="bold"), id="log-head", markup=False)
        with VerticalScroll(id="log-body"):
            yield Static(log_renderable(self.notices), id="log-content", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        body = self.query_one("#log-body", VerticalScroll)
        body.focus()
        body.scroll_end(animate=False)
