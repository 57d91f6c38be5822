"""The trash of a root: layout, records, and the lock that serialises clear, restore and purge.

```
<root>/.lanewatch-root/
  trash.lock                 flock: one clear / restore / purge at a time in this root
  trash.jsonl                journal: cleared, restored, purged (actions.journal)
  trash/<id>/record.json     where it came from, who cleared it, when, its state and size
  trash/<id>/namespace/      the namespace folder itself, moved here by one rename
  trash/.purging-<id>/       an entry being purged (a purge that died is resumed from here)
```

An entry is complete when `namespace/` exists. The record is written (fsync'd) before the
rename, so a crash between the two leaves a record without a namespace: listed as incomplete
and removed by the next purge, never restored.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lanewatch.actions.journal import actor_label
from lanewatch.actions.targets import NotFound, TargetError, known_roots
from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import ensure_real_dir, open_regular, read_nofollow_in, write_atomic
from lanewatch.lanes.roots import ROOT_META

TRASH = "trash"
TRASH_LOCK = "trash.lock"
RECORD = "record.json"
PAYLOAD = "namespace"
PURGING = ".purging-"
SCHEMA = 1
LOCK_WAIT = 60.0  # a clear's checks take well under a second; a purge of a big tree longer
_ID_RE = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")


def trash_dir(root: Path) -> Path:
    return root / ROOT_META / TRASH


def new_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


def is_id(text: str) -> bool:
    return bool(_ID_RE.fullmatch(text))


def ensure_trash(root: Path) -> Path:
    """Create `.lanewatch-root/trash/` if needed; refuse if either is a symlink."""
    ensure_real_dir(root / ROOT_META)
    return ensure_real_dir(trash_dir(root), 0o700)


@contextlib.contextmanager
def trash_lock(root: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the root's trash lock, waiting up to `wait` seconds for another clear or purge."""
    ensure_real_dir(root / ROOT_META)
    fd = open_regular(root / ROOT_META / TRASH_LOCK, os.O_RDONLY | os.O_CREAT)  # never a FIFO
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            if time.monotonic() > deadline:
                raise LanewatchError(f"the trash of {root} is busy (another clear or purge)")
            time.sleep(0.02)
        yield
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class TrashRecord:
    id: str
    root: str
    name: str
    original: str
    lane: str | None
    checkout_id: str | None
    checkout_path: str | None
    state: str  # the namespace's state when it was cleared
    reason: str
    owner_pid: int | None
    cleared_at: float
    cleared_by: dict[str, Any]
    files: int
    bytes: int  # apparent: the files' lengths
    schema: int = SCHEMA
    # On disk, as `du -sB1` counts (None: a record written before it was kept).
    allocated: int | None = None

    def write(self, entry: Path) -> None:
        data = json.dumps(asdict(self), indent=2, sort_keys=True).encode() + b"\n"
        write_atomic(entry / RECORD, data)

    @classmethod
    def read(cls, entry: Path) -> TrashRecord | None:
        """The record of an entry, or None if missing or not one we wrote."""
        try:
            data, _ = read_nofollow_in(entry, RECORD, 256 * 1024)
            raw = json.loads(data)
            record = cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})
        except (OSError, ValueError, TypeError, LanewatchError):
            return None
        if not isinstance(record.name, str) or not isinstance(record.cleared_at, int | float):
            return None
        return record


@dataclass(frozen=True, slots=True)
class TrashEntry:
    """One cleared namespace in a root's trash (what `lanewatch trash` and the dashboard list)."""

    id: str
    root: str
    name: str
    lane: str | None
    original: str
    cleared_at: float | None
    cleared_by: str | None
    bytes: int | None
    files: int | None
    state: str | None
    reason: str | None
    checkout_path: str | None
    path: str  # the entry folder
    complete: bool  # False: a record without a namespace (a clear that died mid-way)
    record: TrashRecord | None
    allocated: int | None = None  # on disk, as `du -sB1` counted it at the clear

    def to_json(self, now: float) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "record"}
        data["allocated_bytes"] = data.pop("allocated")
        data["age"] = None if self.cleared_at is None else round(now - self.cleared_at, 3)
        data["cleared_by_detail"] = self.record.cleared_by if self.record else None
        return data


def read_entry(root: Path, entry_id: str) -> TrashEntry:
    entry = trash_dir(root) / entry_id
    record = TrashRecord.read(entry)
    complete = os.path.isdir(entry / PAYLOAD) and not os.path.islink(entry / PAYLOAD)
    if record is None:
        return TrashEntry(
            entry_id, str(root), "?", None, "?", None, None, None, None, None, None, None,
            str(entry), complete, None,
        )  # fmt: skip
    return TrashEntry(
        id=entry_id,
        root=str(root),
        name=record.name,
        lane=record.lane,
        original=record.original,
        cleared_at=float(record.cleared_at),
        cleared_by=actor_label(record.cleared_by),
        bytes=record.bytes,
        files=record.files,
        state=record.state,
        reason=record.reason,
        checkout_path=record.checkout_path,
        path=str(entry),
        complete=complete,
        record=record,
        allocated=record.allocated if isinstance(record.allocated, int) else None,
    )


def entry_ids(root: Path) -> list[str]:
    """Ids of the entries in a root's trash, oldest first (ids sort by time)."""
    try:
        with os.scandir(trash_dir(root)) as it:
            return sorted(e.name for e in it if is_id(e.name) and e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def purging_dirs(root: Path) -> list[str]:
    try:
        with os.scandir(trash_dir(root)) as it:
            return sorted(e.name for e in it if e.name.startswith(PURGING))
    except (FileNotFoundError, NotADirectoryError):
        return []


def list_trash(root: Path, *, incomplete: bool = False) -> list[TrashEntry]:
    """The entries of one root's trash, oldest first; those a clear did not finish (a record
    without a namespace) only with `incomplete`."""
    entries = [read_entry(root, i) for i in entry_ids(root)]
    return entries if incomplete else [e for e in entries if e.complete]


def list_all(roots: Sequence[Path] | None = None, *, incomplete: bool = False) -> list[TrashEntry]:
    known = roots if roots is not None else known_roots()
    found = [e for r in known for e in list_trash(r, incomplete=incomplete)]
    return sorted(found, key=lambda e: e.id)


def find(trash_id: str, roots: Sequence[Path] | None = None) -> TrashEntry:
    """The entry with this id in the known roots. Raises NotFound or TargetError."""
    if not is_id(trash_id):
        raise TargetError(f"{trash_id!r} is not a trash id (see `lanewatch trash`)")
    found = [
        read_entry(r, trash_id)
        for r in (roots if roots is not None else known_roots())
        if os.path.isdir(trash_dir(r) / trash_id)
    ]
    if not found:
        raise NotFound(f"no entry {trash_id} in the trash of the known roots", trash_id)
    if len(found) > 1:
        raise TargetError(f"{trash_id} is in several roots: " + ", ".join(e.root for e in found))
    return found[0]
