"""`lanewatch doctor`: what a lane gets on this machine, as this user, and what would change it
(the checks: cli/tools/checkup.py)."""

from __future__ import annotations

import os

import click
from rich import box
from rich.table import Table

from lanewatch import __version__
from lanewatch.cli.common import cell, friendly_errors, say
from lanewatch.cli.lanes.status_cmd import console
from lanewatch.cli.reports import report
from lanewatch.cli.tools.checkup import DEGRADED, OFF, run_all
from lanewatch.linux.procid import user_name

STYLES = {DEGRADED: "yellow", OFF: "red"}


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@friendly_errors
def doctor_command(as_json: bool) -> None:
    """What a lane gets here, as this user: the /tmp fence, a network of its own and its
    resolver, a cgroup, who wrote what (kernel or inferred), port leases, the roots, the
    inotify watches one more watcher of them needs, and the always-on service. Each is tried
    the way `run` and the engine try it; a check is ok, degraded (lanes get less, and say what
    would change it) or off. Exits 0: nothing here is an error of the command."""
    checks = run_all()
    if as_json:
        data = {
            "version": __version__,
            "user": user_name(),
            "uid": os.getuid(),
            "checks": [c.to_json() for c in checks],
        }
        report("doctor", data)
        return
    table = Table(box=box.SIMPLE_HEAD, show_header=True)
    table.add_column("check")
    table.add_column("status")
    table.add_column("what lanes get (and what would change it)", overflow="fold")
    for c in checks:
        what = cell(c.summary)
        if c.fix:
            what.append("\n→ ")
            what.append(cell(c.fix, "dim"))
        table.add_row(c.name, cell(c.status, STYLES.get(c.status, "green")), what)
    console().print(table)
    short = sum(c.status != "ok" for c in checks)
    say(f"lanewatch {__version__} as {user_name()}: {len(checks) - short} of {len(checks)} ok")
