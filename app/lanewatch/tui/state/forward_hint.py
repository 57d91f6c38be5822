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
    """(title, message) for the lane `ns`; plain text, made inert. For a `--fence net` lane
    the ports its processes listen on in its own namespace are the prober's (`lane_ports`)."""
    lane = ns.lane or ns.name
    port = str(ns.lease[0]) if ns.lease is not None else "PORT"
    if "network" in ns.fence_private:
        seen = lane_ports(ns)
        if not seen:
            said = f"lane {lane} listens on no TCP port in its own loopback yet"
            return "forward", inert(f"{said}; then: {forward_line(ns, port)}")
        lines = "; ".join(forward_line(ns, str(p)) for p in seen)
        return "forward", inert(f"in a terminal (Ctrl-C stops it): {lines}")
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


def forward_line(ns: NamespaceView, port: str = "PORT") -> str:
    """`lanewatch forward NAME PORT -> http://127.0.0.1:PORT/`; not yet inert."""
    return f"lanewatch forward {shlex.quote(ns.name)} {port} -> http://127.0.0.1:{port}/"


def lane_ports(ns: NamespaceView) -> list[int]:
    """The TCP ports the net-fenced lane `ns` listens on in its own namespace, as the prober
    last read them there (`linux/netnsports.py`: identity and namespace re-checked around each
    read): the lane's `private` ports."""
    return sorted({p.port for p in ns.ports if p.private and p.proto == "tcp"})
