"""Who wrote, for one incident: every lane named once, and the title a person reads. Pure.

An incident of the writer kinds (`cross-lane-write`, `shared-file`) names every lane whose
process wrote (or held) its path(s): one entry per lane (its namespace key, else its pid),
with the newest pid and start ticks, when it was first and last seen and how many distinct
sightings it had. Each kind's detector builds its title from that list ("agent-1 and agent-2
both write /tmp/receipt.json"; `model/kinds.py` names it): untrusted text (lane names,
paths), shown inert, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeGuard

MAX_WRITERS = 32  # lanes named per incident; the first ones stay
MAX_PIDS = 16  # (pid, start ticks) kept per writer, newest last: what "gone" is judged on
NAMED = 3  # lanes named in a title before "and N more"

Writer = Mapping[str, Any]


def writer_key(intruder: Mapping[str, Any]) -> str:
    ns = intruder.get("namespace")
    if isinstance(ns, str) and ns:
        return ns
    lane = intruder.get("lane")
    return f"lane:{lane}" if lane else f"pid:{intruder.get('pid')}"


def _pids(entry: Mapping[str, Any]) -> list[list[int | None]]:
    out = []
    for item in entry.get("pids") or ():
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], int):
            out.append([item[0], item[1] if isinstance(item[1], int) else None])
    return out


def _entry(intruder: Mapping[str, Any], t: float) -> dict[str, Any]:
    pid = intruder.get("pid")
    ticks = intruder.get("start_ticks")
    return {
        "key": writer_key(intruder),
        "lane": intruder.get("lane"),
        "namespace": intruder.get("namespace"),
        "checkout_id": intruder.get("checkout_id"),
        "pid": pid,
        "start_ticks": ticks,
        "command": list(intruder.get("command") or ()),
        "pids": [[pid, ticks]] if isinstance(pid, int) else [],
        "first_seen": t,
        "last_seen": t,
        "count": 1,
    }


def _join(old: Mapping[str, Any], new: Mapping[str, Any], *, counted: bool) -> dict[str, Any]:
    """One lane's entry from two (same key); the newer one's pid and command win."""
    newer = new if new.get("last_seen", 0) >= old.get("last_seen", 0) else old
    pids = _pids(old)
    for p in _pids(new):
        if p in pids:
            pids.remove(p)
        pids.append(p)
    out = dict(old)
    for field in ("lane", "namespace", "checkout_id", "pid", "start_ticks", "command"):
        if newer.get(field) is not None:
            out[field] = newer[field]
    out["pids"] = pids[-MAX_PIDS:]
    out["first_seen"] = min(old.get("first_seen", 0), new.get("first_seen", 0))
    out["last_seen"] = max(old.get("last_seen", 0), new.get("last_seen", 0))
    counts = (int(old.get("count") or 0), int(new.get("count") or 0))
    out["count"] = sum(counts) if counted else max(counts)
    # Gone (`mark_gone`) holds until a sighting after it: then one of its processes lives.
    gone = latest_gone(old, new)
    out.pop("gone_at", None)
    if gone is not None and gone >= out["last_seen"]:
        out["gone_at"] = gone
    return out


def latest_gone(*entries: Mapping[str, Any]) -> float | None:
    """The latest `gone_at` the entries (writers, or an intruder seen twice) say; None: none."""
    return max((g for g in (e.get("gone_at") for e in entries) if _number(g)), default=None)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def mark_gone(
    writers: Sequence[Writer], gone: Iterable[tuple[int, int | None]], at: float
) -> tuple[Writer, ...]:
    """`writers`, each whose every process is in `gone` ((pid, start ticks) found exited at
    `at`) marked `gone_at` (kept when already marked)."""
    dead = set(gone)
    out = []
    for w in writers:
        pids = [(p[0], p[1]) for p in _pids(w)]
        if pids and "gone_at" not in w and all(p in dead for p in pids):
            w = {**w, "gone_at": at}
        out.append(w)
    return _frozen(out)


def _frozen(entries: Iterable[Mapping[str, Any]]) -> tuple[Writer, ...]:
    ordered = sorted(entries, key=lambda e: (e.get("first_seen", 0), e.get("key", "")))
    return tuple(MappingProxyType(dict(e)) for e in ordered[:MAX_WRITERS])


def add_writer(
    writers: Sequence[Writer], intruder: Mapping[str, Any], t: float, *, new: bool
) -> tuple[Writer, ...]:
    """`writers` with the sighting of `intruder` at `t` (`new`: a distinct observation)."""
    entry = _entry(intruder, t)
    if not new:
        entry["count"] = 0
    by_key = {str(w.get("key")): w for w in writers}
    old = by_key.get(entry["key"])
    by_key[entry["key"]] = entry if old is None else _join(old, entry, counted=True)
    return _frozen(by_key.values())


def merge_writers(a: Sequence[Writer], b: Sequence[Writer]) -> tuple[Writer, ...]:
    """Two views of one incident's writers (two engines, or a record and its copy)."""
    by_key: dict[str, Mapping[str, Any]] = {}
    for w in (*a, *b):
        key = str(w.get("key"))
        old = by_key.get(key)
        by_key[key] = w if old is None else _join(old, w, counted=False)
    return _frozen(by_key.values())


def writers_from_json(
    items: object, intruder: Mapping[str, Any], first: float, last: float
) -> tuple[Writer, ...]:
    """The stored list; a record of an older lanewatch has none: its one intruder."""
    if isinstance(items, list):
        out = [dict(w) for w in items if isinstance(w, dict) and isinstance(w.get("key"), str)]
        if out:
            return _frozen(out)
    if not intruder:
        return ()
    entry = _entry(intruder, first)
    entry["last_seen"] = last
    return _frozen([entry])


def _name(w: Mapping[str, Any]) -> str:
    lane = w.get("lane")
    return str(lane) if lane else f"pid {w.get('pid')}"


def names(writers: Sequence[Writer]) -> str:
    """ "agent-1", "agent-1 and agent-2", "a, b, c and 2 more": for a title."""
    out = [_name(w) for w in writers]
    if len(out) > NAMED + 1:
        out = [*out[:NAMED], f"{len(out) - NAMED} more"]
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]
