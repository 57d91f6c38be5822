"""A lane's ports in `status` (the PORTS cell, the `lease` and `ports` of `--json`) and in
`lanewatch ports`: one wording for both."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from lanewatch.inert import inert
from lanewatch.model.ports import ports_cell
from lanewatch.model.views import LanePort, NamespaceView

PORT_FIELDS = ("proto", "address", "port", "pid", "command", "private")


def port_json(p: LanePort) -> dict[str, Any]:
    return {k: getattr(p, k) for k in PORT_FIELDS}


def ports_json(v: NamespaceView) -> dict[str, Any]:
    """`lease`: {first, last, count} or null; `ports`: what its processes listen on."""
    lease = None
    if v.lease is not None:
        first, count = v.lease
        lease = {"first": first, "last": first + count - 1, "count": count}
    return {"lease": lease, "ports": [port_json(p) for p in v.ports]}


def outside_lease(v: NamespaceView, p: LanePort) -> bool:
    if v.lease is None:
        return True
    first, count = v.lease
    return not first <= p.port < first + count


def ports_text(v: NamespaceView) -> Text:
    """The PORTS cell: the ports listened on ("20000 +1"), yellow when one lies outside the
    lane's lease; "-" when none."""
    shown = ports_cell(v.ports)
    if not shown:
        return Text("-", style="dim")
    odd = any(outside_lease(v, p) and not p.private for p in v.ports)
    return Text(inert(shown), style="yellow" if odd else "")
