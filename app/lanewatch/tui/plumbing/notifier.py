"""What tells the user something: Textual's `App.notify` (and the screen's, which hands on to
the app's; `LanewatchApp.notify` makes every notice inert). The one declaration of it for the
parts that are handed their owner as a Protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel


class Notifier(Protocol):
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
