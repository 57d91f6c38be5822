"""Paths as a process in another mount namespace names them, turned into ours.

A fenced lane (lanes/fence.py) sees a folder of its namespace at /tmp. The kernel names its
files by *its* mount table: /proc/PID/fd/N and fanotify both say `/tmp/fixed.json`, which in
ours is shared temp. `MountViews.ours(pid, path)` finds the process's mount that holds the
path (its /proc/PID/mountinfo), and the mount of ours that shows the same folder of the same
filesystem, and rewrites the path: `<namespace>/tmp/fixed.json`. A process in our own mount
namespace, or one we cannot read (another user's, gone), keeps its path as given: unknown is
never turned into a guess. Tables are kept per namespace id (a fence mounts at its start).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from lanewatch.linux.mountinfo import MountEntry, read_mountinfo
from lanewatch.linux.paths import is_under
from lanewatch.linux.proc import PROC

MAX_TABLES = 256


def _mount_ns(pid: int | str, dfd: int | None = None) -> str | None:
    try:
        if dfd is not None:
            return os.readlink("ns/mnt", dir_fd=dfd)
        return os.readlink(f"{PROC}/{pid}/ns/mnt")
    except OSError:
        return None


def _holding(table: list[MountEntry], path: str) -> MountEntry | None:
    """The last-mounted entry whose mount point holds `path` (the one a lookup reaches)."""
    best: MountEntry | None = None
    for entry in table:
        if is_under(path, entry.mount_point) and (
            best is None or len(entry.mount_point) >= len(best.mount_point)
        ):
            best = entry
    return best


def translate(theirs: list[MountEntry], ours: list[MountEntry], path: str) -> str | None:
    """`path` of a process with mount table `theirs`, as a path in `ours`; None when no
    mount of ours shows that folder. Pure."""
    mine = _holding(theirs, path)
    if mine is None:
        return None
    inside = os.path.relpath(path, mine.mount_point)
    folder = os.path.normpath(os.path.join(mine.root, inside))
    best: tuple[int, int, str] | None = None
    for entry in ours:
        if entry.device != mine.device or not is_under(folder, entry.root):
            continue
        rest = os.path.relpath(folder, entry.root)
        candidate = os.path.normpath(os.path.join(entry.mount_point, rest))
        if _holding(ours, candidate) is not entry:
            continue  # covered by a later mount in ours: that path shows something else
        rank = (len(entry.root), -len(entry.mount_point), candidate)
        if best is None or rank[:2] > best[:2]:
            best = rank
    return None if best is None else best[2]


class MountViews:
    """Our paths for what processes in other mount namespaces name (see the module doc)."""

    def __init__(self) -> None:
        self._self = _mount_ns("self")
        self._ours: list[MountEntry] | None = None
        self._tables: dict[str, list[MountEntry] | None] = {}

    def ours(self, pid: int, path: str) -> str:
        """`path` as process `pid` names it, in our mount namespace's words."""
        view = self.of(pid)
        return path if view is None else view(path)

    def of(self, pid: int, dfd: int | None = None) -> Callable[[str], str] | None:
        """How to turn the paths process `pid` names into ours; None when they are ours
        already (our mount namespace) or cannot be known. `dfd`: its pinned /proc folder."""
        ns = _mount_ns(pid, dfd)
        if ns is None or ns == self._self:
            return None
        if ns not in self._tables:
            if len(self._tables) >= MAX_TABLES:
                self._tables.pop(next(iter(self._tables)))
            where = f"{PROC}/{pid}/mountinfo" if dfd is None else f"{PROC}/self/fd/{dfd}/mountinfo"
            try:
                self._tables[ns] = read_mountinfo(where)
            except OSError:
                self._tables[ns] = None
        theirs = self._tables[ns]
        if theirs is None:
            return None
        if self._ours is None:
            try:
                self._ours = read_mountinfo()
            except OSError:
                return None
        ours = self._ours

        def view(path: str) -> str:
            found = translate(theirs, ours, path)
            return path if found is None else found

        return view
