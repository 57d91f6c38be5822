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
another's fds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from lanewatch.linux.unixsockets import AbstractListener, abstract_listeners
from lanewatch.model.views import NamespaceView
from lanewatch.processes.sockowners import SocketHolder, socket_owners


@dataclass(frozen=True, slots=True)
class LaneListener:
    """An abstract name a lane's process listens on: the eldest holder of the lane's."""

    socket: AbstractListener
    view: NamespaceView
    holder: SocketHolder


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
    held = lanes_holding({s.inode for s in found}, list(views))
    out = [
        LaneListener(s, v, h)
        for s in sorted(found, key=lambda s: s.name)
        for v, h in held.by_inode.get(s.inode, ())
    ]
    return Listened(out, held.hidden)
