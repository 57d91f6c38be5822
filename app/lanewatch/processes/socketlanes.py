"""Which lane's process holds a socket: a port's listener, or an abstract unix socket's (an X
display's `@/tmp/.X11-unix/X99`, a D-Bus or test server bound to a name with no file).

An abstract name belongs to the network namespace, not to `/tmp`, so the fence does not keep
it apart: `xvfb-run` in two fenced lanes at once asks for `:99` twice, and the second Xvfb
fails. This names the first. A socket counts as a lane's when one of the lane's running
processes (`NamespaceView.members`, by pid and start ticks, re-read from each holder as its fds
are read) holds it open. A lane's own network namespace (`--fence net`) is not ours to list
(there it collides with no one's).

Blind spot, said, never guessed (`Held.hidden`): a process whose open files we may not read.
Inside a normal user's fenced lane (a user namespace of its own) that is every process outside
it, the user's own included: the kernel lets only a process of the same user namespace read
another's fds. An X display is still told there: an X server writes its pid to `/tmp/.X99-lock`
as it starts, in the lane's own `/tmp` when fenced, which any process of the user may read
(`x_lock_lanes`; the pid must be a running member of that lane, started before the lock).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from lanewatch.lanes.fsutil import read_nofollow_in
from lanewatch.linux.unixsockets import AbstractListener, abstract_listeners
from lanewatch.linux.userns import in_one_uid_namespace
from lanewatch.model.views import LaneMember, NamespaceView
from lanewatch.processes.sockowners import SocketHolder, socket_owners


@dataclass(frozen=True, slots=True)
class LaneListener:
    """An abstract name a lane's process listens on: the eldest holder of the lane's."""

    socket: AbstractListener
    view: NamespaceView
    holder: SocketHolder
    how: str = "open file"  # how the holder is known: it holds the socket, or its "X lock file"


@dataclass(slots=True)
class Held:
    """Who of the lanes holds each socket inode, eldest first; `hidden`: the lanes with a
    running process whose open files could not be read (they may hold any of them)."""

    by_inode: dict[int, list[tuple[NamespaceView, SocketHolder]]] = field(default_factory=dict)
    hidden: list[NamespaceView] = field(default_factory=list)


@dataclass(slots=True)
class Listened:
    found: list[LaneListener]
    hidden: list[NamespaceView]  # as `Held.hidden`
    names: frozenset[str] = frozenset()  # every abstract name listened on, a lane's or not


def why_hidden() -> str:
    """Why a lane's open files could not be read here, in words."""
    if in_one_uid_namespace():
        return "inside a lane's fence, a user namespace, no process outside it can be read"
    return "its process made itself unreadable, as ssh-agent does, or is another user's"


def lanes_holding(inodes: Collection[int], views: Iterable[NamespaceView]) -> Held:
    """The lanes of `views` whose running processes hold the sockets `inodes`."""
    lane_of = {(m.pid, m.start_ticks): v for v in views for m in v.members}
    held = Held()
    if not inodes or not lane_of:
        return held
    owners = socket_owners(inodes, among={pid for pid, _ in lane_of})
    for inode, holders in owners.by_inode.items():
        seen: set[str] = set()
        for h in sorted(holders, key=lambda h: h.start_ticks or 0):
            v = lane_of.get((h.pid, h.start_ticks or -1))
            if v is not None and v.key not in seen:
                seen.add(v.key)
                held.by_inode.setdefault(inode, []).append((v, h))
    by_pid = {pid: v for (pid, _), v in lane_of.items()}
    hidden = {by_pid[h.pid].key: by_pid[h.pid] for h in owners.unreadable if h.pid in by_pid}
    held.hidden = sorted(hidden.values(), key=lambda v: v.key)
    return held


def lane_listeners(views: Iterable[NamespaceView]) -> Listened | None:
    """The abstract names the lanes of `views` listen on, by name then lane; None when the
    kernel's socket table cannot be read."""
    found = abstract_listeners()
    if found is None:
        return None
    views = list(views)
    held = lanes_holding({s.inode for s in found}, views)
    out: list[LaneListener] = []
    for s in sorted(found, key=lambda s: s.name):
        seen = held.by_inode.get(s.inode, [])
        out.extend(LaneListener(s, v, h) for v, h in seen)
        number = s.display_number
        if not seen and held.hidden and number is not None:
            for v, m in x_lock_lanes(number, held.hidden):
                holder = SocketHolder(m.pid, m.command, m.uid, m.start_ticks)
                out.append(LaneListener(s, v, holder, "X lock file"))
    return Listened(out, held.hidden, frozenset(s.name for s in found))


X_LOCK = ".X{}-lock"
X_LOCK_BYTES = 64
LOCK_SLACK = 1.0  # seconds: a process's start time, from clock ticks, may read a little late


def x_lock_lanes(
    display: int, views: Iterable[NamespaceView], shared: Path = Path("/tmp")
) -> list[tuple[NamespaceView, LaneMember]]:
    """The lanes of `views` whose running process is the X server of `display` by its lock
    file: in the lane's own `tmp/` (fenced), or in `shared` (unfenced). The pid in it must be
    one of the lane's members, and the lock no older than that process (a stale lock's pid
    handed out again is no one's)."""
    name = X_LOCK.format(display)
    out = []
    for v in views:
        for folder in (Path(v.key) / "tmp", shared):
            member = _lock_member(folder, name, v.members)
            if member is not None:
                out.append((v, member))
                break
    return out


def _lock_member(folder: Path, name: str, members: Iterable[LaneMember]) -> LaneMember | None:
    try:
        data, st = read_nofollow_in(folder, name, X_LOCK_BYTES)
        pid = int(data.strip())
    except (OSError, ValueError):
        return None
    for m in members:
        started = m.started_at
        if m.pid == pid and started is not None and st.st_mtime >= started - LOCK_SLACK:
            return m
    return None
