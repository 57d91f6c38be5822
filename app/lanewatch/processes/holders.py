"""Raw /proc scanner: which processes hold a path under given prefixes, and how.

"Holding" means the kernel says a process has its working directory (`cwd`), an open file
descriptor (`fd`, directory fds and deleted files included), and, when asked, its root (`root`,
a chroot) or a memory mapping (`map`) under a prefix. We read `/proc` directly:
`psutil.open_files` is slower and skips directory fds and deleted files.

How races are kept out: each process is pinned by an `O_PATH` fd on `/proc/PID` before anything
else is read, and every later read goes through that fd. If the process exits, the reads fail
(we skip it quietly); if its pid is reused meanwhile, the pinned fd still names the dead process,
so a new process is never credited with a dead one's files. A `Holder`'s start ticks come from
the same pinned directory, so its identity and its paths always belong to one process.

What it cannot see:
- processes hidden from us: `/proc` mounted with `hidepid` (then `ProcScan.hidden` says so), and
  processes outside our pid namespace;
- a thread that unshared its cwd or fd table from its process, and the fds of a process whose
  main thread exited while other threads run (only the thread group leader is read);
- paths of a process in another mount namespace or chroot are printed relative to *its* root,
  so they may not match our prefixes;
- the environment is the one passed to `execve`: later `setenv` calls in the process do not show.

Permission errors never mean "not holding": the pid lands in `unreadable` with the reason, and
`complete` turns false.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import stat as stat_mod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from lanewatch.linux.mountinfo import hidden_reason as _hidden_reason
from lanewatch.linux.mountview import MountViews
from lanewatch.linux.proc import DELETED as _DELETED
from lanewatch.linux.proc import DENIED_ERRNOS as _DENIED_ERRNOS
from lanewatch.linux.proc import GONE_ERRNOS as _GONE_ERRNOS
from lanewatch.linux.proc import (
    PROC,
    ProcStat,
    open_fd_dir,
    parse_cmdline,
    pin,
    read_stat,
    stat_table,
)
from lanewatch.linux.proc import environ_values as _environ_values
from lanewatch.linux.proc import owner_at as _dir_uid
from lanewatch.linux.proc import parse_status as _parse_status
from lanewatch.linux.proc import pids as _pids
from lanewatch.linux.proc import read_at as _read
from lanewatch.linux.proc import stat_at as _stat_at
from lanewatch.linux.proc import why as _why
from lanewatch.linux.procid import ProcessIdentity, boot_id
from lanewatch.processes.held import Access, HeldPath
from lanewatch.processes.memo import (
    FdFacts,
    ProcMemo,
    Reading,
    Seen,
    mark_of,
    read_sched,
    read_status,
)

LANE_VAR = "LANEWATCH_LANE"
NAMESPACE_VAR = "LANEWATCH_NAMESPACE"

_LANE_KEY = LANE_VAR.encode() + b"="
_NAMESPACE_KEY = NAMESPACE_VAR.encode() + b"="


@dataclass(frozen=True, slots=True)
class Holder:
    """A process holding at least one path under a prefix."""

    stat: ProcStat
    boot_id: str
    # Owner of /proc/PID: the effective uid (root for a non-dumpable, e.g. setuid, process).
    uid: int | None
    cmdline: tuple[str, ...]
    paths: tuple[HeldPath, ...]
    lane: str | None  # $LANEWATCH_LANE at exec time, when set and readable
    namespace: str | None  # $LANEWATCH_NAMESPACE at exec time, when set and readable
    env_readable: bool  # False: environ could not be read, or was not asked for

    @property
    def pid(self) -> int:
        return self.stat.pid

    @property
    def start_ticks(self) -> int:
        return self.stat.start_ticks

    @property
    def ppid(self) -> int:
        return self.stat.ppid

    @property
    def pgid(self) -> int:
        return self.stat.pgid

    @property
    def comm(self) -> str:
        return self.stat.comm

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(self.stat.pid, self.stat.start_ticks, self.boot_id)

    @property
    def writing(self) -> bool:
        """True when an fd or a shared mapping under a prefix is open for writing."""
        return any(p.writable for p in self.paths)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A part of a process we could not inspect: "cannot tell", never "not holding"."""

    pid: int
    what: str  # "proc", "stat", "cwd", "root", "fd", "maps"
    reason: str
    uid: int | None = None  # owner of /proc/PID, so a caller can judge who that process is
    # The kernel hides it from its own user: it made itself non-dumpable (ssh-agent,
    # gpg-agent, sshd's session), so its /proc/PID/fd belongs to root whatever uid runs it.
    non_dumpable: bool = False


@dataclass(frozen=True, slots=True)
class ProcScan:
    prefixes: tuple[str, ...]
    holders: tuple[Holder, ...]
    unreadable: tuple[Unreadable, ...]
    # Stat of every process seen when scanned `with_tree`, else of the holders only.
    procs: Mapping[int, ProcStat] = field(compare=False, repr=False)
    hidden: str | None = None  # why processes may be missing from /proc, or None
    with_maps: bool = False
    with_tree: bool = False
    # /proc/PID/status of the pids the caller asked for (`scan`'s `statuses`), read through
    # the same pin as the stat in `procs`: one process's, both.
    statuses: Mapping[int, bytes] = field(default_factory=dict, compare=False, repr=False)

    @property
    def complete(self) -> bool:
        """True when every process could be inspected, so no holder can have been missed."""
        return not self.unreadable and self.hidden is None

    @property
    def unreadable_pids(self) -> frozenset[int]:
        return frozenset(u.pid for u in self.unreadable)

    def holder(self, pid: int) -> Holder | None:
        return next((h for h in self.holders if h.pid == pid), None)

    def descendants(self, pid: int) -> set[int]:
        """Descendants of `pid` from this scan's table (with_tree), else from a fresh one."""
        return descendants_in(self.procs if self.with_tree else process_table(), pid)


@dataclass(frozen=True, slots=True)
class HoldersResult:
    """Who holds `path`; `complete` is False when some process could not be inspected."""

    path: str
    holders: tuple[Holder, ...]
    unreadable: tuple[Unreadable, ...]
    hidden: str | None

    @property
    def complete(self) -> bool:
        return not self.unreadable and self.hidden is None

    @property
    def held(self) -> bool:
        return bool(self.holders)


# --- public entry points ------------------------------------------------------------------------


def scan(
    prefixes: Sequence[str | os.PathLike[str]],
    *,
    with_env: bool = True,
    with_maps: bool = False,
    with_tree: bool = False,
    own_fds: Collection[int] = (),
    memo: ProcMemo | None = None,
    sockets: Collection[str] = (),
    statuses: Collection[int] = (),
) -> ProcScan:
    """Every process holding a path under any of `prefixes`.

    `with_maps` also reads `/proc/PID/maps` and `/proc/PID/root` (about twice the cost: maps are
    long). `with_tree` also records the stat (ppid, pgid, start ticks) of every process, for
    `ProcScan.descendants` (reading every stat costs about half a bare readlink scan).
    `own_fds` are fds of *this* process to ignore (a lock the caller holds inside the path); our
    cwd and our other fds still count. `memo` (one per caller, kept between scans) lets a scan
    reuse what a holder's fds and environment were while it provably did not run since
    (`processes.memo`); the result is the same. `sockets`: fd links (`socket:[INODE]`) of
    listening sockets: a process with an fd on one holds it too (kind "socket"), read from the
    same readlinks. `statuses`: pids whose /proc/PID/status to keep too (`ProcScan.statuses`),
    read through the pin (the one read the memo makes of a holder it knows).
    """
    matcher = _Matcher(prefixes)
    matcher.sockets = frozenset(sockets)
    me = os.getpid()
    ignored = frozenset((me, fd) for fd in own_fds)
    bid = boot_id()
    procs: dict[int, ProcStat] = {}
    found: list[Holder] = []
    unreadable: list[Unreadable] = []
    kept: dict[int, bytes] = {}
    wanted = frozenset(statuses)
    # A fenced lane names its /tmp files /tmp/...: see linux/mountview.
    views = MountViews(memo.mounts if memo is not None else None)
    try:
        if memo is not None:
            memo.begin(matcher.pairs)
        for pid in _pids():
            _probe(
                pid,
                matcher,
                with_env,
                with_maps,
                with_tree,
                ignored,
                bid,
                procs,
                found,
                unreadable,
                memo,
                views,
                wanted,
                kept,
            )
        if memo is not None:
            memo.end()
    finally:
        views.close()
    return ProcScan(
        prefixes=matcher.prefixes,
        holders=tuple(found),
        unreadable=tuple(unreadable),
        procs=MappingProxyType(procs),
        hidden=_hidden_reason(),
        with_maps=with_maps,
        with_tree=with_tree,
        statuses=MappingProxyType(kept),
    )


def holders(
    path: str | os.PathLike[str],
    *,
    with_maps: bool = True,
    with_env: bool = True,
    own_fds: Collection[int] = (),
) -> HoldersResult:
    """Every process with its cwd, root, an fd or (by default) a mapping inside `path`.

    For clear's check: go ahead only when `held` is False AND `complete` is True.
    """
    result = scan([path], with_env=with_env, with_maps=with_maps, own_fds=own_fds)
    return HoldersResult(
        path=result.prefixes[0],
        holders=result.holders,
        unreadable=result.unreadable,
        hidden=result.hidden,
    )


def process_table() -> dict[int, ProcStat]:
    """The stat of every visible process; processes that vanish meanwhile are skipped."""
    return stat_table()


def ppid_map() -> dict[int, int]:
    return {pid: st.ppid for pid, st in process_table().items()}


def descendants(pid: int) -> set[int]:
    """Pids of every live descendant of `pid` (not `pid` itself), from a fresh process table.

    A child whose parent died is re-parented (to init or a subreaper) and leaves this tree; its
    process group, session and $LANEWATCH_LANE still tell where it came from.
    """
    return descendants_in(process_table(), pid)


def descendants_in(procs: Mapping[int, ProcStat], pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for st in procs.values():
        children.setdefault(st.ppid, []).append(st.pid)
    found: set[int] = set()
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        if child in found or child == pid:
            continue  # a table read while processes come and go must not loop
        found.add(child)
        todo.extend(children.get(child, ()))
    return found


def ancestors(pid: int) -> list[int]:
    """Parent, grandparent, ... of `pid`, nearest first, up to the top of our pid namespace."""
    chain: list[int] = []
    seen = {pid}
    current = pid
    while True:
        try:
            st = read_stat(current)
        except OSError:
            break
        if st is None or st.ppid <= 0 or st.ppid in seen:
            break
        chain.append(st.ppid)
        seen.add(st.ppid)
        current = st.ppid
    return chain


# --- the probe ----------------------------------------------------------------------------------


class _Matcher:
    """Prefix test on kernel paths. Each prefix is kept as given (made absolute) and with
    symlinks resolved, because the kernel always prints resolved paths."""

    def __init__(self, prefixes: Iterable[str | os.PathLike[str]]) -> None:
        given: list[str] = []
        pairs: list[tuple[str, str, str]] = []  # (form, form + "/", caller's prefix)
        for raw in prefixes:
            norm = os.path.abspath(os.fspath(raw))
            given.append(norm)
            for form in dict.fromkeys((norm, os.path.realpath(norm))):
                pairs.append((form, form if form.endswith("/") else form + "/", norm))
        self.prefixes = tuple(given)
        self.pairs = tuple(pairs)
        self.needles = tuple({os.fsencode(p[0]) for p in pairs})
        # One C-level test rejects most paths (/dev/null, libraries, ...) before the loop;
        # `maybe` also admits a prefix itself printed with the kernel's " (deleted)".
        self.slashed = tuple(p[1] for p in pairs)
        self.exact = frozenset(p[0] for p in pairs)
        self.exact_or_deleted = self.exact | {p[0] + _DELETED for p in pairs}
        self.sockets: frozenset[str] = frozenset()  # listening sockets' fd links (`scan`)

    def maybe(self, raw: str) -> bool:
        """False when neither `raw` nor `raw` without " (deleted)" can lie under a prefix."""
        return raw.startswith(self.slashed) or raw in self.exact_or_deleted

    def match(self, path: str) -> str | None:
        if not path.startswith(self.slashed) and path not in self.exact:
            return None
        for form, slashed, given in self.pairs:
            if path.startswith(slashed) or path == form:
                return given
        return None


def _owner(dfd: int) -> tuple[int | None, bool]:
    """(effective uid, is a zombie) of a process we could not read, from its status (readable
    by all). Not the owner of /proc/PID: for a process that made itself non-dumpable (ssh-agent,
    gpg-agent) that is root, whoever runs it, and a clear must not take a user's own hidden
    process for another user's (`non_dumpable` says which it is). A normal user gets EACCES
    even for its own zombies' fd/."""
    try:
        status = _parse_status(_read(dfd, "status"))
    except OSError:
        return _dir_uid(dfd), False
    uid = status.euid
    return (uid if uid is not None else _dir_uid(dfd)), status.state == "Z"


def _non_dumpable(dfd: int, uid: int | None) -> bool:
    """Whether a process of a normal uid had the kernel hide its insides (its fd/ belongs to
    root while it runs as `uid`): a non-dumpable process, not another user's."""
    if not uid:
        return False
    try:
        return os.stat("fd", dir_fd=dfd, follow_symlinks=False).st_uid == 0
    except OSError:
        return False


def _candidate(matcher: _Matcher, raw: str) -> bool:
    """Cheap test before any stat: could `raw` (maybe with " (deleted)") lie under a prefix?"""
    if not matcher.maybe(raw):
        return False
    if raw.endswith(_DELETED) and matcher.match(raw[: -len(_DELETED)]) is not None:
        return True
    return matcher.match(raw) is not None


def _resolve(raw: str, link: str, dfd: int) -> tuple[str, bool, bool]:
    """(path, deleted, directory) of what `link` (cwd, root, fd/N) points to.

    The kernel appends " (deleted)" to an unlinked object's path; a live file may also be
    *named* "x (deleted)", so the suffix is dropped unless that name is the very same inode.
    """
    try:
        st: os.stat_result | None = os.stat(link, dir_fd=dfd)  # follows the magic link
    except OSError:
        st = None  # closed or exited meanwhile
    directory = st is not None and stat_mod.S_ISDIR(st.st_mode)
    if not raw.endswith(_DELETED):
        return raw, False, directory
    if st is not None:
        try:
            named = os.lstat(raw)
        except OSError:
            named = None
        if named is not None and (named.st_dev, named.st_ino) == (st.st_dev, st.st_ino):
            return raw, False, directory
    return raw[: -len(_DELETED)], True, directory


def _probe(
    pid: int,
    matcher: _Matcher,
    with_env: bool,
    with_maps: bool,
    with_tree: bool,
    ignored: frozenset[tuple[int, int]],
    bid: str,
    procs: dict[int, ProcStat],
    found: list[Holder],
    unreadable: list[Unreadable],
    memo: ProcMemo | None = None,
    views: MountViews | None = None,
    statuses: frozenset[int] = frozenset(),
    kept: dict[int, bytes] | None = None,
) -> None:
    try:
        # Pin the process: reads through dfd fail rather than read the pid's next owner.
        dfd = pin(pid)
    except OSError as exc:
        if exc.errno not in _GONE_ERRNOS:
            unreadable.append(Unreadable(pid, "proc", _why(exc)))
        return
    try:
        seen = memo.previous(pid) if memo is not None else None
        sched = None
        if seen is not None:  # the memo's mark: before the stat and every fact it vouches for
            with contextlib.suppress(OSError):  # gone or unreadable: the reads below say; no mark
                sched = read_sched(dfd)
        st: ProcStat | None = None
        if with_tree or seen is not None:
            st = _stat(pid, dfd, unreadable, memo)
            if st is None:
                return
            if with_tree:
                procs[pid] = st
            if st.kernel_thread:
                return  # no fd table of its own, no user's cwd: nothing of ours to hold
        mark = mark_of(sched, st) if sched is not None and st is not None else None
        still = (
            memo is not None
            and seen is not None
            and st is not None
            and memo.still(seen, mark, st.start_ticks)
        )
        if not still:
            seen = None  # it ran, or is another process: read it afresh
        if kept is not None and pid in statuses:
            if seen is not None and seen.status is not None:
                kept[pid] = seen.status  # its uid is its own to change: it did not run
            else:
                with contextlib.suppress(OSError):  # gone or unreadable: the reads below say
                    kept[pid] = read_status(dfd)
        problems: list[Unreadable] = []
        reading = Reading() if memo is not None else None
        # Its fds as they were, unless another process may share its table and change it.
        reuse = seen.fds if seen is not None and seen.alone else None
        ours = False  # in our mount namespace: its paths need no words of ours
        if seen is not None and seen.ours:
            ours = True  # it did not run since: no setns(2), no unshare(2)
        elif views is not None:
            ours = views.in_ours(pid, dfd)
        view = views.of(pid, dfd) if views is not None and not ours else None
        held = _held_paths(pid, dfd, matcher, with_maps, ignored, problems, reuse, reading, view)
        if held is None:
            return  # vanished mid-scan
        if memo is not None and reading is not None and reading.table is not None:
            memo.saw_table(reading.table)
        if problems:
            uid, zombie = _owner(dfd)
            if not zombie:  # a zombie has closed its files and dropped its cwd: it hides nothing
                hidden = _non_dumpable(dfd, uid)
                unreadable.extend(
                    Unreadable(u.pid, u.what, u.reason, uid, hidden) for u in problems
                )
        if not held:
            return
        if st is None:
            st = _stat(pid, dfd, unreadable, memo)
            if st is None:
                return
        procs[pid] = st
        holder = _describe(st, dfd, held, with_env, bid, seen)
        if holder is None:
            return
        found.append(holder)
        if memo is not None and reading is not None:
            memo.keep(
                pid,
                Seen(
                    start_ticks=st.start_ticks,
                    mark=mark,
                    fds=reading.fds,
                    table=reading.table,
                    holder=holder,
                    ours=ours,
                    status=kept.get(pid) if kept is not None else None,
                ),
            )
    finally:
        os.close(dfd)


def _stat(
    pid: int, dfd: int, unreadable: list[Unreadable], memo: ProcMemo | None = None
) -> ProcStat | None:
    try:
        if memo is not None:
            return _stat_at(pid, dfd, memo.stats, memo.stats_now)
        return _stat_at(pid, dfd)
    except OSError as exc:
        if exc.errno not in _GONE_ERRNOS:
            unreadable.append(Unreadable(pid, "stat", _why(exc), _owner(dfd)[0]))
        return None


def _held_paths(
    pid: int,
    dfd: int,
    matcher: _Matcher,
    with_maps: bool,
    ignored: frozenset[tuple[int, int]],
    problems: list[Unreadable],
    reuse: FdFacts | None = None,
    reading: Reading | None = None,
    view: Callable[[str], str] | None = None,
) -> list[HeldPath] | None:
    """Paths under a prefix, or None when the process vanished. `reuse`: facts of the fds of
    a process that did not run since they were read; `reading` learns this scan's. `view`:
    our names for the paths of a process in another mount namespace."""
    held: list[HeldPath] = []
    links: tuple[Literal["cwd", "root"], ...] = ("cwd", "root") if with_maps else ("cwd",)
    for link in links:
        try:
            target = os.readlink(link, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return None
            if exc.errno != errno.ENOENT:  # ENOENT: a zombie or exiting process has no cwd
                problems.append(Unreadable(pid, link, _why(exc)))
            continue
        if view is not None:
            target = view(target)
        if not _candidate(matcher, target):
            continue
        deleted = False
        if target.endswith(_DELETED):  # else `_resolve` would say it as it is (no stat needed)
            target, deleted, _ = _resolve(target, link, dfd)
        prefix = matcher.match(target)
        if prefix is None:
            continue
        # The same words as at the last scan: the very same object (cheap to compare later).
        known = reuse.get(link) if reuse is not None else None
        if known is None or (known.path, known.prefix, known.deleted) != (target, prefix, deleted):
            known = HeldPath(target, link, prefix, deleted=deleted, directory=True)
        if reading is not None:
            reading.fds[link] = known
        held.append(known)

    fds = _held_fds(pid, dfd, matcher, ignored, problems, reuse, reading, view)
    if fds is None:
        return None
    held.extend(fds)
    if with_maps:
        held.extend(_mapped(pid, dfd, matcher, problems, view))
    return held


def _held_fds(
    pid: int,
    dfd: int,
    matcher: _Matcher,
    ignored: frozenset[tuple[int, int]],
    problems: list[Unreadable],
    reuse: FdFacts | None = None,
    reading: Reading | None = None,
    view: Callable[[str], str] | None = None,
) -> list[HeldPath] | None:
    """Open files under a prefix, or None when the process vanished (`_read_fds`)."""
    # The names are listed by path (one open, no dup of a pinned folder fd: five system calls
    # fewer per process); every look-up below goes through the pin ("fd/N" under `dfd`). If
    # the process died and its pid was reused, the listing may be the next process's, but each
    # look-up then fails: nothing is read of any process but the pinned one.
    try:
        names = os.listdir(f"{PROC}/{pid}/fd")
    except OSError as exc:
        if exc.errno in _GONE_ERRNOS:
            return None
        problems.append(Unreadable(pid, "fd", _why(exc)))
        return []
    # Many fds: their folder opened once through the pin, each look-up one step shorter.
    at, lead = dfd, "fd/"
    if len(names) > _MANY_FDS:
        with contextlib.suppress(OSError):  # else through the pin, whose reads say why
            at, lead = open_fd_dir(dfd), ""
    try:
        return _read_fds(pid, names, at, lead, matcher, ignored, problems, reuse, reading, view)
    finally:
        if at != dfd:
            os.close(at)


_MANY_FDS = 32  # past this many fds, opening their folder costs less than the longer look-ups


def _read_fds(
    pid: int,
    names: list[str],
    at: int,
    lead: str,
    matcher: _Matcher,
    ignored: frozenset[tuple[int, int]],
    problems: list[Unreadable],
    reuse: FdFacts | None,
    reading: Reading | None,
    view: Callable[[str], str] | None,
) -> list[HeldPath]:
    """`_held_fds` of the fds `names`, each `lead + name` under folder fd `at`. This loop runs
    once per fd of every process: it is the scan's cost, so it does no more than each fd
    needs."""
    held: list[HeldPath] = []
    watcher = False
    match = matcher.match
    slashed, exact, sockets = matcher.slashed, matcher.exact_or_deleted, matcher.sockets
    facts = reading.fds if reading is not None else None
    table = reading.links if reading is not None else None
    for name in names:
        link = lead + name
        try:
            raw = os.readlink(link, dir_fd=at)
        except OSError as exc:
            if exc.errno in _GONE_ERRNOS:
                continue  # closed meanwhile, or the process exited
            problems.append(Unreadable(pid, "fd", _why(exc)))
            if exc.errno in _DENIED_ERRNOS:
                break  # every other fd would fail the same ptrace check
            continue
        if table is not None:
            table.append(raw)
        if view is not None:
            raw = view(raw)
        # Most fds are sockets, pipes or paths elsewhere: reject them before any stat
        # (`matcher.maybe`, inlined: this line runs for every fd on the machine).
        if not raw.startswith(slashed) and raw not in exact:
            watcher = watcher or raw == _FANOTIFY
            if sockets and raw in sockets:
                held.append(HeldPath(raw, "socket", "", int(name)))
            continue
        if reuse is not None:
            # The same link text under the same name, the prefixes unchanged (the memo drops
            # every reuse when they change): the same open file, its facts as they were.
            known = reuse.get(name)
            if (
                known is not None
                and known.path == raw
                and not (ignored and (pid, known.fd) in ignored)
            ):
                if facts is not None:
                    facts[name] = known
                held.append(known)
                continue
        prefix = match(raw)
        suffixed = raw.endswith(_DELETED)
        if prefix is None and not (suffixed and match(raw[: -len(_DELETED)]) is not None):
            continue
        fd = int(name)
        if ignored and (pid, fd) in ignored:
            continue
        access = _fd_access(link, at)
        if suffixed or access not in ("write", "readwrite"):
            path, deleted, directory = _resolve(raw, link, at)
            if path != raw or prefix is None:  # the suffix dropped (or was a name)
                prefix = match(path)
                if prefix is None:
                    continue
        else:
            # open(2) refuses to open a folder for writing (EISDIR): a writable fd is
            # never a folder, and without the suffix it is not deleted: no stat needed.
            path, deleted, directory = raw, False, False
        file_id = _file_id(link, at) if access in ("write", "readwrite") else None
        one = HeldPath(path, "fd", prefix, fd, access, deleted, directory, file_id)  # type: ignore[arg-type]
        if facts is not None and not suffixed and access is not None:
            facts[name] = one
        held.append(one)
    if reading is not None:
        reading.table = hash((tuple(names), tuple(reading.links)))
    if watcher:  # a fanotify listener's read-only fds are its events' files, not a user's
        return [h for h in held if h.access != "read"]
    return held


# A fanotify group (a watcher such as a root `lanewatch record` with kernel attribution) gets an
# open read-only fd of each file an event names, held until it has read the event: a clear must
# not take that for a process using the namespace (a concurrent recorder made clear refuse).
_FANOTIFY = "anon_inode:[fanotify]"


def _file_id(link: str, dfd: int) -> tuple[int, int] | None:
    """(device, inode) of the file behind fd `link` (the magic link followed: the open file)."""
    try:
        st = os.stat(link, dir_fd=dfd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _fd_access(link: str, dfd: int) -> Access | None:
    # The kernel gives /proc/PID/fd/N the mode of the open file: r-x for read, -wx for write
    # (what `ls -l /proc/PID/fd` shows). One lstat, cheaper than parsing fdinfo.
    try:
        mode = os.lstat(link, dir_fd=dfd).st_mode
    except OSError:
        return None
    readable = bool(mode & stat_mod.S_IRUSR)
    writable = bool(mode & stat_mod.S_IWUSR)
    if readable and writable:
        return "readwrite"
    if writable:
        return "write"
    return "read" if readable else "path"


def _mapped(
    pid: int,
    dfd: int,
    matcher: _Matcher,
    problems: list[Unreadable],
    view: Callable[[str], str] | None = None,
) -> list[HeldPath]:
    try:
        data = _read(dfd, "maps")
    except OSError as exc:
        if exc.errno not in _GONE_ERRNOS:
            problems.append(Unreadable(pid, "maps", _why(exc)))
        return []
    if view is None and not any(needle in data for needle in matcher.needles):
        return []  # the common case: no need to parse the lines
    found: dict[str, HeldPath] = {}
    for line in data.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith(b"/"):
            continue
        # The kernel escapes only "\n" in map paths.
        target = os.fsdecode(parts[5].replace(b"\\012", b"\n"))
        deleted = target.endswith(_DELETED)
        if deleted:
            target = target[: -len(_DELETED)]
        if view is not None:
            target = view(target)
        prefix = matcher.match(target)
        if prefix is None:
            continue
        perms = parts[1]
        shared_write = perms[1:2] == b"w" and perms[3:4] == b"s"
        previous = found.get(target)
        if previous is None or (shared_write and previous.access != "write"):
            access: Access = "write" if shared_write else "read"
            found[target] = HeldPath(target, "map", prefix, None, access, deleted)
    return list(found.values())


def _describe(
    st: ProcStat, dfd: int, held: list[HeldPath], with_env: bool, bid: str, seen: Seen | None
) -> Holder | None:
    """Add uid, cmdline and the lane variables; None if the process exited meanwhile. `seen`:
    the same process, which did not run since it was last described (`processes.memo`)."""
    last = seen.holder if seen is not None else None
    if last is not None and last.env_readable == with_env:
        paths = tuple(held)
        if last.stat is st and last.paths == paths:  # the stat as it was: the same object
            return last
        # Its uid too: changing it takes a system call (setuid, prctl), and it made none.
        return dataclasses.replace(last, stat=st, paths=paths)
    try:
        raw = _read(dfd, "cmdline")
    except OSError as exc:
        if exc.errno in _GONE_ERRNOS:
            return None
        raw = b""
    cmdline = parse_cmdline(raw)
    lane = namespace = None
    env_readable = False
    if with_env:
        try:
            env = _read(dfd, "environ")
        except OSError as exc:
            if exc.errno in _GONE_ERRNOS:
                return None
        else:
            env_readable = True
            lane, namespace = _environ_values(env, _LANE_KEY, _NAMESPACE_KEY)
    return Holder(
        stat=st,
        boot_id=bid,
        uid=_dir_uid(dfd),
        cmdline=cmdline,
        paths=tuple(held),
        lane=lane,
        namespace=namespace,
        env_readable=env_readable,
    )
