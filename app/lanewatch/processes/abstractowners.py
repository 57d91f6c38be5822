"""Which lane listens on each abstract unix socket: an X display (`@/tmp/.X11-unix/X99`), a
D-Bus or a test server bound to a name with no file.

An abstract name belongs to the network namespace, not to `/tmp`, so the fence does not keep
it apart: `xvfb-run` in two fenced lanes at once asks for `:99` twice, and the second Xvfb
fails. This names the first. A socket counts as a lane's when one of the lane's running
processes (`NamespaceView.members`, by pid and start ticks, re-read from each holder as its fds
are read) holds it open; a name no lane holds is left out, and a lane's own network namespace
(`--fence net`) is not ours to list (there it collides with no one's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lanewatch.linux.unixsockets import AbstractListener, abstract_listeners
from lanewatch.model.views import NamespaceView
from lanewatch.processes.sockowners import SocketHolder, socket_owners


@dataclass(frozen=True, slots=True)
class LaneListener:
    """An abstract name a lane's process listens on: the eldest holder of the lane's."""

    socket: AbstractListener
    view: NamespaceView
    holder: SocketHolder


def lane_listeners(views: Iterable[NamespaceView]) -> list[LaneListener] | None:
    """The abstract names the lanes of `views` listen on, by name then lane; None when the
    kernel's socket table cannot be read."""
    found = abstract_listeners()
    if found is None:
        return None
    lane_of = {(m.pid, m.start_ticks): v for v in views for m in v.members}
    if not found or not lane_of:
        return []
    owners = socket_owners({s.inode for s in found}, among={pid for pid, _ in lane_of})
    out: list[LaneListener] = []
    for s in sorted(found, key=lambda s: s.name):
        seen: set[str] = set()
        for h in sorted(owners.by_inode.get(s.inode, ()), key=lambda h: h.start_ticks or 0):
            v = lane_of.get((h.pid, h.start_ticks or -1))
            if v is not None and v.key not in seen:
                seen.add(v.key)
                out.append(LaneListener(s, v, h))
    return out
