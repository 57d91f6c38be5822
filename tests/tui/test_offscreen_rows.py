"""Rows off screen whose change is only activity (a write, a heartbeat, a reading) wait for their
cells until they can be seen (`main_rows.py`, `lane_table/_deferred.py`); everything else, and
every row on screen, is built in the drain that brings it. On a stand-in engine (fakes.py):
what is checked is which rows a drain builds and what the screen shows after, not timing.

`MainRows.catch_up` (rows that waited a second, built a few at a time) is switched off where a
test shows another path to the screen, so that path is what the test sees; the last test checks
the catch-up."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from textual.pilot import Pilot

from lanewatch.model.views import Changes, Incident, NamespaceView
from lanewatch.tui.app import LanewatchApp, make_app

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import screen_text, shows, until

SIZE = (220, 30)  # every Lanes column fits: FILES shows without a sideways scroll
LANES = [ns_view(f"l{i:03}") for i in range(200)]  # sorted by lane: l000 on top


@contextlib.asynccontextmanager
async def dashboard(
    catch_up: bool = False,
) -> AsyncIterator[tuple[LanewatchApp, FakeEngine, Pilot[None], list[set[str]]]]:
    """The dashboard on the 200 lanes, all in its table; the keys each drain builds from now
    (`track_builds`). Without `catch_up`, rows that wait are built only when seen or read."""
    engine = FakeEngine(LANES)
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 200)
        if not catch_up:
            app.main.rows.catch_up = lambda limit: None  # type: ignore[method-assign]
        yield app, engine, pilot, track_builds(app)


def written(view: NamespaceView, files: int) -> NamespaceView:
    """`view` after a write: only its activity moved."""
    return dataclasses.replace(
        view, files=files, bytes=view.bytes + 1, last_write=NOW, write_rate=(*view.write_rate, 9)
    )


def track_builds(app: LanewatchApp) -> list[set[str]]:
    """The keys each drain built, one set per drain (builds outside a drain are not counted)."""
    rows = app.main.rows
    drains: list[set[str]] = []
    apply, build = rows.apply, rows.build
    inside: list[set[str]] = []

    def counting_apply(delta):  # type: ignore[no-untyped-def]
        inside.append(set())
        try:
            apply(delta)
        finally:
            drains.append(inside.pop())

    def counting_build(view, row, now):  # type: ignore[no-untyped-def]
        if inside:
            inside[-1].add(row.id if isinstance(row, Incident) else row.key)
        return build(view, row, now)

    rows.apply = counting_apply  # type: ignore[method-assign]
    rows.build = counting_build  # type: ignore[method-assign]
    return drains


def push(engine: FakeEngine, *views: NamespaceView) -> None:
    engine.push(Changes(upserts={v.key: v for v in views}, at=NOW))


def row_line(app: LanewatchApp, lane: str) -> str:
    return next((line for line in screen_text(app).splitlines() if f" {lane} " in line), "")


async def test_a_write_off_screen_waits_and_shows_when_scrolled_to() -> None:
    async with dashboard() as (app, engine, pilot, drains):
        table = app.main.table()
        push(engine, written(LANES[1], 4321), written(LANES[150], 98765))
        await until(pilot, lambda: bool(drains))
        assert drains == [{LANES[1].key}]  # on screen: built; l150, far below: waits
        assert LANES[150].key in table.deferred.keys
        await shows(pilot, "4321")
        assert "98765" not in screen_text(app)

        # Scrolled into view, it shows what it became: the table builds it on the way.
        table.move_cursor(LANES[150].key)
        await until(pilot, lambda: "98765" in row_line(app, "l150"), what="l150's new files")
        assert LANES[150].key not in table.deferred.keys


async def test_a_change_that_is_not_activity_is_built_at_once() -> None:
    async with dashboard() as (app, engine, pilot, drains):
        moved = dataclasses.replace(LANES[160], pid=7777)  # a new owner, far off screen
        push(engine, moved)
        await until(pilot, lambda: bool(drains))
        assert drains == [{moved.key}]
        assert not app.main.table().deferred.keys
        app.main.table().move_cursor(moved.key)
        await until(pilot, lambda: "7777" in row_line(app, "l160"), what="l160's new pid")


async def test_a_write_that_comes_with_an_incident_is_built_at_once() -> None:
    """The incident makes the lane a victim (its `!` cell, its tone): nothing in the lane's
    own fields says so, so a drain that changes an incident builds every row it touched."""
    async with dashboard() as (app, engine, pilot, drains):
        hit = written(LANES[150], 777)
        engine.push(
            Changes(upserts={hit.key: hit}, incidents={"i1": incident("i1", hit.key)}, at=NOW)
        )
        await until(pilot, lambda: bool(drains))
        assert hit.key in drains[0]
        assert not app.main.table().deferred.keys


async def test_sorted_by_files_a_write_off_screen_moves_its_row_at_once() -> None:
    async with dashboard() as (app, engine, pilot, drains):
        table = app.main.table()
        table.sort_by("files", reverse=True)  # every lane has 12: ties keep l000 on top
        push(engine, written(LANES[170], 55555))
        await until(pilot, lambda: bool(drains))
        assert drains == [{LANES[170].key}]  # its place depends on the cell: built now
        assert table.visible_keys[0] == LANES[170].key
        await until(pilot, lambda: "55555" in row_line(app, "l170"), what="l170 on top")


async def test_rows_left_waiting_catch_up_once_they_have_waited_a_second() -> None:
    async with dashboard(catch_up=True) as (app, engine, pilot, drains):
        table = app.main.table()
        push(engine, *(written(LANES[i], 60000 + i) for i in range(100, 200)))
        await until(pilot, lambda: bool(drains))
        assert not drains[0]  # all of them off screen
        # Once they have waited a second, the age tick builds them (column widths follow);
        # reading a row would build it too, so the table's own rows are what is looked at.
        await until(pilot, lambda: not table.deferred.keys, 5.0, what="the catch-up")
        assert table.order.rows[LANES[199].key][table.order.column_index["files"]] == "60199"
