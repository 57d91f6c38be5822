"""Incidents on disk: `<root>/.lanewatch-root/incidents.jsonl`, shared by every engine.

Each line is a whole incident record. Writers append under `incidents.lock` (a lock file that
is never unlinked), after catching up with what others appended, and only append a record that
differs from the merged one on disk, so two engines on one root do not duplicate each other.
Readers merge lines by id (`model.incidents.merge_records`); a malformed line is skipped.
When the file holds many superseded lines it is compacted, still under the lock.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from filelock import Timeout, UnixFileLock

from lanewatch.lanes.fsutil import NotAFile, open_regular, write_atomic
from lanewatch.lanes.roots import ROOT_META
from lanewatch.model.incidents import IncidentRecord, merge_records, record_from_json
from lanewatch.records.ownership import give_fd, give_path, root_owner

log = logging.getLogger(__name__)

LOG_FILE = "incidents.jsonl"
LOCK_FILE = "incidents.lock"
COMPACT_BYTES = 1024 * 1024  # compact once the file is this large and mostly superseded
MAX_LINE = 1024 * 1024


def log_path(root: str) -> Path:
    return Path(root) / ROOT_META / LOG_FILE


class IncidentLog:
    """One root's incident file, as seen by one engine."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.path = log_path(root)
        self.known: dict[str, IncidentRecord] = {}  # merged records, as on disk
        self._offset = 0
        self._inode: int | None = None
        self._lines = 0
        self._owner = root_owner(root)  # a privileged recorder's files are the root owner's

    def _lock(self) -> UnixFileLock:
        return UnixFileLock(
            str(self.path.parent / LOCK_FILE),
            timeout=10,
            thread_local=False,
            fallback_to_soft=False,
            preserve_lock_file=True,
        )

    def read_new(self) -> list[IncidentRecord]:
        """Records appended since the last read (all of them if the file was replaced)."""
        try:
            fd = open_regular(self.path, os.O_RDONLY)
        except NotAFile as exc:
            log.warning("incidents of %s not read: %s", self.root, exc)
            return []
        except OSError:
            return []
        try:
            st = os.fstat(fd)
            if st.st_ino != self._inode or st.st_size < self._offset:
                self._offset, self._inode, self._lines = 0, st.st_ino, 0
                self.known.clear()
            data = os.pread(fd, max(0, st.st_size - self._offset), self._offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1
        self._offset += end
        out: list[IncidentRecord] = []
        for raw in data[:end].splitlines():
            self._lines += 1
            if len(raw) > MAX_LINE:
                continue
            try:
                rec = record_from_json(json.loads(raw), self.root)
            except ValueError:
                continue
            if rec is not None:
                out.append(rec)
                old = self.known.get(rec.id)
                self.known[rec.id] = rec if old is None else merge_records(old, rec)
        return out

    def load(self) -> list[IncidentRecord]:
        """Every incident of this root, merged."""
        self.read_new()
        return list(self.known.values())

    def persist(self, records: Iterable[IncidentRecord]) -> bool:
        """Append what is new in `records`; False if the root cannot be written now."""
        records = list(records)
        if not records:
            return True
        try:
            self.path.parent.mkdir(exist_ok=True)
            give_path(self.path.parent, self._owner)
            with self._lock():
                give_path(self.path.parent / LOCK_FILE, self._owner)
                self.read_new()
                lines = []
                for rec in records:
                    old = self.known.get(rec.id)
                    merged = rec if old is None else merge_records(old, rec)
                    if old is not None and merged.to_json() == old.to_json():
                        continue
                    self.known[rec.id] = merged
                    lines.append(json.dumps(merged.to_json(), sort_keys=True) + "\n")
                if lines:
                    self._append("".join(lines).encode())
                if self._offset > COMPACT_BYTES and self._lines > 4 * len(self.known):
                    self._compact()
        except (OSError, Timeout) as exc:
            log.warning("cannot write incidents to %s: %s", self.path, exc)
            return False
        return True

    def _append(self, data: bytes) -> None:
        fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            give_fd(fd, self._owner)
            os.write(fd, data)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._offset, self._inode = st.st_size, st.st_ino
        self._lines += data.count(b"\n")

    def _compact(self) -> None:
        body = "".join(json.dumps(r.to_json(), sort_keys=True) + "\n" for r in self.known.values())
        write_atomic(self.path, body.encode())
        give_path(self.path, self._owner)
        st = os.stat(self.path)
        self._offset, self._inode, self._lines = st.st_size, st.st_ino, len(self.known)


def read_all(roots: Iterable[str]) -> dict[str, IncidentRecord]:
    """Every incident of every root, merged by id (for the CLI)."""
    out: dict[str, IncidentRecord] = {}
    for root in roots:
        for rec in IncidentLog(root).load():
            old = out.get(rec.id)
            out[rec.id] = rec if old is None else merge_records(old, rec)
    return out
