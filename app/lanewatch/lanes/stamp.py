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

from lanewatch.lanes.fields import Rejected, load_versioned, strings, take
from lanewatch.lanes.fsutil import NotAFile, UnsafePath, read_nofollow_in, write_atomic
from lanewatch.lanes.scheme import SCHEME_VERSION

SCHEMA = 1
MAX_STAMP_BYTES = 64 * 1024
DEFAULT_HEARTBEAT = 5.0
MAX_HEARTBEAT = 86400.0
ENV_HEARTBEAT = "LANEWATCH_HEARTBEAT"
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
    # The fence (runner/fence.py): "kernel", "bwrap" or "none"; None: written before fences.
    fence: str | None = None
    fence_note: str | None = None  # why a lane runs unfenced ("--fence none", the kernel's no)
    fence_private: list[str] | None = None  # the mount points that are the lane's own
    schema: int = SCHEMA
    # The mount namespace CMD runs in ("mnt:[4026532]"), when it has one of its own (the fence):
    # a process cannot leave it, so it marks the lane's processes after the runner is gone.
    mnt_ns: str | None = None
    # The scheme of the host that wrote it (lanes/scheme.py). None: the stamp names none (an
    # older lanewatch: `scheme.stated` reads it as 1). Typed as every field: not an int is garbage.
    scheme: int | None = SCHEME_VERSION
    # The family (docs/engine.md): the folder name, in the same root, of the lane that started
    # this one for its own workers (`pytest -p lanewatch -n 2`: `pytest` for `pytest-gw0`);
    # None: a lane of its own. Lanes of one family are never intruders to each other.
    family: str | None = None
    # The regular files on fds 0-2 of the process that started the lane, as [st_dev, st_ino],
    # taken when it began (`lanes/handed.py`): what whoever started it redirected its output to
    # (`pytest > /tmp/log`). The lane's processes writing them are not the lane's own writes.
    # None: not recorded (an older lanewatch).
    stdio: list[list[int]] | None = None
    # The cgroup v2 lanewatch made for the lane (`linux/cgroup.py`), CMD started in
    # it; None: the lane's processes are found by the membership rules (`cgroup_note`: why).
    cgroup: str | None = None
    cgroup_note: str | None = None
    # The lane's port lease (`lanes/leases.py`): [first port, count]; None: it holds none.
    ports: list[int] | None = None
    # `--fence net` (runner/netfence.py): the network namespace CMD runs in ("net:[4026533]"),
    # when it has one of its own; else `net_note` says why a lane that asked for one has none.
    net_ns: str | None = None
    net_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = self.state.value
        # Stamps without them keep their shape.
        for name in (
            *("mnt_ns", "family", "stdio", "cgroup", "cgroup_note", "ports"),
            *("net_ns", "net_note"),
        ):
            if data[name] is None:
                del data[name]
        return data

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
_OPTIONAL: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("child_pid", "child_start_ticks", "pgid", "exit_code"), (int,)),
    "released_at": (int, float),
    **dict.fromkeys(("fence", "fence_note"), (str,)),
    "fence_private": (list,),
    **dict.fromkeys(("mnt_ns", "family", "cgroup", "cgroup_note", "net_ns", "net_note"), (str,)),
    "scheme": (int,),
    "stdio": (list,),
    "ports": (list,),
}
_WRONG_TYPE = "field {name!r} has the wrong type"


class StampStatus(StrEnum):
    OK = "ok"
    MISSING = "missing"
    EMPTY = "empty"
    GARBAGE = "garbage"  # not JSON, partial write, or wrong shape
    OVERSIZED = "oversized"
    FUTURE_SCHEMA = "future-schema"
    SYMLINK = "symlink"  # the stamp, or its folder, is a symlink
    # Something else that is not a regular file, by name: never read, never blocked on.
    FIFO = "fifo"
    DIRECTORY = "directory"
    SOCKET = "socket"
    DEVICE = "device"
    SPECIAL = "special"
    UNREADABLE = "unreadable"  # permission or I/O error: we cannot tell


@dataclass(frozen=True, slots=True)
class StampRead:
    status: StampStatus
    stamp: Stamp | None = None
    detail: str = ""
    mtime: float | None = None  # the live heartbeat: owners touch the stamp, not rewrite it
    raw: dict[str, Any] | None = field(default=None, repr=False)
    # Who owns the stamp file and the namespace folder (None: not read). The stamp's `uid` is
    # only a claim; these say who could have written it (`model.classify.claims_mismatch`).
    file_uid: int | None = None
    folder_uid: int | None = None
    # The bytes as read, where the reader keeps them (the engine's: `files.walk.read_stamp_at`),
    # so a replaced owner's stamp can be shown beside its successor's.
    data: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is StampStatus.OK

    @property
    def heartbeat_at(self) -> float | None:
        if self.stamp is None:
            return None
        return max(self.stamp.heartbeat_at, self.mtime or 0.0)


def not_a_file(exc: NotAFile) -> StampRead:
    """The read of a stamp that is a FIFO, a folder, a device...: labelled for what it is."""
    return StampRead(StampStatus(exc.kind), detail=str(exc))


def stamp_path(namespace: Path) -> Path:
    return namespace / META_DIR / STAMP_FILE


def parse_stamp(data: bytes) -> StampRead:
    """Turn stamp bytes into a typed result. Pure: never raises."""
    obj = load_versioned(
        data, limit=MAX_STAMP_BYTES, schema=SCHEMA, no_schema="no valid schema version"
    )
    if isinstance(obj, Rejected):
        return StampRead(StampStatus(obj.kind), detail=obj.detail, raw=obj.raw)
    values = take(
        obj,
        _REQUIRED,
        wrong="field {name!r} missing or wrong type",
        not_finite="field {name!r} is not a finite number",
    )
    if isinstance(values, str):
        return _garbage(values)
    if not strings(values["command"]):
        return _garbage("field 'command' is not a list of strings")
    optional = take(
        obj, _OPTIONAL, wrong=_WRONG_TYPE, optional=True, not_finite=_WRONG_TYPE, into=values
    )
    if isinstance(optional, str):
        return _garbage(optional)
    if values.get("fence_private") is not None and not strings(values["fence_private"]):
        return _garbage("field 'fence_private' is not a list of strings")
    if values.get("stdio") is not None and not _file_ids(values["stdio"]):
        return _garbage("field 'stdio' is not a list of [device, inode] pairs")
    if values.get("ports") is not None and not _lease_pair(values["ports"]):
        return _garbage("field 'ports' is not [first port, count]")
    family = values.get("family")
    if family is not None and (not family or "/" in family or family in (".", "..")):
        return _garbage("field 'family' is not a folder name")
    state = obj.get("state")
    if type(state) is not str or state not in _STATES:  # required: "live" is never a guess
        return _garbage(f"missing or unknown state {state!r}"[:120])
    values["state"] = OwnerState(state)
    root = obj.get("root", "")
    if type(root) is not str:
        return _garbage("field 'root' has the wrong type")
    values["root"] = root
    if values["pid"] <= 0 or values["heartbeat_interval"] <= 0:
        return _garbage("pid or heartbeat interval out of range")
    values["schema"] = obj["schema"]
    return StampRead(
        StampStatus.OK, Stamp(**{k: v for k, v in values.items() if k in _STAMP_FIELDS})
    )


def _file_ids(value: list[Any]) -> bool:
    return len(value) <= 3 and all(
        type(item) is list and len(item) == 2 and all(type(n) is int and n >= 0 for n in item)
        for item in value
    )


def _lease_pair(value: list[Any]) -> bool:
    if len(value) != 2 or not all(type(n) is int for n in value):
        return False
    first, count = value
    return first > 0 and count > 0 and first + count - 1 <= 65535


def _garbage(detail: str) -> StampRead:
    return StampRead(StampStatus.GARBAGE, detail=detail)


def read_stamp(namespace: Path) -> StampRead:
    """Read a namespace's stamp. Neither `.lanewatch/` nor `owner.json` may be a symlink."""
    path = stamp_path(namespace)
    try:
        data, st = read_nofollow_in(namespace / META_DIR, STAMP_FILE, MAX_STAMP_BYTES)
    except FileNotFoundError:
        return StampRead(StampStatus.MISSING, detail="no owner stamp")
    except NotAFile as exc:
        return not_a_file(exc)
    except UnsafePath as exc:
        return StampRead(StampStatus.SYMLINK, detail=str(exc))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a symlink
            return StampRead(StampStatus.SYMLINK, detail=f"{path} or its folder is a symlink")
        return StampRead(StampStatus.UNREADABLE, detail=f"{exc.strerror} reading {path}")
    result = parse_stamp(data)
    return replace(result, mtime=st.st_mtime, file_uid=st.st_uid, folder_uid=folder_uid(namespace))


def folder_uid(namespace: str | os.PathLike[str]) -> int | None:
    """The uid owning the namespace folder itself (never followed), or None if unreadable."""
    try:
        return os.lstat(namespace).st_uid
    except OSError:
        return None


def write_stamp(namespace: Path, stamp: Stamp) -> None:
    data = json.dumps(stamp.to_json(), indent=2, sort_keys=True).encode() + b"\n"
    write_atomic(stamp_path(namespace), data)


def touch_heartbeat(namespace: Path, now: float | None = None) -> None:
    """Refresh the heartbeat without a rewrite (see docs/architecture.md)."""
    t = time.time() if now is None else now
    os.utime(stamp_path(namespace), (t, t), follow_symlinks=False)
