"""As root (or with CAP_SYS_ADMIN): every write by the audited runs' processes, anywhere.

One fanotify group (kernel/fanotify.py) with a filesystem mark on every real filesystem of
our mount namespace (pseudo filesystems left out) reports every write on the machine, with
the writer's pid and a pidfd. Only writes by a member of one of the audit's runs are kept: a
process whose ancestry reaches the run's `lanewatch run` (our unreaped child, so its pid is
its own while the run lasts; the runner is a child subreaper, processes/members.py), or whose
environment names the run's lane namespace ($LANEWATCH_NAMESPACE, which `lanewatch run`
exports). The fence's mount namespace cannot be used: the audit's shim enters a namespace of
its own for the home overlay. Other tests, other users: not members, dropped.

Reads: each written file gets an inode mark for FAN_ACCESS and FAN_CLOSE_NOWRITE after its
first write (filesystem-wide read marks would wake us for every read on the machine: every
import of every Python on it). A member's read of a file another run wrote is the dangerous case.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lanewatch.kernel.fanotify import (
    FAN_ACCESS,
    FAN_CLOSE_NOWRITE,
    FAN_CLOSE_WRITE,
    FAN_MODIFY,
    FanEvent,
    FanotifyError,
    FanotifyWatcher,
)
from lanewatch.lanes.lane import ENV_NAMESPACE
from lanewatch.linux.mountinfo import read_mountinfo
from lanewatch.linux.proc import ProcStat, environ_values, read_file, read_stat

READ_MASK = FAN_ACCESS | FAN_CLOSE_NOWRITE
# Filesystems no tool writes files to (or that fanotify cannot mark): never marked.
PSEUDO = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "devpts",
        "mqueue",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "hugetlbfs",
        "autofs",
        "binfmt_misc",
        "nsfs",
        "efivarfs",
        "rpc_pipefs",
        "selinuxfs",
        "devtmpfs",
    }
)
MAX_DEPTH = 64  # ancestors walked from a writer to its run's runner
DELETED = " (deleted)"


@dataclass(frozen=True, slots=True)
class Access:
    run: int
    path: str
    kind: str  # "written", "deleted" (written, then removed before we read the event), "read"
    time_ns: int  # the file's mtime for a write; when we read the event for a read


def own_times(accesses: Sequence[Access]) -> list[int | None]:
    """Each access's time, None for a write whose time may be another write's.

    A write's time is its file's mtime when the event is read (`os.fstat` on the event's fd),
    and a later write of the same file before that read moves it: run A's write, read after run
    B rewrote the file, carries B's time, which may fall in another of A's tests. Events come in
    kernel order, so when a later write of the same path carries the very same time, the
    earlier one's own time is unknown (or was the same coarse tick): None, named by no test."""
    last: dict[str, int] = {}  # path -> index of its latest write so far
    out: list[int | None] = [a.time_ns for a in accesses]
    for i, acc in enumerate(accesses):
        if acc.kind == "read":
            continue
        before = last.get(acc.path)
        if before is not None and accesses[before].time_ns == acc.time_ns:
            out[before] = None
        last[acc.path] = i
    return out


class KernelWatch:
    """Start with `start()` (None, or why it cannot watch), `add_run()` for each run as it
    starts, `stop()` once every run ended; then `accesses` and `notes`."""

    def __init__(self, skip: Sequence[str]) -> None:
        # Paths seen otherwise (the audit's folder: lanes, home overlays; the checkouts).
        self._skip = tuple(p.rstrip("/") + "/" for p in skip)
        self._runs: dict[int, int] = {}  # runner pid -> run index
        self._namespaces: dict[str, int] = {}  # lane namespace -> run index
        self._lock = threading.Lock()
        self._who: dict[tuple[int, int], int | None] = {}  # (pid, start ticks) -> run
        self._marked: set[str] = set()
        self.accesses: list[Access] = []
        self.unmarked: list[str] = []  # filesystems we could not mark, with why
        self.exited = 0  # writes whose writer was gone when read: not attributed
        self.lost = 0  # overflows: the kernel dropped events
        self.unnamed = 0  # a run's writes to files deleted before we could name them
        self.unplaced = 0  # a run's accesses through a mount of its own we cannot name
        self.unread: list[str] = []  # written files we could not mark for reads, with why
        self._watcher: FanotifyWatcher | None = None
        self._pidfds = True

    def start(self) -> str | None:
        points = _filesystems()
        watcher = FanotifyWatcher(
            [],
            self._on_batch,
            prefixes=["/"],
            pidfds=True,
            name="lanewatch-audit",
        )
        try:
            watcher.start()
        except (FanotifyError, OSError) as exc:
            return getattr(exc, "reason", None) or str(exc)
        for point in points:
            try:
                watcher.add_path(point, prefix=False)
            except (FanotifyError, OSError) as exc:
                self.unmarked.append(f"{point}: {getattr(exc, 'reason', None) or exc}")
        if not watcher.marks:
            watcher.stop()
            return "no filesystem could be marked"
        self._watcher = watcher
        # Without pidfds (before Linux 5.15) a pid is read as it is now: it may be reused.
        self._pidfds = watcher.reports_pidfds
        return None

    def add_lane(self, index: int, namespace: str) -> None:
        """Before the run starts: its members carry $LANEWATCH_NAMESPACE from the first."""
        with self._lock:
            self._namespaces[namespace] = index
            self._who.clear()  # a process judged no run's before may be this one's

    def add_run(self, index: int, runner_pid: int) -> None:
        with self._lock:
            self._runs[runner_pid] = index
            self._who.clear()

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def _on_batch(self, events: Sequence[FanEvent]) -> None:
        for ev in events:
            if ev.is_overflow:
                self.lost += 1
                continue
            path = ev.path
            if path is None or not path.startswith("/") or path.startswith(self._skip):
                continue
            wrote = bool(ev.mask & (FAN_CLOSE_WRITE | FAN_MODIFY))
            if ev.pidfd < 0 and self._pidfds:
                if wrote:
                    self.exited += 1
                continue
            run = self._run_of(ev.pid)
            if run is None:
                continue
            gone = path.endswith(DELETED)
            if gone:
                path = path[: -len(DELETED)]
                if path in ("", "/"):  # removed before we read it, on a mount not ours: no name
                    self.unnamed += 1
                    continue
            if not gone and not _names(path, ev.fd):
                self.unplaced += 1  # a mount of the run's own (the home overlay): not our name
                continue
            if wrote and not gone and path not in self._marked:
                self._mark(path)  # from now on, every read of it is reported
            if ev.mask & FAN_CLOSE_WRITE:  # one write: a MODIFY alone is followed by its close
                try:
                    mtime = os.fstat(ev.fd).st_mtime_ns
                except OSError:
                    mtime = time.time_ns()
                self.accesses.append(Access(run, path, "deleted" if gone else "written", mtime))
            if ev.mask & READ_MASK and not wrote:
                self.accesses.append(Access(run, path, "read", time.time_ns()))

    def _mark(self, path: str) -> None:
        self._marked.add(path)
        if self._watcher is None:
            return
        try:
            self._watcher.mark_file(path, READ_MASK)
        except (FanotifyError, OSError, RuntimeError) as exc:
            self.unread.append(f"{path}: {getattr(exc, 'reason', None) or exc}")

    def _run_of(self, pid: int) -> int | None:
        """The run `pid` (alive: its pidfd is open) belongs to, or None."""
        st = read_stat(pid)
        if st is None:
            return None
        key = (pid, st.start_ticks)
        if key in self._who:
            return self._who[key]
        with self._lock:
            runs, namespaces = dict(self._runs), dict(self._namespaces)
        found: int | None = None
        here: ProcStat | None = st
        depth = 0
        while here is not None and depth < MAX_DEPTH:
            if here.pid in runs:
                found = runs[here.pid]
                break
            if here.ppid <= 1:
                break
            here, depth = read_stat(here.ppid), depth + 1
        if found is None:
            env = read_file(pid, "environ")
            if env is not None:
                (marker,) = environ_values(env, ENV_NAMESPACE.encode())
                found = namespaces.get(marker) if marker else None
        if len(self._who) > 4096:
            self._who.clear()
        self._who[key] = found
        return found


def _names(path: str, fd: int) -> bool:
    """Whether `path`, in our mount namespace, is the file the event's descriptor holds (a file
    reached through a mount we do not have is named relative to that mount: "/.cache/x")."""
    try:
        ours, theirs = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


def _filesystems() -> list[str]:
    """One mount point per real filesystem of our mount namespace (a filesystem mark covers
    every mount of it)."""
    seen: set[str] = set()
    out: list[str] = []
    with contextlib.suppress(OSError):
        for entry in read_mountinfo():
            if entry.fstype in PSEUDO or entry.device in seen:
                continue
            if not os.path.isdir(entry.mount_point):
                continue
            seen.add(entry.device)
            out.append(entry.mount_point)
    return out
