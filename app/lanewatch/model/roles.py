"""What a lane is to the open collisions it is part of: the one `!` of the dashboard and of
`lanewatch status`. Pure.

A role is told by a glyph and a word, never by colour alone: `!` victim (a lane whose files
another wrote), `>` intruder (a lane that wrote into another's), `~` shared (a lane that wrote
one file in shared temp that another lane wrote too; no one is the victim there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from lanewatch.model.kinds import is_collision
from lanewatch.model.views import Incident, NamespaceView


class Role(Enum):
    """Each member's value is (glyph, word)."""

    VICTIM = ("!", "victim")
    INTRUDER = (">", "intruder")
    SHARED = ("~", "shared")

    def __init__(self, glyph: str, word: str) -> None:
        self.glyph = glyph
        self.word = word
        self.label = f"{glyph} {word}"  # glyph and word: "! victim"


ORDER = (Role.VICTIM, Role.INTRUDER, Role.SHARED)  # the worst first
LEGEND = "  ".join(role.label for role in ORDER)


def _names(entry: Mapping[str, Any], ns: NamespaceView) -> bool:
    """The writer `entry` (an intruder or a writer of the list) is the lane `ns`."""
    named = entry.get("namespace")
    if isinstance(named, str) and named:
        return named == ns.key
    lane = entry.get("lane")
    if not lane or lane != ns.lane:
        return False
    checkout = entry.get("checkout_id")
    return checkout is None or checkout == ns.checkout_id


def role_in(ns: NamespaceView, incident: Incident) -> Role | None:
    """What `ns` is to `incident` (open or not), if anything: nothing for a warning (a lane
    over its budget names itself, and is no one's victim)."""
    if not is_collision(incident.kind):
        return None
    if incident.victim is not None and incident.victim == ns.key:
        return Role.VICTIM
    writers = [incident.intruder, *incident.writers]
    if not any(_names(w, ns) for w in writers):
        return None
    if incident.victim is None:  # a shared file: written by lanes, no one's namespace
        return Role.SHARED
    return Role.INTRUDER


def roles_of(ns: NamespaceView, incidents: Iterable[Incident]) -> tuple[Role, ...]:
    """The roles of `ns` in the open (unacknowledged) `incidents`, the worst first."""
    found = {role_in(ns, i) for i in incidents if not i.acknowledged}
    return tuple(role for role in ORDER if role in found)


def roles_label(roles: Iterable[Role]) -> str:
    """ "! victim", "! victim > intruder", "" for none."""
    return " ".join(role.label for role in roles)
