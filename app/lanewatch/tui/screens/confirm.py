"""One confirmation for every action that changes something: it names the target, its owner and
what will happen. `y` confirms; `n` or escape cancels; the cancel button has the focus, so a
stray enter never confirms. Keys typed before the dialog was on screen (or within `GUARD` of it,
or of a focus move between its buttons) do nothing but cancel: the dialog says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from lanewatch.tui.screens.typeahead import TypeaheadGuard

MAX_LISTED = 8
CANCEL_KEYS = ("n", "escape")  # safe to take at once, whenever they were typed


class ConfirmScreen(TypeaheadGuard, ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
        Binding("left,right,tab", "app.focus_next", "Next button", show=False),
    ]

    def __init__(self, title: str, targets: Sequence[Text], what: str, verb: str) -> None:
        super().__init__()
        self.title_text = title
        self.targets = list(targets)
        self.what = what
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body") as body:
            body.border_title = self.title_text
            listed = Text()
            for target in self.targets[:MAX_LISTED]:
                listed.append("• ")
                listed.append_text(target)
                listed.append("\n")
            if len(self.targets) > MAX_LISTED:
                listed.append(f"… and {len(self.targets) - MAX_LISTED} more\n", style="dim")
            listed.rstrip()
            yield Static(listed, id="confirm-targets", markup=False)
            yield Static(Text(self.what), id="confirm-what", markup=False)
            note = Static("", id="confirm-note", markup=False)
            note.display = False  # until a key typed ahead was ignored
            yield note
            with Horizontal(id="confirm-buttons"):
                yield Button(Text(f"{self.verb} [y]"), id="confirm-yes", variant="error")
                yield Button(Text("Cancel [n]"), id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def guards(self, key: str) -> bool:
        return key not in CANCEL_KEYS

    def typed_ahead(self, key: str) -> None:
        note = self.query_one("#confirm-note", Static)
        note.update(
            Text(f"Ignored {key}: typed before this dialog was on screen. ", style="bold")
            + Text(f"Press y to {self.verb.lower()}, n to cancel.")
        )
        note.display = True

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed, "#confirm-yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def _no(self) -> None:
        self.dismiss(False)
