"""The ledger: an append-only diary per namespace. Observational, never proof.

Gates never read it. Lines are JSON appended under an exclusive flock on the ledger file, so
concurrent writers never interleave; readers skip lines they cannot parse. A ledger that is not
a regular file (a FIFO, a socket...) is never waited on: `append` skips the line and says why,
readers see no lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.lanes.fsutil import NotAFile, flock_within, open_regular
from lanewatch.lanes.stamp import LEDGER_FILE, META_DIR

MAX_LINE = 64 * 1024
LOCK_WAIT = 2.0  # seconds: appends take microseconds; longer is someone holding it on purpose


def ledger_path(namespace: Path) -> Path:
    return namespace / META_DIR / LEDGER_FILE


@dataclass(frozen=True, slots=True)
class LedgerLine:
    time: float
    event: str
    lane: str
    pid: int
    fields: dict[str, Any]


def append(namespace: Path, event: str, *, lane: str, **fields: Any) -> str | None:
    """Append one line; None, or why it was skipped (the ledger is a FIFO, a folder...: logged,
    never waited on). Other failures (permission, a vanished folder) raise OSError."""
    entry = {"time": time.time(), "event": event, "lane": lane, "pid": os.getpid(), **fields}
    line = json.dumps(entry, sort_keys=True, default=str).encode() + b"\n"
    path = ledger_path(namespace)
    try:
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    except NotAFile as exc:
        _warn("ledger line %r not written to %s: %s", event, path, exc)
        return str(exc)
    try:
        if not flock_within(fd, LOCK_WAIT):
            _warn("ledger line %r not written to %s: its lock stayed held", event, path)
            return f"{LEDGER_FILE} stayed locked by another process for {LOCK_WAIT:g}s"
        try:
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return None


def _warn(message: str, *args: object) -> None:
    from lanewatch.lanes.logs import warn  # only for a skipped line: `run` starts without logging

    warn(__name__, message, *args)


def read(namespace: Path, *, tail: int | None = None) -> list[LedgerLine]:
    """Parsed ledger lines, oldest first; corrupt lines are skipped. `tail`: only the last N."""
    lines = list(_iter_lines(namespace))
    if tail is None:
        return lines
    return lines[-tail:] if tail > 0 else []


def last(namespace: Path) -> LedgerLine | None:
    """The last line that parses among the ledger's final MAX_LINE bytes (a long ledger is not
    read whole); None when there is none there."""
    try:
        fd = open_regular(ledger_path(namespace), os.O_RDONLY)
    except OSError:  # NotAFile too
        return None
    with contextlib.closing(os.fdopen(fd, "rb")) as f:
        end = f.seek(0, os.SEEK_END)
        f.seek(max(0, end - MAX_LINE - 1))
        chunk = f.read()
    raws = chunk.splitlines()
    if end > len(chunk) and raws:
        raws = raws[1:]  # the first may be the tail of a longer line
    for raw in reversed(raws):
        line = _parse(raw)
        if line is not None:
            return line
    return None


def _iter_lines(namespace: Path) -> Iterator[LedgerLine]:
    path = ledger_path(namespace)
    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError:  # NotAFile too: a FIFO at its name is never read
        return
    with contextlib.closing(os.fdopen(fd, "rb")) as f:
        for raw in f:
            line = _parse(raw)
            if line is not None:
                yield line


def _parse(raw: bytes) -> LedgerLine | None:
    if len(raw) > MAX_LINE:
        return None
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    t, event, lane, pid = obj.get("time"), obj.get("event"), obj.get("lane"), obj.get("pid")
    if not (isinstance(t, int | float) and isinstance(event, str) and isinstance(lane, str)):
        return None
    rest = {k: v for k, v in obj.items() if k not in ("time", "event", "lane", "pid")}
    return LedgerLine(float(t), event, lane, pid if isinstance(pid, int) else -1, rest)
