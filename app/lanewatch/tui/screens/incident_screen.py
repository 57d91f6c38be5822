"""An incident on a timeline: who wrote which path when (writer, note, content hash, grade),
then what each writer wrote (contents and diffs, `widgets/report_view.py`), the ledger lines
around it and the victim's stamp. `v` / `i` jump to the victim's / intruder's lane in the main
screen (backspace there comes back). `e` exports Markdown, `E` JSON, into the state folder's
`exports/`; `s` asks where; each asks first, naming the file. The report is
`records/report.py`'s: the same bytes as `lanewatch incidents ID --markdown`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from lanewatch.hosts import elsewhere
from lanewatch.inert import inert
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.records.report import who
from lanewatch.tui.backend.actions_adapter import can_kill, why_not_kill
from lanewatch.tui.backend.report_export import (
    IncidentReport,
    build_report,
    default_folder,
    default_name,
    far_report,
)
from lanewatch.tui.plumbing.messages import (
    CatchUp,
    JumpToLane,
    OpenFile,
    OpenFiles,
    ReportLoaded,
    post_quietly,
)
from lanewatch.tui.plumbing.thread_work import thread_work
from lanewatch.tui.screens.path_prompt import PathPrompt
from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard
from lanewatch.tui.state import humanize
from lanewatch.tui.state.culprit import incident_lane, intruder_lane, writer_rows
from lanewatch.tui.state.incident_status import state_line
from lanewatch.tui.widgets.lane_table import Cell, Column, LaneTable, number_key
from lanewatch.tui.widgets.report_view import writes_renderable
from lanewatch.tui.widgets.view_columns import untrusted

if TYPE_CHECKING:
    from lanewatch.tui.shell.action_flows import ActionFlows
    from lanewatch.tui.state.dashboard_state import DashboardState

# WRITER and NOTE come first, narrow enough that both fit in 80 columns (the point of the
# timeline); the date is in the summary above, the full sha256 in "What each writer wrote".
EVIDENCE_COLUMNS = (
    Column("time", "TIME", width=8),
    Column("writer", "WRITER", max_width=22, grow=1),
    Column("note", "NOTE", max_width=28, grow=2),
    Column("path", "PATH", max_width=40),
    Column("size", "SIZE", justify="right", sort_key=number_key),
    Column("grade", "GRADE"),
    Column("sha256", "SHA256", width=12),
)


SUMMARY_COMMAND = 60  # characters of a command in the summary (the export has it whole)


def summary(incident: Incident, victim: NamespaceView | None) -> Text:
    text = Text(inert(f"{incident.kind} "), style="bold red")
    text.append(inert(incident.id), style="dim")
    text.append("\nvictim   ")
    text.append(inert(victim.lane or victim.name if victim else (incident.victim or "–")))
    intruder = dict(incident.intruder)
    before = intruder.pop("previous_owner", None)
    text.append("\nintruder ")
    text.append(who(intruder, SUMMARY_COMMAND))
    if isinstance(before, dict):
        text.append("\nbefore   ")
        text.append(who(before, SUMMARY_COMMAND))
    for label, line, gone in writer_rows(incident, SUMMARY_COMMAND):  # gone since, too
        style = "dim" if gone else "bold"
        text.append(f"\n{label.ljust(9)}", style=style)
        text.append(line, style=style)
    text.append(
        f"\nseen     {humanize.stamp_time(incident.first_seen)}"
        f" → {humanize.stamp_time(incident.last_seen)}"
        f"  ×{incident.count}  grade {inert(incident.grade)}"
    )
    state = state_line(incident)
    if state:  # open and never acknowledged: nothing to say
        text.append(f"\nstate    {state}", style="bold")
    return text


def context_renderable(report: IncidentReport, hint: str = "") -> RenderableType:
    """What each writer wrote (when the evidence names a file), then the victim's ledger and
    stamp (when the incident has a victim): a shared port has neither."""
    parts: list[RenderableType] = [writes_renderable(report, hint)] if report.about_files else []
    if not report.has_victim:
        if not parts:
            return Text(
                "No file was written and no lane was its victim: the evidence above is all.",
                style="dim",
            )
        return Group(*parts)
    parts.append(Text("\nLedger around the incident", style="bold underline"))
    if not report.ledger:
        parts.append(Text("no ledger lines in the window", style="dim"))
    ledger = Table.grid(padding=(0, 1))
    for line in report.ledger:
        ledger.add_row(
            Text(humanize.stamp_time(line.time), style="dim"),
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
            if isinstance(value, list):  # argv (strings); stdio ([device, inode] pairs)
                shown = " ".join(v if isinstance(v, str) else json.dumps(v) for v in value)
            elif name == "heartbeat_at" and stamp.heartbeat_at is not None:
                # The heartbeat touches the file; its field keeps the time it was written.
                shown = f"{humanize.stamp_time(stamp.heartbeat_at)} (last heartbeat)"
            elif name.endswith("_at") and isinstance(value, int | float):
                shown = humanize.stamp_time(value)
            else:
                shown = str(value)
            grid.add_row(inert(name), Text(inert(shown)))
        parts.append(grid)
    return Group(*parts)


class IncidentScreen(TypeaheadGuard, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        # What a user came for first (at 80 columns the footer ends after four or five keys).
        Binding("k,f9", "kill_intruder", "Kill intruder"),
        Binding("a", "acknowledge", "Acknowledge"),
        Binding("l", "victim_files", "Victim's files"),
        Binding("c", "written_file", "Written file", show=False),
        Binding("v", "jump('victim')", "Victim's lane"),
        Binding("i", "jump('intruder')", "Intruder's lane"),
        Binding("e", "export('md')", "Export .md"),
        Binding("E", "export('json')", "Export .json"),
        Binding("s", "export_as", "Export as…"),
        Binding("r", "reload", "Reload"),
        Binding("left_square_bracket", "context_scroll(-1)", "Scroll writes up", show=False),
        Binding("right_square_bracket", "context_scroll(1)", "Scroll writes down", show=False),
    ]
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        ("export", "export_as", "acknowledge", "kill_intruder")
    )

    def __init__(
        self,
        incident: Incident,
        victim: NamespaceView | None,
        state: DashboardState,
        flows: ActionFlows,
    ) -> None:
        super().__init__()
        self.state = state
        self.flows = flows  # the app's confirm-then-act flows, handed in
        self.incident = incident
        self.victim = victim
        self.report: IncidentReport | None = None
        self.elsewhere: str | None = None  # another host's incident: how to see the rest there

    def compose(self) -> ComposeResult:
        yield Static(summary(self.incident, self.victim), id="incident-summary", markup=False)
        yield LaneTable(EVIDENCE_COLUMNS, id="evidence")
        with VerticalScroll(id="incident-context"):
            yield Static(Text("reading…", style="dim"), id="incident-context-body", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        far = self.state.adapter.host_of(self.incident.id)
        self.elsewhere = elsewhere.report(*far) if far is not None else None
        self.query_one("#evidence", LaneTable).focus()
        self.action_reload()

    def picture_changed(self) -> None:
        """The app applied a batch: follow this incident (a new count, an acknowledgement)."""
        current = self.state.picture.incidents.get(self.incident.id)
        # Not before it is composed (a drain can come between its push and its mount).
        if current is not None and current != self.incident and self.is_mounted:
            self.action_reload()

    def on_screen_resume(self) -> None:
        self.post_message(CatchUp())  # a confirmation or a prompt was on top: catch up

    def action_reload(self) -> None:
        current = self.state.picture.incidents.get(self.incident.id)
        if current is not None:
            self.incident = current
            self.query_one("#incident-summary", Static).update(summary(current, self.victim))
            self.refresh_bindings()
        self._load(self.incident, self.victim)

    @thread_work("report", "read the incident's stamp and ledger")
    def _load(self, incident: Incident, victim: NamespaceView | None) -> None:
        if self.elsewhere is not None:  # another host's: its facts are on its disk
            report = far_report(incident)
        else:
            report = build_report(self.state.roots(), incident)
        post_quietly(self, ReportLoaded(report))

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
                humanize.clock(row.time),
                untrusted(row.writer),
                untrusted(row.note),
                untrusted(path),
                humanize.size(row.size) if row.size is not None else humanize.NONE,
                untrusted(row.grade),
                (row.sha256 or humanize.NONE)[:12],
            )
        table = self.query_one("#evidence", LaneTable)
        table.apply(rows, [key for key in table.visible_keys if key not in rows])
        body = self.query_one("#incident-context-body", Static)
        if self.elsewhere is not None:
            body.update(Text(inert(self.elsewhere), style="yellow"))
        else:
            body.update(context_renderable(message.report, self.state.picture.attribution_hint))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("export", "export_as"):
            return True if self.report is not None else None
        if action == "acknowledge":
            return None if self.incident.acknowledged else True
        if action == "jump":
            if parameters and parameters[0] == "victim" and self.incident.victim is None:
                return False  # a shared file: no lane is the victim, nothing to jump to
            lanes = self.state.picture.namespaces
            return True if incident_lane(lanes, self.incident, str(parameters[0])) else None
        if action == "kill_intruder":
            if self.incident.victim is None:
                return False  # a shared file: no one intruded; the writers are in Lanes
            ns = intruder_lane(self.state.picture.namespaces, self.incident)
            return True if ns is not None and can_kill(ns) else None
        if action == "victim_files":
            if self.incident.victim is None:
                return False
            return True if self.elsewhere is None else None
        if action == "written_file":
            return True if self._written_file() is not None else None
        return True

    def action_kill_intruder(self) -> None:
        """The kill dialog on the intruding lane (as `k` on its row in Lanes), saying why."""
        ns = intruder_lane(self.state.picture.namespaces, self.incident)
        if ns is None or not can_kill(ns):
            why = why_not_kill(ns) if ns is not None else "its lane is not watched here"
            self.notify(f"The intruder cannot be killed from here: {why}.", markup=False)
            return
        self.flows.confirm_kill_intruder(ns, self.incident)

    def action_victim_files(self) -> None:
        """The victim's namespace, file by file (as `l` on its row)."""
        if self.incident.victim is not None and self.elsewhere is None:
            self.post_message(OpenFiles(self.incident.victim))

    def _written_file(self) -> str | None:
        """The evidence row under the cursor, as a path inside the victim's namespace."""
        table = self.query_one("#evidence", LaneTable)
        key = table.cursor_key
        if key is None or self.report is None or self.incident.victim is None:
            return None
        if self.elsewhere is not None:
            return None
        inside = self.incident.victim.rstrip("/") + "/"
        path = self.report.evidence[int(str(key))].path
        return path[len(inside) :] if path.startswith(inside) else None

    def action_written_file(self) -> None:
        """The file the evidence row under the cursor is about, as the victim has it now."""
        rel = self._written_file()
        if rel is not None and self.incident.victim is not None:
            self.post_message(OpenFile(self.incident.victim, rel))

    def action_jump(self, whose: str) -> None:
        """Select the victim's or the intruder's lane in the main screen (backspace there
        comes back here)."""
        key = incident_lane(self.state.picture.namespaces, self.incident, whose)
        if key is None:
            self.notify(f"The {whose}'s lane is not watched here.", markup=False, timeout=4)
            return
        self.post_message(JumpToLane(key, self.incident))
        self.notify("backspace: back to the incident", timeout=4)

    def action_context_scroll(self, direction: int) -> None:
        pane = self.query_one("#incident-context", VerticalScroll)
        if direction < 0:
            pane.scroll_page_up(animate=False)
        else:
            pane.scroll_page_down(animate=False)

    def action_export(self, kind: str, target: str | None = None) -> None:
        if self.report is None:
            return
        where = Path(target).expanduser() if target else None
        self.flows.confirm_export(self.incident, kind, where, report=self.report)

    def action_export_as(self) -> None:
        if self.report is None:
            return
        name = default_name(self.incident, "md")
        here = str(default_folder())
        # The input shows its value raw: a folder whose name holds a control is left implicit
        # (a relative name is written into that folder all the same).
        default = str(Path(here) / name) if inert(here) == here else name

        def chosen(path: str | None) -> None:
            if path:
                kind = "json" if path.endswith(".json") else "md"
                # A relative name goes into the exports folder, never the current one.
                self.action_export(kind, str(default_folder() / Path(path).expanduser()))

        self.app.push_screen(
            PathPrompt(
                "Export incident",
                "A file (.md or .json) or a folder; enter writes, esc cancels.",
                default,
            ),
            chosen,
        )

    def action_acknowledge(self) -> None:
        self.flows.confirm_acknowledge([self.incident])
