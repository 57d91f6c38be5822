"""`lanewatch history PATH`: every recorded write of one file, oldest first.

Reads the write history kept in each root (`<root>/.lanewatch-root/writes.jsonl`, written
while kernel attribution runs: a dashboard or `lanewatch record` as root). Writes of a
namespace's files are kept in that namespace's root; a lane's writes in shared temp in the
lane's root. Exit codes: 0, or 8 when nothing is recorded for PATH.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import click
from rich.table import Table

from lanewatch.cli.common import cell, fail, friendly_errors
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import read_roots
from lanewatch.cli.status_cmd import console


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


@click.command("history")
@click.argument("path", type=click.Path())
@read_roots
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def history_command(path: str, roots: Sequence[str], as_json: bool) -> None:
    """Every recorded write of PATH: when, which lane, pid, command, size and content hash."""
    from lanewatch.engine.engine import resolve_roots
    from lanewatch.records.writes import history

    target = os.path.realpath(path)  # the kernel reports canonical paths
    paths = resolve_roots(list(roots) if roots else None)
    found = history(paths, target)
    if as_json:
        report("history", {"path": target, "roots": paths, "writes": [e.to_json() for e in found]})
    elif found:
        table = Table(title=cell(f"writes of {target}"), title_justify="left")
        for col in ("time", "lane", "pid", "command", "size", "sha256", "how"):
            table.add_column(col, no_wrap=col in ("time", "pid", "size", "sha256"))
        for e in found:
            table.add_row(
                _iso(e.time),
                cell(e.lane or ("-" if e.identified else "?")),
                str(e.pid),
                cell(" ".join(e.command)[:80] or "-"),
                "-" if e.size is None else str(e.size),
                cell((e.sha256 or "-")[:16]),
                cell(e.how + ("" if e.event == "close-write" else f" [{e.event}]")),
            )
        console().print(table)
    if not found:
        fail(
            f"no recorded write of {target} in {', '.join(paths) or 'no root'} (writes are "
            "recorded while kernel attribution runs: a dashboard or `lanewatch record` as root)",
            Exit.NOT_FOUND,
        )
