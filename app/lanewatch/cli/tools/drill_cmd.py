"""`lanewatch drill`: the collision drill."""

from __future__ import annotations

import sys

import click

from lanewatch.cli import reports
from lanewatch.cli.common import friendly_errors, say
from lanewatch.drill.drill import CLASSES, EXIT_BLIND, EXIT_CLOBBERED, DrillReport, run_drill


@click.command("drill")
@click.option(
    "--lanes",
    type=click.IntRange(2, 64),
    default=4,
    show_default=True,
    help="How many lanes write in parallel.",
)
@click.option(
    "--seconds",
    type=click.FloatRange(0.05, 3600),
    default=2.0,
    show_default=True,
    help="How long each lane keeps writing.",
)
@click.option(
    "--unbound",
    is_flag=True,
    help="Also run the writers against ONE shared folder and report its clobbers.",
)
@click.option("--checkout", type=click.Path(), help="Drill in this checkout instead of cwd.")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Drill in this scratch root (default: a private one, removed afterwards).",
)
@click.option("--keep", is_flag=True, help="Keep the drill's temp folder for inspection.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@friendly_errors
def drill_command(
    lanes: int,
    seconds: float,
    unbound: bool,
    checkout: str | None,
    root: str | None,
    keep: bool,
    as_json: bool,
) -> None:
    """Run LANES real lanes that write the same artifacts under the same names, in parallel.

    Each lane (a `lanewatch run` process of this checkout) writes a receipt, a temp file, a test
    output and ledger lines, each with its own content, again and again, and reads them back.
    Exits 0 only if no lane ever read another's bytes; 4 if one did; 1 if a lane failed;
    6 outside a checkout. With --unbound, the same writers also share one folder (inside the
    drill's private temp folder): their clobbers are reported, and finding none exits 5,
    because then the drill could not see a collision at all.
    """
    progress = None if as_json else (lambda msg: say(f"drill: {msg}", err=True))
    report = run_drill(
        lanes=lanes,
        seconds=seconds,
        unbound=unbound,
        checkout=checkout,
        root=root,
        keep=keep,
        on_phase=progress,
    )
    if as_json:
        reports.report("drill", report.to_json())
    else:
        _print(report)
    sys.exit(report.exit_code)


def _classes(counts: dict[str, int]) -> str:
    return ", ".join(f"{c} {counts[c]}" for c in CLASSES)


def _print(report: DrillReport) -> None:
    iso = report.isolated
    say(
        f"isolated: {len(iso)} lanes in {report.checkout_id}, root {report.root}: "
        f"{sum(r.total_writes for r in iso)} writes, {report.isolated_clobbers} clobbered"
    )
    for r in iso:
        state = r.error or (f"{r.total_clobbers} clobbered" if r.total_clobbers else "ok")
        say(f"  {r.lane}  {r.total_writes:6d} writes  {state}  {r.namespace or ''}")
        for ex in r.examples:
            say(f"    {ex['class']}: {ex['path']} seq {ex['seq']} held {ex['found']!r}")
    for line in report.shared_namespaces:
        say(f"  COLLISION: {line}")
    if report.unbound is not None:
        shared = report.unbound
        say(
            f"shared folder {report.shared_dir}: {sum(r.total_writes for r in shared)} writes, "
            f"{report.unbound_clobbers} clobbered ({_classes(report.by_class(shared))})"
        )
        for r in shared:
            if r.error:
                say(f"  writer {r.index}: {r.error}")
    for err in report.errors:
        say(f"error: {err}", err=True)
    code = report.exit_code
    if code == 0:
        seen = (
            f"; the drill saw {report.unbound_clobbers} clobbers in the shared folder"
            if report.unbound is not None
            else ""
        )
        say(f"drill: ok, no lane clobbered another{seen}")
    elif code == EXIT_CLOBBERED:
        say("drill: FAILED, a lane read another lane's bytes in its own namespace")
    elif code == EXIT_BLIND:
        say("drill: FAILED, the shared folder showed no clobber: the drill is blind")
    else:
        say("drill: FAILED, a lane did not finish (see errors)")
