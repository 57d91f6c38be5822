"""One confirmation for every action that changes something: it names the target, its owner and
what will happen. `y` confirms; `n` or escape cancels; the cancel button has the focus, so a
stray enter never confirms. Of the keys typed before the dialog was on screen (or within `GUARD`
of it, or of a focus move between its buttons) only `n` and escape act; the dialog says so."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from lanewatch.inert import inert
from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard

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
        self.ignored: str | None = None  # the last key typed ahead (shown in the dialog)
        self.ignored_burst = False  # it came in a burst, once the dialog was on screen

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-body") as body:
            body.border_title = inert(self.title_text)
            listed = Text()
            for target in self.targets[:MAX_LISTED]:
                listed.append("• ")
                listed.append_text(target)
                listed.append("\n")
            if len(self.targets) > MAX_LISTED:
                listed.append(f"… and {len(self.targets) - MAX_LISTED} more\n", style="dim")
            listed.rstrip()
            yield Static(listed, id="confirm-targets", markup=False)
            yield Static(Text(inert(self.what)), id="confirm-what", markup=False)
            note = Static("", id="confirm-note", markup=False)
            note.display = False  # until a key typed ahead was ignored
            yield note
            with Horizontal(id="confirm-buttons"):
                yield Button(Text(f"{self.verb} [y]"), id="confirm-yes", variant="error")
                yield Button(Text("Cancel [n]"), id="confirm-no")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()
        self._show_ignored()

    def guards(self, key: str) -> bool:
        return key not in CANCEL_KEYS

    def typed_ahead(self, key: str, burst: bool = False) -> None:
        self.ignored = key
        self.ignored_burst = burst
        self._show_ignored()

    def _show_ignored(self) -> None:
        if self.ignored is None:
            return
        try:
            note = self.query_one("#confirm-note", Static)
        except NoMatches:
            return  # the key came before the dialog was composed: `on_mount` shows it
        why = (
            "it came in a burst of keys (a paste, or keys sent by a script)"
            if self.ignored_burst
            else "typed before this dialog was on screen"
        )
        note.update(
            Text(f"Ignored {self.ignored}: {why}. ", style="bold")
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
