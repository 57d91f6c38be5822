"""The ledger: an append-only diary per namespace. Observational, never proof.

Gates never read it. Lines are JSON appended under an exclusive flock on the ledger file, so
concurrent writers never interleave; readers skip lines they cannot parse.
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

from lanewatch.scheme.stamp import LEDGER_FILE, META_DIR

MAX_LINE = 64 * 1024


def ledger_path(namespace: Path) -> Path:
    return namespace / META_DIR / LEDGER_FILE


@dataclass(frozen=True, slots=True)
class LedgerLine:
    time: float
    event: str
    lane: str
    pid: int
    fields: dict[str, Any]


def append(namespace: Path, event: str, *, lane: str, **fields: Any) -> None:
    entry = {"time": time.time(), "event": event, "lane": lane, "pid": os.getpid(), **fields}
    line = json.dumps(entry, sort_keys=True, default=str).encode() + b"\n"
    path = ledger_path(namespace)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read(namespace: Path, *, tail: int | None = None) -> list[LedgerLine]:
    """Parsed ledger lines, oldest first; corrupt lines are skipped. `tail`: only the last N."""
    lines = list(_iter_lines(namespace))
    if tail is None:
        return lines
    return lines[-tail:] if tail > 0 else []


def _iter_lines(namespace: Path) -> Iterator[LedgerLine]:
    path = ledger_path(namespace)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    with contextlib.closing(os.fdopen(fd, "rb")) as f:
        for raw in f:
            if len(raw) > MAX_LINE:
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(obj, dict):
                continue
            t, event, lane, pid = obj.get("time"), obj.get("event"), obj.get("lane"), obj.get("pid")
            if not (
                isinstance(t, int | float) and isinstance(event, str) and isinstance(lane, str)
            ):
                continue
            rest = {k: v for k, v in obj.items() if k not in ("time", "event", "lane", "pid")}
            yield LedgerLine(float(t), event, lane, pid if isinstance(pid, int) else -1, rest)
