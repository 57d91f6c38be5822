"""At 80 columns each view shows the columns a user scans for without scrolling sideways, even
with long names, 7-digit pids and the widest states; the rest of the row follows to the right.
Rendered by the real app on the stand-in engine (fixed rows: this is about layout only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lanewatch.model.views import Footprint, NamespaceView, NsState
from lanewatch.tui.app import make_app
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets.spark_cells import WIDTH as SPARK_WIDTH
from lanewatch.tui.widgets.view_columns import (
    ACTIVITY,
    COLLISIONS,
    COLUMNS,
    LANES,
    STALE,
    lanes_row,
    stale_row,
)

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import screen_text, until

LONG = "a-very-long-lane-name-from-a-generator-0042"
WIDE_STATES = [NsState.LIVE, NsState.HUNG, NsState.UNKNOWN]


def crowded() -> FakeEngine:
    """More rows than fit (a vertical scrollbar takes its column) with the widest values."""
    views = [
        ns_view(
            f"{LONG}-{n}",
            WIDE_STATES[n % 3],
            grade="inferred",  # "unknown?"
            pid=4_194_000 + n,
            checkout_id="a-long-checkout-folder-name-0123456789ab",
            host="build-host-with-a-long-name",
            started_at=NOW - 86400 * 12 - 3600 * 23,
            heartbeat_at=NOW - 3600 * 23 - 59 * 60,
            last_write=NOW - 3600 * 23 - 58 * 60,
            files=1_234_567,
            bytes=987_000_000_000,
            allocated=999_000_000_000,
        )
        for n in range(30)
    ]
    views += [
        ns_view(
            f"{LONG}-stale-{n}",
            NsState.RELEASED if n % 2 else NsState.ORPHAN,
            reason="no valid stamp: not JSON: Expecting value: line 1 column 1 (char 0)",
            released_at=NOW - 86400 * 12 - 3600 * 23,
            bytes=987_000_000_000,
            allocated=999_000_000_000,
        )
        for n in range(30)
    ]
    incidents = [
        incident(
            f"foreign-receipt-{n:012x}",
            f"/roots/r1/{LONG}-{n}",
            kind="foreign-receipt",
            intruder={"lane": f"{LONG}-x", "pid": 4_194_303},
            grade="inferred",
            count=12345,
            first_seen=NOW - 86400 * 12 - 3600 * 23,
            last_seen=NOW - 3600 * 23,
        )
        for n in range(30)
    ]
    return FakeEngine(views, incidents)


def header(text: str, first: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith(first))


@pytest.mark.parametrize(
    ("key", "first", "shown", "columns"),
    [
        ("1", "!", ["STATE", "LANE", "CHECKOUT", "PID", "BEAT", "WRITE", "W/S"], LANES),
        ("2", "KIND", ["VICTIM", "INTRUDER", "FIRST", "LAST"], COLLISIONS),
        ("3", "STATE", ["LANE", "WHY", "SINCE", "DISK"], STALE),
    ],
)
async def test_the_columns_that_matter_fit_in_80_columns(
    key: str, first: str, shown: list[str], columns: tuple[object, ...]
) -> None:
    app = make_app([Path("/roots/r1")], engine=crowded(), clock=lambda: NOW)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        await pilot.press(key)
        await until(pilot, lambda: app.main.table().row_count >= 30, what="rows")
        await pilot.pause()
        table = app.main.table()
        assert table.scrollable_content_region.width < 80, "the vertical scrollbar is there"
        line = header(screen_text(app), first)
        for label in shown:
            assert label in line, (label, line)
        if "W/S" in shown:  # left-aligned and fixed: the whole sparkline must be on screen
            assert line.index("W/S") + SPARK_WIDTH <= table.scrollable_content_region.width
        # Long names end in an ellipsis instead of pushing the rest off screen.
        assert "…" in screen_text(app)
        assert len(columns) > len(shown) + 1, "the rest of the row is still there, to the right"


def test_a_beat_on_time_says_ok_and_costs_no_redraw_until_it_is_late() -> None:
    """A live owner's beat younger than two of its intervals reads "ok": the passing of seconds
    changes nothing on its row until the beat is late (an idle dashboard redrew every row on
    screen once a second to count 0s..4s). A late beat, and any other state's, counts."""
    from lanewatch.tui.state.dashboard_store import View
    from lanewatch.tui.widgets.view_columns import BEAT_OK, age_cells, ages_change_at

    fresh = ns_view(
        "a", heartbeat_at=NOW - 2, heartbeat_interval=5.0, last_write=None, started_at=NOW - 7200
    )
    assert age_cells(View.LANES, fresh, NOW)["beat"] == BEAT_OK
    # Nothing on the row changes before the beat is 10 s old (two intervals).
    assert ages_change_at(View.LANES, fresh, NOW) == NOW - 2 + 10.0
    assert age_cells(View.LANES, fresh, NOW + 7.9)["beat"] == BEAT_OK
    assert age_cells(View.LANES, fresh, NOW + 8.0)["beat"] == "10s"  # late: counted
    assert ages_change_at(View.LANES, fresh, NOW + 8.0) == NOW - 2 + 11.0
    hung = ns_view("b", NsState.HUNG, heartbeat_at=NOW - 2, heartbeat_interval=5.0)
    assert age_cells(View.LANES, hung, NOW)["beat"] == "2s"
    unknown_interval = ns_view("c", heartbeat_at=NOW - 2, heartbeat_interval=None)
    assert age_cells(View.LANES, unknown_interval, NOW)["beat"] == "2s"


# What each activity field becomes, for the test below: a value unlike `ns_view`'s.
ACTIVITY_VALUES = {
    "last_write": NOW - 50,
    "heartbeat_at": NOW - 40,
    "write_rate": (9, 9, 9),
    "allocated": 10**9,
    "disk_growth": 5000.0,
    "bytes": 10**8,
    "files": 99_999,
    "footprint": Footprint(NOW, 75.0, 2.0, 300 * 2**20, 2, "rules"),
    "cpu_history": (50, 60),
    "cpu_quiet_since": NOW - 3600,
}


@pytest.mark.parametrize("view", sorted(ACTIVITY, key=lambda v: v.value))
def test_an_activity_field_changes_only_the_columns_it_names(view: View) -> None:
    """`view_columns.ACTIVITY` lets a row off screen wait when only these fields changed,
    unless the table sorts by one of the columns named (`main_rows.py`). A field that changed
    another column would leave that column wrong, or a row out of order, until the row is
    seen: so each field, changed alone, changes no column but those it names."""
    names = {f.name for f in dataclasses.fields(NamespaceView)}
    assert set(ACTIVITY[view]) <= names
    assert set(ACTIVITY[view]) == set(ACTIVITY_VALUES)
    # Footprint readings show for a lane whose CPU has been quiet with memory held ("idle").
    base = ns_view("a", footprint=Footprint(NOW, 0.0, 2.0, 2**20, 1, "rules"))
    keys = [c.key for c in COLUMNS[view]]
    build = lanes_row if view is View.LANES else stale_row
    before = build(base, NOW)
    for field, columns in ACTIVITY[view].items():
        after = build(dataclasses.replace(base, **{field: ACTIVITY_VALUES[field]}), NOW)
        changed = {keys[i] for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}
        assert changed <= set(columns), f"{field} changed {changed - set(columns)}"
