"""`lanewatch trash`, `lanewatch restore TRASH_ID`, `lanewatch purge`: after a clear.

Exit codes (docs/exit-codes.md): restore 0 restored, 3 refused (the name is taken again),
8 no such trash id (restored or purged already, or never was); purge 0 all due entries purged
(or kept because in use, or nothing was due), 1 some could not be deleted (the next purge
resumes them), 7 nobody to confirm, or the answer was no.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lanewatch.actions.purge import DEFAULT_RETENTION, due, purge
from lanewatch.actions.restore import find, restore
from lanewatch.actions.results import human_size, sizes_text
from lanewatch.actions.targets import known_roots
from lanewatch.actions.trashbox import TrashEntry, list_all, purging_dirs
from lanewatch.cli import completers
from lanewatch.cli.actions.ask import confirm, safe
from lanewatch.cli.common import ago, friendly_errors
from lanewatch.cli.duration import Duration
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report


@click.command("trash")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
@friendly_errors
def trash_command(as_json: bool) -> None:
    """List cleared namespaces in the trash of every known root, oldest first."""
    entries = list_all()
    now = time.time()
    if as_json:
        # `key`: the namespace's path, as status names it; `original` is its old name (0.1).
        rows = [{**e.to_json(now), "key": e.original} for e in entries]
        report("trash", {"retention_seconds": DEFAULT_RETENTION, "entries": rows})
        return
    if not entries:
        click.echo("the trash is empty")
        return
    table = Table(box=None, header_style="bold")
    for col in ("ID", "LANE", "STATE", "CLEARED", "BY", "DISK", "SIZE", "NAMESPACE"):
        table.add_column(col, no_wrap=col in ("ID", "DISK", "SIZE"))
    for e in entries:
        table.add_row(
            Text(safe(e.id)),
            Text(safe(e.lane or "-")),
            Text(safe(e.state or "?")),
            _ago(e.cleared_at, now),
            Text(safe(e.cleared_by or "?")),
            human_size(e.allocated),
            human_size(e.bytes),
            Text(safe(e.original)),
        )
    Console(soft_wrap=True).print(table)


@click.command("restore")
@click.argument("trash_id", shell_complete=completers.trash_ids)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@friendly_errors
def restore_command(trash_id: str, as_json: bool) -> None:
    """Put the cleared namespace TRASH_ID (see `lanewatch trash`) back where it was.

    Refused when its name is taken again: a namespace created after the clear stays.
    """
    entry = find(trash_id)  # not in any trash (restored, purged, mistyped): exit 8
    result = restore(entry, check=False)
    if as_json:
        report(
            "restore",
            {
                "outcome": result.outcome,
                "trash_id": entry.id,
                "key": result.path or entry.original,
                "lane": entry.lane,
                "message": result.message,
            },
        )
    else:
        click.echo(safe(result.message), err=not result.ok)
    if not result.ok:  # gone: a concurrent restore or purge took it meanwhile
        sys.exit(Exit.NOT_FOUND if result.outcome == "gone" else Exit.REFUSED)


@click.command("purge")
@click.option(
    "--older-than",
    type=Duration(),
    default=DEFAULT_RETENTION,
    help="Only entries cleared at least this long ago.  [default: 7d]",
)
@click.option("--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@friendly_errors
def purge_command(older_than: float, yes: bool, as_json: bool) -> None:
    """Delete trash entries for good, by default those cleared more than 7 days ago.

    An entry some process still holds (a cwd or a file inside) is kept for a later purge; a
    purge that was interrupted is finished first.
    """
    roots = known_roots()
    doomed = due(roots, older_than=older_than)
    leftovers = sum(len(purging_dirs(r)) for r in roots)
    if not doomed and not leftovers:
        if as_json:
            report("purge", _purge_json("nothing", "nothing to purge", older_than, []))
        else:
            click.echo("nothing to purge")
        return
    if doomed:
        confirm(_plan(doomed), f"Delete {len(doomed)} entries for good?", yes)
    result = purge(roots, older_than=older_than, only={e.id for e in doomed})
    if as_json:
        outcome = "purged" if result.ok else "failed"
        items = [asdict(i) for i in result.items]
        report("purge", _purge_json(outcome, result.message, older_than, items))
    else:
        for item in result.items:
            click.echo(safe(item.message), err=item.outcome == "failed")
        click.echo(safe(result.message.split(";")[0]))
    if not result.ok:
        sys.exit(Exit.FAILED)


def _purge_json(
    outcome: str, message: str, older_than: float, items: list[dict[str, Any]]
) -> dict[str, Any]:
    return {"outcome": outcome, "message": message, "older_than": older_than, "items": items}


def _plan(entries: list[TrashEntry]) -> list[str]:
    disk = [e.allocated for e in entries if e.allocated is not None]
    data = sum(e.bytes or 0 for e in entries)
    total = sizes_text(sum(disk) if len(disk) == len(entries) else None, data)
    lines = [f"Delete for good ({total}, no restore after this):"]
    now = time.time()
    for e in entries:
        what = safe(e.original) if e.complete else "(a clear that did not finish)"
        lines.append(f"  {e.id}  {what}  cleared {_ago(e.cleared_at, now)}")
    return lines


def _ago(t: float | None, now: float) -> str:
    return ago(t, now, unknown="?")
