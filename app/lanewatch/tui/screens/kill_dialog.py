"""The kill confirmation with a signal menu (htop's F9, k9s' kill): TERM by default, INT, HUP or
KILL a key away (1-4, or s for the next). The dialog says what the chosen signal does and who
gets it; whichever is chosen, the owner's identity is re-checked at the moment of the signal
(`actions/kill.py`). A digit typed ahead of the dialog changes nothing (`TypeaheadGuard`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from lanewatch.actions.kill import SIGNALS
from lanewatch.inert import inert
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen

MENU = tuple(SIGNALS)  # "TERM", "INT", "HUP", "KILL"
WHAT = {
    "TERM": "asks it to end (its clean-up runs)",
    "INT": "as ctrl+c in its terminal",
    "HUP": "hang-up: many programs end, some reload",
    "KILL": "cannot be caught: it ends with no clean-up",
}


class KillConfirm(ConfirmScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(str(n), f"signal('{name}')", f"SIG{name}", show=False)
            for n, name in enumerate(MENU, 1)
        ),
        Binding("s", "next_signal", "Next signal", show=False),
    ]

    def __init__(
        self,
        title: str,
        targets: Sequence[Text],
        describe: Callable[[str], str],
    ) -> None:
        self.describe = describe
        self.signal_name = MENU[0]
        super().__init__(title, targets, describe(self.signal_name), "Kill")

    @property
    def signal(self) -> int:
        return int(SIGNALS[self.signal_name])

    def on_mount(self) -> None:
        super().on_mount()
        menu = Static(self._menu(), id="confirm-signal", markup=False)
        self.query_one("#confirm-body").mount(menu, before="#confirm-what")

    def _menu(self) -> Text:
        line = Text("Signal: ", style="bold")
        for n, name in enumerate(MENU, 1):
            chosen = name == self.signal_name
            # Reverse and brackets, not only a colour: it reads with NO_COLOR too.
            line.append(
                f"[{n} {name}]" if chosen else f" {n} {name} ", "bold reverse" if chosen else ""
            )
            line.append(" ")
        line.append(f" s: next · SIG{self.signal_name} {WHAT[self.signal_name]}", style="dim")
        return line

    def action_signal(self, name: str) -> None:
        if name not in SIGNALS or name == self.signal_name:
            return
        self.signal_name = name
        self.what = self.describe(name)
        self.query_one("#confirm-signal", Static).update(self._menu())
        self.query_one("#confirm-what", Static).update(Text(inert(self.what)))

    def action_next_signal(self) -> None:
        self.action_signal(MENU[(MENU.index(self.signal_name) + 1) % len(MENU)])
