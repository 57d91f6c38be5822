"""Writing actions down: the lane's own ledger, and the root's trash journal.

The ledger is observational (a diary, never proof), so a failed write never undoes or blocks
an action; it comes back as a note for the action's message. Nothing is written through a
symlink: `.lanewatch/` must be a real folder, and the ledger file is opened O_NOFOLLOW; nothing
waits on one that is not a regular file (a FIFO): the line is skipped, and the note says so.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import stat
import time
from pathlib import Path
from typing import Any

from lanewatch.lanes import ledger
from lanewatch.lanes.fsutil import flock_within, open_regular
from lanewatch.lanes.roots import ROOT_META
from lanewatch.lanes.stamp import META_DIR
from lanewatch.linux.procid import hostname

TRASH_JOURNAL = "trash.jsonl"
log = logging.getLogger(__name__)


def actor() -> dict[str, Any]:
    """Who acts: written into the ledger and the trash record."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"user": user, "uid": os.getuid(), "pid": os.getpid(), "host": hostname()}


def actor_label(who: dict[str, Any]) -> str:
    return f"{who.get('user', '?')} (pid {who.get('pid', '?')} on {who.get('host', '?')})"


def note(namespace: Path, event: str, *, lane: str | None, **fields: Any) -> str | None:
    """Append `event` to the namespace's ledger; None, or why it could not be written."""
    try:
        meta = os.lstat(namespace / META_DIR)
    except FileNotFoundError:
        return "no ledger (the namespace has no .lanewatch folder)"
    except OSError as exc:
        return f"ledger not written: {exc.strerror}"
    if not stat.S_ISDIR(meta.st_mode):
        return f"ledger not written: {META_DIR} is not a real folder"
    try:
        skipped = ledger.append(namespace, event, lane=lane or namespace.name, by=actor(), **fields)
    except OSError as exc:
        return f"ledger not written: {exc.strerror}"
    return f"ledger not written: {skipped}" if skipped else None


def trash_journal(root: Path, event: str, **fields: Any) -> None:
    """Append a line to `<root>/.lanewatch-root/trash.jsonl` (cleared, restored, purged)."""
    entry = {"time": time.time(), "event": event, "by": actor(), **fields}
    line = json.dumps(entry, sort_keys=True, default=str).encode() + b"\n"
    path = root / ROOT_META / TRASH_JOURNAL
    try:
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except OSError as exc:  # NotAFile too (a FIFO there): a diary never blocks an action
        log.warning("trash journal line %r not written to %s: %s", event, path, exc)
        return
    try:
        if flock_within(fd, ledger.LOCK_WAIT):
            os.write(fd, line)
        else:
            log.warning(
                "trash journal line %r not written to %s: its lock stayed held", event, path
            )
    except OSError:
        pass
    finally:
        os.close(fd)
