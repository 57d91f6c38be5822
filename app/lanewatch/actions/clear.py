"""Clear: move a stale, orphan or released namespace into its root's trash, or refuse.

Order (docs/actions.md says why): judge the state (cheap, refuses live and hung at once);
pin the folder (no symlink, its locks taken without waiting: held means refuse); judge the
state again from a fresh read of the stamp; no mount point inside; no live unix socket bound
inside (`actions/sockets.py`); no process with its cwd, an fd (folders and deleted files
included) or a mapping inside, and every process readable;
then one rename into `<root>/.lanewatch-root/trash/<id>/namespace`, checked to have moved the
very folder that was pinned, and checked again for mount points (one mounted after the check
moved along with the folder: it is put back and the clear refused). The root's trash lock is
held throughout, so two clears of one namespace run one after the other: the first moves it,
the second finds it gone. The diary lines (the namespace's ledger, the trash journal) are
written after the lock is let go: the ledger lies inside the namespace, where anyone who could
write there may have left a FIFO, and no later clear or purge of the root waits on that.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lanewatch.actions import journal, trashbox
from lanewatch.actions.assess import Assessment, Seen, aim, assess
from lanewatch.actions.checks import foreign_host, why_held, why_mounted, why_not_clearable
from lanewatch.actions.fsops import rename_noreplace, tree_size
from lanewatch.actions.pin import Gone, Pinned, Refused, pin
from lanewatch.actions.results import checked, sizes_text
from lanewatch.actions.sockets import why_listening
from lanewatch.actions.targets import Target, TargetError, ViewLike, namespaces
from lanewatch.errors import LanewatchError
from lanewatch.lanes import ledger
from lanewatch.model.views import STALE_STATES

Outcome = Literal["cleared", "would-clear", "refused", "gone"]


@dataclass(frozen=True, slots=True)
class ClearResult:
    outcome: Outcome
    target: str  # the namespace's path (or the spec, when it named nothing)
    label: str
    message: str
    state: str | None = None  # the state it was judged in
    trash_id: str | None = None
    trash_path: str | None = None
    files: int | None = None
    bytes: int | None = None  # apparent: the files' lengths
    owner_host: str | None = None  # the owner's host, when it is not this one (then refused)
    allocated: int | None = None  # on disk, as `du -sB1` counts: what the clear frees

    @property
    def ok(self) -> bool:
        return self.outcome != "refused"

    def __str__(self) -> str:
        return self.message


def clear(
    spec: str | os.PathLike[str] | ViewLike | Target,
    *,
    dry_run: bool = False,
    seen: Seen | None = None,
    roots: list[Path] | None = None,
    check: bool = True,
) -> ClearResult:
    """Clear one namespace named any way targets accept (or a dashboard row).

    A dashboard row also says what the user saw; a changed owner is refused. `check=True`
    raises ActionRefused on a refusal (and TargetError for a spec that names nothing).
    """
    try:
        target, seen = aim(spec, seen, roots)
    except TargetError as exc:
        if check:
            raise
        return ClearResult("refused", os.fspath(_spec_text(spec)), str(spec), str(exc))
    return checked(clear_target(target, dry_run=dry_run, seen=seen), check)


def stale_targets(roots: list[Path]) -> list[Target]:
    """Every namespace of `roots` nobody runs in right now: stale, orphan or released (the
    dashboard's Stale view, and what `lanewatch_stale_allocated_bytes` counts;
    docs/clearing.md says why released ones are in). Each is still checked in full."""
    return [t for t in namespaces(roots) if assess(t).state in STALE_STATES]


def clear_target(
    target: Target, *, dry_run: bool = False, seen: Seen | None = None, reaper: str | None = None
) -> ClearResult:
    """`reaper`: the policy that asked (`actions/reap.py`), written beside the ledger lines."""
    if not os.path.lexists(target.path):
        return _gone(target)
    if os.path.islink(target.path):
        return _refused(target, f"{target.path} is a symlink; lanewatch never acts through one")
    first = assess(target)
    why = why_not_clearable(first)
    if why is not None:
        _note_refusal(target, first, why, dry_run, reaper)
        return _refused(target, why, first.state.value, foreign_host(first.stamp))
    diary: list[Callable[[], object]] = []  # written once the trash lock is let go
    try:
        lock = contextlib.nullcontext() if dry_run else trashbox.trash_lock(target.root)
        with lock:
            result = _pinned(target, dry_run, seen, diary, reaper)
    except LanewatchError as exc:  # the trash is busy, or unsafe (a symlink, a FIFO)
        result = _refused(target, str(exc))
    except OSError as exc:  # e.g. the trash could not be written
        result = _refused(target, f"the clear failed: {exc}")
    for write in diary:
        write()
    return result


def _refused(
    target: Target, why: str, state: str | None = None, owner_host: str | None = None
) -> ClearResult:
    msg = f"refused to clear {target.label}: {why}"
    return ClearResult("refused", str(target.path), target.label, msg, state, owner_host=owner_host)


def _pinned(
    target: Target,
    dry_run: bool,
    seen: Seen | None,
    diary: list[Callable[[], object]],
    reaper: str | None = None,
) -> ClearResult:
    try:
        pinned = pin(target.path, create_lock=not dry_run)
    except Gone:
        return _gone(target)
    except Refused as exc:
        return _refused(target, str(exc))
    try:
        now = assess(target)  # the stamp again, read under the lock
        why = why_not_clearable(now)
        if why is None and seen is not None:
            why = seen.changed(now.stamp)
        why = why or why_mounted(target.path) or why_listening(target.path)
        held = why_held(target.path, pinned.own_fds) if why is None else None
        why = why or (held.why if held else None)
        if why is not None:
            diary.append(functools.partial(_note_refusal, target, now, why, dry_run, reaper))
            return _refused(target, why, now.state.value, foreign_host(now.stamp))
        files, size, disk = tree_size(target.path)
        note = f" [{held.note}]" if held and held.note else ""
        if dry_run:
            msg = (
                f"would clear {target.label} ({now.describe()}): "
                f"{sizes_text(disk, size)} in {files} files{note}"
            )
            return ClearResult(
                "would-clear",
                str(target.path),
                target.label,
                msg,
                now.state.value,
                files=files,
                bytes=size,
                allocated=disk,
            )
        return _move(target, pinned, now, (files, size, disk), note, diary, reaper)
    finally:
        pinned.release()


def _move(
    target: Target,
    pinned: Pinned,
    a: Assessment,
    counted: tuple[int, int, int],
    note: str,
    diary: list[Callable[[], object]],
    reaper: str | None = None,
) -> ClearResult:
    files, size, disk = counted
    by_policy = {"reaper": reaper} if reaper else {}
    trash = trashbox.ensure_trash(target.root)
    if os.stat(trash).st_dev != pinned.identity[0]:
        return _refused(
            target, f"the trash {trash} is on another filesystem: no atomic move possible"
        )
    at = time.time()
    tid = trashbox.new_id(at)
    entry = trash / tid
    os.mkdir(entry, 0o700)
    stamp = a.stamp
    record = trashbox.TrashRecord(
        id=tid,
        root=str(target.root),
        name=target.name,
        original=str(target.path),
        lane=stamp.lane if stamp else target.lane,
        checkout_id=stamp.checkout_id if stamp else None,
        checkout_path=stamp.checkout_path if stamp else None,
        state=a.state.value,
        reason=a.verdict.reason,
        owner_pid=stamp.pid if stamp else None,
        cleared_at=at,
        cleared_by=journal.actor(),
        files=files,
        bytes=size,
        allocated=disk,
    )
    record.write(entry)
    entry_fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not pinned.still_here():
            _drop(entry)
            return _refused(target, "the folder at its name was replaced while it was checked")
        try:
            rename_noreplace(pinned.root_fd, target.name, entry_fd, trashbox.PAYLOAD)
        except FileNotFoundError:
            _drop(entry)
            return _gone(target)
        except OSError as exc:
            _drop(entry)
            return _refused(target, f"the move into the trash failed: {exc.strerror}")
        moved = os.lstat(trashbox.PAYLOAD, dir_fd=entry_fd)
        if (moved.st_dev, moved.st_ino) != pinned.identity:  # swapped at the last instant
            rename_noreplace(entry_fd, trashbox.PAYLOAD, pinned.root_fd, target.name)
            _drop(entry)
            return _refused(
                target, "the folder at its name was replaced at the last moment; put back"
            )
        mounted = why_mounted(entry / trashbox.PAYLOAD)  # one mounted since the check moved too
        if mounted is not None:
            diary.append(functools.partial(_note_refusal, target, a, mounted, False, reaper))
            return _put_back(target, pinned, entry, entry_fd, tid, mounted, diary)
    finally:
        os.close(entry_fd)
    payload = entry / trashbox.PAYLOAD
    diary.append(
        functools.partial(
            journal.note,
            payload,
            "cleared",
            lane=record.lane,
            trash_id=tid,
            state=a.state.value,
            reason=a.verdict.reason,
            original=str(target.path),
            **by_policy,
        )
    )
    diary.append(
        functools.partial(
            journal.trash_journal,
            target.root,
            "cleared",
            id=tid,
            name=target.name,
            lane=record.lane,
            **by_policy,
        )
    )
    msg = (
        f"cleared {target.label} ({a.state.value}): moved {sizes_text(disk, size)} in "
        f"{files} files "
        f"to the trash of {target.root} as {tid} (lanewatch restore {tid}){note}"
    )
    return ClearResult(
        "cleared",
        str(target.path),
        target.label,
        msg,
        a.state.value,
        tid,
        str(payload),
        files,
        size,
        allocated=disk,
    )


def _put_back(
    target: Target,
    pinned: Pinned,
    entry: Path,
    entry_fd: int,
    tid: str,
    why: str,
    diary: list[Callable[[], object]],
) -> ClearResult:
    """A mount appeared inside the namespace between the check and the move: move it back."""
    try:
        rename_noreplace(entry_fd, trashbox.PAYLOAD, pinned.root_fd, target.name)
    except OSError as exc:  # its name was taken meanwhile: it stays in the trash, recorded
        diary.append(
            functools.partial(
                journal.trash_journal, target.root, "cleared", id=tid, name=target.name
            )
        )
        return _refused(
            target,
            f"{why} (mounted during the clear); it could not be put back ({exc.strerror}), "
            f"so it stays in the trash as {tid}, where purge never enters a mount",
        )
    _drop(entry)
    return _refused(target, f"{why} (mounted during the clear); put back")


def _drop(entry: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(entry / trashbox.RECORD)
    with contextlib.suppress(OSError):
        os.rmdir(entry)


def _gone(target: Target) -> ClearResult:
    return ClearResult(
        "gone",
        str(target.path),
        target.label,
        f"{target.label} is already gone from {target.root} (cleared meanwhile?)",
    )


def _note_refusal(
    target: Target, a: Assessment, why: str, dry_run: bool, reaper: str | None = None
) -> None:
    """A refused clear in the namespace's ledger. The reaper's (`reaper`: its rule) is written
    once while the same reason stands: its pass comes back every few minutes, and a namespace a
    process keeps holding would fill its ledger with the same line."""
    if dry_run or not os.path.isdir(target.path) or os.path.islink(target.path):
        return
    by_policy = {"reaper": reaper} if reaper else {}
    if reaper is not None:
        last = ledger.last(target.path)
        if (
            last is not None
            and last.event == "clear-refused"
            and "reaper" in last.fields
            and last.fields.get("reason") == why
        ):
            return
    lane = a.stamp.lane if a.stamp else target.lane
    journal.note(target.path, "clear-refused", lane=lane, reason=why, **by_policy)


def _spec_text(spec: object) -> str:
    return (
        os.fspath(spec) if isinstance(spec, str | os.PathLike) else str(getattr(spec, "key", spec))
    )
