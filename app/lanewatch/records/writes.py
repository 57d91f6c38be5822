"""Persisted write history: every kernel-attributed write of a namespace's file, and every
write a lane made in shared temp, in `<root>/.lanewatch-root/writes.jsonl`.

One JSON object a line (`WriteEntry.to_json`). Bounded: once the file passes `MAX_BYTES` it
is renamed to `writes.1.jsonl` (replacing the previous one) under `writes.lock`, so a root
holds at most about twice that. Several engines may append to one root: each line is written
with one `write` in append mode, and readers drop the duplicates (the same kernel event seen
by two engines: same path, pid, start ticks and content, within a second).
`lanewatch history PATH` reads it with `history(roots, path)`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import Timeout, UnixFileLock

from lanewatch.lanes.fsutil import open_regular
from lanewatch.lanes.roots import ROOT_META
from lanewatch.records.ownership import give_fd, give_path, root_owner

log = logging.getLogger(__name__)

LOG_FILE = "writes.jsonl"
OLD_FILE = "writes.1.jsonl"
LOCK_FILE = "writes.lock"
MAX_BYTES = 8 * 1024 * 1024
MAX_LINE = 64 * 1024
SCHEMA = 1
# `how` of an entry the engine made from a stamp it read (not a kernel event): the writer is
# the owner the stamp names (engine/stampversions.py).
STAMP_CLAIM = "as its stamp says"
# `how` of an entry the engine made from a shared file it read while lanes' processes held it
# open for writing (engine/heldversions.py): the writer is inferred, `held_by` names the holders.
HELD_READ = "inferred: read while it held the file"


@dataclass(frozen=True, slots=True)
class WriteEntry:
    """One attributed write."""

    path: str
    time: float  # when we read the event (the write happened at most that long before)
    size: int | None
    sha256: str | None  # None: not hashed (a modify before the close, or too large)
    stored: bool  # the content is in the root's evidence store
    pid: int
    start_ticks: int | None
    identified: bool
    lane: str | None
    namespace: str | None  # the writer's namespace
    command: tuple[str, ...]
    how: str
    event: str  # "close-write" | "modify"
    victim: str | None = None  # the namespace the path is in (None: shared temp)
    held_by: tuple[str, ...] = ()  # HELD_READ: "lane L, pid N" of every holder at the read

    def to_json(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in self.__slots__}  # not asdict: it deep-copies
        data["command"] = list(self.command)
        data["held_by"] = list(self.held_by)
        data["schema"] = SCHEMA
        return data

    @classmethod
    def from_json(cls, obj: object) -> WriteEntry | None:
        if not isinstance(obj, dict):
            return None
        try:
            cmd = obj.get("command") or []
            held = obj.get("held_by") or []
            return cls(
                path=str(obj["path"]),
                time=float(obj["time"]),
                size=_int(obj.get("size")),
                sha256=obj["sha256"] if isinstance(obj.get("sha256"), str) else None,
                stored=obj.get("stored") is True,
                pid=int(obj["pid"]),
                start_ticks=_int(obj.get("start_ticks")),
                identified=obj.get("identified") is True,
                lane=obj["lane"] if isinstance(obj.get("lane"), str) else None,
                namespace=obj["namespace"] if isinstance(obj.get("namespace"), str) else None,
                command=tuple(str(a) for a in cmd) if isinstance(cmd, list) else (),
                how=str(obj.get("how") or ""),
                event=str(obj.get("event") or ""),
                victim=obj["victim"] if isinstance(obj.get("victim"), str) else None,
                held_by=tuple(str(h) for h in held) if isinstance(held, list) else (),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def log_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / ROOT_META


class WriteLog:
    """Appends to one root's write history (one thread)."""

    def __init__(self, root: str, *, max_bytes: int = MAX_BYTES) -> None:
        self.dir = log_dir(root)
        self.path = self.dir / LOG_FILE
        self.max_bytes = max_bytes
        self._dir_ok = False
        self._owner = root_owner(root)  # a privileged recorder's files are the root owner's

    def append(self, entries: Sequence[WriteEntry]) -> bool:
        if not entries:
            return True
        data = "".join(json.dumps(e.to_json(), sort_keys=True) + "\n" for e in entries).encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            if not self._dir_ok:
                self.dir.mkdir(exist_ok=True)  # not parents: a root that is gone stays gone
                give_path(self.dir, self._owner)
                self._dir_ok = True
            fd = open_regular(self.path, flags)  # NotAFile (an OSError) for a FIFO
            try:
                give_fd(fd, self._owner)
                os.write(fd, data)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > self.max_bytes:
                self._rotate()
        except OSError as exc:
            log.warning("cannot record writes in %s: %s", self.path, exc)
            self._dir_ok = False
            return False
        return True

    def _rotate(self) -> None:
        lock = UnixFileLock(
            str(self.dir / LOCK_FILE), timeout=5, thread_local=False, preserve_lock_file=True
        )
        try:
            with lock, contextlib.suppress(FileNotFoundError):
                give_path(self.dir / LOCK_FILE, self._owner)
                if os.stat(self.path).st_size > self.max_bytes:  # not rotated by another
                    os.replace(self.path, self.dir / OLD_FILE)
        except Timeout:
            log.warning("write history of %s not rotated: lock busy", self.dir)


def _read(path: Path, limit: int | None = None) -> Iterable[WriteEntry]:
    """The entries of one log; with `limit`, of its last `limit` bytes only (the first,
    partial line skipped)."""
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if limit is not None and size > limit:
                f.seek(size - limit)
                f.readline()
            for raw in f:
                if len(raw) > MAX_LINE:
                    continue
                try:
                    entry = WriteEntry.from_json(json.loads(raw))
                except ValueError:
                    continue
                if entry is not None:
                    yield entry
    except OSError:
        return


def entries(roots: Iterable[str]) -> list[WriteEntry]:
    """Every recorded write of every root, oldest first, without duplicates."""
    out: list[WriteEntry] = []
    for root in roots:
        for name in (OLD_FILE, LOG_FILE):
            out.extend(_read(log_dir(root) / name))
    out.sort(key=lambda e: e.time)
    kept: list[WriteEntry] = []
    last: dict[tuple[object, ...], float] = {}
    for e in out:
        key = (e.path, e.pid, e.start_ticks, e.sha256, e.size, e.event)
        t = last.get(key)
        last[key] = e.time
        if t is not None and e.time - t < 1.0:
            continue
        kept.append(e)
    return kept


TAIL_BYTES = 512 * 1024  # of each root's current log: what `latest_under` reads


def latest_under(
    roots: Iterable[str], under: str, *, limit: int = TAIL_BYTES
) -> dict[str, WriteEntry]:
    """The newest recorded write of each path under the folder `under`, from the recent end
    of each root's history only (bounded: the detail pane asks on every selection)."""
    prefix = under.rstrip("/") + "/"
    out: dict[str, WriteEntry] = {}
    for root in roots:
        for e in _read(log_dir(root) / LOG_FILE, limit):
            if e.path.startswith(prefix):
                old = out.get(e.path)
                if old is None or e.time >= old.time:
                    out[e.path] = e
    return out


def history(roots: Iterable[str], path: str) -> list[WriteEntry]:
    """Every recorded write of `path` (as the kernel printed it: canonical), oldest first."""
    return [e for e in entries(roots) if e.path == path]
