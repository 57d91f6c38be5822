"""Purge: delete trash entries for good, after the retention period.

Entries older than DEFAULT_RETENTION (7 days; `--older-than` changes it) are purged. Each is
first renamed to `trash/.purging-<id>` under the root's trash lock: from then on it can no
longer be restored or listed, and a purge that dies mid-way is finished by the next purge
(every `.purging-*` folder is resumed whatever its age; one that a running purge holds a
flock on is left to it). The delete itself runs outside the lock with `fsops.remove_tree`,
which never follows a symlink and never leaves the entry's filesystem or mount: a mount point
found inside (a bind mount made after the clear, even of the same filesystem) is neither
entered nor deleted, and the purge of that entry fails naming it, for the next purge to finish
once it is unmounted. An entry some process still holds (a writer with its cwd or an open file
or mapping inside) is kept, named, and left for a later purge.

Unlike a clear, a purge does not refuse when some processes cannot be inspected: the entry
was checked when it was cleared and has waited out the retention period in the trash.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lanewatch.actions import journal, trashbox
from lanewatch.actions.checks import MAX_LISTED, describe, settled_scan
from lanewatch.actions.fsops import remove_tree
from lanewatch.actions.results import human_size
from lanewatch.actions.sockets import listening_inside
from lanewatch.actions.targets import known_roots
from lanewatch.actions.trashbox import TrashEntry, list_all
from lanewatch.errors import LanewatchError

DEFAULT_RETENTION = 7 * 24 * 3600.0

PurgeOutcome = Literal["purged", "kept", "failed"]


@dataclass(frozen=True, slots=True)
class PurgeItem:
    trash_id: str
    root: str
    name: str
    outcome: PurgeOutcome
    message: str
    bytes: int | None = None


@dataclass(frozen=True, slots=True)
class PurgeResult:
    items: tuple[PurgeItem, ...]
    older_than: float

    @property
    def ok(self) -> bool:
        return all(i.outcome != "failed" for i in self.items)

    @property
    def message(self) -> str:
        purged = [i for i in self.items if i.outcome == "purged"]
        if not self.items:
            return "nothing to purge"
        size = sum(i.bytes or 0 for i in purged)
        head = f"purged {len(purged)} entries ({human_size(size)})"
        rest = [i.message for i in self.items if i.outcome != "purged"]
        return "; ".join([head, *rest])

    def __str__(self) -> str:
        return self.message


def due(
    roots: Sequence[Path] | None = None,
    *,
    older_than: float = DEFAULT_RETENTION,
    now: float | None = None,
) -> list[TrashEntry]:
    """Entries a purge would delete: cleared at least `older_than` seconds ago, or incomplete."""
    cutoff = (time.time() if now is None else now) - older_than
    out = []
    for entry in list_all(roots, incomplete=True):
        when = entry.cleared_at if entry.cleared_at is not None else _mtime(entry.path)
        if not entry.complete or when <= cutoff:
            out.append(entry)
    return out


def purge(
    roots: Sequence[Path] | None = None,
    *,
    older_than: float = DEFAULT_RETENTION,
    only: Collection[str] | None = None,
    now: float | None = None,
    reaper: str | None = None,
) -> PurgeResult:
    """Delete due entries for good (only those in `only`, when given: what the user saw).
    `reaper`: the policy that asked (`actions/reap.py`), written in the trash journal."""
    items: list[PurgeItem] = []
    for root in roots if roots is not None else known_roots():
        try:
            items.extend(_purge_root(root, older_than, only, now, reaper))
        except (LanewatchError, OSError) as exc:  # its trash lock is busy, or not a file
            msg = f"could not purge the trash of {root}: {exc}"
            items.append(PurgeItem("-", str(root), "-", "failed", msg))
    return PurgeResult(tuple(items), older_than)


def _purge_root(
    root: Path,
    older_than: float,
    only: Collection[str] | None,
    now: float | None,
    reaper: str | None = None,
) -> list[PurgeItem]:
    trash = trashbox.trash_dir(root)
    if not os.path.isdir(trash) or os.path.islink(trash):
        return []
    items: list[PurgeItem] = []
    work: list[tuple[str, TrashEntry | None, int]] = []
    with trashbox.trash_lock(root):
        for name in trashbox.purging_dirs(root):  # a purge that died left these: finish them
            fd = _claim(trash / name)
            if fd is not None:  # else another purge is deleting it right now
                work.append((name, None, fd))
        entries = due([root], older_than=older_than, now=now)
        entries = [e for e in entries if only is None or e.id in only]
        held = _held(entries)
        for entry in entries:
            if entry.id in held:
                items.append(_kept(entry, held[entry.id]))
                continue
            doomed = trashbox.PURGING + entry.id
            try:
                os.rename(trash / entry.id, trash / doomed)
            except FileNotFoundError:
                continue  # purged by someone else meanwhile
            except OSError as exc:  # EBUSY: the entry itself is a mount point
                why = exc.strerror or str(exc)
                items.append(_failed(root, entry.id, entry.name, why, entry.bytes))
                continue
            fd = _claim(trash / doomed)
            if fd is not None:
                work.append((doomed, entry, fd))
    for name, held_entry, fd in work:  # the deletes run outside the lock: clears need not wait
        try:
            items.append(_delete(root, trash / name, held_entry, reaper))
        finally:
            os.close(fd)
    return items


def _claim(doomed: Path) -> int | None:
    """An exclusive flock on a `.purging-*` folder while we delete it, so a concurrent purge
    leaves it to us instead of resuming it too (a purge that died holds no flock)."""
    try:
        fd = os.open(doomed, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _held(entries: Sequence[TrashEntry]) -> dict[str, str]:
    if not entries:
        return {}
    scan = settled_scan([e.path for e in entries])
    by_prefix = {os.path.abspath(e.path): e.id for e in entries}
    out: dict[str, str] = {}
    listening = listening_inside([Path(e.path) for e in entries])  # a live socket: never deleted
    for e in entries:
        why = listening.get(str(Path(e.path)))
        if why is not None:
            out[e.id] = why
    for h in scan.holders:
        for p in h.paths:
            tid = by_prefix.get(p.prefix)
            if tid is not None and tid not in out:
                out[tid] = describe(h, Path(p.prefix))
    return out


def _kept(entry: TrashEntry, why: str) -> PurgeItem:
    msg = f"kept {entry.id} ({entry.name}): still in use, {why}; a later purge deletes it"
    return PurgeItem(entry.id, entry.root, entry.name, "kept", msg, entry.bytes)


def _delete(
    root: Path, doomed: Path, entry: TrashEntry | None, reaper: str | None = None
) -> PurgeItem:
    tid = entry.id if entry else doomed.name.removeprefix(trashbox.PURGING)
    name = entry.name if entry else "?"
    left = remove_tree(doomed)
    if left:
        more = f" and {len(left) - MAX_LISTED} more" if len(left) > MAX_LISTED else ""
        why = "; ".join(left[:MAX_LISTED]) + more
        return _failed(root, tid, name, why, entry.bytes if entry else None)
    by_policy = {"reaper": reaper} if reaper else {}
    journal.trash_journal(root, "purged", id=tid, name=name, resumed=entry is None, **by_policy)
    how = "finished purging" if entry is None else "purged"
    size = entry.bytes if entry else None
    return PurgeItem(tid, str(root), name, "purged", f"{how} {tid} ({name})", size)


def _failed(root: Path, tid: str, name: str, why: str, size: int | None) -> PurgeItem:
    msg = f"could not purge {tid} ({name}): {why}; a later purge tries again"
    return PurgeItem(tid, str(root), name, "failed", msg, size)


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0
