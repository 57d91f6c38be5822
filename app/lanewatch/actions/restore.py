"""The trash after a clear: list it and restore from it (purge is `actions.purge`).

Restore puts an entry back under its old name in its root with one no-replace rename. It is
refused when the name is taken again: a writer that recreated the namespace after the clear
made a new namespace, which stays as it is. The restored folder is the one that was cleared
(same inode, same files, its ledger gains a "restored" line).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from lanewatch.actions import journal, trashbox
from lanewatch.actions.fsops import rename_noreplace
from lanewatch.actions.purge import DEFAULT_RETENTION, PurgeResult, due, purge
from lanewatch.actions.results import checked
from lanewatch.actions.targets import TargetError, check_name, known_roots
from lanewatch.actions.trashbox import TrashEntry, find, list_all, list_trash
from lanewatch.errors import LanewatchError

__all__ = [
    "DEFAULT_RETENTION",
    "PurgeResult",
    "RestoreResult",
    "TrashEntry",
    "due",
    "find",
    "list_all",
    "list_trash",
    "purge",
    "restore",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ItemLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def root(self) -> str: ...


@dataclass(frozen=True, slots=True)
class RestoreResult:
    outcome: Literal["restored", "refused", "gone"]
    trash_id: str
    message: str
    path: str | None = None  # where it is back

    @property
    def ok(self) -> bool:
        return self.outcome == "restored"

    def __str__(self) -> str:
        return self.message


def restore(
    item: str | ItemLike, *, roots: Sequence[Path] | None = None, check: bool = True
) -> RestoreResult:
    """Put a cleared namespace back. `item` is a trash id or a listed entry."""
    known = list(roots) if roots is not None else known_roots()
    try:
        entry = find(item, known) if isinstance(item, str) else _listed(item, known)
    except TargetError as exc:
        if check:
            raise
        return RestoreResult("refused", str(getattr(item, "id", item)), str(exc))
    root = Path(entry.root)
    try:
        with trashbox.trash_lock(root):
            result = _restore_locked(root, entry.id)
    except (LanewatchError, OSError) as exc:
        result = RestoreResult("refused", entry.id, f"refused to restore {entry.id}: {exc}")
    if result.ok:  # the diary, after the lock: the ledger lies in the namespace (maybe a FIFO)
        dest = Path(str(result.path))
        journal.note(
            dest, "restored", lane=entry.lane, trash_id=entry.id, cleared_at=entry.cleared_at
        )
        journal.trash_journal(root, "restored", id=entry.id, name=entry.name, lane=entry.lane)
    return checked(result, check)


def _listed(item: ItemLike, known: Sequence[Path]) -> TrashEntry:
    root = Path(item.root)
    if all(root != r for r in known):
        raise TargetError(f"{item.root} is not a known scratch root")
    if not trashbox.is_id(item.id):
        raise TargetError(f"{item.id!r} is not a trash id")
    return trashbox.read_entry(root, item.id)


def _restore_locked(root: Path, tid: str) -> RestoreResult:
    def refuse(why: str) -> RestoreResult:
        return RestoreResult("refused", tid, f"refused to restore {tid}: {why}")

    entry = trashbox.read_entry(root, tid)
    if not os.path.isdir(entry.path):
        return RestoreResult("gone", tid, f"{tid} is no longer in the trash (restored or purged)")
    if entry.record is None:
        return refuse("its record is missing or unreadable")
    if not entry.complete:
        return refuse("the entry holds no namespace (a clear that did not finish)")
    why = check_name(entry.name)
    if why is not None:
        return refuse(f"its record names no valid folder: {why}")
    dest = root / entry.name
    if os.path.lexists(dest):
        return refuse(_taken(dest))
    root_fd = os.open(root, _DIR_FLAGS)
    entry_fd = os.open(entry.path, _DIR_FLAGS)
    try:
        rename_noreplace(entry_fd, trashbox.PAYLOAD, root_fd, entry.name)
    except FileExistsError:
        return refuse(_taken(dest))
    finally:
        os.close(entry_fd)
        os.close(root_fd)
    with contextlib.suppress(OSError):  # the namespace is back; a leftover record is harmless
        os.unlink(Path(entry.path) / trashbox.RECORD)
        os.rmdir(entry.path)
    label = f"lane {entry.lane!r} ({entry.name})" if entry.lane else entry.name
    return RestoreResult("restored", tid, f"restored {label} to {dest}", str(dest))


def _taken(dest: Path) -> str:
    return (
        f"the name is taken again: {dest} exists (a new namespace made after the clear); "
        "clear or move that one first"
    )
