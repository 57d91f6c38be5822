"""The `who_listens` tool's answer: which lane holds a port, an X display or an abstract unix
socket, for an agent whose server just failed with "address already in use" (or whose Xvfb
"failed to start"), with the fix that fits.

Read once per call, as `lanewatch ports` reads: one probe of the known roots' live lanes
(`Engine.snapshot`), the machine's port leases, and the kernel's socket tables. A process of a
root we do not read (another user's, as a normal user) is not named, but a listener that is no
known lane's is said to be there (`elsewhere`). In a `--fence net` lane the tables are its own
network namespace's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.agents.answers import AgentError
from lanewatch.agents.me import Me, who_am_i
from lanewatch.agents.whosepath import known_roots
from lanewatch.inert import inert
from lanewatch.model.views import NamespaceView

X_DISPLAY = "@/tmp/.X11-unix/X{}"
_PORT = re.compile(r"([0-9]{1,5})(?:/(tcp|udp))?")
_DISPLAY = re.compile(r":([0-9]{1,9})")
ASK = "give a port (3000, or 5353/udp), an X display (:99) or an abstract socket name (@name)"
PORT_FIX = "listen on $PORT instead (your lane's lease{lease}), or on port 0 and pass it on"
NAME_FIX = (
    "for an X server, `xvfb-run -a` (it takes the next free display) or `Xvfb -displayfd`; "
    "or run your lane with `lanewatch run --fence net`, where abstract names are its own"
)


@dataclass(frozen=True, slots=True)
class Target:
    """What was asked about: a port (`proto` None: either) or an abstract name."""

    port: int | None = None
    proto: str | None = None
    name: str | None = None

    @property
    def said(self) -> str:
        if self.name is not None:
            return self.name
        return f":{self.port}" + (f"/{self.proto}" if self.proto else "")


def target(on: str) -> Target:
    """`3000`, `5353/udp`, `:99` (the X display's name) or `@name`; AgentError otherwise."""
    on = on.strip()
    if on.startswith("@") and len(on) > 1 and "\0" not in on:
        return Target(name=on)
    if found := _DISPLAY.fullmatch(on):
        return Target(name=X_DISPLAY.format(int(found.group(1))))
    if (found := _PORT.fullmatch(on)) and 1 <= int(found.group(1)) <= 65535:
        return Target(port=int(found.group(1)), proto=found.group(2))
    raise AgentError(ASK)


def who_listens(on: str, me: Me | None = None) -> dict[str, Any]:
    """The lanes listening on `on` (mine among them or not), whether anything else does, and
    the fix."""
    from lanewatch.engine.engine import Engine

    want = target(on)
    me = who_am_i() if me is None else me
    views = list(Engine(known_roots(me)).snapshot().upserts.values())
    mine = os.path.realpath(me.namespace) if me.namespace else None
    found = _named(want.name, views) if want.name is not None else _port(want, views)
    lanes = [{**h, "mine": h["namespace"] == mine} for h in found.lanes]
    answer: dict[str, Any] = {
        "on": inert(want.said),
        "lanes": lanes,
        "elsewhere": found.elsewhere,
        "hidden": [inert(v.lane or v.name) for v in found.hidden],
    }
    if want.port is not None:
        from lanewatch.lanes.leases import lease_of, read_leases

        lease = lease_of(want.port, read_leases())
        answer["leased_to"] = inert(lease.lane) if lease is not None else None
    answer["fix"] = _fix(want, lanes, found, me)
    return answer


@dataclass(slots=True)
class Found:
    lanes: list[dict[str, Any]]  # the lanes seen holding it, eldest holder first
    listened: bool  # whether our tables list a listener on it at all
    hidden: list[NamespaceView]  # lanes whose processes' open files could not be read
    table: bool = True  # False: the kernel's socket table could not be read at all

    @property
    def elsewhere(self) -> bool:
        """A listener that is no lane's: only when no lane could be hiding it."""
        return self.table and self.listened and not self.lanes and not self.hidden


def _lane(v: NamespaceView, pid: int, command: str) -> dict[str, Any]:
    return {
        "lane": inert(v.lane or v.name),
        "namespace": v.key,
        "checkout": inert(v.checkout_path) if v.checkout_path else None,
        "pid": pid,
        "command": inert(command[:200]),
    }


def _named(name: str, views: list[NamespaceView]) -> Found:
    from lanewatch.processes.socketlanes import lane_listeners

    listened = lane_listeners(views)
    if listened is None:  # the kernel's table cannot be read: nothing can be said
        return Found([], False, [], table=False)
    found = [one for one in listened.found if one.socket.name == name]
    lanes = [{**_lane(o.view, o.holder.pid, o.holder.command), "how": o.how} for o in found]
    return Found(lanes, name in listened.names, listened.hidden if not lanes else [])


def _port(want: Target, views: list[NamespaceView]) -> Found:
    from lanewatch.linux.netsockets import listening
    from lanewatch.processes.socketlanes import lanes_holding

    def fits(proto: str, port: int) -> bool:
        return port == want.port and want.proto in (None, proto)

    # What the snapshot's probe saw each lane listen on: the host's ports, and a --fence net
    # lane's own, read in its network namespace.
    seen = [(v, p) for v in views for p in v.ports if fits(p.proto, p.port)]
    host = {v.key: (v, p) for v, p in seen if not p.private}  # IPv4 and IPv6: one each
    own = [(v, p) for v, p in seen if p.private]
    lanes = [
        {**_lane(v, p.pid, p.command), "private": p.private, "how": "open file"}
        for v, p in [*host.values(), *own]
    ]
    inodes = {s.inode for s in listening() if fits(s.proto, s.port)}
    # A listener no lane was seen holding: whose cannot be told if a lane could not be read.
    hidden = lanes_holding(inodes, views).hidden if inodes and not host else []
    return Found(lanes, bool(inodes), hidden)


def _fix(want: Target, lanes: list[dict[str, Any]], found: Found, me: Me) -> str:
    if not found.table:
        return "cannot tell: the kernel's table of abstract sockets cannot be read here"
    shared = [h for h in lanes if not h.get("private")]
    private = [h for h in lanes if h.get("private") and not h["mine"]]
    aside = (
        f" (lane {private[0]['lane']} listens on it in its own network namespace, where it "
        "collides with no one's)"
        if private
        else ""
    )
    if not shared and not found.listened:
        return f"nothing listens on {want.said} here now{aside}"
    theirs = [h for h in shared if not h["mine"]]
    if shared and not theirs:
        pids = ", ".join(str(h["pid"]) for h in shared)
        return f"your own lane holds it (pid {pids}): reuse it, or end that process first"
    remedy = NAME_FIX if want.name is not None else PORT_FIX.format(lease=_my_lease(me))
    if theirs:
        return f"lane {theirs[0]['lane']} holds it: {remedy}"
    if found.hidden:
        from lanewatch.processes.socketlanes import why_hidden

        names = inert(", ".join(v.lane or v.name for v in found.hidden[:5]))
        return (
            "something listens on it, and which lane cannot be told here: the open files of "
            f"lane(s) {names} cannot be read ({why_hidden()}): {remedy}"
        )
    return f"a process of no lane known here holds it: {remedy}{aside}"


def _my_lease(me: Me) -> str:
    from lanewatch.lanes.stamp import read_stamp

    if me.namespace is None:
        return ", once you run in a lane"
    stamp = read_stamp(Path(me.namespace)).stamp
    if stamp is None or not stamp.ports:
        return ""
    first, count = stamp.ports
    return f": {first}-{first + count - 1}"
