"""What the dashboard currently shows: the engine's views, split into the three tables.

Pure (no Textual): `Picture.apply` takes one merged `Changes` and returns, per table, the rows
to upsert and to remove, so the screen touches only what changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from lanewatch.model.roles import Role, role_in, roles_of
from lanewatch.model.views import (
    STALE_STATES,
    Changes,
    Incident,
    NamespaceView,
    NsState,
    SourceHealth,
)


class View(StrEnum):
    LANES = "lanes"
    COLLISIONS = "collisions"
    STALE = "stale"


VIEW_TITLES = {View.LANES: "Lanes", View.COLLISIONS: "Collisions", View.STALE: "Stale"}

# UNKNOWN ("could not tell") stays with the lanes: it may be alive, so it is never offered
# for clearing.
LANE_STATES = frozenset({NsState.LIVE, NsState.HUNG, NsState.UNKNOWN, NsState.HEADLESS})


def view_of(ns: NamespaceView) -> View:
    return View.STALE if ns.state in STALE_STATES else View.LANES


Row = NamespaceView | Incident


@dataclass
class Delta:
    """Row changes per table, produced by one `Picture.apply`."""

    upserts: dict[View, dict[str, Row]] = field(default_factory=lambda: {view: {} for view in View})
    removals: dict[View, set[str]] = field(default_factory=lambda: {view: set() for view in View})

    def __bool__(self) -> bool:
        return any(self.upserts.values()) or any(self.removals.values())

    def touched(self, view: View) -> set[str]:
        return set(self.upserts[view]) | self.removals[view]


@dataclass
class Picture:
    namespaces: dict[str, NamespaceView] = field(default_factory=dict)
    incidents: dict[str, Incident] = field(default_factory=dict)
    health: tuple[SourceHealth, ...] = ()
    loaded: bool = False
    """True once the first full picture arrived."""
    updated_at: float | None = None
    attribution: str | None = None
    """How writers are known: "kernel" (fanotify) or "inferred"; None until the engine says."""
    attribution_hint: str = ""
    _counts: dict[View, int] = field(default_factory=lambda: dict.fromkeys(View, 0))
    _against: dict[str, set[str]] = field(default_factory=dict)  # victim key -> open incident ids
    # ns key -> open incident ids it is part of (victim, intruder, shared): its `!` column
    _involving: dict[str, set[str]] = field(default_factory=dict)

    def apply(self, changes: Changes) -> Delta:
        delta = Delta()
        if changes.full:
            for key in set(self.namespaces) - set(changes.upserts):
                self._remove_ns(key, delta)
            for iid in set(self.incidents) - set(changes.incidents):
                gone = self.incidents.pop(iid)
                self._counts[View.COLLISIONS] -= int(not gone.acknowledged)
                delta.removals[View.COLLISIONS].add(iid)
                self._victim_changed(gone, None, delta)
                self._involved_changed(gone, None, delta)
            self.loaded = True
        for key in changes.removed:
            self._remove_ns(key, delta)
        for key, ns in changes.upserts.items():
            old = self.namespaces.get(key)
            self.namespaces[key] = ns
            view = view_of(ns)
            if old is None:
                self._counts[view] += 1
            elif view_of(old) is not view:
                self._counts[view_of(old)] -= 1
                self._counts[view] += 1
                delta.removals[view_of(old)].add(key)
                delta.upserts[view_of(old)].pop(key, None)
            delta.upserts[view][key] = ns
            delta.removals[view].discard(key)
        for iid, incident in changes.incidents.items():
            old_incident = self.incidents.get(iid)
            was_open = old_incident is not None and not old_incident.acknowledged
            self._counts[View.COLLISIONS] += int(not incident.acknowledged) - int(was_open)
            self.incidents[iid] = incident
            self._victim_changed(old_incident, incident, delta)
            self._involved_changed(old_incident, incident, delta)
            if incident.acknowledged:
                delta.upserts[View.COLLISIONS].pop(iid, None)
                delta.removals[View.COLLISIONS].add(iid)
            else:
                delta.upserts[View.COLLISIONS][iid] = incident
                delta.removals[View.COLLISIONS].discard(iid)
        if changes.health or changes.full:
            self.health = tuple(changes.health)
        self.updated_at = changes.at
        # Engines that predate write attribution have no such fields.
        self.attribution = getattr(changes, "attribution", None) or self.attribution
        self.attribution_hint = getattr(changes, "attribution_hint", "") or self.attribution_hint
        return delta

    def _victim_changed(self, old: Incident | None, new: Incident | None, delta: Delta) -> None:
        """Keep the open incidents per victim; a victim whose set changed is redrawn (its row
        shows a marker and takes the incident's severity)."""
        was = old.victim if old is not None and not old.acknowledged else None
        now = new.victim if new is not None and not new.acknowledged else None
        if was == now:
            return
        ident = (new or old).id  # type: ignore[union-attr]
        if was is not None:
            self._against.get(was, set()).discard(ident)
        if now is not None:
            self._against.setdefault(now, set()).add(ident)
        for key in {was, now} - {None}:
            ns = self.namespaces.get(key)  # type: ignore[arg-type]
            if ns is not None and key not in delta.removals[view_of(ns)]:
                delta.upserts[view_of(ns)][ns.key] = ns

    def _keys_of(self, incident: Incident | None) -> set[str]:
        """The namespaces an open `incident` involves (its victim and every lane that wrote)."""
        if incident is None or incident.acknowledged:
            return set()
        keys = {incident.victim} if incident.victim else set()
        for entry in (incident.intruder, *incident.writers):
            named = entry.get("namespace")
            if isinstance(named, str) and named:
                keys.add(named)
            elif entry.get("lane"):  # a writer named by lane (and checkout) only
                keys.update(k for k, ns in self.namespaces.items() if role_in(ns, incident))
        return keys

    def _involved_changed(self, old: Incident | None, new: Incident | None, delta: Delta) -> None:
        """Keep the open incidents per lane involved; a lane whose set changed is redrawn (its
        `!` column says its role: `model/roles.py`)."""
        if (
            old is not None
            and new is not None
            and (old.acknowledged, old.writers, old.intruder)
            == (new.acknowledged, new.writers, new.intruder)
        ):
            return
        was, now = self._keys_of(old), self._keys_of(new)
        ident = (new or old).id  # type: ignore[union-attr]
        for key in was - now:
            self._involving.get(key, set()).discard(ident)
        for key in now - was:
            self._involving.setdefault(key, set()).add(ident)
        for key in was ^ now:
            ns = self.namespaces.get(key)
            if ns is not None and key not in delta.removals[view_of(ns)]:
                delta.upserts[view_of(ns)][ns.key] = ns

    def roles(self, key: str) -> tuple[Role, ...]:
        """What the lane `key` is to the open collisions: victim, intruder, shared."""
        ns = self.namespaces.get(key)
        if ns is None:
            return ()
        found = (self.incidents.get(iid) for iid in self._involving.get(key, ()))
        return roles_of(ns, [i for i in found if i is not None])

    def open_against(self, key: str) -> list[Incident]:
        """The open (unacknowledged) incidents whose victim is the namespace `key`."""
        found = (self.incidents.get(iid) for iid in self._against.get(key, ()))
        return [i for i in found if i is not None and not i.acknowledged]

    def _remove_ns(self, key: str, delta: Delta) -> None:
        old = self.namespaces.pop(key, None)
        if old is not None:
            view = view_of(old)
            self._counts[view] -= 1
            delta.removals[view].add(key)
            delta.upserts[view].pop(key, None)

    def rows(self, view: View) -> dict[str, Row]:
        if view is View.COLLISIONS:
            return {k: i for k, i in self.incidents.items() if not i.acknowledged}
        return {k: ns for k, ns in self.namespaces.items() if view_of(ns) is view}

    def counts(self) -> dict[View, int]:
        """Rows per view, kept up to date by `apply` (the header asks on every frame)."""
        return dict(self._counts)

    def row(self, view: View, key: str) -> Row | None:
        if view is View.COLLISIONS:
            return self.incidents.get(key)
        ns = self.namespaces.get(key)
        return ns if ns is not None and view_of(ns) is view else None

    def incidents_of(self, key: str) -> list[Incident]:
        """Incidents a namespace is part of (as victim, or listed in its incident ids)."""
        ns = self.namespaces.get(key)
        ids: Iterable[str] = ns.incident_ids if ns is not None else ()
        ids = [*ids, *self._involving.get(key, ())]  # and the open ones it wrote in
        found = {iid: self.incidents[iid] for iid in ids if iid in self.incidents}
        for iid, incident in self.incidents.items():
            if incident.victim == key:
                found[iid] = incident
        return sorted(found.values(), key=lambda i: i.first_seen)

    def victim_label(self, key: str | None) -> str:
        """A victim as every view names it: its lane, else its key; `–` for none (shared temp)."""
        return self.lane_of(key) or (key or "–")

    def lane_of(self, key: str | None) -> str | None:
        ns = self.namespaces.get(key) if key else None
        if ns is None:
            return None
        return ns.lane or ns.name
