"""LaneTable: a change to cells nobody can see (a hidden column, one scrolled off to the side)
draws nothing; the cells are right once they come into view. Counted in lines drawn, not timed
(the age tick changes AGE, past 80 columns, on every row on screen each second)."""

from __future__ import annotations

from textual.pilot import Pilot

from lanewatch.tui.widgets.lane_table import Column, LaneTable
from tests.conftest import until

from .test_lane_table import Host, screen_lines

COLUMNS = (
    Column("name", "Lane"),
    Column("path", "Path", width=70),  # pushes "age" past the view's 60 columns
    Column("age", "Age", width=8, justify="right"),
)
SIZE = (60, 12)


def rows(count: int) -> dict[str, tuple[str, str, str]]:
    return {f"k{i}": (f"lane-{i:03}", f"/w/{i}", f"{i}s") for i in range(count)}


async def drawn(pilot: Pilot[None], table: LaneTable) -> None:
    await until(pilot, lambda: table.line_renders > 0, 5.0, interval=None)
    await pilot.pause()


async def test_a_change_to_a_column_scrolled_off_draws_nothing() -> None:
    app = Host(COLUMNS)
    async with app.run_test(size=SIZE) as pilot:
        table = app.table
        table.apply(rows(30))
        await drawn(pilot, table)
        lines = table.line_renders

        table.update_cells({f"k{i}": {"age": f"{i + 100}s"} for i in range(30)})
        await pilot.pause()
        await pilot.pause()
        assert table.line_renders == lines  # every changed cell is off to the right

        # A cell in view still repaints its line.
        table.update_cells({"k2": {"path": "/w/moved"}})
        await until(pilot, lambda: table.line_renders > lines, 5.0, interval=None)
        assert "/w/moved" in screen_lines(app)[3]

        # Scrolled to, the ages read what they became.
        table.scroll_to(x=table.max_scroll_x, animate=False)
        await until(pilot, lambda: "102s" in "\n".join(screen_lines(app)), 5.0, interval=None)


async def test_a_change_to_a_hidden_column_draws_nothing() -> None:
    app = Host(COLUMNS)
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.table
        table.apply(rows(30))
        table.set_hidden(["path"])
        await drawn(pilot, table)
        assert "3s" in screen_lines(app)[4]  # header, then k0..k3: age is in view
        table.set_hidden(["age"])
        await pilot.pause()
        lines = table.line_renders

        table.update_cells({"k3": {"age": "77s"}})
        await pilot.pause()
        await pilot.pause()
        assert table.line_renders == lines

        table.set_hidden([])
        await until(pilot, lambda: "77s" in screen_lines(app)[4], 5.0, interval=None)
