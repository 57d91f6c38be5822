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
from typing import TYPE_CHECKING

import click
from rich import box
from rich.table import Table
from rich.text import Text

from lanewatch.cli.common import cell, fail, friendly_errors
from lanewatch.cli.exits import Exit
from lanewatch.cli.lanes.status_cmd import WIDE, console
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import read_roots

if TYPE_CHECKING:
    from lanewatch.records.writes import WriteEntry

SHA_WIDE, SHA_NARROW = 16, 12  # hex digits of a content hash shown (the JSON has it whole)
COMMAND_CUT = 80  # characters of a command shown (the JSON has it whole)


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
        out = console()
        out.print(_table(target, found, narrow=out.width < WIDE))
    if not found:
        fail(
            f"no recorded write of {target} in {', '.join(paths) or 'no root'} (writes are "
            "recorded while kernel attribution runs: a dashboard or `lanewatch record` as root)",
            Exit.NOT_FOUND,
        )


def _table(target: str, found: Sequence[WriteEntry], *, narrow: bool) -> Table:
    """Wide: every column. Narrow (80 columns): no `how` (the JSON has it), a shorter hash, no
    vertical rules, and the command last, folded over lines rather than cut: it is what tells
    one writer from another, so it keeps the room the fixed columns leave."""
    table = Table(
        title=cell(f"writes of {target}"),
        title_justify="left",
        box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
        pad_edge=not narrow,
        expand=narrow,
    )
    narrow_order = ("time", "lane", "pid", "size", "sha256", "command")
    order = narrow_order if narrow else ("time", "lane", "pid", "command", "size", "sha256", "how")
    for col in order:
        if col == "command":
            table.add_column(col, overflow="fold", ratio=1 if narrow else None)
        else:
            table.add_column(col, no_wrap=col not in ("lane", "how"))
    sha = SHA_NARROW if narrow else SHA_WIDE
    for e in found:
        cells: dict[str, str | Text] = {
            "time": _iso(e.time),
            "lane": cell(e.lane or ("-" if e.identified else "?")),
            "pid": str(e.pid),
            "command": cell(" ".join(e.command)[:COMMAND_CUT] or "-"),
            "size": "-" if e.size is None else str(e.size),
            "sha256": cell((e.sha256 or "-")[:sha]),
            "how": cell(e.how + ("" if e.event == "close-write" else f" [{e.event}]")),
        }
        table.add_row(*(cells[col] for col in order))
    return table
