"""`lanewatch id`: the checkout identity of the current directory."""

from __future__ import annotations

import click

from lanewatch.cli.common import friendly_errors, say
from lanewatch.cli.reports import report
from lanewatch.lanes.checkout import resolve_checkout
from lanewatch.lanes.scheme import SCHEME_VERSION


@click.command("id")
@click.option("--checkout", "checkout", type=click.Path(), help="Bind to this path instead of cwd.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def id_command(checkout: str | None, as_json: bool) -> None:
    """Print the checkout id, slug, worktree root and git common dir."""
    bound = resolve_checkout(checkout)
    fields = {**bound.to_json(), "scheme": SCHEME_VERSION}  # which scheme this host keeps
    if as_json:
        report("id", fields)
        return
    for key, value in fields.items():
        say(f"{key:12} {value}")
