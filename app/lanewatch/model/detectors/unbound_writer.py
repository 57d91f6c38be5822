"""`shared-file` (formerly `unbound-writer`): lanes' processes writing one file in shared
temp, outside every namespace. One incident per file, naming every lane that wrote it. Pure.

Two sightings of one incident: the prober's (`held`: the process holds a file there open for
writing: inferred) and the kernel's (`unbound_write`: fanotify reported the write: known).
"""

from __future__ import annotations

from collections.abc import Sequence

from lanewatch.linux.paths import IPC_TEMP, is_under, under_any
from lanewatch.model.detection import detects
from lanewatch.model.facts import HeldInSharedTemp, WroteInSharedTemp
from lanewatch.model.family import handed, head
from lanewatch.model.holdings import (
    Holding,
    OwnerIndex,
    lane_of,
    writes,
)
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.observation import Observation
from lanewatch.model.sightings import from_holding, from_write
from lanewatch.model.writerlist import Writer, names

KIND = "shared-file"  # formerly "unbound-writer" (`model.kinds.LEGACY_NAMES`)


@detects(KIND, reads=HeldInSharedTemp)
def held(
    h: Holding,
    owners: OwnerIndex,
    roots: Sequence[str],
    at: float,
    rivals: frozenset[str] = frozenset(),
) -> Observation | None:
    """A lane's process holds a file in shared temp (outside every namespace) open for writing.
    Not a collision: a cwd, a file read, an unlinked file, a lane of a root we do not watch, a
    path in the lane's own checkout or its repository's common git dir, a file handed to the
    lane or to its family's head by whoever started it (`model/family.py`), a name in
    `/dev/shm` no other lane family holds (`alone_in_ipc`)."""
    if not writes(h) or h.deleted or h.directory:
        return None  # a cwd or a read-only file is not a write; an unlinked file has no name
    if alone_in_ipc(h.path, rivals):
        return None
    found = lane_of(h, owners)
    if found is None:
        return None
    owner, how = found
    if not any(is_under(owner.key, r) for r in roots):
        return None  # a lane of a root we do not watch: its own dashboard reports it
    family_head = owners.by_key.get(head(owner.key, owner.family))
    if handed(h.file_id, owner.handed, family_head.handed if family_head else None):
        return None  # `pytest > /tmp/log`: the shell opened it for whoever runs pytest
    if owner.checkout_path and is_under(h.path, owner.checkout_path):
        return None
    if owner.git_common_dir and is_under(h.path, owner.git_common_dir):
        return None  # its checkout's own repository (git commit, gc in a linked worktree)
    summary = f"pid {h.pid} of lane {owner.lane} holds {h.path} outside its namespace"
    return from_holding(KIND, None, owner, h, how, at, summary, group=h.path, path=h.path)


def alone_in_ipc(path: str, rivals: frozenset[str]) -> bool:
    """A name in `/dev/shm` (`linux.paths.IPC_TEMP`) that no other lane family uses: a
    semaphore or shared memory of the lane's own program (multiprocessing, a browser), which
    collides with nobody. The same name written by two families is an incident."""
    return not rivals and under_any(path, IPC_TEMP)


@detects(KIND, reads=WroteInSharedTemp)
def unbound_write(
    w: KernelWrite, roots: Sequence[str], rivals: frozenset[str] = frozenset()
) -> Observation | None:
    """A lane's process wrote in shared temp, outside its namespace.

    Not a collision: a writer with no lane, a lane of a root we do not watch (its own engine
    reports it), a path inside the lane's own checkout or its repository's common git dir (git
    commit or gc in a linked worktree writes the main checkout's `.git`), and the files the
    lane (or its family's head) was started with on fds 0-2 (`w.handed`: chosen by whoever
    started it; `model/family.py`). Not judged: a lane known only by its environment, whose
    owner's stamp (so its checkout) was not read (yet): its write may be in its own checkout,
    and unknown is never turned into a guess (the write is in the history all the same). A
    name in `/dev/shm` that no other lane family wrote (`alone_in_ipc`).
    """
    if w.namespace is None or w.lane is None or w.handed or w.checkout_path is None:
        return None
    if alone_in_ipc(w.path, rivals):
        return None
    if not any(is_under(w.namespace, r) for r in roots) or is_under(w.path, w.namespace):
        return None
    if w.checkout_path and is_under(w.path, w.checkout_path):
        return None
    if w.git_common_dir and is_under(w.path, w.git_common_dir):
        return None
    what = f"write by lane {w.lane} outside its namespace"
    summary = f"pid {w.pid} of lane {w.lane} wrote {w.path} outside its namespace"
    return from_write(KIND, None, w, what, summary, group=w.path, path=w.path)


def title(
    writers: Sequence[Writer], *, path: str | None, latest: str | None = None, **_: object
) -> str | None:
    """ "agent-1 writes PATH outside its lane", "agent-1 and agent-2 both write PATH"; a
    lane's flood of files (`model/flood.py`, no one path): "agent-1 writes many files outside
    its lane (the latest: PATH)"."""
    if writers and not path and latest:
        return f"{names(writers)} writes many files outside its lane (the latest: {latest})"
    if not writers or not path:
        return None
    if len(writers) == 1:
        return f"{names(writers)} writes {path} outside its lane"
    return f"{names(writers)} {'both' if len(writers) == 2 else 'all'} write {path}"
