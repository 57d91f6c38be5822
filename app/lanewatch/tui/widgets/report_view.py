""" "What each writer wrote", as the incident timeline shows it: per recorded write, who wrote
it (lane, pid, command) and what (the first text version whole, then a diff from the one
before), from an `IncidentReport` (`records/report.py`). Plain Rich `Text`, never markup: every
string in it came from disk and was made inert when the report was built."""

from __future__ import annotations

from rich.text import Text

from lanewatch.inert import inert
from lanewatch.records.report import IncidentReport, label, says
from lanewatch.tui.state import humanize

DIFF_STYLES = {"+": "green", "-": "red", "@": "cyan"}


def writes_renderable(report: IncidentReport, hint: str = "") -> Text:
    text = Text("What each writer wrote", style="bold underline", end="\n")
    if not report.files:
        text.append("\nNo write of these paths was recorded.\n", style="dim")
        if hint:
            text.append(f"Attribution: {inert(hint)}\n", style="dim")
        return text
    for story in report.files:
        text.append("\n")
        text.append(inert(story.path), style="bold")
        text.append("\n")
        for n, shown in enumerate(story.shown, 1):
            text.append(f" {n}. ", style="dim")
            text.append(label(shown.version, humanize.stamp_time, 16))
            text.append("\n")
        for shown in story.shown:
            text.append("\n")
            style = "bold yellow" if shown.kind in ("binary", "not-kept", "not-hashed") else "bold"
            text.append(says(shown), style=style)
            text.append("\n")
            for line in shown.lines:
                first = line[:1] if shown.kind == "diff" else ""
                text.append("  " + line, style=DIFF_STYLES.get(first, ""))
                text.append("\n")
            if shown.more:
                text.append(f"  … {shown.more} more lines (export for the whole)\n", style="dim")
    return text
