"""Owner stamps: who owns a namespace, written atomically, read into a typed result.

A reader never gets an exception and never a guess: a missing, empty, partial, garbage,
oversized, symlinked or future-schema stamp each comes back as its own `StampStatus`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from lanewatch.scheme.fsutil import UnsafePath, read_nofollow_in, write_atomic

SCHEMA = 1
MAX_STAMP_BYTES = 64 * 1024
DEFAULT_HEARTBEAT = 5.0
MAX_HEARTBEAT = 86400.0
ENV_HEARTBEAT = "LANEWATCH_HEARTBEAT"
OVERDUE_FACTOR = 3.0  # a heartbeat is overdue after this many missed intervals
META_DIR = ".lanewatch"
STAMP_FILE = "owner.json"
LOCK_FILE = "owner.lock"
LEDGER_FILE = "ledger.jsonl"


def valid_heartbeat(value: float) -> bool:
    """A heartbeat interval a stamp can carry and a thread can wait: finite, in (0, a day]."""
    return math.isfinite(value) and 0 < value <= MAX_HEARTBEAT


def default_heartbeat() -> float:
    """$LANEWATCH_HEARTBEAT when it is a valid interval, else DEFAULT_HEARTBEAT."""
    try:
        value = float(os.environ.get(ENV_HEARTBEAT, DEFAULT_HEARTBEAT))
    except ValueError:
        return DEFAULT_HEARTBEAT
    return value if valid_heartbeat(value) else DEFAULT_HEARTBEAT


class OwnerState(StrEnum):
    LIVE = "live"
    RELEASED = "released"


@dataclass(frozen=True, slots=True)
class Stamp:
    lane: str
    namespace: str
    checkout_id: str
    checkout_path: str
    host: str
    boot_id: str
    pid: int
    start_ticks: int
    user: str
    uid: int
    command: list[str]
    started_at: float
    heartbeat_at: float
    heartbeat_interval: float
    state: OwnerState = OwnerState.LIVE
    root: str = ""
    child_pid: int | None = None  # the CMD `lanewatch run` started, leader of its own group
    child_start_ticks: int | None = None
    pgid: int | None = None
    released_at: float | None = None
    exit_code: int | None = None
    schema: int = SCHEMA

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        return data

    def overdue_after(self) -> float:
        return self.heartbeat_interval * OVERDUE_FACTOR

    def with_changes(self, **changes: Any) -> Stamp:
        return replace(self, **changes)


_STAMP_FIELDS = frozenset(f.name for f in fields(Stamp))
_REQUIRED: dict[str, tuple[type, ...]] = {
    "lane": (str,),
    "namespace": (str,),
    "checkout_id": (str,),
    "checkout_path": (str,),
    "host": (str,),
    "boot_id": (str,),
    "pid": (int,),
    "start_ticks": (int,),
    "user": (str,),
    "uid": (int,),
    "command": (list,),
    "started_at": (int, float),
    "heartbeat_at": (int, float),
    "heartbeat_interval": (int, float),
}
_STATES = frozenset(state.value for state in OwnerState)
_OPTIONAL_INT = ("child_pid", "child_start_ticks", "pgid", "exit_code")
_OPTIONAL_FLOAT = ("released_at",)


class StampStatus(StrEnum):
    OK = "ok"
    MISSING = "missing"
    EMPTY = "empty"
    GARBAGE = "garbage"  # not JSON, partial write, or wrong shape
    OVERSIZED = "oversized"
    FUTURE_SCHEMA = "future-schema"
    SYMLINK = "symlink"  # or not a regular file
    UNREADABLE = "unreadable"  # permission or I/O error: we cannot tell


@dataclass(frozen=True, slots=True)
class StampRead:
    status: StampStatus
    stamp: Stamp | None = None
    detail: str = ""
    mtime: float | None = None  # the live heartbeat: owners touch the stamp, not rewrite it
    raw: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is StampStatus.OK

    @property
    def heartbeat_at(self) -> float | None:
        if self.stamp is None:
            return None
        return max(self.stamp.heartbeat_at, self.mtime or 0.0)


def stamp_path(namespace: Path) -> Path:
    return namespace / META_DIR / STAMP_FILE


def parse_stamp(data: bytes) -> StampRead:
    """Turn stamp bytes into a typed result. Pure: never raises."""
    if len(data) > MAX_STAMP_BYTES:
        return StampRead(StampStatus.OVERSIZED, detail=f"larger than {MAX_STAMP_BYTES} bytes")
    if not data.strip():
        return StampRead(StampStatus.EMPTY, detail="empty file")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return StampRead(StampStatus.GARBAGE, detail=f"not JSON: {str(exc)[:80]}")
    if not isinstance(obj, dict):
        return StampRead(StampStatus.GARBAGE, detail="not a JSON object")
    schema = obj.get("schema")
    if type(schema) is not int or schema < 1:
        return StampRead(StampStatus.GARBAGE, detail="no valid schema version", raw=obj)
    if schema > SCHEMA:
        return StampRead(
            StampStatus.FUTURE_SCHEMA,
            detail=f"schema {schema} is newer than this lanewatch understands ({SCHEMA})",
            raw=obj,
        )
    values: dict[str, Any] = {}
    for name, types in _REQUIRED.items():
        value = obj.get(name)
        if type(value) not in types:  # `type` not isinstance: True is not a pid
            return StampRead(StampStatus.GARBAGE, detail=f"field {name!r} missing or wrong type")
        if type(value) is float and not math.isfinite(value):  # JSON allows NaN and Infinity
            return StampRead(StampStatus.GARBAGE, detail=f"field {name!r} is not a finite number")
        values[name] = value
    if not all(isinstance(part, str) for part in values["command"]):
        return StampRead(StampStatus.GARBAGE, detail="field 'command' is not a list of strings")
    for name in _OPTIONAL_INT:
        value = obj.get(name)
        if value is not None and type(value) is not int:
            return StampRead(StampStatus.GARBAGE, detail=f"field {name!r} has the wrong type")
        values[name] = value
    for name in _OPTIONAL_FLOAT:
        value = obj.get(name)
        if value is not None and (type(value) not in (int, float) or not math.isfinite(value)):
            return StampRead(StampStatus.GARBAGE, detail=f"field {name!r} has the wrong type")
        values[name] = value
    state = obj.get("state")
    if type(state) is not str or state not in _STATES:  # required: "live" is never a guess
        return StampRead(StampStatus.GARBAGE, detail=f"missing or unknown state {state!r}"[:120])
    values["state"] = OwnerState(state)
    root = obj.get("root", "")
    if type(root) is not str:
        return StampRead(StampStatus.GARBAGE, detail="field 'root' has the wrong type")
    values["root"] = root
    if values["pid"] <= 0 or values["heartbeat_interval"] <= 0:
        return StampRead(StampStatus.GARBAGE, detail="pid or heartbeat interval out of range")
    values["schema"] = schema
    return StampRead(
        StampStatus.OK, Stamp(**{k: v for k, v in values.items() if k in _STAMP_FIELDS})
    )


def read_stamp(namespace: Path) -> StampRead:
    """Read a namespace's stamp. Neither `.lanewatch/` nor `owner.json` may be a symlink."""
    path = stamp_path(namespace)
    try:
        data, st = read_nofollow_in(namespace / META_DIR, STAMP_FILE, MAX_STAMP_BYTES)
    except FileNotFoundError:
        return StampRead(StampStatus.MISSING, detail="no owner stamp")
    except UnsafePath as exc:
        return StampRead(StampStatus.SYMLINK, detail=str(exc))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a symlink
            return StampRead(StampStatus.SYMLINK, detail=f"{path} or its folder is a symlink")
        return StampRead(StampStatus.UNREADABLE, detail=f"{exc.strerror} reading {path}")
    result = parse_stamp(data)
    return replace(result, mtime=st.st_mtime)


def write_stamp(namespace: Path, stamp: Stamp) -> None:
    data = json.dumps(stamp.to_json(), indent=2, sort_keys=True).encode() + b"\n"
    write_atomic(stamp_path(namespace), data)


def touch_heartbeat(namespace: Path, now: float | None = None) -> None:
    """Refresh the heartbeat without a rewrite (see docs/architecture.md)."""
    t = time.time() if now is None else now
    os.utime(stamp_path(namespace), (t, t), follow_symlinks=False)
