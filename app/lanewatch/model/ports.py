"""Which lane listens on which port: the prober's socket holdings put in lanes' words. Pure.

The prober reads the listening sockets (`linux/netsockets.py`) and, with the fd readlinks it
makes anyway, which processes hold each (holdings of kind "socket", path `socket:[INODE]`).
A socket held by a process and its children (a server that forks workers) is the eldest
holder's, as a held file is (`model/writers.py`). A process of no lane holds nobody's port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from lanewatch.linux.netsockets import Listening
from lanewatch.model.family import one_family
from lanewatch.model.holdings import Holding, Owner, OwnerIndex, lane_of
from lanewatch.model.views import LanePort

MAX_REMEMBERED = 4096  # ports whose listeners a `PortMemory` keeps


@dataclass(frozen=True, slots=True)
class Listener:
    """One lane's process listening on one socket, with how the lane is known."""

    owner: Owner
    how: str
    holding: Holding
    socket: Listening

    @property
    def port(self) -> LanePort:
        s, h = self.socket, self.holding
        command = " ".join(h.command)[:200]
        return LanePort(s.proto, s.address, s.port, h.pid, command, s.private)


def listeners(
    holdings: Iterable[Holding],
    owners: Mapping[str, Owner] | OwnerIndex,
    listening: Mapping[str, Listening],
) -> list[Listener]:
    """Every (lane, socket) the holdings show, the eldest holder of each socket named."""
    index = owners if isinstance(owners, OwnerIndex) else OwnerIndex(owners)
    socks = [h for h in holdings if h.kind == "socket" and h.path in listening]
    holders: dict[str, set[int]] = {}
    for h in socks:
        holders.setdefault(h.path, set()).add(h.pid)
    out: list[Listener] = []
    seen: set[tuple[str, str]] = set()
    for h in socks:
        if any(p in holders[h.path] for p in h.lineage[1:]):
            continue  # inherited: its ancestor is named
        found = lane_of(h, index)
        if found is None:
            continue
        owner, how = found
        if (owner.key, h.path) in seen:
            continue
        seen.add((owner.key, h.path))
        out.append(Listener(owner, how, h, listening[h.path]))
    return out


def ports_by_lane(found: Iterable[Listener]) -> dict[str, tuple[LanePort, ...]]:
    """Each lane's ports (by namespace key), lowest port first."""
    out: dict[str, list[LanePort]] = {}
    for one in found:
        out.setdefault(one.owner.key, []).append(one.port)
    return {
        key: tuple(sorted(ports, key=lambda p: (p.port, p.proto, p.address)))
        for key, ports in out.items()
    }


def ports_cell(ports: Iterable[LanePort], limit: int = 2) -> str:
    """A narrow PORTS cell: "3000 8000", "3000 +2" when there are more; "" for none. One
    port listened on both IPv4 and IPv6 counts once. A `--fence net` lane's ports are all in
    its own namespace: "3000 private" (a lane with both kinds: "3000 (private) 8000")."""
    ports = list(ports)
    every = bool(ports) and all(p.private for p in ports)
    labels = list(dict.fromkeys(p.label if every else p.shown for p in ports))
    if len(labels) <= limit:
        cell = " ".join(labels)
    else:
        cell = " ".join(labels[: limit - 1]) + f" +{len(labels) - limit + 1}"
    return f"{cell} private" if every else cell


def ports_line(lease: tuple[int, int] | None, ports: Iterable[LanePort]) -> str:
    """The detail pane's words: "leases 20000-20009; listens on 20000 (127.0.0.1, pid 12)"."""
    parts = []
    if lease is not None:
        parts.append(f"leases {lease[0]}-{lease[0] + lease[1] - 1}")
    heard = [f"{p.shown} ({p.address}, pid {p.pid})" for p in ports]
    if heard:
        parts.append("listens on " + ", ".join(heard))
    return "; ".join(parts)


def lease_from_json(value: object) -> tuple[int, int] | None:
    """A `status --json` namespace's `lease` ({first, count}) back into (first, count); None
    for anything else (a far lanewatch's garbage is no lease)."""
    if not isinstance(value, Mapping):
        return None
    first, count = value.get("first"), value.get("count")
    if type(first) is not int or type(count) is not int or first <= 0 or count <= 0:
        return None
    return first, count


def ports_from_json(value: object) -> tuple[LanePort, ...]:
    """A `status --json` namespace's `ports` back into LanePorts; entries that are not one
    are left out."""
    out: list[LanePort] = []
    for p in value if isinstance(value, list) else ():
        if not isinstance(p, Mapping):
            continue
        proto, address, port, pid = p.get("proto"), p.get("address"), p.get("port"), p.get("pid")
        if proto not in ("tcp", "udp") or not isinstance(address, str):
            continue
        if type(port) is not int or type(pid) is not int:
            continue
        private = p.get("private") is True
        out.append(LanePort(proto, address, port, pid, str(p.get("command", "")), private))
    return tuple(out)


def _never(_: Listener) -> bool:
    return False


@dataclass
class PortMemory:
    """Who listened on each port outside any lease while this engine watched: the first
    listener of each lane's run, by (proto, port). Bounded (oldest ports forgotten first)."""

    # (proto, port) -> namespace key -> (its listener, when first seen)
    seen: dict[tuple[str, int], dict[str, tuple[Listener, float]]] = field(default_factory=dict)

    def note(
        self, one: Listener, at: float, over: Callable[[Listener], bool] = _never
    ) -> list[tuple[Listener, float]]:
        """Remember `one`, seen at `at`; the other lanes (of other families) that used its
        port, each with when it was first seen there. A listener whose lane's run is `over`
        (and that no longer listens) is forgotten first: a fixed port used by one run after
        another is no fight, only by runs alive together."""
        where = (one.socket.proto, one.socket.port)
        lanes = self.seen.setdefault(where, {})
        for key in [k for k, (other, _) in lanes.items() if over(other)]:
            del lanes[key]
        lanes.setdefault(one.owner.key, (one, at))
        if len(self.seen) > MAX_REMEMBERED:
            del self.seen[next(iter(self.seen))]
        return [
            (other, when)
            for key, (other, when) in lanes.items()
            if key != one.owner.key
            and not one_family(key, other.owner.family, one.owner.key, one.owner.family)
        ]
