"""From a collision to the lane that caused it: which lane intruded, why a kill would be aimed
at it (the kill dialog says so), and which writers still run. Pure: the picture's namespaces
and an incident in, plain data out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lanewatch.inert import inert
from lanewatch.model.roles import Role, role_in
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.records.report import who
from lanewatch.tui.state import humanize

WRITERS_SHOWN = 3  # writers per group (now / gone) in a timeline's summary


def intruder_lane(
    namespaces: Mapping[str, NamespaceView], incident: Incident
) -> NamespaceView | None:
    """The lane that intruded in `incident`, if the picture has it; never its victim (the
    same lane name in another checkout is another lane). None for an incident without a
    victim (a shared file: no one intruded on anyone) or one whose intruder is not watched."""
    if incident.victim is None:
        return None
    named = incident.intruder.get("namespace")
    if isinstance(named, str) and named in namespaces and named != incident.victim:
        return namespaces[named]
    found = [
        ns
        for key, ns in namespaces.items()
        if key != incident.victim and role_in(ns, incident) is Role.INTRUDER
    ]
    return found[0] if len(found) == 1 else None  # two alike: the user picks in Lanes


def incident_lane(
    namespaces: Mapping[str, NamespaceView], incident: Incident, whose: str
) -> str | None:
    """The namespace key of an incident's victim (`whose` "victim") or intruder, if the
    picture has it (a timeline's jumps)."""
    if whose == "victim":
        return incident.victim if incident.victim in namespaces else None
    intruder = incident.intruder
    named = intruder.get("namespace")
    if isinstance(named, str) and named in namespaces:
        return named
    lane, checkout = intruder.get("lane"), intruder.get("checkout_id")
    if not lane:
        return None
    found = [
        k
        for k, ns in namespaces.items()
        if ns.lane == lane and (checkout is None or ns.checkout_id == checkout)
    ]
    return incident.victim if incident.victim in found else (found[0] if found else None)


def kill_reason(incident: Incident, victim: str) -> str:
    """Why the kill dialog opened on this lane: the incident it intruded in, where, when (a
    path inside the victim's namespace as `./x`: the dialog fits 80×24)."""
    paths = {e.path for e in incident.evidence}
    newest = max(incident.evidence, key=lambda e: e.time, default=None)
    inside = (incident.victim or "").rstrip("/") + "/"
    what = ""
    if newest is not None:
        path = newest.path
        if path is not None and inside != "/" and path.startswith(inside):
            path = "./" + path[len(inside) :]
        many = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
        where = "" if path is None else f" {path}{many}"  # a write has a path; a claim none
        what = f"{where}, last at {humanize.clock(newest.time)}"
    return inert(f"Intruder of {incident.id}: it wrote in lane {victim}'s namespace{what}.")


def gone(writer: Mapping[str, Any]) -> float | None:
    """When the writer's processes were seen gone (None: still running, or not known gone)."""
    at = writer.get("gone_at")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None


def writers_now_and_gone(
    incident: Incident,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The incident's writers (the intruder if it lists none): those that still run, and
    those gone (newest gone first)."""
    writers = list(incident.writers) or [incident.intruder]
    now = [w for w in writers if gone(w) is None]
    past = sorted((w for w in writers if gone(w) is not None), key=lambda w: -(gone(w) or 0))
    return now, past


def writer_line(writer: Mapping[str, Any], limit: int) -> str:
    """One writer for the summary: `who` says "gone since" for a gone one."""
    return who(writer, limit)


def writer_rows(incident: Incident, limit: int) -> list[tuple[str, str, bool]]:
    """The writers beyond the intruder's line, as the timeline's summary and the detail pane
    list them: (label, line, gone), up to WRITERS_SHOWN still running ("writing") then as many
    gone ("gone"), each group's rest as one "… and N more" row (label ""). Empty when the
    incident names one writer (its intruder line says it all)."""
    now, past = writers_now_and_gone(incident)
    if len(now) + len(past) < 2:
        return []
    rows: list[tuple[str, str, bool]] = []
    for label, group, gone in (("writing", now, False), ("gone", past, True)):
        rows += [(label, writer_line(w, limit), gone) for w in group[:WRITERS_SHOWN]]
        if len(group) > WRITERS_SHOWN:
            rows.append(("", f"… and {len(group) - WRITERS_SHOWN} more", gone))
    return rows


ONGOING = 300.0  # a collision written this recently, by a writer not seen gone, is ongoing


def still_writing(incident: Incident, now: float) -> bool:
    """Is the collision going on: a writer not seen gone, and a write in the last minutes?"""
    current, _past = writers_now_and_gone(incident)
    return bool(current) and now - incident.last_seen < ONGOING
