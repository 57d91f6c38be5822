"""From what the fanotify reader saw to what the engine and the roots keep.

`Fact` is one event as the reader saw it while its descriptors were open (path, zone, writer,
content sample). `Attributor` turns facts into the engine's `KernelBatch` parts: file-history
records, incident observations (each write handed to detection, `kinds.detect`, as the fact
of where it lies: `model/facts.py`), and `Keep` entries for the keeper (the
evidence store and the write history). It runs on the attribution thread only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lanewatch.kernel.fanotify import ContentSample, FanEvent
from lanewatch.kernel.keeper import Keep
from lanewatch.lanes.leases import lease_dir
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.linux.paths import IPC_TEMP, is_under, under_any
from lanewatch.linux.proc import readlink
from lanewatch.model.facts import WroteInNamespace, WroteInSharedTemp
from lanewatch.model.family import handed, head
from lanewatch.model.filehistory import WriteRecord
from lanewatch.model.ipcnames import IpcNames
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.kinds import detect
from lanewatch.model.observation import Observation
from lanewatch.processes.pidclock import Mark
from lanewatch.processes.pidlane import Writer
from lanewatch.records.writes import WriteEntry

STDIO_FOR = 30.0  # seconds an owner's stdout/stderr targets are cached
LAST_HASHES = 4096  # paths whose last content hash we remember (unchanged closes are skipped)
EVIDENCE_PER_SECOND = 20  # new evidence items a second per incident
RACED = "content unknown: another process wrote the file before it could be read"
# A contested content whose other writers could not be shown done in time (kernel.attribution).
UNSURE = "content unknown: another process may have written the file before it could be read"


@dataclass(frozen=True, slots=True)
class KernelBatch:
    """What the attribution thread hands the engine's worker."""

    writes: tuple[tuple[str, WriteRecord], ...] = ()  # for the in-memory file history
    observations: tuple[tuple[Observation, str], ...] = ()  # (observation, root)
    lost: str | None = None  # events were lost: why (overflow); rescan
    at: float = 0.0


@dataclass(slots=True)
class Fact:
    """One event, as the reader saw it while its descriptors were open."""

    path: str
    zone: str  # "ns" | "shared"
    victim: str | None  # the namespace key, for "ns"
    root: str | None  # the victim's root, for "ns"
    writer: Writer
    event: str  # "close-write" | "modify"
    modified: bool  # FAN_MODIFY was set: data was written (a bare close may be no write)
    sample: ContentSample | None
    at: float
    window: Mark | None
    deleted: bool = False
    tries_until: float = 0.0
    raced: str = ""  # why the content is unknown (RACED, UNSURE): another writer's, maybe
    # Another process wrote the file lately: when (monotonic) the content was read, and in
    # which of the reader's reads; it waits for the other writers' events (kernel.attribution).
    contested_at: float = 0.0
    read_no: int = 0
    file_id: tuple[int, int] | None = None  # (device, inode), for shared temp: handed?

    @property
    def event_text(self) -> str:
        text = self.event + (" (deleted since)" if self.deleted else "")
        return text + (f" ({self.raced})" if self.raced else "")


@dataclass(slots=True)
class Lost:
    why: str
    at: float


@dataclass
class Stats:
    events: int = 0
    attributed: int = 0
    unknown: int = 0
    dropped: int = 0
    lost: int = 0
    thinned: int = 0  # writes kept out of an incident's evidence (over the budget)
    unsure: int = 0  # contested contents made unknown for want of proof in MAX_GRACE


def _writes(ev: FanEvent) -> str | None:
    """The path an event says was written, if it is a write."""
    if ev.path is None or not (ev.is_modify or ev.is_close_write):
        return None
    return ev.path.removesuffix(" (deleted)")


def _writers_by_path(events: Sequence[FanEvent]) -> dict[str, set[int]]:
    """The pids that wrote each path, by the write events among `events`."""
    pids: dict[str, set[int]] = {}
    for ev in events:
        path = _writes(ev)
        if path is not None:
            pids.setdefault(path, set()).add(ev.pid)
    return pids


def _race(f: Fact | Lost) -> None:
    if isinstance(f, Fact) and f.sample is not None:
        f.sample, f.raced = None, RACED


def raced_within(facts: Sequence[Fact | Lost], events: Sequence[FanEvent]) -> None:
    """Contents read in one batch are the files' as they were after every write in it (the
    kernel also merges a process's events into its earlier queued one, so their order does not
    say which came last): a file two processes wrote in the batch has no known writer of its
    content."""
    pids = _writers_by_path(events)
    for f in facts:
        if isinstance(f, Fact) and len(pids.get(f.path, ())) > 1:
            _race(f)


def raced_after(held: Sequence[Fact | Lost], events: Sequence[FanEvent]) -> None:
    """Events were queued when `held`'s contents were read; this read holds them (and maybe
    later ones: counted too, to be safe): another process's write of a file we read may have
    come before our read."""
    by_path = _writers_by_path(events)
    for f in held:
        if isinstance(f, Fact) and by_path.get(f.path, set()) - {f.writer.pid}:
            _race(f)


def is_stamp(path: str) -> bool:
    """An owner stamp, or the temp file it is being written to (`write_atomic`'s name)."""
    folder, _, name = path.rpartition("/")
    if not folder.endswith("/" + META_DIR):
        return False
    return name == STAMP_FILE or (name.startswith(f".{STAMP_FILE}.") and name.endswith(".tmp"))


def worth_keeping(path: str) -> bool:
    """Small files worth keeping: not lock files, not ledgers (append-only diaries)."""
    name = path.rsplit("/", 1)[-1]
    return not (name.endswith(".lock") or name == "ledger.jsonl")


class Attributor:
    def __init__(
        self,
        roots: Sequence[str],
        stats: Stats,
        victim_lane: Callable[[str], tuple[str | None, str | None]] = lambda _key: (None, None),
    ) -> None:
        self.roots = list(roots)
        self.stats = stats
        self.victim_lane = victim_lane  # a namespace's lane (incident titles) and family
        self.leases = str(lease_dir())
        self._hashes: OrderedDict[str, str | None] = OrderedDict()
        self._budget: dict[str, tuple[int, int]] = {}
        self._stdio: dict[int, tuple[float, frozenset[str]]] = {}
        self._ipc = IpcNames()  # who wrote each name in /dev/shm

    def attribute(
        self, facts: Sequence[Fact]
    ) -> tuple[list[tuple[str, WriteRecord]], list[tuple[Observation, str]], list[Keep]]:
        writes: list[tuple[str, WriteRecord]] = []
        observations: list[tuple[Observation, str]] = []
        keeps: list[Keep] = []
        for f in facts:
            w = f.writer
            if f.zone == "shared" and w.lane is None:
                continue  # shared temp: only lanes' writes are ours to record
            sha = f.sample.sha256 if f.sample is not None else None
            size = f.sample.size if f.sample is not None else None
            path = f.path  # ours: named by the reader while the event's descriptors were open
            if f.event == "close-write" and not self._changed(path, sha, f.modified):
                continue
            self.stats.attributed += w.identified
            self.stats.unknown += not w.identified
            kw = KernelWrite(
                path=path,
                time=f.at,
                event=f.event_text,
                size=size,
                sha256=sha,
                pid=w.pid,
                start_ticks=w.start_ticks,
                lane=w.lane if w.identified else None,
                namespace=w.namespace if w.identified else None,
                checkout_id=w.checkout_id,
                checkout_path=w.checkout_path,
                command=w.command,
                how=w.how,
                writer=w.label,
                handed=f.zone == "shared" and self._handed(w, f.path, f.file_id),
                git_common_dir=w.git_common_dir,
                family=w.family,
            )
            if f.event == "close-write":
                writes.append((path, WriteRecord(f.at, size, sha, w.label)))
                keep = _keep(f, path)
                if keep is not None:
                    keeps.append(keep)
            if f.zone == "ns" and f.victim is not None and f.root is not None:
                owns = w.owner and w.namespace == f.victim
                lane, family = self.victim_lane(f.victim)
                fact: WroteInNamespace | WroteInSharedTemp = WroteInNamespace(
                    kw, f.victim, victim_owner=owns, victim_lane=lane, victim_family=family
                )
                root = f.root
            elif is_under(f.path, self.leases):
                continue  # a lane's port lease (lanes/leases.py): lanewatch's own file
            elif kw.namespace is not None and under_any(path, IPC_TEMP):
                root = w.root or ""
                fact = self._in_ipc(kw, observations, root)
            else:
                fact, root = WroteInSharedTemp(kw, self.roots), w.root or ""
            for obs in detect(fact):
                if self._within_budget(obs.id, f.at):
                    observations.append((obs, root))
        return writes, observations, keeps

    def _in_ipc(
        self, kw: KernelWrite, observations: list[tuple[Observation, str]], root: str
    ) -> WroteInSharedTemp:
        """A lane's write of a name in /dev/shm: its fact, with the other families that wrote
        the name (`model/ipcnames.py`); their writes not judged yet are judged now, with this
        one's family as their rival, so the incident names them all."""
        rivals, earlier = self._ipc.meet(kw, root)
        mine = frozenset({head(kw.namespace or "", kw.family)})
        for prior, prior_root in earlier:
            for obs in detect(WroteInSharedTemp(prior, self.roots, mine)):
                observations.append((obs, prior_root))
        return WroteInSharedTemp(kw, self.roots, rivals)

    def _within_budget(self, incident_id: str, at: float) -> bool:
        """At most EVIDENCE_PER_SECOND new evidence items a second per incident: a storm of
        foreign writes is one incident with a sample of them (all are in the history)."""
        sec = int(at)
        seen_sec, count = self._budget.get(incident_id, (sec, 0))
        if seen_sec != sec:
            count = 0
        if count >= EVIDENCE_PER_SECOND:
            self.stats.thinned += 1
            return False
        self._budget[incident_id] = (sec, count + 1)
        if len(self._budget) > 1024:
            self._budget.pop(next(iter(self._budget)))
        return True

    def _changed(self, path: str, sha: str | None, modified: bool) -> bool:
        """False for a close without a write: opened for writing, same content as before."""
        old = self._hashes.pop(path, None)
        self._hashes[path] = sha
        if len(self._hashes) > LAST_HASHES:
            self._hashes.popitem(last=False)
        return modified or sha is None or old != sha

    def _handed(self, w: Writer, path: str, file_id: tuple[int, int] | None) -> bool:
        """Written by the lane's `lanewatch run` itself (it writes only lanewatch's files and
        its stdout/stderr), or into a file the lane was started with on fds 0-2 (its stamp's
        `stdio`, `model/family.py`): chosen by whoever started the lane, not by the lane. An
        in-process owner (`pytest -p lanewatch`) runs the lane's own code: only its handed
        files are excused. A stamp without `stdio` (an older lanewatch): the paths its owner
        has on fds 1 and 2 now."""
        if w.owner_pid is None:
            return False
        if w.pid == w.owner_pid and w.runner:
            return True
        if w.handed is not None:
            return handed(file_id, w.handed)
        return path in self._owner_stdio(w.owner_pid)

    def _owner_stdio(self, owner_pid: int) -> frozenset[str]:
        now = time.monotonic()
        cached = self._stdio.get(owner_pid)
        if cached is None or now - cached[0] > STDIO_FOR:
            links = set()
            for fd in (1, 2):
                try:
                    links.add(readlink(owner_pid, f"fd/{fd}"))
                except OSError:
                    continue
            if links or cached is None:  # gone since: keep what we saw while it lived
                cached = (now, frozenset(links))
                self._stdio[owner_pid] = cached
            if len(self._stdio) > 256:
                self._stdio.pop(next(iter(self._stdio)))
        return cached[1]


def _keep(f: Fact, path: str) -> Keep | None:
    """The keeper's entry: the write (at `path`, our name for it) for the root's history, and
    its bytes if worth keeping."""
    w = f.writer
    root = f.root if f.zone == "ns" else w.root
    if root is None:
        return None
    sample = f.sample
    small = sample is not None and sample.complete and worth_keeping(path)
    entry = WriteEntry(
        path=path,
        time=f.at,
        size=sample.size if sample else None,
        sha256=sample.sha256 if sample else None,
        stored=False,
        pid=w.pid,
        start_ticks=w.start_ticks,
        identified=w.identified,
        lane=w.lane,
        namespace=w.namespace,
        command=w.command,
        how=w.how,
        event=f.event_text,
        victim=f.victim,
    )
    return Keep(root, entry, sample.prefix if small and sample else None)
