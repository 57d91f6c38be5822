"""`Engine.snapshot`'s picture is kept by merging each delivery in place; it must equal what
`merge_changes` gives over the same deliveries (the contract's definition of merging)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lanewatch.engine.engine import _Picture
from lanewatch.model.views import Changes, SourceHealth, merge_changes

KEYS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def deliveries(draw: st.DrawFn) -> Changes:
    # Stand-ins for views and incidents: the merge only moves them by key.
    upserts: dict[str, Any] = draw(st.dictionaries(KEYS, st.integers(0, 9), max_size=3))
    incidents: dict[str, Any] = draw(st.dictionaries(KEYS, st.integers(0, 9), max_size=2))
    health = draw(st.sampled_from([(), (SourceHealth("/r", "ok", "inotify"),)]))
    return Changes(
        upserts=MappingProxyType(upserts),
        removed=frozenset(draw(st.sets(KEYS, max_size=2))),
        incidents=MappingProxyType(incidents),
        health=health,
        full=draw(st.booleans()),
        at=draw(st.floats(0, 1e6)),
        attribution=draw(st.sampled_from([None, "kernel", "inferred"])),
        attribution_hint=draw(st.sampled_from(["", "why"])),
    )


@given(st.lists(deliveries(), min_size=1, max_size=8))
def test_the_picture_merged_in_place_equals_merge_changes(seq: list[Changes]) -> None:
    picture = _Picture()
    want: Changes | None = None
    for changes in seq:
        picture.add(changes)
        want = changes if want is None or changes.full else merge_changes(want, changes)
        got = picture.changes()
        assert got is not None
        assert dict(got.upserts) == dict(want.upserts)
        assert got.removed == want.removed and dict(got.incidents) == dict(want.incidents)
        assert (got.health, got.full, got.at) == (want.health, want.full, want.at)
        assert (got.attribution, got.attribution_hint) == (want.attribution, want.attribution_hint)


def test_an_empty_picture_is_none_and_a_made_picture_is_not_changed_by_later_deliveries() -> None:
    picture = _Picture()
    assert picture.changes() is None
    a: dict[str, Any] = {"a": 1}
    b: dict[str, Any] = {"b": 2}
    picture.add(Changes(upserts=MappingProxyType(a), full=True))
    first = picture.changes()
    picture.add(Changes(upserts=MappingProxyType(b)))
    assert first is not None and dict(first.upserts) == {"a": 1}
    later = picture.changes()
    assert later is not None and dict(later.upserts) == {"a": 1, "b": 2} and later.full
