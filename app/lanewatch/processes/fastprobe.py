"""The fast probe: what the processes of live lanes hold, found from the process tree alone.

A full /proc scan (`sources.procscan.scan`) reads the cwd, every fd, the command line and the
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
from collections.abc import Iterable, Mapping, Sequence

from lanewatch.model.writers import Holding, Owner
from lanewatch.processes import holders
from lanewatch.processes.ownpids import own_pids

_O_PATH = getattr(os, "O_PATH", 0)


def lane_pids(procs: Mapping[int, holders.ProcStat], owners: Iterable[Owner]) -> set[int]:
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


def _inside(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def _env(dfd: int) -> tuple[str | None, str | None]:
    try:
        fd = os.open("environ", os.O_RDONLY, dir_fd=dfd)
    except OSError:
        return None, None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return None, None
    finally:
        os.close(fd)
    lane = namespace = None
    for entry in b"".join(chunks).split(b"\0"):
        if entry.startswith(b"LANEWATCH_LANE="):
            lane = os.fsdecode(entry[15:])
        elif entry.startswith(b"LANEWATCH_NAMESPACE="):
            namespace = os.fsdecode(entry[20:])
    return lane, namespace


def _access(dfd: int, fd: str) -> str | None:
    try:
        with open(f"fdinfo/{fd}", "rb", opener=lambda p, f: os.open(p, f, dir_fd=dfd)) as info:
            for line in info:
                if line.startswith(b"flags:"):
                    flags = int(line.split()[1], 8)
                    if _O_PATH and flags & _O_PATH:
                        return "path"
                    return ("read", "write", "readwrite", "readwrite")[flags & 3]
    except (OSError, ValueError):
        return None
    return None


def holdings_of(
    pids: Iterable[int],
    procs: Mapping[int, holders.ProcStat],
    prefixes: Sequence[str],
) -> list[Holding]:
    """What `pids` hold (cwd and fds) under `prefixes` (given as real, absolute paths)."""
    prefixes = [p.rstrip("/") for p in prefixes]
    own = own_pids()
    out: list[Holding] = []
    for pid in pids:
        st = procs.get(pid)
        if st is None or pid in own:
            continue
        try:
            dfd = os.open(f"/proc/{pid}", _O_PATH | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            out.extend(_one(pid, dfd, st, procs, prefixes))
        finally:
            os.close(dfd)
    return out


def _one(
    pid: int,
    dfd: int,
    st: holders.ProcStat,
    procs: Mapping[int, holders.ProcStat],
    prefixes: Sequence[str],
) -> list[Holding]:
    found: list[tuple[str, str, str | None, bool, int | None, bool]] = []
    try:
        cwd = os.readlink("cwd", dir_fd=dfd)
        if _inside(cwd, prefixes):
            found.append((cwd, "cwd", None, False, None, True))
    except OSError:
        pass
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for name in fds:
        try:
            target = os.readlink(f"fd/{name}", dir_fd=dfd)
        except OSError:
            continue
        deleted = target.endswith(" (deleted)")
        if deleted:
            target = target[:-10]
        if target.startswith("/") and _inside(target, prefixes):
            try:
                is_dir = stat.S_ISDIR(os.stat(f"fd/{name}", dir_fd=dfd).st_mode)
            except OSError:
                is_dir = False
            found.append((target, "fd", _access(dfd, name), deleted, int(name), is_dir))
    if not found:
        return []
    # Re-check the pinned process is the one in the table (not a reused pid).
    try:
        with open("stat", "rb", opener=lambda p, f: os.open(p, f, dir_fd=dfd)) as f:
            data = f.read()
        if int(data[data.rfind(b")") + 2 :].split()[19]) != st.start_ticks:
            return []
    except (OSError, ValueError, IndexError):
        return []
    lane, namespace = _env(dfd)
    try:
        with open("cmdline", "rb", opener=lambda p, f: os.open(p, f, dir_fd=dfd)) as f:
            cmd = tuple(os.fsdecode(a) for a in f.read().split(b"\0") if a)
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
        )
        for path, kind, access, deleted, fd, is_dir in found
    ]
