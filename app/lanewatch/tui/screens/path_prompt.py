"""Ask for a path (where to write an export). An enter typed ahead of the prompt writes nothing."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard


class PathPrompt(TypeaheadGuard, ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(("submit",))  # enter writes

    def __init__(self, title: str, hint: str, value: str) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-body") as body:
            body.border_title = self.title_text
            yield Static(Text(self.hint), markup=False)
            yield Input(value=self.value, id="prompt-input")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
