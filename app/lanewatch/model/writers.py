"""Foreign and unbound writers among what the prober saw processes hold. Pure.

The prober hands over `Holding`s (`model/holdings.py`); `writers` finds where each path lies
and hands it to detection as the fact of that place (`model/facts.py`): `HeldInNamespace`
inside a lane's namespace (the cross-lane writer's, `model/detectors/foreign_writer.py`),
`HeldInSharedTemp` in shared temp outside every namespace (`model/detectors/unbound_writer.py`).

Only a write counts: a file open for writing (O_WRONLY or O_RDWR, append or not) or a shared
writable mapping. A file held read-only (`sort` reading /tmp/x/big.txt, a script's input) is a
reader, never an incident. In another lane's namespace a working directory or an open folder
also counts (relative paths and `openat` write there); in shared temp it does not.

A file held by a process and by its children (a shell's `exec 3>f` and every `sleep` it starts
inherit the descriptor) is the holding of the eldest that holds it: the process that opened it,
or the one that handed it down. A passing child is never the one named (a row kept
naming a `sleep 2` long exited while the shell that held the file was the lane's writer).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from lanewatch.linux.paths import IPC_TEMP, is_under, under_any
from lanewatch.model.facts import HeldInNamespace, HeldInSharedTemp
from lanewatch.model.family import Stamped, head
from lanewatch.model.holdings import Holding, Owner, OwnerIndex, lane_of, writes
from lanewatch.model.kinds import detect
from lanewatch.model.observation import Observation


def _enclosing(path: str, index: Mapping[str, str]) -> str | None:
    """The deepest namespace `path` is or lies inside; `index` maps each namespace key, without
    a trailing slash, to the key. What testing every key with `inside`, longest first, finds,
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


def writers(
    holdings: Iterable[Holding],
    owners: Mapping[str, Owner],
    namespaces: Iterable[str],
    *,
    roots: Sequence[str],
    shared: Sequence[str],
    ignore: Sequence[str] = (),
    at: float,
    stamped: Mapping[str, Stamped] | None = None,
    quiet: Collection[Holding] = (),
    found_quiet: set[Holding] | None = None,
) -> list[Observation]:
    """Foreign writers (a lane's process holding a path in another lane's namespace) and
    unbound writers (a lane's process holding a file in shared temp outside any namespace).

    `owners` maps namespace keys with a live owner; `namespaces` lists every namespace key we
    know (owned or not), so a path inside any of them is attributed to it. `stamped`: what
    each namespace's stamp on this host says, live or released (`model/family.py`).

    `quiet`: holdings a call with these same namespaces, owners and stamps found to mean
    nothing each on its own (the caller keeps them, and forgets them when any of those
    changes): skipped. `found_quiet` (filled): the holdings of this call that mean nothing on
    their own, `quiet` ones included; not those passed over for another holding's sake (an
    ancestor that holds it too, a file an owner was handed), which may count once that one
    goes. What a holding means never depends on `at`, only its observation's time does.
    """
    holdings = list(holdings)
    # Longest key first, so a key given with and without a trailing slash keeps the longer.
    index = {ns.rstrip("/") or "/": ns for ns in sorted(set(namespaces), key=len)}
    by_owner = OwnerIndex(owners)
    # Stamps written before lanes recorded their handed files (`Owner.handed` None): paths an
    # owner process holds itself were handed to its lane by whoever started it (a redirected
    # stdout of `lanewatch run`); a child inheriting them did not choose them. A stamp that
    # records them is judged by them alone (`unbound_writer.held`).
    owner_pids = {o.pid for o in owners.values() if o.pid is not None and o.handed is None}
    handed = {(h.path) for h in holdings if h.pid in owner_pids}
    holders: dict[tuple[str, str, bool], set[int]] = {}
    for h in holdings:
        holders.setdefault((h.path, h.kind, writes(h)), set()).add(h.pid)
    ipc = _ipc_families(holdings, by_owner)
    out: list[Observation] = []
    nothing = found_quiet if found_quiet is not None else set()
    for h in holdings:
        rivals = _rivals(h, ipc)
        if h in quiet and not rivals:
            nothing.add(h)
            continue
        if any(p in holders[(h.path, h.kind, writes(h))] for p in h.lineage[1:]):
            continue  # an ancestor holds it too: inherited, the ancestor is named
        victim = _enclosing(h.path, index)
        found: list[Observation] = []
        if victim is not None:
            # Checked before `ignore`: the default root lives inside the ignored state dir.
            said = stamped.get(victim) if stamped is not None else None
            found = detect(HeldInNamespace(h, victim, by_owner, at, said))
        elif any(is_under(h.path, p) for p in ignore):
            pass  # lanewatch's own state (roots registry, bookkeeping): nobody's write
        elif any(is_under(h.path, r) for r in roots):
            pass  # the root's own data (.lanewatch-root) or a stray file: not a lane's
        elif any(is_under(h.path, s) for s in shared):
            if h.pid in owner_pids and h.fd in (0, 1, 2):
                pass  # the owner's own stdio: chosen by whoever started it
            elif h.path in handed and h.pid not in owner_pids:
                continue
            else:
                found = detect(HeldInSharedTemp(h, by_owner, roots, at, rivals))
        if found:
            out.extend(found)
        elif not rivals:
            nothing.add(h)
    return out


def _ipc_families(holdings: Sequence[Holding], owners: OwnerIndex) -> dict[str, dict[Holding, str]]:
    """For each name in `/dev/shm` held for writing, the lane family (its head's key) of each
    holding of it: whether one family uses the name alone is a matter of the probe, not of
    one holding (so such a holding is never quiet while another family holds the name)."""
    out: dict[str, dict[Holding, str]] = {}
    for h in holdings:
        if not writes(h) or not under_any(h.path, IPC_TEMP):
            continue
        found = lane_of(h, owners)
        if found is not None:
            owner = found[0]
            out.setdefault(h.path, {})[h] = head(owner.key, owner.family)
    return out


def _rivals(h: Holding, ipc: Mapping[str, Mapping[Holding, str]]) -> frozenset[str]:
    families = ipc.get(h.path)
    if not families:
        return frozenset()
    mine = families.get(h)
    return frozenset(f for f in families.values() if f != mine)
