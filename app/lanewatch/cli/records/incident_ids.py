"""An incident ID as a person types it: the whole ID, or any prefix of it or of its hash that
names one incident (as git and docker take a short commit or container id).

An ID is `<kind>-<12 hex digits>` (model/observation.py), so `cross-lane-write-85b` and `85b4`
both name `cross-lane-write-85b4…` when no other incident starts so. A prefix that names more
than one is a usage error (exit 2) listing them; none is not found (exit 8).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lanewatch.cli.common import fail
from lanewatch.cli.exits import Exit

SHOWN = 5  # candidates named in the message; "and N more" after


def matches(ids: Iterable[str], wanted: str) -> list[str]:
    """The IDs `wanted` names: itself if whole, else each ID it starts (or whose hash it starts)."""
    known = sorted(set(ids))
    if not wanted:
        return []
    if wanted in known:
        return [wanted]
    return [i for i in known if i.startswith(wanted) or i.rpartition("-")[2].startswith(wanted)]


def one(ids: Iterable[str], wanted: str, where: Sequence[str]) -> str:
    """The one ID `wanted` names, or exit: 8 when none, 2 when several (they are listed)."""
    found = matches(ids, wanted)
    if len(found) == 1:
        return found[0]
    if not found:
        fail(f"no incident {wanted!r} in {', '.join(where)}", Exit.NOT_FOUND)
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    names = ", ".join(found[:SHOWN])
    fail(f"{wanted!r} names {len(found)} incidents: {names}{more}; type more of it", Exit.USAGE)
