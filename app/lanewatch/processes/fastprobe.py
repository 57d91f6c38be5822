"""The fast probe: what the processes of live lanes hold, found from the process tree alone.

A full /proc scan (`processes.holders.scan`) reads the cwd, every fd, the command line and the
environment of every process holding anything under the prefixes; on a busy host with hundreds
of processes sitting in /tmp that costs hundreds of milliseconds. Most of those processes belong
to no lane. Here we read only `stat` of every process (pid, ppid, pgid), pick the descendants
and process-group members of live owners, and read cwd and fds of those alone.

What it cannot see, and the full scan (run every so often) can: a lane process that left both
its owner's tree and its process group (setsid, then re-parented), known only by its
$LANEWATCH_NAMESPACE. Each process is pinned by an O_PATH fd on /proc/PID before its links are
read, so a pid reused mid-read is never credited with the dead process's files.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence

from lanewatch.linux.mountview import MountViews
from lanewatch.linux.paths import SHARED_TEMP, under_any
from lanewatch.linux.proc import DELETED, Pinned, ProcStat, environ_values, fd_access
from lanewatch.model.holdings import Holding, Owner
from lanewatch.processes.ownpids import own_pids

_LANE_KEY = b"LANEWATCH_LANE="
_NAMESPACE_KEY = b"LANEWATCH_NAMESPACE="


def lane_pids(procs: Mapping[int, ProcStat], owners: Iterable[Owner]) -> set[int]:
    """Owners, their descendants and their process groups' members."""
    owners = list(owners)
    found = {pid for o in owners for pid in o.pids if pid in procs}
    groups = {o.pgid for o in owners if o.pgid}
    children: dict[int, list[int]] = {}
    for st in procs.values():
        children.setdefault(st.ppid, []).append(st.pid)
        if st.pgid in groups:
            found.add(st.pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def holdings_of(
    pids: Iterable[int],
    procs: Mapping[int, ProcStat],
    prefixes: Sequence[str],
    views: MountViews | None = None,
    sockets: Collection[str] = (),
) -> list[Holding]:
    """What `pids` hold (cwd and fds) under `prefixes` (given as real, absolute paths). With
    `views`, a path in shared temp is put in our words while the process is pinned (a fenced
    lane's /tmp/x is a file of its namespace): renamed after the probe, a process that had
    exited since kept its /tmp/x, which passed for a write in shared temp. `sockets`: the fd
    links of listening sockets (`socket:[INODE]`): an fd on one is held too (kind "socket")."""
    prefixes = [p.rstrip("/") for p in prefixes]
    own = own_pids()
    out: list[Holding] = []
    for pid in pids:
        st = procs.get(pid)
        if st is None or pid in own:
            continue
        try:
            pinned = Pinned.open(pid)
        except OSError:
            continue
        with pinned:
            out.extend(_one(pinned, st, procs, prefixes, views, sockets))
    return out


def _one(
    pinned: Pinned,
    st: ProcStat,
    procs: Mapping[int, ProcStat],
    prefixes: Sequence[str],
    views: MountViews | None = None,
    sockets: Collection[str] = (),
) -> list[Holding]:
    pid = pinned.pid
    found: list[tuple[str, str, str | None, bool, int | None, bool, tuple[int, int] | None]] = []
    try:
        cwd = pinned.readlink("cwd")
        if under_any(cwd, prefixes):
            found.append((cwd, "cwd", None, False, None, True, None))
    except OSError:
        pass
    try:
        fds = pinned.fds()
    except OSError:
        fds = []
    for name in fds:
        try:
            target = pinned.readlink(f"fd/{name}")
        except OSError:
            continue
        if target in sockets:
            found.append((target, "socket", None, False, int(name), False, None))
            continue
        deleted = target.endswith(DELETED)
        if deleted:
            target = target[: -len(DELETED)]
        if target.startswith("/") and under_any(target, prefixes):
            try:
                st_fd = os.stat(f"fd/{name}", dir_fd=pinned.dfd)  # the open file itself
            except OSError:
                st_fd = None
            is_dir = st_fd is not None and stat.S_ISDIR(st_fd.st_mode)
            access = fd_access(pinned.fd_flags(name))
            file_id = (st_fd.st_dev, st_fd.st_ino) if st_fd is not None else None
            found.append((target, "fd", access, deleted, int(name), is_dir, file_id))
    if not found:
        return []
    # Re-check the pinned process is the one in the table (not a reused pid).
    try:
        now = pinned.stat()
    except OSError:
        return []
    if now is None or now.start_ticks != st.start_ticks:
        return []
    if views is not None and any(under_any(f[0], SHARED_TEMP) for f in found):
        view = views.of(pid, pinned.dfd)
        if view is not None:
            found = [(view(f[0]) if under_any(f[0], SHARED_TEMP) else f[0], *f[1:]) for f in found]
    try:
        lane, namespace = environ_values(pinned.environ(), _LANE_KEY, _NAMESPACE_KEY)
    except OSError:
        lane = namespace = None
    try:
        cmd = tuple(a for a in pinned.cmdline() if a)
    except OSError:
        cmd = ()
    lineage = [pid]
    current = procs.get(pid)
    while current is not None and current.ppid > 0 and current.ppid not in lineage:
        lineage.append(current.ppid)
        current = procs.get(current.ppid)
    return [
        Holding(
            pid=pid,
            start_ticks=st.start_ticks,
            path=path,
            kind=kind,
            access=access,
            deleted=deleted,
            directory=is_dir,
            lane_env=lane,
            namespace_env=namespace,
            lineage=tuple(lineage),
            pgid=st.pgid,
            command=cmd,
            fd=fd,
            file_id=file_id if access in ("write", "readwrite") else None,
        )
        for path, kind, access, deleted, fd, is_dir, file_id in found
    ]
