"""`lanewatch audit`: the migration queue for the user's own commands (docs/audit.md)."""

from __future__ import annotations

import sys

import click

from lanewatch.audit.audit import run_audit
from lanewatch.audit.auditreport import markdown, text
from lanewatch.cli import reports
from lanewatch.cli.common import friendly_errors, say
from lanewatch.cli.lanes.laneopts import command_after_dashes


@click.command(
    "audit", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 64),
    default=None,
    help="How many runs at once (default 2, or one per --checkout).",
)
@click.option(
    "--checkout",
    "checkouts",
    multiple=True,
    type=click.Path(),
    help="Run in this checkout (repeatable; default: temporary worktrees of HEAD).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="End every run still going after SECONDS (SIGTERM, then SIGKILL); exits 5.",
)
@click.option("--keep", is_flag=True, help="Keep the audit's temp folder for inspection.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the migration queue.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly_errors
def audit_command(
    parallel: int | None,
    checkouts: tuple[str, ...],
    keep: bool,
    timeout: float | None,
    as_json: bool,
    as_markdown: bool,
    cmd: tuple[str, ...],
) -> None:
    """Run CMD in several lanes of several checkouts at once; list what it wrote outside them.

    Every path written in /tmp, /var/tmp, the home folder (where the kernel allows an overlay)
    or the checkout, and as root every path written anywhere, is classified checkout-scoped,
    product-scoped or unbound, with the runs (and, under pytest, the tests) that wrote it and,
    as root, the runs that read it. Exits 0 when no path was written by two runs, 4 when one
    was (a collision once unfenced) or a run read what another wrote, 5 when a run could not
    be fenced or started or timed out, 6 outside a checkout without --checkout
    (docs/exit-codes.md).
    """
    argv = command_after_dashes(cmd, "lanewatch audit [OPTIONS] -- CMD [ARGS]...")
    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown exclude each other: pick one")
    progress = None if as_json or as_markdown else (lambda m: say(f"audit: {m}", err=True))
    report = run_audit(
        argv,
        parallel=parallel,
        checkouts=checkouts,
        keep=keep,
        timeout=timeout,
        on_phase=progress,
    )
    if as_json:
        reports.report("audit", report.to_json())
    elif as_markdown:
        click.echo(markdown(report))
    else:
        for line in text(report):
            say(line)
    sys.exit(report.exit_code)
