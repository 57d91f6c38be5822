"""The listening sockets of the `--fence net` lanes, each in a network namespace of its own
that the host's tables (`linux/netsockets.py`) do not list: read through one of the lane's
processes (`linux/netnsports.py`), marked `private`, and handed to the probe beside the host's,
so the fd readlinks it makes anyway (`socket:[INODE]`: inodes are the machine's, whatever the
namespace) map them to the lane's processes and lane (`model/ports.py`).

When they are read: at a probe, a lane's tables are read again only when its process read
through changed, when its namespace's socket counts moved since the last reading (sockstat:
a listener came or went, or a connection did), or at a full probe (`fresh`: a listener replaced
by another between two readings leaves the counts as they were). Between probes the prober asks
`pairs` on the pace it asks the host's sockets at, so a lane that starts listening is probed
within about that. A lane without `net_ns` in its stamp is never read: with no net-fenced lane,
nothing here reads anything.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from lanewatch.lanes.stamp import OwnerState, Stamp
from lanewatch.linux import netnsports
from lanewatch.linux.netsockets import Listening
from lanewatch.model.classify import LivenessEvidence


@dataclass(frozen=True, slots=True)
class _Read:
    """One lane's last reading: through which process, of which namespace, at which counts."""

    pid: int
    start_ticks: int
    net_ns: str
    counts: tuple[int, ...]
    sockets: tuple[Listening, ...]


def _through(s: Stamp, ev: LivenessEvidence, last: _Read | None) -> Iterator[tuple[int, int]]:
    """(pid, start ticks) of the lane's processes to read its namespace through: the last one
    read through, its command, then its other members (the runner and slirp4netns are on the
    host's side: `netnsports` refuses them)."""
    if last is not None and last.net_ns == s.net_ns:
        yield last.pid, last.start_ticks
    if s.child_pid and s.child_start_ticks:
        yield s.child_pid, s.child_start_ticks
    for m in ev.members:
        yield m.pid, m.start_ticks


class PrivateNets:
    """What one prober keeps between probes; used by its thread only (not thread-safe)."""

    def __init__(self) -> None:
        self._reads: dict[str, _Read] = {}

    def read(
        self,
        stamps: Mapping[str, Stamp],
        evidence: Mapping[str, LivenessEvidence],
        *,
        fresh: bool = False,
    ) -> dict[str, Listening]:
        """At a probe: the listening sockets of every live lane whose stamp names a network
        namespace of its own (`net_ns`), by fd link; `fresh`: every lane's tables read again."""
        reads: dict[str, _Read] = {}
        for key, s in stamps.items():
            ev = evidence.get(key)
            if not s.net_ns or s.state is not OwnerState.LIVE or ev is None:
                continue
            last = self._reads.get(key)
            tried: set[int] = set()
            for pid, ticks in _through(s, ev, last):
                if pid in tried:
                    continue
                tried.add(pid)
                found = self._read_one(s.net_ns, pid, ticks, None if fresh else last)
                if found is not None:
                    reads[key] = found
                    break
        self._reads = reads
        return {sock.link: sock for r in reads.values() for sock in r.sockets}

    def pairs(self) -> frozenset[tuple[int, int]]:
        """Between probes: (port, inode) of the listening sockets of the lanes read at the last
        probe, each lane's tables read again only if its socket counts moved. Nothing is read
        when no lane is net-fenced. A process gone since is left as it was: its end wakes the
        prober, whose probe reads through another."""
        for key, last in list(self._reads.items()):
            found = self._read_one(last.net_ns, last.pid, last.start_ticks, last)
            if found is not None and found is not last:
                self._reads[key] = found
        reads = self._reads.values()
        return frozenset((sock.port, sock.inode) for r in reads for sock in r.sockets)

    @staticmethod
    def _read_one(net_ns: str, pid: int, ticks: int, last: _Read | None) -> _Read | None:
        """The namespace read through (`pid`, `ticks`): `last` itself while it is through
        that process and the counts did not move; None when the process cannot be read through."""
        counts = netnsports.counts(pid, ticks, net_ns)  # before the tables: a change after shows
        if counts is None:
            return None
        if last is not None and (last.pid, last.start_ticks, last.net_ns) == (pid, ticks, net_ns):
            if last.counts == counts:
                return last
            found = netnsports.listening(pid, ticks, net_ns)
            return None if found is None else replace(last, counts=counts, sockets=tuple(found))
        found = netnsports.listening(pid, ticks, net_ns)
        return None if found is None else _Read(pid, ticks, net_ns, counts, tuple(found))
