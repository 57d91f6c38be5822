"""Each host's picture once (`status --host`): a hello, then `lanewatch status --json` there,
every host at the same time (a slow one costs its own timeout, not the sum)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType

from lanewatch.hosts import farviews, flags, link
from lanewatch.hosts.config import Host
from lanewatch.hosts.stream import LOST, OK, HostState, judge_hello
from lanewatch.model.views import Changes, SourceHealth


@dataclass(frozen=True, slots=True)
class HostPicture:
    state: HostState
    changes: Changes


def one(host: Host) -> HostPicture:
    state = HostState(host)
    if not judge_hello(host, link.call(host, "hello", "--json"), state):
        return HostPicture(state, Changes(health=(state.health(),), at=time.time()))
    answer = link.call(host, "status", "--json")
    data = answer.json()  # status exits 4 or 5 with its picture printed: a picture all the same
    if data is None:
        state.status, state.detail = LOST, f"no picture: {answer.why()}"
        return HostPicture(state, Changes(health=(state.health(),), at=time.time()))
    views = [
        farviews.view(host.name, n) for n in data.get("namespaces") or () if isinstance(n, dict)
    ]
    incidents = [
        farviews.incident(host.name, i) for i in data.get("incidents") or () if isinstance(i, dict)
    ]
    flag = flags.unbound(incidents)
    if flag is not None:
        state.flags.append(flag)
    state.status, state.detail = OK, f"read from {host.destination}"
    far: list[SourceHealth] = [
        farviews.health(host.name, r) for r in data.get("roots") or () if isinstance(r, dict)
    ]
    return HostPicture(
        state,
        Changes(
            upserts=MappingProxyType({v.key: v for v in views}),
            incidents=MappingProxyType({i.id: i for i in incidents}),
            health=(state.health(), *far),
            at=time.time(),
        ),
    )


def gather(hosts: Sequence[Host]) -> list[HostPicture]:
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(one, hosts))


def merged(local: Changes, pictures: Sequence[HostPicture]) -> Changes:
    """The local picture with every host's namespaces, incidents and health added."""
    upserts = dict(local.upserts)
    incidents = dict(local.incidents)
    health = list(local.health)
    for p in pictures:
        upserts.update(p.changes.upserts)
        incidents.update(p.changes.incidents)
        health.extend(p.changes.health)
    return Changes(
        upserts=MappingProxyType(upserts),
        removed=local.removed,
        incidents=MappingProxyType(incidents),
        health=tuple(health),
        full=local.full,
        at=local.at,
        attribution=local.attribution,
        attribution_hint=local.attribution_hint,
    )
