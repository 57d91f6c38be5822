"""A half-migrated host, named with the one command that fixes it.

The failure lanewatch exists for moves to the machine that was forgotten: one host keeps the
scheme, another has no lanewatch or an older scheme, or its jobs write shared temp outside any
lane. Each of those is a `Flag` on the host: what is wrong and what to run.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lanewatch.hosts.config import Host
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.model.kinds import ESCAPED_THE_LANES
from lanewatch.model.views import Incident

MISSING = "no-lanewatch"
SCHEME = "scheme-differs"
UNBOUND = "unbound-writers"


@dataclass(frozen=True, slots=True)
class Flag:
    kind: str  # MISSING | SCHEME | UNBOUND
    detail: str
    fix: str  # the one command that fixes it

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail, "fix": self.fix}


def on_host(host: Host, command: str) -> str:
    return f"ssh {shlex.quote(host.destination)} {shlex.quote(command)}"


def missing(host: Host, why: str) -> Flag:
    return Flag(
        MISSING,
        f"lanewatch is not installed there (`{host.command}`: {why})",
        on_host(host, "python3 -m pip install --user lanewatch"),
    )


def scheme(host: Host, hello: Mapping[str, Any]) -> Flag | None:
    theirs = hello.get("scheme")
    if theirs == SCHEME_VERSION:
        return None
    version = hello.get("version", "?")
    if isinstance(theirs, int) and theirs > SCHEME_VERSION:
        return Flag(
            SCHEME,
            f"it keeps scheme {theirs} (lanewatch {version}), newer than this side's "
            f"{SCHEME_VERSION}",
            "python3 -m pip install -U lanewatch",
        )
    return Flag(
        SCHEME,
        f"it keeps scheme {theirs if theirs is not None else 'none'} (lanewatch {version}), "
        f"not this side's {SCHEME_VERSION}",
        on_host(host, "python3 -m pip install -U lanewatch"),
    )


def unbound(incidents: Iterable[Incident]) -> Flag | None:
    """Writes that escape the lanes: open shared-file incidents (lanes writing one file in
    shared temp, where they clash)."""
    paths = sorted(
        {i.path or "?" for i in incidents if i.kind in ESCAPED_THE_LANES and not i.acknowledged}
    )
    if not paths:
        return None
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return Flag(
        UNBOUND,
        f"jobs there write shared temp outside their lanes ({', '.join(paths[:3])}{more})",
        "lanewatch run --lane NAME -- CMD  (each job there, so its temp is its lane's)",
    )
