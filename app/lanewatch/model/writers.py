"""Foreign and unbound writers: which lane a process holding a path belongs to. Pure.

The prober hands over `Holding`s (a process, a path it holds as cwd or open file, and its lane
evidence: $LANEWATCH_NAMESPACE, $LANEWATCH_LANE, its ancestry and process group); `writers`
turns them into `Observation`s of a lane's process holding a path in another lane's namespace
(foreign writer) or a file in shared temp outside every namespace (unbound writer).

Only a write counts: a file open for writing (O_WRONLY or O_RDWR, append or not) or a shared
writable mapping. A file held read-only (`sort` reading /tmp/x/big.txt, a script's input) is a
reader, never an incident. In another lane's namespace a working directory or an open folder
also counts (relative paths and `openat` write there); in shared temp it does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lanewatch.lanes.stamp import META_DIR
from lanewatch.model.incidents import Observation
from lanewatch.model.views import Evidence, Grade, IncidentKind


@dataclass(frozen=True, slots=True)
class Holding:
    """One path a process holds (cwd or open file), as the prober saw it."""

    pid: int
    start_ticks: int
    path: str
    kind: str  # cwd | fd | map | root
    access: str | None  # read | write | readwrite | path | None
    deleted: bool
    directory: bool
    lane_env: str | None  # $LANEWATCH_LANE
    namespace_env: str | None  # $LANEWATCH_NAMESPACE
    lineage: tuple[int, ...]  # pid, parent, grandparent, ...
    pgid: int
    command: tuple[str, ...]
    size: int | None = None
    fd: int | None = None


@dataclass(frozen=True, slots=True)
class Owner:
    """A namespace's owner, for attribution: its pids and where it is bound."""

    key: str  # namespace path
    lane: str
    checkout_id: str
    checkout_path: str
    pids: frozenset[int]  # stamp pid and the command's pid
    pgid: int | None
    pid: int | None = None  # the stamp's pid: `lanewatch run` itself, or the claiming process
    # The common git dir of the checkout's repository (`git rev-parse --git-common-dir`), where
    # the checkout's own git writes (objects, refs, a linked worktree's index); None: unknown.
    git_common_dir: str | None = None


def _inside(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def writes(h: Holding) -> bool:
    """Whether the holding is a write: an fd open for writing or a shared writable mapping.
    An fd whose access could not be read (closed meanwhile) is no evidence of a write."""
    return h.kind in ("fd", "map") and h.access in ("write", "readwrite")


def _enclosing(path: str, index: Mapping[str, str]) -> str | None:
    """The deepest namespace `path` is or lies inside; `index` maps each namespace key, without
    a trailing slash, to the key. What testing every key with `_inside`, longest first, finds,
    in one dict look-up per folder level of `path` instead of one test per namespace."""
    if not path:
        return None  # not a path at all (the kernel never prints one empty)
    current = path.rstrip("/") or "/"
    while True:
        found = index.get(current)
        if found is not None:
            return found
        if current == "/" or "/" not in current:
            return None
        current = current.rsplit("/", 1)[0] or "/"


class OwnerIndex:
    """Owners looked up by namespace, pid, process group and lane name: built once per probe,
    so attributing each holding costs a few dict look-ups, not a pass over every owner."""

    def __init__(self, owners: Mapping[str, Owner]) -> None:
        self.by_key = owners
        self.by_pid: dict[int, Owner] = {}
        self.by_pgid: dict[int, Owner] = {}
        self.by_lane: dict[str, list[Owner]] = {}
        for owner in owners.values():
            for pid in owner.pids:
                self.by_pid.setdefault(pid, owner)
            if owner.pgid is not None:
                self.by_pgid.setdefault(owner.pgid, owner)
            self.by_lane.setdefault(owner.lane, []).append(owner)


def lane_of(h: Holding, owners: Mapping[str, Owner] | OwnerIndex) -> tuple[Owner, str] | None:
    """The lane a process belongs to, with how we know: its environment, else its ancestry."""
    index = owners if isinstance(owners, OwnerIndex) else OwnerIndex(owners)
    if h.namespace_env:
        key = h.namespace_env.rstrip("/")
        bound = index.by_key.get(key) or Owner(
            key, h.lane_env or key.rsplit("/", 1)[-1], "", "", frozenset(), None
        )
        return bound, "$LANEWATCH_NAMESPACE"
    for pid in h.lineage:
        owner = index.by_pid.get(pid)
        if owner is not None:
            how = "owner process" if pid == h.pid else f"descends from owner pid {pid}"
            return owner, how
    owner = index.by_pgid.get(h.pgid)
    if owner is not None:
        return owner, f"in owner's process group {owner.pgid}"
    if h.lane_env:
        matches = index.by_lane.get(h.lane_env, [])
        if len(matches) == 1:
            return matches[0], "$LANEWATCH_LANE"
    return None


def _writer(h: Holding, lane: str) -> str:
    cmd = " ".join(h.command)[:120]
    return f"pid {h.pid} (lane {lane}): {cmd}"


def _holding_evidence(h: Holding, lane: str, how: str, at: float) -> Evidence:
    what = "working directory" if h.kind == "cwd" else f"{h.kind} open for {h.access or '?'}"
    return Evidence(
        path=h.path,
        time=at,
        size=h.size,
        sha256=None,
        grade=Grade.INFERRED.value,
        writer=_writer(h, lane),
        note=f"{what}; lane known by {how}",
        key=f"hold:{h.pid}:{h.start_ticks}:{h.kind}:{h.path}",
    )


def writers(
    holdings: Iterable[Holding],
    owners: Mapping[str, Owner],
    namespaces: Iterable[str],
    *,
    roots: Sequence[str],
    shared: Sequence[str],
    ignore: Sequence[str] = (),
    at: float,
) -> list[Observation]:
    """Foreign writers (a lane's process holding a path in another lane's namespace) and
    unbound writers (a lane's process holding a file in shared temp outside any namespace).

    `owners` maps namespace keys with a live owner; `namespaces` lists every namespace key we
    know (owned or not), so a path inside any of them is attributed to it.
    """
    holdings = list(holdings)
    # Longest key first, so a key given with and without a trailing slash keeps the longer.
    index = {ns.rstrip("/") or "/": ns for ns in sorted(set(namespaces), key=len)}
    by_owner = OwnerIndex(owners)
    owner_pids = {o.pid for o in owners.values() if o.pid is not None}
    # Paths an owner process holds itself were handed to its lane by whoever started it
    # (a redirected stdout of `lanewatch run`); a child inheriting them did not choose them.
    handed = {(h.path) for h in holdings if h.pid in owner_pids}
    out: list[Observation] = []
    for h in holdings:
        victim = _enclosing(h.path, index)
        if victim is not None:
            # Checked before `ignore`: the default root lives inside the ignored state dir.
            obs = _foreign(h, victim, by_owner, at)
        elif any(_inside(h.path, p) for p in ignore):
            continue  # lanewatch's own state (roots registry, bookkeeping): nobody's write
        elif any(_inside(h.path, r) for r in roots):
            continue  # the root's own data (.lanewatch-root) or a stray file: not a lane's
        elif any(_inside(h.path, s) for s in shared):
            if h.pid in owner_pids and h.fd in (0, 1, 2):
                continue  # the owner's own stdio: chosen by whoever started it
            if h.path in handed and h.pid not in owner_pids:
                continue
            obs = _unbound(h, by_owner, roots, at)
        else:
            continue
        if obs is not None:
            out.append(obs)
    return out


def _foreign(h: Holding, victim: str, owners: OwnerIndex, at: float) -> Observation | None:
    if _inside(h.path, f"{victim}/{META_DIR}"):
        return None  # lanewatch's own files: stamps, locks, ledgers
    if not (writes(h) or h.kind == "cwd" or h.directory):
        return None  # a file held read-only (or an O_PATH fd on one) is read, not written
    victim_owner = owners.by_key.get(victim)
    if victim_owner is not None and h.pid in victim_owner.pids:
        return None  # the owner itself, whatever environment it inherited
    found = lane_of(h, owners)
    if found is None:
        return None  # nobody's lane: a shell or a tool outside any lane; not attributed
    intruder, how = found
    if intruder.key == victim:
        return None
    ev = _holding_evidence(h, intruder.lane, how, at)
    return Observation(
        kind=IncidentKind.FOREIGN_WRITER,
        victim=victim,
        intruder_key=intruder.key,
        intruder=_owner_json(intruder, h),
        evidence=ev,
        summary=f"pid {h.pid} of lane {intruder.lane} holds {h.path}",
    )


def _unbound(h: Holding, owners: OwnerIndex, roots: Sequence[str], at: float) -> Observation | None:
    if not writes(h) or h.deleted or h.directory:
        return None  # a cwd or a read-only file is not a write; an unlinked file has no name
    found = lane_of(h, owners)
    if found is None:
        return None
    owner, how = found
    if not any(_inside(owner.key, r) for r in roots):
        return None  # a lane of a root we do not watch: its own dashboard reports it
    if owner.checkout_path and _inside(h.path, owner.checkout_path):
        return None
    if owner.git_common_dir and _inside(h.path, owner.git_common_dir):
        return None  # its checkout's own repository (git commit, gc in a linked worktree)
    ev = _holding_evidence(h, owner.lane, how, at)
    return Observation(
        kind=IncidentKind.UNBOUND_WRITER,
        victim=None,
        intruder_key=owner.key,
        intruder=_owner_json(owner, h),
        evidence=ev,
        summary=f"pid {h.pid} of lane {owner.lane} holds {h.path} outside its namespace",
    )


def _owner_json(owner: Owner, h: Holding) -> dict[str, Any]:
    return {
        "lane": owner.lane,
        "namespace": owner.key,
        "checkout_id": owner.checkout_id,
        "pid": h.pid,
        "command": list(h.command),
    }
