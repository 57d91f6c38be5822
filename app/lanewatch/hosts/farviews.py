"""A host's JSON (`status --json`, `record --json --views`) back into this side's views.

Every key and root is prefixed with the host's name (`NAME:/path`), so a remote namespace never
meets a local one of the same path, and an action on it knows where to run. The host column
(`host`) shows the host's name: the lane is known to run there. Fields are read defensively:
a far side of another version may leave one out, and none of it is trusted as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lanewatch.model.ports import lease_from_json, ports_from_json
from lanewatch.model.views import (
    Evidence,
    Footprint,
    Incident,
    LaneMember,
    NamespaceView,
    NsState,
    SourceHealth,
)

SEP = ":"


def remote_key(host: str, key: str) -> str:
    return f"{host}{SEP}{key}"


def split_key(key: str) -> tuple[str, str] | None:
    """(host, far key) of a remote namespace's key; None for a local one (a path)."""
    if key.startswith("/") or SEP not in key:
        return None
    host, _, far = key.partition(SEP)
    return (host, far) if far.startswith("/") else None


def host_root(host: str) -> str:
    """The pseudo-root a host's own health is shown under (`ssh:NAME`)."""
    return f"ssh{SEP}{host}"


def host_fixes(health: Iterable[SourceHealth]) -> list[tuple[str, list[str]]]:
    """(host, [what is wrong, "fix: …", …]) of each flagged host in a picture's health (the
    line `stream.HostState.health` writes: parts joined by "; ", each fix after its finding)."""
    found = []
    prefix = host_root("")
    for h in health:
        if not h.root.startswith(prefix) or "fix: " not in h.detail:
            continue
        parts = h.detail.split("; ")
        kept = [
            p
            for i, p in enumerate(parts)
            if p.startswith("fix: ") or (i + 1 < len(parts) and parts[i + 1].startswith("fix: "))
        ]
        found.append((h.root.removeprefix(prefix), kept))
    return found


def _str(d: Mapping[str, Any], k: str) -> str | None:
    v = d.get(k)
    return None if v is None else str(v)


def _int(d: Mapping[str, Any], k: str) -> int | None:
    v = d.get(k)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(d: Mapping[str, Any], k: str) -> float | None:
    v = d.get(k)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _state(value: Any) -> NsState:
    try:
        return NsState(str(value))
    except ValueError:
        return NsState.UNKNOWN  # a newer far side's state: "could not tell", never dead


def view(host: str, d: Mapping[str, Any]) -> NamespaceView:
    """One namespace of `status --json` (or a `--views` state line's `view`)."""
    members = tuple(
        LaneMember(
            pid=_int(m, "pid") or 0,
            start_ticks=_int(m, "start_ticks") or 0,
            command=str(m.get("command", "")),
            started_at=_num(m, "started_at"),
            how=str(m.get("how", "")),
            uid=_int(m, "uid"),
        )
        for m in d.get("members") or ()
        if isinstance(m, Mapping)
    )
    command = d.get("command") or ()
    return NamespaceView(
        key=remote_key(host, str(d.get("key", ""))),
        root=remote_key(host, str(d.get("root", ""))),
        name=str(d.get("name", "")),
        lane=_str(d, "lane"),
        checkout_id=_str(d, "checkout_id"),
        checkout_path=_str(d, "checkout_path"),
        host=host,
        pid=_int(d, "pid"),
        user=_str(d, "user"),
        command=tuple(str(c) for c in command) if isinstance(command, list) else (),
        state=_state(d.get("state")),
        reason=str(d.get("reason", "")),
        grade=str(d.get("grade", "inferred")),
        started_at=_num(d, "started_at"),
        heartbeat_at=_num(d, "heartbeat_at"),
        heartbeat_interval=_num(d, "heartbeat_interval"),
        released_at=_num(d, "released_at"),
        exit_code=_int(d, "exit_code"),
        last_write=_num(d, "last_write"),
        files=_int(d, "files"),
        bytes=_int(d, "bytes"),
        write_rate=tuple(int(x) for x in d.get("write_rate") or () if isinstance(x, int)),
        stamp_status=str(d.get("stamp_status", "")),
        incident_ids=tuple(remote_key(host, str(i)) for i in d.get("incident_ids") or ()),
        uid=_int(d, "uid"),
        mismatch=_str(d, "mismatch"),
        fence=_str(d, "fence"),
        fence_note=_str(d, "fence_note"),
        fence_private=tuple(str(p) for p in d.get("fence_private") or ()),
        members=members,
        allocated=_int(d, "allocated_bytes"),  # None: a lanewatch that does not say
        footprint=_footprint(d.get("footprint")),  # None: not said
        cpu_history=tuple(x for x in d.get("cpu_history") or () if isinstance(x, int)),
        cpu_quiet_since=_num(d, "cpu_quiet_since"),
        disk_growth=_num(d, "disk_growth"),
        membership=_str(d, "membership"),
        lease=lease_from_json(d.get("lease")),  # absent: a lanewatch without leases
        ports=ports_from_json(d.get("ports")),
    )


def _footprint(f: Any) -> Footprint | None:
    """A far lane's footprint as its `status --json` says it; None when it says none."""
    if not isinstance(f, Mapping) or _num(f, "at") is None:
        return None
    return Footprint(
        at=_num(f, "at") or 0.0,
        cpu=_num(f, "cpu_percent"),
        window=_num(f, "cpu_window") or 0.0,
        memory=_int(f, "memory_bytes"),
        processes=_int(f, "processes") or 0,
        membership=str(f.get("membership", "rules")),
        memory_from=str(f.get("memory_from", "rss")),
    )


def _far(host: str, value: Any) -> str | None:
    return None if value is None else remote_key(host, str(value))


def incident(host: str, d: Mapping[str, Any]) -> Incident:
    evidence = []
    latest = d.get("latest")
    for e in [*(d.get("evidence") or ()), *([latest] if isinstance(latest, Mapping) else [])]:
        if isinstance(e, Mapping):
            evidence.append(
                Evidence(
                    path=_str(e, "path"),
                    time=_num(e, "time") or 0.0,
                    size=_int(e, "size"),
                    sha256=_str(e, "sha256"),
                    grade=str(e.get("grade", "inferred")),
                    writer=_str(e, "writer"),
                    note=str(e.get("note", "")),
                )
            )
    intruder = d.get("intruder")
    intruder = dict(intruder) if isinstance(intruder, Mapping) else {}
    if isinstance(intruder.get("namespace"), str):
        intruder["namespace"] = remote_key(host, intruder["namespace"])
    return Incident(
        id=remote_key(host, str(d.get("id", ""))),
        kind=str(d.get("kind", "")),
        victim=_far(host, d.get("victim")),
        intruder=intruder,
        first_seen=_num(d, "first_seen") or 0.0,
        last_seen=_num(d, "last_seen") or 0.0,
        count=_int(d, "count") or 0,
        grade=str(d.get("grade", "inferred")),
        evidence=tuple(evidence),
        acknowledged=bool(d.get("acknowledged")),
        summary=f"[{host}] {d.get('summary', '')}",
        writers=tuple(dict(w) for w in d.get("writers") or () if isinstance(w, Mapping)),
        path=_str(d, "path"),
        ack_at=_num(d, "ack_at"),
        ack_by=_str(d, "ack_by"),
        resolved=bool(d.get("resolved")),
        reopened=bool(d.get("reopened")),
        ack_note=str(d.get("ack_note", "")),
    )


def health(host: str, d: Mapping[str, Any]) -> SourceHealth:
    """A far root's health, under its prefixed name."""
    return SourceHealth(
        root=remote_key(host, str(d.get("root", ""))),
        status=str(d.get("status", "degraded")),
        detail=str(d.get("detail", "")),
    )
