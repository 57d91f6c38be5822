"""An incident on a timeline: who wrote which path when (content hash, evidence grade), the
victim's stamp, the ledger lines around it. `e` exports Markdown, `E` JSON, into the current
folder; `s` asks where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from lanewatch.inert import inert
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui import fmt
from lanewatch.tui.columns import intruder_label, untrusted
from lanewatch.tui.export import IncidentReport, build_report, default_name
from lanewatch.tui.messages import ReportLoaded
from lanewatch.tui.screens.prompt import PathPrompt
from lanewatch.tui.screens.typeahead import TypeaheadGuard
from lanewatch.tui.widgets.lane_table import Cell, Column, LaneTable, number_key

if TYPE_CHECKING:
    from lanewatch.tui.app import LanewatchApp

EVIDENCE_COLUMNS = (
    Column("time", "TIME"),
    Column("path", "PATH", max_width=60),
    Column("size", "SIZE", justify="right", sort_key=number_key),
    Column("sha256", "SHA256", width=12),
    Column("grade", "GRADE"),
    Column("writer", "WRITER", max_width=30),
    Column("note", "NOTE", max_width=40),
)


def summary(incident: Incident, victim: NamespaceView | None) -> Text:
    text = Text(inert(f"{incident.kind} "), style="bold red")
    text.append(inert(incident.id), style="dim")
    text.append("\nvictim   ")
    text.append(inert(victim.lane or victim.name if victim else (incident.victim or "–")))
    text.append("\nintruder ")
    text.append(intruder_label(dict(incident.intruder)))
    text.append(
        f"\nseen     {fmt.stamp_time(incident.first_seen)} → {fmt.stamp_time(incident.last_seen)}"
        f"  ×{incident.count}  grade {inert(incident.grade)}"
        + ("  (acknowledged)" if incident.acknowledged else "")
    )
    return text


def context_renderable(report: IncidentReport) -> RenderableType:
    parts: list[RenderableType] = [Text("Ledger around the incident", style="bold underline")]
    if not report.ledger:
        parts.append(Text("no ledger lines in the window", style="dim"))
    ledger = Table.grid(padding=(0, 1))
    for line in report.ledger:
        ledger.add_row(
            Text(fmt.stamp_time(line.time), style="dim"),
            Text(inert(line.event), style="bold"),
            Text(inert(f"{line.lane} pid {line.pid}")),
            Text(json.dumps(line.fields, sort_keys=True, default=str), style="dim"),
        )
    parts.append(ledger)
    parts.append(Text("\nVictim's owner stamp (now)", style="bold underline"))
    stamp = report.victim_stamp
    if stamp is None:
        parts.append(Text("victim namespace not known", style="dim"))
    elif stamp.stamp is None:
        parts.append(Text(inert(f"{stamp.status.value}: {stamp.detail}"), style="yellow"))
    else:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in stamp.stamp.to_json().items():
            if isinstance(value, list):
                shown = " ".join(value)
            elif name.endswith("_at") and isinstance(value, int | float):
                shown = fmt.stamp_time(value)
            else:
                shown = str(value)
            grid.add_row(inert(name), Text(inert(shown)))
        parts.append(grid)
    return Group(*parts)


class IncidentScreen(TypeaheadGuard, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("e", "export('md')", "Export .md"),
        Binding("E", "export('json')", "Export .json"),
        Binding("s", "export_as", "Export as…"),
        Binding("a", "acknowledge", "Acknowledge"),
        Binding("r", "reload", "Reload"),
    ]
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(("export", "export_as", "acknowledge"))

    def __init__(self, incident: Incident, victim: NamespaceView | None) -> None:
        super().__init__()
        self.incident = incident
        self.victim = victim
        self.report: IncidentReport | None = None

    @property
    def lw(self) -> LanewatchApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(summary(self.incident, self.victim), id="incident-summary", markup=False)
        yield LaneTable(EVIDENCE_COLUMNS, id="evidence")
        with VerticalScroll(id="incident-context"):
            yield Static(Text("reading…", style="dim"), id="incident-context-body", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#evidence", LaneTable).focus()
        self.action_reload()

    def picture_changed(self) -> None:
        """The app applied a batch: follow this incident (a new count, an acknowledgement)."""
        current = self.lw.picture.incidents.get(self.incident.id)
        if current is not None and current != self.incident:
            self.action_reload()

    def on_screen_resume(self) -> None:
        self.lw.drain()  # a confirmation or a prompt was on top: catch up

    def action_reload(self) -> None:
        current = self.lw.picture.incidents.get(self.incident.id)
        if current is not None:
            self.incident = current
            self.query_one("#incident-summary", Static).update(summary(current, self.victim))
            self.refresh_bindings()
        self._load(self.incident, self.victim)

    @work(
        thread=True,
        exclusive=True,
        group="report",
        description="read the incident's stamp and ledger",
        exit_on_error=False,
    )
    def _load(self, incident: Incident, victim: NamespaceView | None) -> None:
        report = build_report(incident, victim, self.lw.clock())
        self.lw.post_from_thread(self, ReportLoaded(report))

    @on(ReportLoaded)
    def _loaded(self, message: ReportLoaded) -> None:
        self.report = message.report
        rows: dict[str, tuple[Cell, ...]] = {}
        inside = (self.incident.victim or "").rstrip("/") + "/"
        for n, row in enumerate(message.report.evidence):
            path = row.path
            if inside != "/" and path.startswith(inside):
                path = "./" + path[len(inside) :]  # inside the victim's namespace
            rows[f"{n:06d}"] = (
                fmt.stamp_time(row.time),
                untrusted(path),
                fmt.size(row.size) if row.size is not None else fmt.NONE,
                (row.sha256 or fmt.NONE)[:12],
                untrusted(row.grade),
                untrusted(row.writer),
                untrusted(row.note),
            )
        table = self.query_one("#evidence", LaneTable)
        table.apply(rows, [key for key in table.visible_keys if key not in rows])
        body = self.query_one("#incident-context-body", Static)
        body.update(context_renderable(message.report))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("export", "export_as"):
            return True if self.report is not None else None
        if action == "acknowledge":
            return None if self.incident.acknowledged else True
        return True

    def action_export(self, kind: str, target: str | None = None) -> None:
        if self.report is None:
            return
        self.lw.flows.write_export(self.report, kind, Path(target).expanduser() if target else None)

    def action_export_as(self) -> None:
        if self.report is None:
            return
        name = default_name(self.incident, "md")
        here = str(Path.cwd())
        # The input shows its value raw: a folder whose name holds a control is left implicit
        # (a relative name is written into the current folder all the same).
        default = str(Path(here) / name) if inert(here) == here else name

        def chosen(path: str | None) -> None:
            if path:
                kind = "json" if path.endswith(".json") else "md"
                self.action_export(kind, path)

        self.app.push_screen(
            PathPrompt(
                "Export incident",
                "A file (.md or .json) or a folder; enter writes, esc cancels.",
                default,
            ),
            chosen,
        )

    def action_acknowledge(self) -> None:
        self.lw.flows.confirm_acknowledge([self.incident])
