"""`lanewatch incidents`: the incident log of every root, or one incident's whole timeline.

Reads `<root>/.lanewatch-root/incidents.jsonl` (what every engine and `status` recorded); it
does not scan. One incident's `--markdown` / `--json` is its report (`records/report.py`), the
same bytes the dashboard exports. `--ack ID` records an acknowledgement. Exit codes: 0, or 8
for an unknown ID.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lanewatch.cli.common import cell, fail, friendly_errors, say
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import read_roots
from lanewatch.cli.status_cmd import ack_word, console, incident_json
from lanewatch.model.kinds import kind_of, severity_of
from lanewatch.model.views import Incident
from lanewatch.records.report import ack_state, build_report, render, who


def _iso(t: float | None) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def writers_line(i: Incident) -> str:
    """Every lane that wrote: "agent-1 (pid 12, 3×), agent-2 (pid 40, 1×, gone since T)"."""
    parts = []
    for w in i.writers:
        who = w.get("lane") or "no lane"
        gone = w.get("gone_at")
        since = f", gone since {_iso(gone)}" if isinstance(gone, int | float) else ""
        parts.append(f"{who} (pid {w.get('pid')}, {w.get('count')}×{since})")
    return ", ".join(parts) or "-"


def _list_table(incidents: Sequence[Incident], console: Console) -> None:
    table = Table(title="incidents", title_justify="left")
    columns = ("id", "kind", "severity", "grade", "count", "first seen", "last seen", "ack")
    for col in (*columns, "summary"):
        table.add_column(col, no_wrap=col != "summary")
    for i in incidents:
        table.add_row(
            cell(i.id),
            cell(i.kind),
            severity_of(i.kind).value,
            cell(i.grade),
            str(i.count),
            _iso(i.first_seen),
            _iso(i.last_seen),
            ack_word(i),
            cell(i.summary),
        )
    console.print(table)


def _one_table(i: Incident, console: Console) -> None:
    console.print(cell(f"{i.id}  {i.kind}  ({i.grade}, seen {i.count}×)", style="bold"))
    known = kind_of(i.kind)
    if known is not None:
        console.print(Text(f"{known.severity.value}: {known.explanation}", style="italic"))
    console.print(cell(i.summary))
    console.print(cell(f"victim:   {i.victim or '-'}"))
    intruder = {k: v for k, v in i.intruder.items() if k != "previous_owner"}
    console.print(cell(f"intruder: {who(intruder)}"))
    console.print(cell(f"writers:  {writers_line(i)}"))
    console.print(Text(f"seen:     {_iso(i.first_seen)} .. {_iso(i.last_seen)}"))
    console.print(cell(f"ack:      {ack_state(i)}"))
    console.print(Text("evidence:", style="bold"))
    for e in i.evidence:
        size = "-" if e.size is None else f"{e.size} B"
        console.print(cell(f"  {_iso(e.time)}  [{e.grade}]  {e.path or '-'}"))
        console.print(
            cell(f"      size {size}  sha256 {e.sha256 or '-'}  writer {e.writer or '-'}")
        )
        console.print(cell(f"      {e.note}"))


@click.command("incidents")
@click.argument("incident_id", required=False)
@read_roots
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with the evidence).")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print Markdown for a postmortem.")
@click.option("--ack", "ack", is_flag=True, help="Acknowledge INCIDENT_ID.")
@friendly_errors
def incidents_command(
    incident_id: str | None, roots: Sequence[str], as_json: bool, as_markdown: bool, ack: bool
) -> None:
    """The incident log of every known root, or INCIDENT_ID with its whole evidence timeline."""
    from lanewatch.engine.engine import acknowledge, resolve_roots
    from lanewatch.records.incidents import read_all

    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown exclude each other")
    paths = resolve_roots(list(roots) if roots else None)
    if ack:
        if not incident_id:
            raise click.UsageError("--ack needs an INCIDENT_ID")
        if not acknowledge(paths, incident_id):
            fail(f"no incident {incident_id!r} in {', '.join(paths)}", Exit.NOT_FOUND)
        say(f"acknowledged: {incident_id}")
        return
    records = read_all(paths)
    incidents = sorted((r.to_view() for r in records.values()), key=lambda i: i.first_seen)
    if incident_id:
        one = next((i for i in incidents if i.id == incident_id), None)
        if one is None:
            fail(f"no incident {incident_id!r} in {', '.join(paths)}", Exit.NOT_FOUND)
        if as_json or as_markdown:  # the dashboard's export, byte for byte
            click.echo(render(build_report(paths, one), "json" if as_json else "md"), nl=False)
        else:
            _one_table(one, console())
        return
    if as_json:
        incidents_json = [incident_json(i, evidence=True) for i in incidents]
        report("incidents", {"roots": paths, "incidents": incidents_json})
    elif as_markdown:
        reports = (render(build_report(paths, i), "md") for i in incidents)
        click.echo("\n".join(reports), nl=False)
    else:
        _list_table(incidents, console())
