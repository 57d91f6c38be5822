"""`lanewatch clear TARGET... [--stale]`: move dead namespaces into their root's trash.

Exit codes (docs/exit-codes.md): 0 every target was cleared (or was already gone, or nothing
was stale); 3 at least one was refused; 2 a TARGET named several things or no namespace; 8 a
TARGET named nothing that exists (and none was refused); 7 nobody to confirm, or the answer
was no.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from lanewatch.actions.assess import Assessment, Seen, assess
from lanewatch.actions.clear import ClearResult, clear_target, stale_targets
from lanewatch.actions.results import sizes_text
from lanewatch.actions.targets import NotFound, Target, TargetError, known_roots, resolve
from lanewatch.actions.trashbox import list_all
from lanewatch.cli import completers
from lanewatch.cli.actions.ask import confirm, safe
from lanewatch.cli.common import friendly_errors
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report


@click.command("clear")
@click.argument("targets", nargs=-1, shell_complete=completers.targets)
@click.option(
    "--stale",
    is_flag=True,
    help="Also every namespace of the known roots that nobody runs in: stale, orphan, released.",
)
@click.option("--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@click.option("--dry-run", is_flag=True, help="Run every check, move nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@friendly_errors
def clear_command(
    targets: tuple[str, ...], stale: bool, yes: bool, dry_run: bool, as_json: bool
) -> None:
    """Move stale, orphan or released namespaces into their root's trash (restorable).

    Each TARGET is a namespace name, its path, or an unambiguous lane name. A namespace is
    refused when it is live or hung, when anything holds its lock, when any process has its
    cwd, an open file or a mapping inside (or cannot be inspected), when a mount point lies
    inside, or when it is a symlink. `lanewatch trash` lists what was moved; `lanewatch
    restore ID` puts it back; `lanewatch purge` deletes it for good.
    """
    if not targets and not stale:
        raise click.UsageError("name at least one TARGET, or pass --stale")
    roots = known_roots()
    chosen: dict[Path, Target] = {}
    early: list[ClearResult] = []
    missing: list[str] = []  # named nothing that exists (exit 8)
    bad: list[str] = []  # named several things, or no namespace (exit 2)
    for spec in targets:
        try:
            t = resolve(spec, roots)
        except NotFound as exc:
            gone = _already_cleared(spec, roots)
            if gone is None:
                missing.append(spec)
            early.append(gone or _missing(spec, str(exc)))
            continue
        except TargetError as exc:
            bad.append(spec)
            early.append(_missing(spec, str(exc)))
            continue
        chosen.setdefault(t.path, t)
    if stale:
        for t in stale_targets(roots):
            chosen.setdefault(t.path, t)
    seen = [assess(t) for t in chosen.values()]
    if seen and not dry_run:
        confirm(_plan(seen), f"Clear {len(seen)} namespace(s)?", yes)
    results = early + [clear_target(a.target, dry_run=dry_run, seen=Seen.of(a.stamp)) for a in seen]
    if as_json:
        rows = [_result_json(r, missing, bad) for r in results]
        report("clear", {"dry_run": dry_run, "results": rows})
    else:
        for r in results:
            click.echo(safe(r.message), err=r.outcome == "refused")
        if not results:
            click.echo("nothing to clear")
        _summary(results, dry_run)
    refused = {r.target for r in results if r.outcome == "refused"} - set(missing) - set(bad)
    if refused:
        sys.exit(Exit.REFUSED)
    if bad:
        sys.exit(Exit.USAGE)
    if missing:
        sys.exit(Exit.NOT_FOUND)


def _result_json(r: ClearResult, missing: list[str], bad: list[str]) -> dict[str, Any]:
    outcome = "not-found" if r.target in missing else "bad-target" if r.target in bad else None
    return {
        "outcome": outcome or r.outcome,  # cleared | would-clear | gone | refused | the two above
        "key": r.target,  # the namespace's path, as status names it (the spec if it named none)
        "label": r.label,
        "state": r.state,
        "trash_id": r.trash_id,
        "trash_path": r.trash_path,
        "files": r.files,
        "bytes": r.bytes,  # apparent: the files' lengths
        "allocated_bytes": r.allocated,  # on disk, as `du -sB1` counts: what the clear frees
        "message": r.message,
        "owner_host": r.owner_host,  # another host's owner: refused, clear it there
    }


def _plan(seen: list[Assessment]) -> list[str]:
    lines = ["Into the trash of its root (restorable with `lanewatch restore`):"]
    for a in seen:
        lines.append(f"  {safe(a.target.label)}  {safe(a.describe())}")
    return lines


def _already_cleared(spec: str, roots: list[Path]) -> ClearResult | None:
    """A name or lane found in the trash: a clear already moved it (ours or a concurrent one)."""
    hits = [e for e in list_all(roots) if spec in (e.name, e.lane)]
    if not hits:
        return None
    last = hits[-1]
    label = f"lane {last.lane!r} ({last.name})" if last.lane else last.name
    msg = f"{label} is already gone: cleared into the trash as {last.id}"
    return ClearResult("gone", last.original, label, msg, last.state, last.id, last.path)


def _missing(spec: str, why: str) -> ClearResult:
    return ClearResult("refused", spec, spec, f"refused to clear {spec!r}: {why}")


def _summary(results: list[ClearResult], dry_run: bool) -> None:
    moved = [r for r in results if r.outcome in ("cleared", "would-clear")]
    refused = sum(r.outcome == "refused" for r in results)
    if len(results) < 2:
        return
    size = sizes_text(sum(r.allocated or 0 for r in moved), sum(r.bytes or 0 for r in moved))
    verb = "would clear" if dry_run else "cleared"
    click.echo(f"{verb} {len(moved)} namespace(s), {size}; refused {refused}")
