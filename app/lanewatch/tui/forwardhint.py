"""The dashboard's `o` on a lane: how to reach its port from the host, as a notice.

A `--fence net` lane's 127.0.0.1 is its own: the notice gives the `lanewatch forward` command
and the URL it will print (the lane's `PORT`, its lease's first port, when it has one). Any
other lane listens on the host's loopback already: the notice gives the URL of what it listens
on. The dashboard does not start the forward itself: a forward lives until Ctrl-C in a terminal
of its own (docs/fence.md, "Reaching a lane's port")."""

from __future__ import annotations

import shlex

from lanewatch.inert import inert
from lanewatch.model.views import NamespaceView


def forward_hint(ns: NamespaceView) -> tuple[str, str]:
    """(title, message) for the lane `ns`; plain text, made inert."""
    lane = ns.lane or ns.name
    port = str(ns.lease[0]) if ns.lease is not None else "PORT"
    if "network" in ns.fence_private:
        command = f"lanewatch forward {shlex.quote(ns.name)} {port}"
        url = f"http://127.0.0.1:{port}/"
        message = (
            f"lane {lane} has a loopback of its own. In a terminal: {command} "
            f"(then open {url}; Ctrl-C stops it; HOSTPORT 0 takes any free port)"
        )
        return "forward a port", inert(message)
    if ns.ports:
        urls = ", ".join(
            sorted({f"http://127.0.0.1:{p.port}/" for p in ns.ports if p.proto == "tcp"})
        )
        if urls:
            return "its ports", inert(f"lane {lane} listens on the host's loopback: {urls}")
    return "its ports", inert(
        f"lane {lane} listens on no port seen here; its PORT is {port} "
        "(`lanewatch run --fence net` gives a lane a loopback of its own)"
    )
