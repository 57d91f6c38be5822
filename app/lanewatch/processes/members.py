"""A lane's members: every running process CMD started, however it left the runner's tree.

Four ways a process is known to be a lane's, strongest first (`LaneMember.how`):
- `descendant`: in the tree below the runner. `lanewatch run` is a child subreaper
  (`linux/reaper.py`), so a process that daemonizes (setsid, double fork) is re-parented to the
  runner, not to init, and stays in this tree for as long as the runner lives;
- `group`: in the process group of CMD (`stamp.pgid`, led by `stamp.child_pid`). The group
  outlives its leader; a pgid number is never handed out again while any member lives. A
  process counts only if it started no earlier than the leader, and while a process holds the
  leader's pid it must be the leader itself (same start ticks);
- `mount-ns`: in the lane's own mount namespace (`stamp.mnt_ns`: the fenced CMD's, as
  `lanewatch run` saw it from outside), which a process cannot leave without privileges
  (setsid, a double fork or `env -i` keep it). The kernel hands a freed namespace's inode
  number out again, so a stale stamp's `mnt_ns` may name a stranger's new namespace: the
  number only picks candidates, and a candidate counts once its /tmp is the lane's own `tmp/`
  folder, which the fence bound there (same device and inode, `_shows_lane_tmp`). A sandbox
  the lane starts (`unshare -m`, bubblewrap, Codex's commands) makes a mount namespace below
  the lane's, with another number, in which /tmp is still the lane's folder: a process there
  counts too, by the same test (`setsid env -i unshare -Urm CMD` left the lane). Where
  /proc/PID/ns/mnt and /proc/PID/root are withheld (another user's process as a normal user, or
  one of our own that made itself non-dumpable: ssh-agent, gpg-agent, sshd's session), its
  /proc/PID/mountinfo is not, and says what is mounted on its /tmp: the lane's folder or not
  (`_mounts_lane_tmp`). Only when that cannot be told either is a process neither a member nor
  a stranger (`unreadable`), and the lane judged unknown rather than stale while one runs;
- `cgroup`: in the cgroup v2 `lanewatch run` made for the lane (`stamp.cgroup`, checked by
  `linux/cgroup.lane_cgroup`), which no process can leave without privileges (and whose
  `cgroup.procs` any user may read); looked at last, so it names the processes that no other
  rule found (a member known otherwise keeps that word);
- `marker`: `$LANEWATCH_NAMESPACE` names the lane's namespace (`lanewatch run` exports it, and
  children inherit it), started no earlier than the runner, running as the stamp's uid. The
  last resort: a program may clear its environment.
The descendants of every process found are members too.

While the runner lives, the tree and the group are enough (the subreaper keeps everything in
the tree) and nothing else is read. Once it is gone (killed, or released without waiting) the
mount namespace and the marker are read too, once per process: each process's answer is kept
by (pid, start ticks, name), so a probe reads only processes it has not seen.
Lanewatch's own processes (`ownpids`) are never members, nor pid 1, nor kernel threads.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from lanewatch.lanes.lane import ENV_NAMESPACE
from lanewatch.lanes.stamp import Stamp
from lanewatch.linux import cgroup
from lanewatch.linux.mountinfo import mount_of, parse_mountinfo
from lanewatch.linux.proc import (
    Pinned,
    ProcStat,
    environ_values,
    fd_path,
    is_denied,
    namespace_link,
)
from lanewatch.linux.reaper import Children, children_of, descendants
from lanewatch.model.views import LaneMember
from lanewatch.processes.ownpids import own_pids
from lanewatch.processes.pidclock import CLK_TCK, boottime
from lanewatch.runner.fence import FOLDERS

_MARKER = f"{ENV_NAMESPACE}=".encode()
MAX_COMMAND = 200  # characters of a member's command line kept


Table = Mapping[int, ProcStat]
Folder = tuple[int, int, str]  # (st_dev, st_ino, path) of the lane's tmp/ folder


class _Facts:
    """What each process said about itself, kept while it runs: (uid, marker, mount ns,
    command) by (pid, start ticks, name). The name changes at exec, and so may the rest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[int, int, str], tuple[int | None, str | None, str | None, str]] = {}
        self._shown: dict[tuple[int, int, str, int, int, str], bool | None] = {}

    def of(self, st: ProcStat) -> tuple[int | None, str | None, str | None, str]:
        key = (st.pid, st.start_ticks, st.comm)
        with self._lock:
            known = self._seen.get(key)
        if known is not None:
            return known
        found = _read(st)
        with self._lock:
            self._seen[key] = found
        return found

    def forget_gone(self, procs: Table) -> None:
        """Drop what was kept about processes no longer in `procs` (bounded by the table)."""
        with self._lock:
            if len(self._seen) > 2 * len(procs) + 64:
                self._seen = {
                    k: v
                    for k, v in self._seen.items()
                    if (st := procs.get(k[0])) is not None and st.start_ticks == k[1]
                }
            if len(self._shown) > 2 * len(procs) + 64:
                self._shown = {
                    k: v
                    for k, v in self._shown.items()
                    if (st := procs.get(k[0])) is not None and st.start_ticks == k[1]
                }

    def shows(self, st: ProcStat, folder: Folder) -> bool | None:
        """`_shows_lane_tmp`, kept by process and folder: a process cannot change its /tmp
        without privileges, as it cannot leave its namespace."""
        key = (st.pid, st.start_ticks, st.comm, *folder)
        with self._lock:
            if key in self._shown:
                return self._shown[key]
        found = _shows_lane_tmp(st, folder)
        with self._lock:
            self._shown[key] = found
        return found


_facts = _Facts()


def _read(st: ProcStat) -> tuple[int | None, str | None, str | None, str]:
    """uid, $LANEWATCH_NAMESPACE, mount namespace and command line of `st`'s process, read
    through a pinned /proc/PID (a pid reused meanwhile answers nothing)."""
    uid = marker = None
    command = st.comm
    try:
        with Pinned.open(st.pid) as p:
            now = p.stat()
            if now is None or now.start_ticks != st.start_ticks:
                return None, None, None, command
            uid = p.owner()
            try:
                marker = environ_values(p.environ(), _MARKER)[0]
            except OSError:
                marker = None  # another user's process, as a normal user: no marker seen
            with contextlib.suppress(OSError):
                command = command_line(p.cmdline()) or st.comm
    except OSError:
        return None, None, None, command
    return uid, marker, namespace_link(st.pid), command


def command_line(args: Sequence[str]) -> str:
    """A member's command line as kept: whole up to MAX_COMMAND characters. Longer, its program
    is first cut to its last folder and name (`…/bin/python`): a venv's interpreter in a long
    checkout path would otherwise fill the room before its name. Then the end is cut."""
    words = [a for a in args if a]
    text = " ".join(words)
    if len(text) > MAX_COMMAND and words and words[0].count("/") > 2:
        words[0] = "…/" + "/".join(words[0].rsplit("/", 2)[-2:])
        text = " ".join(words)
    return text[:MAX_COMMAND]


def lane_tmp(namespace: str) -> Folder | None:
    """(device, inode, path) of the lane's `tmp/` folder, which the fence binds on /tmp; None
    when there is none (then no process can prove it is in the lane's mount namespace)."""
    path = os.path.join(namespace, FOLDERS["/tmp"])
    try:
        found = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, path) if stat.S_ISDIR(found.st_mode) else None


def _shows_lane_tmp(st: ProcStat, folder: Folder) -> bool | None:
    """Whether `st`'s process sees the lane's `tmp/` folder at /tmp, read through its pinned
    /proc/PID/root (a pid reused meanwhile answers False); where that is withheld, by what its
    mountinfo says is mounted on /tmp (`_mounts_lane_tmp`). None when neither may be read.
    /tmp itself is not followed if it is a link: the fence mounts a folder there, and a link
    resolves against our root, not the process's."""
    try:
        with Pinned.open(st.pid) as p:
            now = p.stat()
            if now is None or now.start_ticks != st.start_ticks:
                return False
            try:
                seen = os.stat("root/tmp", dir_fd=p.dfd, follow_symlinks=False)
            except OSError as exc:
                if not is_denied(exc):
                    raise
                return _mounts_lane_tmp(p, st, folder)
    except OSError as exc:
        return None if is_denied(exc) else False
    return (seen.st_dev, seen.st_ino) == folder[:2]


def _mounts_lane_tmp(p: Pinned, st: ProcStat, folder: Folder) -> bool | None:
    """Whether the lane's `tmp/` folder is what is mounted on the pinned process's /tmp, as its
    /proc/PID/mountinfo says (readable when /proc/PID/root is not: the kernel checks no ptrace
    access there). The fence bind-mounts that folder on /tmp, so the mount's device and root
    (the folder within its filesystem) are the folder's own, as our mountinfo spells them. No
    mount on /tmp, or another one: not in the lane. None when either table cannot be read."""
    expected = _tmp_mount(folder)
    if expected is None:
        return None
    data = p.read("mountinfo")
    now = p.stat()
    if now is None or now.start_ticks != st.start_ticks:
        return False  # the pid names another process now
    on_tmp = [m for m in parse_mountinfo(data) if m.mount_point == "/tmp"]
    below = {m.parent_id for m in on_tmp}
    top = [m for m in on_tmp if m.mount_id not in below]  # the one mounted over the others
    return bool(top) and (top[-1].device, top[-1].root) == expected


@functools.lru_cache(maxsize=64)
def _tmp_mount(folder: Folder) -> tuple[str, str] | None:
    """(device, root) that a bind mount of `folder` shows in mountinfo: the device of the
    mount it lies on, and its path within that filesystem. None when it cannot be told."""
    try:
        fd = os.open(folder[2], os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_ino != folder[1]:
            return None  # replaced since it was found
        mount, real = mount_of(fd), fd_path(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if mount is None or real is None:
        return None
    if real != mount.mount_point and not real.startswith(mount.mount_point.rstrip("/") + "/"):
        return None
    rel = os.path.relpath(real, mount.mount_point)
    return mount.device, os.path.normpath(os.path.join(mount.root, rel))


def in_lane_ns(stamp: Stamp, st: ProcStat, ns: str | None, folder: Folder | None) -> bool | None:
    """Whether `st`'s process (mount namespace `ns`, as read) is in the lane's own mount
    namespace: True, False, or None when that cannot be told (the namespace or /tmp withheld
    from us, or a candidate while the lane has no tmp/ folder to compare with)."""
    if not stamp.mnt_ns:
        return False
    if ns is not None and ns != stamp.mnt_ns:
        # A namespace's number is unique while it lives: not the lane's own. But a sandbox the
        # lane started (`unshare -m`, bwrap, a container's runtime) made a namespace below it,
        # whose /tmp is still the lane's folder: its processes are the lane's (only they can
        # see that folder at /tmp, short of a bind made on purpose by someone who may).
        if folder is None or ns == _our_mnt_ns():
            return False
        return _facts.shows(st, folder) is True
    # Its number matches (and may be a reused one), or is withheld: what it sees on /tmp tells.
    return None if folder is None else _facts.shows(st, folder)


@functools.cache
def _our_mnt_ns() -> str | None:
    """Our own mount namespace (a process in it sees the real /tmp, never a lane's)."""
    return namespace_link("self")


@functools.cache
def _booted_at() -> float:
    """Epoch seconds of the boot, once: so a process's start time reads the same each probe."""
    return time.time() - boottime()


def started_at(start_ticks: int) -> float:
    """Epoch seconds of a process start given in clock ticks since boot."""
    return round(_booted_at() + start_ticks / CLK_TCK, 2)


def members_of(
    stamp: Stamp, namespace: str, procs: Table, *, runner_alive: bool
) -> tuple[LaneMember, ...]:
    """The running processes of the lane `stamp` names (its runner left out), from `procs`."""
    skip = own_pids() | {stamp.pid}
    found: dict[int, str] = {}
    children = _tree.of(procs)
    if runner_alive and _may_be_runner(stamp, procs):
        for st in descendants(stamp.pid, procs, children):
            found.setdefault(st.pid, "descendant")
    for st in _group(stamp, procs):
        found.setdefault(st.pid, "group")
    if not runner_alive:
        for pid, how in _marked(stamp, namespace, procs):
            found.setdefault(pid, how)
        for pid in list(found):
            for st in descendants(pid, procs, children):
                found.setdefault(st.pid, "descendant")
    for pid in _in_cgroup(stamp):
        if pid in procs:
            found.setdefault(pid, "cgroup")
    out = []
    for pid, how in sorted(found.items()):
        p = procs.get(pid)
        if pid in skip or pid <= 1 or p is None or p.kernel_thread or p.state in ("Z", "X"):
            continue
        uid, _marker, _ns, command = _facts.of(p)
        when = started_at(p.start_ticks)
        out.append(LaneMember(pid, p.start_ticks, command, when, how, uid, p.pgid))
    _facts.forget_gone(procs)
    return tuple(out)


class _Tree:
    """The children index of the last table asked about: a probe asks `members_of` once per
    lane with one table, and indexing it each time cost more than the rest of the probe (a
    table is never changed once read: `lazy_table`, `stat_table`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[Table, int, Children] | None = None

    def of(self, procs: Table) -> Children:
        with self._lock:
            last = self._last
        if last is not None and last[0] is procs and last[1] == len(procs):
            return last[2]
        children = children_of(procs)
        with self._lock:
            self._last = (procs, len(procs), children)
        return children


_tree = _Tree()


def children(procs: Table) -> Children:
    """Each process's children in `procs`, by parent pid (indexed once per table)."""
    return _tree.of(procs)


def _may_be_runner(stamp: Stamp, procs: Table) -> bool:
    """Whether the stamp's pid can be the lane's runner, whose tree is the lane's: never init
    (a forged stamp naming pid 1 made every process of the machine the lane's), nor a process
    of another uid than the stamp names (a forged stamp naming someone's daemon)."""
    if stamp.pid <= 1:
        return False
    runner = procs.get(stamp.pid)
    if runner is None or stamp.uid is None:
        return True
    uid = _facts.of(runner)[0]
    return uid is None or uid == stamp.uid


def lane_cgroup(stamp: Stamp) -> str | None:
    """The lane's cgroup when its stamp names one lanewatch made for this runner."""
    return cgroup.lane_cgroup(stamp.cgroup, stamp.pid, stamp.start_ticks)


def _in_cgroup(stamp: Stamp) -> list[int]:
    path = lane_cgroup(stamp) if stamp.cgroup else None
    return (cgroup.all_procs(path) or []) if path is not None else []


def _group(stamp: Stamp, procs: Table) -> list[ProcStat]:
    """Members of CMD's process group, while the group can still be CMD's (module doc)."""
    pgid, ticks = stamp.pgid, stamp.child_start_ticks
    if not pgid or pgid <= 1 or ticks is None or pgid != stamp.child_pid:
        return []
    leader = procs.get(pgid)
    if leader is not None and leader.start_ticks != ticks:
        return []  # the number names another process now: the group is not CMD's
    return [st for st in procs.values() if st.pgid == pgid and st.start_ticks >= ticks]


def _marked(stamp: Stamp, namespace: str, procs: Table) -> list[tuple[int, str]]:
    """Processes started since the runner that carry the lane's mount namespace or marker."""
    out = []
    folder = lane_tmp(namespace) if stamp.mnt_ns else None
    for st in procs.values():
        if st.start_ticks < stamp.start_ticks or st.pid <= 1 or st.kernel_thread:
            continue
        uid, marker, ns, _command = _facts.of(st)
        if in_lane_ns(stamp, st, ns, folder):
            out.append((st.pid, "mount-ns"))
        elif marker == namespace and uid == stamp.uid:
            out.append((st.pid, "marker"))
    return out


def unreadable(stamp: Stamp, namespace: str, procs: Table) -> int:
    """How many processes started since the runner may be in the lane's mount namespace but
    cannot be asked (another user's /proc/PID/ns/mnt or /proc/PID/root, as a normal user; or
    its namespace's number matches while the lane has no tmp/ folder to prove it by): not
    members, and not strangers either. 0 for a lane without a mount namespace of its own."""
    if not stamp.mnt_ns:
        return 0
    folder = lane_tmp(namespace)
    skip = own_pids()
    n = 0
    for st in procs.values():
        if st.start_ticks < stamp.start_ticks or st.pid <= 1 or st.kernel_thread:
            continue
        if st.pid in skip or st.state in ("Z", "X"):
            continue
        uid, _marker, ns, _command = _facts.of(st)
        # There, but its namespace withheld from us. A normal user's lane has a user namespace
        # in which only its uid exists: another uid's process cannot be the lane's. A root
        # lane's process may have become anyone.
        if uid is None or (stamp.uid != 0 and uid != stamp.uid):
            continue
        if in_lane_ns(stamp, st, ns, folder) is None:
            n += 1
    return n


def lazy_table(read: Callable[[], dict[int, ProcStat]]) -> Callable[[], dict[int, ProcStat]]:
    """`read`, called at most once: the process table shared by the judgements of one probe."""
    kept: list[dict[int, ProcStat]] = []

    def once() -> dict[int, ProcStat]:
        if not kept:
            kept.append(read())
        return kept[0]

    return once
