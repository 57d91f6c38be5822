"""What a process held at the last /proc scan, reused while the process provably did not run.

Per held fd the scan needs, besides the `readlink` every fd costs, how the file was opened (an
`lstat` of the link) and whether it is a folder (a `stat` through it). Neither can change for
an open file; what can change is which file an fd number names, and only the process's own
system calls change that (open, close, dup2, exec, ...). A process that did not run since the
last scan made no system call, so its fd numbers still name the same open files: their mode
and type are still the ones read then, and so are its command line and environment (both are
the process's own memory), and so is its mount namespace (leaving ours takes its own setns(2)
or unshare(2)): a process in ours is not asked again. Its links are still read on every scan,
since a path can change under it (a rename, an unlink: " (deleted)"); an fd whose link text
changed is read afresh.

"Did not run" comes from `/proc/PID/schedstat` (the task's CPU time in ns, its time waiting
for a CPU, and how many times it was put on one) and `/proc/PID/stat`, read through the same
pin as everything else, the schedstat first:
- the stat, read after the schedstat, says the process is not running (state not R) and has
  one thread: it was off the CPU at that moment, so to run again it must be put on a CPU,
  which counts in the schedstat; a task that was on the CPU at the schedstat read and blocked
  before the stat read did what it did before the facts below were read;
- so: the same schedstat as when the facts were read (taken *before* them), the same start
  ticks, and not running with one thread, both then and now (another thread could change the
  shared fd table while the one we count sleeps; making a thread takes a system call of the
  counted one). A schedstat of "0 0 0" (a kernel that keeps no such counts) is no mark.
  (Its status, whose context switch counts were the mark before, costs twice the read.)
A process first seen holding something is read in full twice before its facts are trusted:
the counts read before the second reading vouch for it.

Another *process* may share the fd table (`clone(CLONE_FILES)` without `CLONE_THREAD`, rare)
and change it while ours sleeps. Sharers show the very same table (fd numbers and link
texts), so a holder's fds are trusted only if no other process showed its table in the scan
its facts come from; sharing begins with a clone by a process that has the table, which is
ours (it ran) or one that already showed the same table. A shell and the subshell it forked
often show one table without sharing it: their command lines and environments are still
reused (a sharer cannot change those), their fds are read afresh. Left open: a table
changed between our reads of two sharers in one scan, then an fd reopened under the same
name with another mode before the next: one scan reports the old mode. Memory written by a
debugger (ptrace, process_vm_writev) does not show in a reused command line or environment.

A memo belongs to one caller (the prober's thread): it is not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lanewatch.linux.mountview import Parses
from lanewatch.linux.proc import read_at, stat_at

if TYPE_CHECKING:
    from lanewatch.linux.proc import ProcStat
    from lanewatch.processes.held import HeldPath
    from lanewatch.processes.holders import Holder

# fd name -> what it held (under a prefix, without " (deleted)"); reused as is, so a caller can
# tell an unchanged holder by identity. Also "cwd" and "root" (never an fd's name): the same
# words of those links give back the same object.
FdFacts = dict[str, "HeldPath"]


@dataclass(slots=True)
class Reading:
    """What one scan read of a process's fd table: the facts of its held fds, and every fd's
    link text (in the table's order) to tell a table shared with another process."""

    fds: FdFacts = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    table: int | None = None  # hash of the fd names and `links`, once the table was read


@dataclass(slots=True)
class Seen:
    """A holder as the last scan saw it."""

    start_ticks: int
    mark: bytes | None  # the schedstat read before these facts; None: not trustworthy
    fds: FdFacts = field(default_factory=dict)
    table: int | None = None  # fingerprint of the whole fd table (`Reading.table`)
    alone: bool = False  # no other process showed the same table in that scan
    # What the scan said of it then (command line, environment, uid: what it did not change).
    holder: Holder | None = None
    # In our mount namespace (its paths ours as they are); leaving it takes a system call.
    ours: bool = False
    status: bytes | None = None  # its /proc/PID/status, when the caller asked for it


class ProcMemo:
    """Holders of the previous scan, by pid; a scan keeps only this scan's holders. Also each
    process's stat as parsed at the last scan, by its bytes (`linux.proc.stat_at`), and the
    other mount namespaces' tables (`linux.mountview.Parses`): parsing is a pure function of
    the bytes, so an unchanged stat (a sleeping process's) or table is not parsed again."""

    def __init__(self) -> None:
        self._last: dict[int, Seen] = {}
        self._now: dict[int, Seen] = {}
        self._tables: dict[int, int] = {}  # this scan's fd tables: fingerprint -> processes
        self.stats: dict[bytes, ProcStat] = {}  # the last scan's (read only while scanning)
        self.stats_now: dict[bytes, ProcStat] = {}  # this scan's
        self.mounts = Parses()  # other mount namespaces' tables, parsed by their bytes
        self._prefixes: object = None  # what the facts were matched against

    def __len__(self) -> int:
        return len(self._last)

    def begin(self, prefixes: object) -> None:
        """A scan starts; `prefixes`: what it matches paths against. A fact names its prefix,
        so when they changed since the last scan, no fact of it is reused."""
        if prefixes != self._prefixes:
            self._last = {}
            self._prefixes = prefixes
        self._now = {}
        self._tables = {}
        self.stats_now = {}

    def saw_table(self, table: int) -> None:
        self._tables[table] = self._tables.get(table, 0) + 1

    def end(self) -> None:
        for seen in self._now.values():
            seen.alone = seen.table is not None and self._tables.get(seen.table) == 1
        self._last, self._now, self._tables = self._now, {}, {}
        self.stats, self.stats_now = self.stats_now, {}

    def still(self, seen: Seen, mark: bytes | None, start_ticks: int) -> bool:
        """Whether the process did not run since `seen` (same schedstat, read before its
        facts and now; same start ticks): what it alone can change (its command line,
        environment, uid, mount namespace) is as it was. Its fd table too, unless another
        process may share it (`Seen.alone` false)."""
        return mark is not None and mark == seen.mark and start_ticks == seen.start_ticks

    def previous(self, pid: int) -> Seen | None:
        return self._last.get(pid)

    def keep(self, pid: int, seen: Seen) -> None:
        self._now[pid] = seen


def quiet_mark(dfd: int) -> bytes | None:
    """The mark of the pinned process (its schedstat, if it is off the CPU and has one thread),
    else None (never trusted). Raises OSError like any read of /proc/PID."""
    sched = read_sched(dfd)
    st = stat_at(0, dfd)
    return mark_of(sched, st) if st is not None else None


def read_sched(dfd: int) -> bytes:
    """/proc/PID/schedstat of the pinned process: read before the stat the mark is judged by
    (`mark_of`), and before any fact it vouches for."""
    return read_at(dfd, "schedstat", once=256)


def read_status(dfd: int) -> bytes:
    """/proc/PID/status of the pinned process, in one read: what the scan keeps for the
    prober's owners (`holders.scan`)."""
    return read_at(dfd, "status", once=16384)


def mark_of(sched: bytes, st: ProcStat) -> bytes | None:
    """The mark of schedstat content `sched` given the process's stat read after it."""
    if st.state == "R" or st.threads != 1:
        return None
    counts = sched.split()
    if len(counts) != 3 or counts[2] == b"0":
        return None  # not counted here: never trusted
    return sched
