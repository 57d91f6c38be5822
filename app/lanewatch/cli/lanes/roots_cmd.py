"""`lanewatch roots`: the registry of scratch roots."""

from __future__ import annotations

from pathlib import Path

import click

from lanewatch.cli.common import friendly_errors, say
from lanewatch.cli.reports import report
from lanewatch.lanes.roots import Registry, canonical_root, default_root, ensure_root


@click.group("roots", invoke_without_command=True)
@click.pass_context
def roots_command(ctx: click.Context) -> None:
    """List, add or remove scratch roots (default: list)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_roots)


@roots_command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def list_roots(as_json: bool = False) -> None:
    """List every known scratch root; the default root comes first."""
    entries = Registry().list()
    default = str(canonical_root(default_root()))  # entries are canonical paths
    if as_json:
        # `root`, as status and every other report names a root; `path` is its old name (0.1).
        rows = [
            {"root": e.path, "path": e.path, "added_at": e.added_at, "default": e.path == default}
            for e in entries
        ]
        report("roots", {"roots": rows})
        return
    for e in entries:
        say(e.path + ("  (default)" if e.path == default else ""))


@roots_command.command("add")
@click.argument("directory", type=click.Path(file_okay=False))
@friendly_errors
def add_root(directory: str) -> None:
    """Register DIRECTORY as a scratch root (created if missing)."""
    path, new = Registry().add(ensure_root(Path(directory)))
    say(f"{'added' if new else 'already known'}: {path}")


@roots_command.command("remove")
@click.argument("directory", type=click.Path())
@friendly_errors
def remove_root(directory: str) -> None:
    """Forget DIRECTORY (its files are left alone)."""
    removed = Registry().remove(directory)
    say(f"{'removed' if removed else 'not registered'}: {directory}")
