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
    if want.name is not None:
        holders, elsewhere = _named(want.name, views)
    else:
        holders, elsewhere = _port(want, views)
    lanes = [{**h, "mine": h["namespace"] == mine} for h in holders]
    answer: dict[str, Any] = {"on": inert(want.said), "lanes": lanes, "elsewhere": elsewhere}
    if want.port is not None:
        from lanewatch.lanes.leases import lease_of, read_leases

        lease = lease_of(want.port, read_leases())
        answer["leased_to"] = inert(lease.lane) if lease is not None else None
    answer["fix"] = _fix(want, lanes, elsewhere, me)
    return answer


def _lane(v: NamespaceView, pid: int, command: str) -> dict[str, Any]:
    return {
        "lane": inert(v.lane or v.name),
        "namespace": v.key,
        "checkout": inert(v.checkout_path) if v.checkout_path else None,
        "pid": pid,
        "command": inert(command[:200]),
    }


def _named(name: str, views: list[NamespaceView]) -> tuple[list[dict[str, Any]], bool]:
    from lanewatch.linux.unixsockets import abstract_listeners
    from lanewatch.processes.abstractowners import lane_listeners

    found = [one for one in lane_listeners(views) or () if one.socket.name == name]
    holders = [_lane(one.view, one.holder.pid, one.holder.command) for one in found]
    listed = {a.inode for a in abstract_listeners() or () if a.name == name}
    return holders, bool(listed - {one.socket.inode for one in found})


def _port(want: Target, views: list[NamespaceView]) -> tuple[list[dict[str, Any]], bool]:
    from lanewatch.linux.netsockets import listening

    def fits(proto: str, port: int) -> bool:
        return port == want.port and want.proto in (None, proto)

    holders = [
        {**_lane(v, p.pid, p.command), "private": p.private}
        for v in views
        for p in v.ports
        if fits(p.proto, p.port)
    ]
    # A listener of our tables that no lane holds (a port has one listener, as a rule).
    elsewhere = not any(not h["private"] for h in holders)
    return holders, elsewhere and any(fits(s.proto, s.port) for s in listening())


def _fix(want: Target, lanes: list[dict[str, Any]], elsewhere: bool, me: Me) -> str:
    theirs = [h for h in lanes if not h["mine"] and not h.get("private")]
    if not lanes and not elsewhere:
        return f"nothing listens on {want.said} now"
    if lanes and not theirs:
        pids = ", ".join(str(h["pid"]) for h in lanes)
        return f"your own lane holds it (pid {pids}): reuse it, or end that process first"
    who = f"lane {theirs[0]['lane']}" if theirs else "a process of no lane known here"
    if want.name is not None:
        return f"{who} holds it: {NAME_FIX}"
    return f"{who} holds it: {PORT_FIX.format(lease=_my_lease(me))}"


def _my_lease(me: Me) -> str:
    from lanewatch.lanes.stamp import read_stamp

    if me.namespace is None:
        return ", once you run in a lane"
    stamp = read_stamp(Path(me.namespace)).stamp
    if stamp is None or not stamp.ports:
        return ""
    first, count = stamp.ports
    return f": {first}-{first + count - 1}"
