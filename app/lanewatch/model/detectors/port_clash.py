"""Ports two lanes fight over. Pure.

`leased-port`: a lane's process listens on a port of another lane's lease (`lanes/leases.py`);
the victim is the leaseholder, whose `$PORT` now answers with someone else's build.
`shared-port`: a lane's process listens outside its lease on a port that another lane listened
on too, now or earlier while this engine watched and that lane's run was still alive (a lane
between two servers on its fixed port will start the next one there): the port twin of a fixed
`/tmp` name. One incident per port, naming every lane. A port one run used after another's run
was over is no fight: nothing of the first is left to clash with.

Not a collision: a process of no lane; a lane and its family (`model/family.py`: a pytest
worker listening on its head's `$PORT`); a lane on its own lease; a port the kernel picked
(one in its ephemeral range, `bind(("", 0))`: two lanes drawing the same number at different
times chose nothing); a lease whose owner is gone (`leases.read_leases` keeps live ones only);
a socket in a `--fence net` lane's own network namespace (`Listening.private`), even on a port
leased to another lane or one another lane also listens on: no one else can bind it or reach it
there, so it takes nothing from anyone.
Both are graded inferred: the prober saw the process hold the listening socket.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from lanewatch.lanes.leases import Lease, lease_of
from lanewatch.model.detection import detects
from lanewatch.model.facts import ListenerSeen
from lanewatch.model.family import Stamped, one_family
from lanewatch.model.holdings import owner_json
from lanewatch.model.observation import Observation
from lanewatch.model.ports import Listener, PortMemory
from lanewatch.model.views import Evidence, Grade
from lanewatch.model.writerlist import Writer, names

LEASED = "leased-port"
SHARED = "shared-port"


def _where(one: Listener) -> str:
    s = one.socket
    host = f"[{s.address}]" if ":" in s.address else s.address
    return f"{host}:{s.port}" + ("" if s.proto == "tcp" else f"/{s.proto}")


def _evidence(one: Listener, at: float) -> Evidence:
    h, s = one.holding, one.socket
    return Evidence(
        path=_where(one),
        time=at,
        size=None,
        sha256=None,
        grade=Grade.INFERRED.value,
        writer=f"pid {h.pid} (lane {one.owner.lane}): {' '.join(h.command)[:120]}",
        note=f"listens on {_where(one)}; lane known by {one.how}",
        key=f"listen:{h.pid}:{h.start_ticks}:{s.inode}",
    )


def _family_of(key: str, stamped: Mapping[str, Stamped] | None) -> str | None:
    said = stamped.get(key) if stamped is not None else None
    return said.family if said is not None else None


def in_own_lease(
    one: Listener, leases: Sequence[Lease], stamped: Mapping[str, Stamped] | None
) -> bool:
    """The port is in a lease of the listener's lane or of its family."""
    lease = lease_of(one.socket.port, leases)
    if lease is None:
        return False
    family = _family_of(lease.namespace, stamped)
    return one_family(one.owner.key, one.owner.family, lease.namespace, family)


@detects(LEASED, reads=ListenerSeen)
def leased(
    one: Listener,
    leases: Sequence[Lease],
    at: float,
    stamped: Mapping[str, Stamped] | None = None,
    **_: object,
) -> Observation | None:
    """`one` listens on a port leased to another lane (not of its family)."""
    if one.socket.private:
        return None
    lease = lease_of(one.socket.port, leases)
    if lease is None or in_own_lease(one, leases, stamped):
        return None
    summary = (
        f"pid {one.holding.pid} of lane {one.owner.lane} listens on {_where(one)}, leased to "
        f"lane {lease.lane} ({lease.first}-{lease.last})"
    )
    return Observation(
        kind=LEASED,
        victim=lease.namespace,
        intruder_key=f"{one.socket.proto}/{one.socket.port}",
        intruder=owner_json(one.owner, one.holding),
        evidence=_evidence(one, at),
        summary=summary,
        victim_lane=lease.lane,
    )


def ended(
    stamped: Mapping[str, Stamped] | None, now: Collection[tuple[int, int]]
) -> Callable[[Listener], bool]:
    """Whether a remembered listener's run has ended: it no longer listens (not in `now`) and
    its namespace has no stamp on this host any more (cleared), or one of another run (its
    stamp's pid is not the listener's owner's), or one whose run is over (released, or its
    owner dead, with none of its processes left). Without `stamped`, never."""

    def over(other: Listener) -> bool:
        if stamped is None or (other.holding.pid, other.socket.inode) in now:
            return False
        said = stamped.get(other.owner.key)
        if said is None:
            return True
        return said.over or (other.owner.pid is not None and said.pid != other.owner.pid)

    return over


@detects(SHARED, reads=ListenerSeen)
def shared(
    one: Listener,
    leases: Sequence[Lease],
    memory: PortMemory,
    ephemeral: tuple[int, int],
    at: float,
    stamped: Mapping[str, Stamped] | None = None,
    now: Collection[tuple[int, int]] = (),
) -> list[Observation]:
    """`one` listens outside every lease on a port another lane used while both lanes' runs
    were alive: an observation for each lane of the port (so the incident names them all), or
    none."""
    port = one.socket.port
    if one.socket.private:  # never remembered either: a later lane on the host takes nothing
        return []
    if lease_of(port, leases) is not None or ephemeral[0] <= port <= ephemeral[1]:
        return []
    others = memory.note(one, at, ended(stamped, now))
    if not others:
        return []
    group = f"{one.socket.proto}/{port}"
    label = f":{port}" + ("" if one.socket.proto == "tcp" else f"/{one.socket.proto}")
    out = []
    for each, when in (*others, (one, at)):  # each at the time it was seen listening
        summary = f"pid {each.holding.pid} of lane {each.owner.lane} listens on {_where(each)}"
        out.append(
            Observation(
                kind=SHARED,
                victim=None,
                intruder_key=group,
                intruder=owner_json(each.owner, each.holding),
                evidence=_evidence(each, when),
                summary=summary,
                path=label,
            )
        )
    return out


def title(
    writers: Sequence[Writer], *, path: str | None, victim_lane: str | None = None, **_: object
) -> str | None:
    """ "agent-2 listens on agent-1's port"; "agent-1 and agent-2 both listen on :8000"."""
    if not writers:
        return None
    if path is None:  # leased-port
        if victim_lane is None:
            return None
        return f"{names(writers)} listens on a port leased to {victim_lane}"
    if len(writers) == 1:
        return None
    return f"{names(writers)} {'both' if len(writers) == 2 else 'all'} listen on {path}"
