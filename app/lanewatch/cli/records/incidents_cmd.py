"""`lanewatch incidents`: the incident log of every root, or one incident's whole timeline.

Reads `<root>/.lanewatch-root/incidents.jsonl` (what every engine and `status` recorded); it
does not scan. One incident's `--markdown` / `--json` is its report (`records/report.py`), the
same bytes the dashboard exports. `--ack ID` records an acknowledgement. An ID may be any
prefix of the ID or of its hash that names one incident (`cli/records/incident_ids.py`). Exit
codes: 0; 8 for an unknown ID; 2 for a prefix that names more than one (they are listed).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lanewatch.cli.common import ago, cell, fail, friendly_errors, say
from lanewatch.cli.exits import Exit
from lanewatch.cli.lanes.status_cmd import ack_word, console, incident_json
from lanewatch.cli.records.incident_ids import one as one_id
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import read_roots
from lanewatch.inert import inert
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


# Which columns a width has room for, most wanted first: the whole ID always (it is what
# `incidents ID` takes back, and it starts with the kind, so no kind column: `_said`), severity,
# count, last seen, ack and the summary, which folds onto more lines. `incidents ID` and the
# JSON have every field.
WIDE = 160  # grade, first and last seen as times, the summary in a column of its own
MEDIUM = 120  # grade; last seen as an age. Narrower: the summary goes under its ID
WIDE_COLUMNS = ("id", "severity", "grade", "count", "first seen", "last seen", "ack")
MEDIUM_COLUMNS = ("id", "severity", "grade", "count", "last seen", "ack")
NARROW_COLUMNS = ("incident", "severity", "count", "last seen", "ack")


def _time(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _ago(t: float | None, now: float) -> str:
    return ago(t, now, unknown="-")


def _said(i: Incident) -> str:
    """The summary, after the kind when the ID does not start with it (a record from before a
    kind was renamed, or one forged)."""
    return i.summary if i.id.startswith(f"{i.kind}-") else f"{i.kind}: {i.summary}"


def list_table(incidents: Sequence[Incident], console: Console, now: float | None = None) -> None:
    """The incident log as a table that fits `console.width`; IDs are never cut."""
    now = time.time() if now is None else now
    wide = console.width >= WIDE
    narrow = console.width < MEDIUM
    shown = WIDE_COLUMNS if wide else NARROW_COLUMNS if narrow else MEDIUM_COLUMNS
    table = Table(
        title="incidents",
        title_justify="left",
        expand=True,
        box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,
        pad_edge=wide,
    )
    id_width = max((len(inert(i.id)) for i in incidents), default=2)
    for col in shown:
        if col == "incident":  # the ID on its own line, its summary folded under it
            table.add_column(col, overflow="fold", ratio=1, min_width=id_width)
        else:
            table.add_column(col, no_wrap=True, min_width=id_width if col == "id" else None)
    if not narrow:
        table.add_column("summary", overflow="fold", ratio=1, min_width=12)
    for i in incidents:
        said = _said(i)
        cells = {
            "incident": Text.assemble(cell(i.id), "\n", cell(said, style="dim")),
            "id": cell(i.id),
            "severity": Text(severity_of(i.kind).value),
            "grade": cell(i.grade),
            "count": Text(str(i.count)),
            "first seen": Text(_time(i.first_seen)),
            "last seen": Text(_time(i.last_seen) if wide else _ago(i.last_seen, now)),
            "ack": Text(ack_word(i)),
        }
        summary = () if narrow else (cell(said),)
        table.add_row(*(cells[col] for col in shown), *summary)
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
    """The incident log of every known root, or INCIDENT_ID with its whole evidence timeline.

    INCIDENT_ID may be shortened to any prefix of it, or of its hash, that names one incident.
    """
    from lanewatch.engine.engine import acknowledge, resolve_roots
    from lanewatch.records.incident_log import read_all

    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown exclude each other")
    paths = resolve_roots(list(roots) if roots else None)
    records = read_all(paths)
    if ack:
        if not incident_id:
            raise click.UsageError("--ack needs an INCIDENT_ID")
        whole = one_id(records, incident_id, paths)
        if not acknowledge(paths, whole):  # gone between the read and the ack
            fail(f"no incident {whole!r} in {', '.join(paths)}", Exit.NOT_FOUND)
        say(f"acknowledged: {whole}")
        return
    incidents = sorted((r.to_view() for r in records.values()), key=lambda i: i.first_seen)
    if incident_id:
        whole = one_id(records, incident_id, paths)
        found = next(i for i in incidents if i.id == whole)
        if as_json or as_markdown:  # the dashboard's export, byte for byte
            click.echo(render(build_report(paths, found), "json" if as_json else "md"), nl=False)
        else:
            _one_table(found, console())
        return
    if as_json:
        incidents_json = [incident_json(i, evidence=True) for i in incidents]
        report("incidents", {"roots": paths, "incidents": incidents_json})
    elif as_markdown:
        reports = (render(build_report(paths, i), "md") for i in incidents)
        click.echo("\n".join(reports), nl=False)
    else:
        list_table(incidents, console())
