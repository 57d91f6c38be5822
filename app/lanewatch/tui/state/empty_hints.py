"""What an empty view says, so a new user knows what to do next."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from rich.text import Text

from lanewatch.inert import inert
from lanewatch.model.kinds import KINDS
from lanewatch.tui.state.dashboard_store import View

START_HINT = "lanewatch run --lane NAME -- CMD"


def _a(label: str) -> str:
    return ("an " if label[:1] in "aeiou" else "a ") + label


def collisions_hint() -> str:
    """Every kind of collision the registry knows, in one sentence, wrapped to fit 80 columns."""
    labels = [_a(kind.label) for kind in KINDS.values()]
    listed = ", ".join(labels[:-1]) + " or " + labels[-1] if len(labels) > 1 else labels[0]
    sentence = f"{listed[0].upper()}{listed[1:]} shows up here, with its evidence."
    return "\n".join(textwrap.wrap(sentence, 78)) + "\n"


def empty_text(
    view: View,
    loaded: bool,
    rows: int,
    visible: int,
    filter_text: str,
    roots: Callable[[], list[str]],
) -> Text | None:
    """The message to show instead of the table, or None when the table has something."""
    if not loaded:
        return Text("Scanning the scratch roots…", style="dim")
    if rows and not visible and filter_text:
        text = Text("No row matches the filter ")
        text.append(inert(filter_text), style="bold")
        text.append(" (esc clears it).")
        return text
    if rows:
        return None
    text = Text()
    if view is View.LANES:
        text.append("No lanes are running.\n\n", style="bold")
        text.append("Start one from inside a git checkout:\n\n    ")
        text.append(START_HINT, style="bold cyan")
        text.append("\n\nIt appears here as soon as it claims its namespace.\n")
    elif view is View.COLLISIONS:
        text.append("No collisions.\n\n", style="bold")
        text.append(collisions_hint())
    else:
        text.append("Nothing stale.\n\n", style="bold")
        text.append(
            "Namespaces whose owner died, that have no valid stamp, or whose lane exited\n"
            "show up here; c clears them into the root's trash, t restores.\n"
        )
    paths = roots()
    if paths:
        text.append("\nWatching:\n", style="dim")
        for path in paths[:6]:
            text.append("    ")
            text.append(path, style="dim")
            text.append("\n")
        if len(paths) > 6:
            text.append(f"    … and {len(paths) - 6} more\n", style="dim")
    text.append("\n? lists every key · q quits", style="dim")
    return text
