"""`lanewatch files TARGET`: one namespace's files, newest first (docs/hosts.md).

What the dashboard's files view lists, as a command: another host's dashboard runs `ssh HOST
lanewatch files KEY --json` to list a far lane's files (hosts/farfiles.py). TARGET is a namespace
directly inside a known root (actions/targets.py), a real folder: a symlink in its place is
refused, never followed, and nothing under it is followed either. At most `--limit` entries
(of the first SCAN_LIMIT the walk meets), each named relative to the namespace.

Exit codes: 0; 1 the namespace cannot be read; 2 TARGET cannot be one; 3 TARGET is not a
real folder (a symlink, a file); 8 no such namespace.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from lanewatch.cli import completers
from lanewatch.cli.common import fail, friendly_errors, say
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import ROOT
from lanewatch.lanes.stamp import META_DIR
from lanewatch.model import units

DEFAULT_LIMIT = 2000  # the files view's own (tui/backend/lane_files.MAX_FILES)
SCAN_LIMIT = 20_000  # entries the walk looks at, at most (then `truncated`)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a folder"
        fail(f"{path} is {what}: not listed (nothing is followed)", Exit.REFUSED)
    return st.st_dev, st.st_ino


def listing_json(
    namespace: Path, root: Path, lane: str | None, limit: int, no_meta: bool
) -> dict[str, Any]:
    """The report; `error` says why the namespace itself could not be read."""
    from lanewatch.tui.backend.lane_files import (
        list_files,  # the files view's walk (no Textual in it)
    )

    before = _identity(namespace)
    if before is None:
        fail(f"no namespace {namespace}", Exit.NOT_FOUND)
    listed = list_files(namespace, [str(root)], limit=SCAN_LIMIT)
    if _identity(namespace) != before:  # replaced while it was walked: what was read is not it
        fail(f"{namespace} was replaced while it was listed: not listed", Exit.REFUSED)
    files = [f for f in listed.files if not (no_meta and f.rel.split("/", 1)[0] == META_DIR)]
    return {
        "key": str(namespace),
        "root": str(root),
        "lane": lane,
        "limit": limit,
        "seen": len(listed.files),
        "truncated": listed.truncated or len(files) > limit,
        "error": listed.error,
        "files": [
            {
                "name": f.rel,
                "kind": f.kind,
                "size": f.size,
                "mtime": f.mtime,
                "writer": f.writer,
                "target": f.target,
            }
            for f in files[:limit]  # newest first
        ],
    }


@click.command("files")
@click.argument("target", shell_complete=completers.targets)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=ROOT,
    help="A scratch root TARGET may be in, besides the known ones (repeat).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, SCAN_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="At most this many entries, the newest.",
)
@click.option("--no-meta", is_flag=True, help=f"Leave out the namespace's own {META_DIR} folder.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (what a far dashboard reads).")
@friendly_errors
def files_command(
    target: str, roots: Sequence[str], limit: int, no_meta: bool, as_json: bool
) -> None:
    """The files of namespace TARGET (a path, a folder name or a lane name), newest first."""
    from lanewatch.actions.targets import known_roots, resolve

    found = resolve(target, known_roots(roots))
    data = listing_json(found.path, found.root, found.lane, limit, no_meta)
    if as_json:
        report("files", data)
    else:
        for f in data["files"]:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(f["mtime"]))
            link = f" -> {f['target']}" if f["target"] is not None else ""
            say(f"{units.size(f['size']):>7}  {when}  {f['kind']:<6}  {f['name']}{link}")
        more = " (more not listed)" if data["truncated"] else ""
        say(f"{len(data['files'])} entries in {data['key']}{more}", err=True)
    if data["error"]:
        fail(f"cannot read {data['key']}: {data['error']}", Exit.FAILED)
