"""LaneTable: keyed updates, partial repaints, sort, filter, cursor by key, marks, safety."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.message import Message
from textual.pilot import Pilot

from lanewatch.tui.widgets.lane_table import (
    Column,
    LaneTable,
    duration_key,
    number_key,
    sparkline,
)
from tests.conftest import until

COLUMNS = (
    Column("name", "Lane"),
    Column("bytes", "Bytes", justify="right", sort_key=number_key),
    Column("age", "Age", width=8, justify="right", sort_key=duration_key),
)
SIZE = (60, 12)  # 12 lines: a header and 11 rows


def lanes(count: int, start: int = 0) -> dict[str, tuple[str, str, str]]:
    return {f"k{i}": (f"lane-{i:03}", f"{i} kB", f"{i}s") for i in range(start, start + count)}


class Host(App[None]):
    """The smallest app around a table; records the table's messages."""

    def __init__(self, columns: Iterable[Column] = COLUMNS) -> None:
        super().__init__()
        self.columns = tuple(columns)
        self.messages: list[Message] = []

    def compose(self) -> ComposeResult:
        yield LaneTable(self.columns, id="lanes")

    @property
    def table(self) -> LaneTable:
        return self.query_one(LaneTable)

    def record(self, message: Message) -> None:
        # The hook sees a bubbling message once per node it reaches: keep the first sighting.
        kinds = (
            LaneTable.RowHighlighted,
            LaneTable.RowSelected,
            LaneTable.MarksChanged,
            LaneTable.SortChanged,
        )
        if isinstance(message, kinds) and all(message is not m for m in self.messages):
            self.messages.append(message)


def screen_lines(app: App[None]) -> list[str]:
    """What the terminal shows now (the compositor's lines, repainted lines included)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def row_text(table: LaneTable, key: str) -> str:
    index = table.visible_keys.index(key)
    return table.render_line(index - table.scroll_offset.y + 1).text


def run(app: Host) -> AbstractAsyncContextManager[Pilot[None]]:
    return app.run_test(size=SIZE, message_hook=app.record)


@contextlib.asynccontextmanager
async def hosted(
    columns: Iterable[Column] = COLUMNS,
) -> AsyncIterator[tuple[Host, Pilot[None], LaneTable]]:
    """A `Host` running headless (`run`): the app, its pilot and its table."""
    app = Host(columns)
    async with run(app) as pilot:
        yield app, pilot, app.table


async def test_upsert_and_remove_by_key() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply(lanes(5))
        assert table.visible_keys == ("k0", "k1", "k2", "k3", "k4")
        table.apply({"k2": ("renamed", "2 kB", "2s"), "k9": ("new", "9 kB", "9s")}, ["k0"])
        assert table.visible_keys == ("k1", "k2", "k3", "k4", "k9")
        assert table.get_row("k2") == ("renamed", "2 kB", "2s")
        # A key both upserted and removed in one batch ends up removed.
        table.apply({"k7": ("x", "1", "1s")}, ["k7", "absent"])
        assert not table.has_row("k7")
        assert table.row_count == 5
        await pilot.pause()
        assert "renamed" in row_text(table, "k2")
        with pytest.raises(ValueError, match="cells"):
            table.apply({"bad": ("only one cell",)})


async def test_one_cell_change_rerenders_only_that_row() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(lanes(1000))
        table.sort_by("name")  # an active sort on another column must not cause a re-sort
        await until(pilot, lambda: table.line_renders > 0, 5.0, interval=None)
        await pilot.pause()
        rows_before, lines_before = table.row_renders, table.line_renders

        table.apply({"k5": ("lane-005", "5 kB", "99s")})
        await until(pilot, lambda: table.line_renders > lines_before, 5.0, interval=None)
        await pilot.pause()

        assert table.row_renders - rows_before == 1
        assert table.line_renders - lines_before == 1
        assert "99s" in screen_lines(app)[6]  # header, then k0..k5

        # A full repaint (focus, scroll, resize) reuses every row still cached.
        rows_before, lines_before = table.row_renders, table.line_renders
        table.refresh()
        await until(pilot, lambda: table.line_renders > lines_before, 5.0, interval=None)
        assert table.line_renders - lines_before == SIZE[1]
        assert table.row_renders == rows_before

        # A change to a row scrolled out of view renders nothing now.
        rows_before, lines_before = table.row_renders, table.line_renders
        table.apply({"k900": ("lane-900", "900 kB", "1s")})
        await pilot.pause()
        assert (table.row_renders, table.line_renders) == (rows_before, lines_before)

        # Resending identical rows is free.
        table.apply({key: table.get_row(key) or () for key in table.visible_keys})
        await pilot.pause()
        assert table.row_renders == rows_before


async def test_plain_strings_are_never_markup() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(
            {
                "a": ("[red]x", "[bold]1[/bold]", "1s"),
                "b": ("evil\x1b[2Jname\nnext", "2", "2s"),
                "c": (Text("styled", style="red"), "3", "3s"),
            }
        )
        table.move_cursor("c")  # the cursor's colours are not under test here
        await pilot.pause()
        first = table.render_line(1)
        assert "[red]x" in first.text and "[bold]1[/bold]" in first.text
        assert all(seg.style is None or seg.style.color is None for seg in first)
        second = table.render_line(2).text
        assert "\x1b" not in second and "\n" not in second
        assert "[2Jname next" in second
        styled = [seg for seg in table.render_line(3) if seg.text.startswith("styled")]
        assert styled and styled[0].style is not None and styled[0].style.color is not None
        assert any("[red]x" in line for line in screen_lines(app))


async def test_sort_numbers_durations_stable_and_reversible() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(
            {
                "a": ("a", "2 MB", "1h"),
                "b": ("b", "900 kB", "59m 59s"),
                "c": ("c", "2 MB", "850ms"),
                "d": ("d", "-", "2:00"),
                "e": ("e", "10", "-"),
            }
        )
        table.sort_by("bytes")
        assert table.visible_keys == ("e", "b", "a", "c", "d")  # ties keep insertion order
        table.sort_by("bytes", reverse=True)
        assert table.visible_keys == ("d", "a", "c", "b", "e")  # stable when reversed too
        table.sort_by("age")
        assert table.visible_keys == ("c", "d", "b", "a", "e")
        await pilot.pause()
        assert "Age ▲" in table.render_line(0).text
        # A change of the sort column moves the row; the cursor follows its key.
        assert table.move_cursor("c")
        table.apply({"c": ("c", "2 MB", "3h")})
        assert table.visible_keys == ("d", "b", "a", "c", "e")
        assert table.cursor_key == "c"
        table.sort_by(None)
        assert table.visible_keys == ("a", "b", "c", "d", "e")
        await pilot.pause()
        sorts = [m for m in app.messages if isinstance(m, LaneTable.SortChanged)]
        assert [(m.column, m.reverse) for m in sorts][-2:] == [("age", False), (None, False)]


async def test_header_click_sorts_and_toggles() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply({"a": ("b", "1", "1s"), "b": ("a", "2", "2s")})
        await pilot.pause()
        await pilot.click(LaneTable, offset=(2, 0))
        assert (table.sort_column, table.sort_reverse) == ("name", False)
        assert table.visible_keys == ("b", "a")
        await pilot.click(LaneTable, offset=(2, 0))
        assert (table.sort_column, table.sort_reverse) == ("name", True)
        assert table.visible_keys == ("a", "b")


async def test_filter_keeps_cursor_and_marks() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply(
            {
                "a": ("Alpha", "1", "1s"),
                "b": ("beta", "2", "2s"),
                "c": ("GAMMA", "3", "3s"),
                "d": ("alphabet", "4", "4s"),
            }
        )
        table.focus()
        await pilot.pause()
        await pilot.press("down", "space", "down")  # mark b, cursor on c
        assert table.cursor_key == "c" and table.marked == {"b"}

        table.set_filter("ALPHA")
        assert table.visible_keys == ("a", "d")
        assert table.filter_text == "ALPHA"
        assert table.cursor_key == "d"  # c is hidden: its next shown neighbour
        assert table.marked == {"b"}  # hidden rows stay marked

        table.set_filter("")
        assert table.cursor_key == "c"  # back to the row the user chose

        assert table.row_keys == ("a", "b", "c", "d")
        table.set_filter("a", columns=["bytes"])
        assert table.row_keys == ("a", "b", "c", "d")
        assert table.visible_keys == ()
        assert table.cursor_key is None
        table.set_filter("m", columns=["name"])
        assert table.visible_keys == ("c",)
        # A row changing so it matches (or stops matching) shows up (or leaves) at once.
        table.apply({"b": ("bmx", "2", "2s")})
        assert table.visible_keys == ("b", "c")
        table.apply({"b": ("beta", "2", "2s")})
        assert table.visible_keys == ("c",)


async def test_cursor_follows_key_and_falls_to_neighbour() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(lanes(6))
        table.focus()
        await pilot.pause()
        assert table.cursor_key == "k0"
        await pilot.press("down", "down")
        assert table.cursor_key == "k2"

        table.sort_by("bytes", reverse=True)  # k2 moves to index 3
        assert table.cursor_key == "k2" and table.cursor_index == 3
        table.apply(lanes(3, start=10))  # inserts above it
        assert table.cursor_key == "k2" and table.cursor_index == 6

        table.apply(removals=["k2"])  # the row shown after it takes its place
        assert table.cursor_key == "k1"
        table.sort_by(None)
        await pilot.press("end")
        assert table.cursor_key == "k12"
        table.apply(removals=["k12"])  # the last row: the one before it
        assert table.cursor_key == "k11"
        table.apply(removals=list(table.visible_keys))
        assert table.cursor_key is None
        await pilot.pause()
        highlighted = [m.key for m in app.messages if isinstance(m, LaneTable.RowHighlighted)]
        assert highlighted[-3:] == ["k12", "k11", None]


async def test_keyboard_and_mouse_navigation() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(lanes(100))
        table.focus()
        await pilot.pause()
        await pilot.press("pagedown")
        assert table.cursor_index == 11
        await pilot.press("end")
        assert table.cursor_key == "k99"
        await until(pilot, lambda: table.scroll_offset.y == 100 - 11, 5.0, interval=None)
        await pilot.press("home", "down", "down", "up")
        assert table.cursor_key == "k1"
        await pilot.press("pagedown")
        assert table.cursor_key == "k12"
        await pilot.press("pageup", "pageup")
        assert table.cursor_key == "k0"
        await pilot.press("enter")
        await pilot.click(LaneTable, offset=(3, 4))  # line 4 shows row 3
        assert table.cursor_key == "k3"
        await pilot.click(LaneTable, offset=(3, 4))  # a click on the highlighted row selects
        await pilot.pause()
        selected = [m.key for m in app.messages if isinstance(m, LaneTable.RowSelected)]
        assert selected == ["k0", "k3"]
        assert all(m.control is table for m in app.messages)


async def test_new_rows_do_not_yank_a_view_scrolled_away() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply(lanes(100))
        table.focus()
        await pilot.pause()
        table.scroll_to(y=50, animate=False)
        await until(pilot, lambda: table.scroll_offset.y == 50, 5.0, interval=None)
        table.apply(lanes(1, start=200))
        await pilot.pause()
        assert table.scroll_offset.y == 50 and table.cursor_key == "k0"
        await pilot.press("down")  # the keyboard brings the cursor back into view
        assert table.cursor_key == "k1"
        await until(pilot, lambda: table.scroll_offset.y == 1, 5.0, interval=None)


async def test_marks_are_keys_and_drop_with_their_rows() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(lanes(4))
        table.focus()
        await pilot.pause()
        await pilot.press("space", "down", "down", "space")
        assert table.marked == {"k0", "k2"}
        table.sort_by("bytes", reverse=True)
        assert table.marked == {"k0", "k2"}
        await pilot.press("space")  # the cursor is still on k2
        assert table.marked == {"k0"}
        table.set_marks(["k1", "k3", "nope"])
        assert table.marked == {"k1", "k3"}
        table.apply(removals=["k3"])
        assert table.marked == {"k1"}
        await pilot.pause()
        changes = [m.marked for m in app.messages if isinstance(m, LaneTable.MarksChanged)]
        assert changes[-1] == {"k1"}
        assert len(changes) == 5


async def test_auto_width_grows_shrinks_and_fixed_truncates() -> None:
    columns = (Column("name", "N", min_width=4), Column("path", "P", width=6))
    async with hosted(columns) as (_app, pilot, table):
        table.apply({"a": ("ab", "/short"), "b": ("a-much-longer-name", "/a/long/path")})
        await pilot.pause()
        assert table.render_line(2).text.startswith(" a-much-longer-name  /a/lo… ")
        table.apply(removals=["b"])
        await pilot.pause()
        assert table.render_line(1).text.startswith(" ab    /short ")


async def test_zebra_rows_take_their_component_style() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply(lanes(4))
        await pilot.pause()
        plain_row = table.render_line(3)
        table.zebra_stripes = True
        await pilot.pause()
        even, odd = table.render_line(3), table.render_line(4)  # rows 2 and 3
        assert even.text == plain_row.text
        first_even, first_odd = next(iter(even)), next(iter(odd))
        assert first_even.style is not None and first_even.style.bgcolor is not None
        assert first_odd.style is None or first_odd.style.bgcolor is None


def test_sparkline() -> None:
    assert sparkline([0, 1, 2, 4, 8]) == " ▁▂▄█"
    assert sparkline([5, 5, 5]) == "███"
    assert sparkline([]) == ""
    assert sparkline([1, 8], width=4) == "  ▁█"
    assert sparkline(range(10), width=3) == "▆▇█"
    assert sparkline([0.01, 100]) == "▁█"  # a trickle still shows
    assert sparkline([float("nan"), 1]) == " █"


def test_sort_keys() -> None:
    sizes = ["1 GiB", "2 MB", "10", "-", "1.5 kB", Text("900 B")]
    assert sorted(sizes, key=number_key) == ["10", Text("900 B"), "1.5 kB", "2 MB", "1 GiB", "-"]
    durations = ["1h2m", "61m", "850ms", "3.5s", "01:00:00", "2:05", "5 min", "never"]
    assert sorted(durations, key=duration_key) == [
        "850ms",
        "3.5s",
        "2:05",
        "5 min",
        "01:00:00",
        "61m",
        "1h2m",
        "never",
    ]


async def test_update_cells_replaces_only_the_cells_given() -> None:
    async with hosted() as (app, pilot, table):
        table.apply(lanes(30))
        table.sort_by("name")
        await until(pilot, lambda: table.line_renders > 0, 5.0, interval=None)
        await pilot.pause()
        rows_before, lines_before = table.row_renders, table.line_renders

        # The age tick: one cell of a row on screen; a key without a row is ignored.
        table.update_cells({"k3": {"age": "77s"}, "gone": {"age": "1s"}})
        await until(pilot, lambda: table.line_renders > lines_before, 5.0, interval=None)
        await pilot.pause()
        assert table.get_row("k3") == ("lane-003", "3 kB", "77s")
        assert not table.has_row("gone")
        assert (table.row_renders - rows_before, table.line_renders - lines_before) == (1, 1)
        assert "77s" in screen_lines(app)[4]  # header, then k0..k3

        # The same text again: nothing to draw.
        rows_before = table.row_renders
        table.update_cells({"k3": {"age": "77s"}})
        await pilot.pause()
        assert table.row_renders == rows_before

        # A cell of the sort column re-sorts; one of the filter's columns re-filters.
        table.update_cells({"k0": {"name": "zz-last"}})
        assert table.visible_keys[-1] == "k0"
        table.set_filter("77s", ["age"])
        assert table.visible_keys == ("k3",)
        table.update_cells({"k4": {"age": "77s"}, "k3": {"age": "78s"}})
        assert table.visible_keys == ("k4",)
        table.set_filter("")

        # An auto-width column follows its widest cell, growing and shrinking.
        width = table.virtual_size.width
        table.update_cells({"k5": {"bytes": "123456789 kB"}})
        assert table.virtual_size.width == width + len("123456789 kB") - len("Bytes ▲")
        table.update_cells({"k5": {"bytes": "5 kB"}})
        assert table.virtual_size.width == width
        await pilot.pause()
        assert "123456789" not in "\n".join(screen_lines(app))


async def test_ages_moving_on_together_keep_a_sort_on_them_without_a_full_repaint() -> None:
    async with hosted() as (_app, pilot, table):
        table.apply({f"k{i}": (f"lane-{i:03}", "1 kB", f"{10 * i}s") for i in range(30)})
        table.sort_by("age", reverse=True)
        order = table.visible_keys
        assert order[0] == "k29"
        await until(pilot, lambda: table.line_renders > 0, 5.0, interval=None)
        await pilot.pause()

        # A tick: every age one second on. The order holds; only the changed lines redraw.
        lines_before = table.line_renders
        table.update_cells({f"k{i}": {"age": f"{10 * i + 1}s"} for i in range(30)})
        await until(pilot, lambda: table.line_renders > lines_before, 5.0, interval=None)
        await pilot.pause()
        assert table.visible_keys == order
        assert table.line_renders - lines_before == SIZE[1] - 1  # the rows shown, no header

        # An age that passes its neighbour's moves the row.
        table.update_cells({"k0": {"age": "999s"}})
        assert table.visible_keys[0] == "k0"
        # A tie sorts as a fresh sort would: by insertion (k3 before k4).
        table.update_cells({"k4": {"age": "31s"}})
        keys = table.visible_keys
        assert keys.index("k3") < keys.index("k4")
        table.update_cells({"k3": {"age": "999s"}, "k0": {"age": "1s"}})
        assert table.visible_keys[0] == "k3" and table.visible_keys[-1] == "k0"
