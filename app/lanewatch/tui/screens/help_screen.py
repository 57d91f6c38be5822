"""The help screen: every key of the dashboard, read from the live bindings so it cannot drift."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from lanewatch.model.kinds import KINDS
from lanewatch.model.states import STATES
from lanewatch.tui.widgets.view_columns import SEVERITY_STYLES

INTRO = (
    "lanewatch shows every lane's scratch namespace on every known root, live.\n"
    "Start a lane with:  lanewatch run --lane NAME -- CMD"
)
LEGEND = (
    "States: "
    + " · ".join(f"{s.state.value} ({s.meaning})" for s in STATES.values())
    + ". A trailing ? means the state was inferred (from timing or open files), not known "
    "from the kernel. Rows read by severity: high is bold (hung, the victim of a takeover), "
    "medium is coloured (stale, orphan, unknown), low is dim (released); ! marks the victim "
    "of an open collision."
)


def kinds_legend() -> Table:
    """Every kind of collision, from the registry: its name, severity and what it means."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column()
    table.add_row("", "")
    table.add_row(Text("Collisions", style="bold underline"), "")
    for kind in KINDS.values():
        table.add_row(
            Text(kind.name, style=SEVERITY_STYLES[kind.severity]),
            Text(f"{kind.severity.value}: {kind.explanation}"),
        )
    return table


def key_display(keys: str) -> str:
    names = []
    for key in keys.split(","):
        key = key.strip()
        names.append(
            {
                "question_mark": "?",
                "slash": "/",
                "less_than_sign": "<",
                "greater_than_sign": ">",
                "space": "space",
                "escape": "esc",
                "left_square_bracket": "[",
                "right_square_bracket": "]",
            }.get(key, key)
        )
    return " ".join(names)


def key_rows(bindings: Iterable[Binding]) -> list[tuple[str, str]]:
    """One row per key: the keys of two bindings that toggle (`f` Follow and `f` Unfollow)
    share a row, "Follow / Unfollow"; a description said twice is said once."""
    rows: dict[str, list[str]] = {}
    for binding in bindings:
        if not binding.description:
            continue
        said = rows.setdefault(binding.key, [])
        if binding.description not in said:
            said.append(binding.description)
    seen: set[str] = set()
    out = []
    for keys, descriptions in rows.items():
        text = " / ".join(descriptions)
        if text not in seen:
            seen.add(text)
            out.append((key_display(keys), text))
    return out


def help_rows(groups: Sequence[tuple[str, Iterable[Binding]]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, bindings in groups:
        table.add_row(Text(title, style="bold underline"), "")
        for keys, text in key_rows(bindings):
            table.add_row(keys, Text(text))
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close help"),
    ]

    def __init__(self, groups: Sequence[tuple[str, Sequence[Binding]]], note: str = "") -> None:
        super().__init__()
        self.groups = groups
        self.note = note

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body") as body:
            body.border_title = "Keys"
            body.border_subtitle = "esc closes"
            yield Static(Text(INTRO), markup=False)
            if self.note:
                yield Static(Text(self.note, style="italic"), markup=False)
            yield Static(help_rows(self.groups), markup=False)
            yield Static(Text(LEGEND, style="dim"), markup=False)
            yield Static(kinds_legend(), markup=False, id="help-kinds")
