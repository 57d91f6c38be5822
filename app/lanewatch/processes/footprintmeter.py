"""A lane's footprint now: CPU and memory of its processes.

Read in the prober's pass: a probe's process table already holds each member's CPU ticks and
resident pages (`linux/proc.ProcStat`), so a probe adds no read; between two probes the
`Prober` meters the members it last found, one /proc/PID/stat each (no walk of /proc): every
round a lane whose processes used CPU at their last reading, the others at each quiet check
(`processes/quietpace.py`).

CPU is a rate, so it takes two readings: a process read before gets (its ticks now − then) /
the time between; a process read for the first time gets its ticks over its whole life (the
reading's `window` says how long that was). Blind spots of the rules: a process that started
and ended between two readings is not counted, nor the CPU of children a member reaped (the
kernel adds it to the parent's `cutime` only at the reaping, all at once).

A lane with a cgroup (`linux/cgroup.py`) is read from it instead: `usage_usec`, exact,
processes already gone included, and its working set where the memory controller is on the
unified hierarchy (else the members' resident pages, summed as without a cgroup).
Resident pages summed over processes count a page shared by several (a fork's, a library's)
once per process: an upper bound, as `ps` and htop show it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from lanewatch.lanes.stamp import Stamp
from lanewatch.linux import cgroup
from lanewatch.linux.proc import PAGE_SIZE, ProcStat, read_stat
from lanewatch.model.classify import LivenessEvidence
from lanewatch.model.views import Footprint
from lanewatch.processes.members import lane_cgroup
from lanewatch.processes.pidclock import CLK_TCK

StatOf = Callable[[int], ProcStat | None]


def boot_clock() -> float:
    """Seconds since boot, the clock process start times are counted in."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def fresh_stat(pid: int) -> ProcStat | None:
    """/proc/PID/stat now; None when it is gone or cannot be read."""
    try:
        return read_stat(pid)
    except OSError:
        return None


class Meter:
    """Footprints of lanes, reading after reading. Kept by one caller (the prober's thread):
    not thread-safe."""

    def __init__(self) -> None:
        self._ticks: dict[tuple[int, int], tuple[int, float]] = {}  # (pid, start) -> (ticks, t)
        self._usec: dict[str, tuple[int, float]] = {}  # cgroup -> (usage µs, t)

    def measure(
        self,
        stamps: Mapping[str, Stamp],
        evidence: Mapping[str, LivenessEvidence],
        stat_of: StatOf,
        at: float | None = None,
        *,
        every: bool = True,
    ) -> dict[str, Footprint]:
        """A reading of every lane of `evidence` with members (or a cgroup), by key.
        `every`: False when `evidence` holds only some of the running lanes (the others' last
        readings are kept for their next rate)."""
        at = time.time() if at is None else at
        now = boot_clock()
        out: dict[str, Footprint] = {}
        seen: set[tuple[int, int]] = set()
        groups: set[str] = set()
        for key, ev in evidence.items():
            stamp = stamps.get(key)
            if stamp is None or not ev.about(stamp):
                continue
            path = lane_cgroup(stamp) if stamp.cgroup else None
            if path is None and not ev.members:
                continue
            stats = []
            for m in ev.members:
                st = stat_of(m.pid)
                if st is not None and st.start_ticks == m.start_ticks:
                    stats.append(st)
            rss = sum(st.rss_pages for st in stats) * PAGE_SIZE
            cpu, window = self._rate(stats, now, seen)
            reading = Footprint(at, cpu, window, rss if stats else 0, len(stats), "rules")
            if path is not None:
                groups.add(path)
                reading = self._from_cgroup(path, stamp, reading, now)
            out[key] = reading
        if every:
            self._ticks = {k: v for k, v in self._ticks.items() if k in seen}
            self._usec = {k: v for k, v in self._usec.items() if k in groups}
        return out

    def _rate(
        self, stats: list[ProcStat], now: float, seen: set[tuple[int, int]]
    ) -> tuple[float | None, float]:
        """CPU % of `stats` summed, and the longest window a process's share covers."""
        if not stats:
            return 0.0, 0.0
        total = 0.0
        window = 0.0
        for st in stats:
            key = (st.pid, st.start_ticks)
            seen.add(key)
            last = self._ticks.get(key)
            self._ticks[key] = (st.cpu_ticks, now)
            if last is not None and now > last[1]:
                span = now - last[1]
                used = max(0, st.cpu_ticks - last[0])
            else:  # a first reading: its whole life
                span = now - st.start_ticks / CLK_TCK
                used = st.cpu_ticks
            if span <= 0:
                continue
            total += used / CLK_TCK / span
            window = max(window, span)
        return round(total * 100, 1), round(window, 3)

    def _from_cgroup(self, path: str, stamp: Stamp, rules: Footprint, now: float) -> Footprint:
        usec = cgroup.cpu_usec(path)
        if usec is None:
            return rules
        last = self._usec.get(path)
        self._usec[path] = (usec, now)
        if last is not None and now > last[1]:
            span = now - last[1]
            cpu: float | None = round(max(0, usec - last[0]) / 1e6 / span * 100, 1)
        else:
            born = (stamp.child_start_ticks or stamp.start_ticks) / CLK_TCK
            span = now - born
            cpu = round(usec / 1e6 / span * 100, 1) if span > 0 else None
        memory = cgroup.memory(path)
        pids = cgroup.all_procs(path)
        return Footprint(
            rules.at,
            cpu,
            round(max(span, 0.0), 3),
            memory if memory is not None else rules.memory,
            len(pids) if pids is not None else rules.processes,
            "cgroup",
            "cgroup" if memory is not None else "rss",
        )


def from_table(table: Callable[[], Mapping[int, ProcStat]]) -> StatOf:
    """A probe's process table as a `StatOf` (read only if a lane has members)."""
    return lambda pid: table().get(pid)
