"""Which processes carry a lane's marker in their environment (`$LANEWATCH_NAMESPACE`, exported
by `lanewatch run` to everything it starts), remembered per process identity.

The fast probe reads the processes of live lanes found from the process tree (descendants and
process groups of each owner). A lane process that left both (setsid, then re-parented: a
daemonised helper, `nohup … &` in a subshell) is found only by its marker; without this it was
seen by the full scan alone, up to 60 s later. A process's initial environment does not change,
so each identity (pid + start ticks) is read once: one `environ` read per new process, none for
a process already seen. A process we may not read (another uid, as a normal user) is
remembered as unmarked and never read again while it lives.

Blind spots: a process that unsets the variable before it execs, or a writer that was never
started under `lanewatch run` (it carries no marker; only its holdings can name it).
Lane membership by other means (a subreaper) plugs in beside this: `fastprobe.lane_pids`
takes any extra pids.
"""

from __future__ import annotations

from collections.abc import Mapping

from lanewatch.linux.proc import Pinned, ProcStat, environ_values

_NAMESPACE_KEY = b"LANEWATCH_NAMESPACE="


class MarkerMemo:
    """The lane marker of every process seen, by (pid, start ticks); used by one thread."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], str | None] = {}
        self.reads = 0  # environ reads (each new process identity: at most one)

    def seen(self) -> frozenset[tuple[int, int]]:
        """The (pid, start ticks) of every process whose marker is known, read or not."""
        return frozenset(self._seen)

    def marked(self, procs: Mapping[int, ProcStat], skip: frozenset[int] = frozenset()) -> set[int]:
        """Pids in `procs` whose environment names a namespace; forgets processes gone."""
        current = {(pid, st.start_ticks) for pid, st in procs.items()}
        for gone in self._seen.keys() - current:
            del self._seen[gone]
        out: set[int] = set()
        for pid, st in procs.items():
            if pid in skip or st.kernel_thread:
                continue
            ident = (pid, st.start_ticks)
            if ident not in self._seen:
                self._seen[ident] = self._read(pid, st.start_ticks)
            if self._seen[ident]:
                out.add(pid)
        return out

    def _read(self, pid: int, start_ticks: int) -> str | None:
        self.reads += 1
        try:
            with Pinned.open(pid) as pinned:
                env = pinned.environ()
                now = pinned.stat()
        except OSError:  # gone, or not ours to read: unmarked as far as we can know
            return None
        if now is None or now.start_ticks != start_ticks:
            return None  # the pid was reused between the table and the read
        (namespace,) = environ_values(env, _NAMESPACE_KEY)
        return namespace or None
