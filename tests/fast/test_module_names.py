"""Each module of `app/lanewatch/` has a name of its own: a file name says its job, and one name
in two rooms (`wire.py` here and there) makes a reader open the wrong one."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "app" / "lanewatch"
# Pairs not yet told apart, each with the rooms that hold it; a pair that is gone must leave
# this list too (the second test), so the list only shrinks.
KNOWN: dict[str, set[str]] = {}


def _twice() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            rooms[path.name].add(str(path.parent.relative_to(PACKAGE)))
    return {name: where for name, where in rooms.items() if len(where) > 1}


def test_no_module_name_is_used_twice() -> None:
    new = {name: sorted(where) for name, where in _twice().items() if name not in KNOWN}
    assert new == {}, "name the module by its job, so that the name is unique in app/lanewatch"


def test_the_known_pairs_still_exist() -> None:
    gone = sorted(name for name in KNOWN if name not in _twice())
    assert gone == [], "a pair told apart: remove it from KNOWN"
