"""Writing actions down: the lane's own ledger, and the root's trash journal.

The ledger is observational (a diary, never proof), so a failed write never undoes or blocks
an action; it comes back as a note for the action's message. Nothing is written through a
symlink: `.lanewatch/` must be a real folder, and the ledger file is opened O_NOFOLLOW.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

from lanewatch.scheme import ledger
from lanewatch.scheme.procid import hostname
from lanewatch.scheme.roots import ROOT_META
from lanewatch.scheme.stamp import META_DIR

TRASH_JOURNAL = "trash.jsonl"


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
        ledger.append(namespace, event, lane=lane or namespace.name, by=actor(), **fields)
    except OSError as exc:
        return f"ledger not written: {exc.strerror}"
    return None


def trash_journal(root: Path, event: str, **fields: Any) -> None:
    """Append a line to `<root>/.lanewatch-root/trash.jsonl` (cleared, restored, purged)."""
    entry = {"time": time.time(), "event": event, "by": actor(), **fields}
    line = json.dumps(entry, sort_keys=True, default=str).encode() + b"\n"
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root / ROOT_META / TRASH_JOURNAL, flags, 0o644)
    except OSError:
        return  # a diary: never the reason an action fails
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)
