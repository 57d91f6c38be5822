"""States at a glance and the k9s / htop habits, on the stand-in engine (tests/tui/fakes.py):
row tones by severity and the victim's `!`, field filters, `g` / `G`, hiding and scrolling
columns, one help row per key, the palette's own commands first, the header's "3 of 12", and a
word when a key does not apply. Kill signals against real lanes: test_kill_signals.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import SelectionList

from lanewatch.model.kinds import Severity
from lanewatch.model.states import STATES, state_severity
from lanewatch.model.views import NsState
from lanewatch.tui.app import LanewatchApp, make_app, theme_for
from lanewatch.tui.screens.column_pick import ColumnPick
from lanewatch.tui.screens.help_screen import HelpScreen
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets.lane_table._table import MARK_GLYPH
from lanewatch.tui.widgets.view_columns import row_tone

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import screen_text, settle, shows, until


def app_with(*views, incidents=()) -> LanewatchApp:  # type: ignore[no-untyped-def]
    return make_app([Path("/roots/r1")], engine=FakeEngine(views, incidents), clock=lambda: NOW)


def lanes() -> LanewatchApp:
    return app_with(
        ns_view("agent-1"),
        ns_view("agent-2"),
        ns_view("agent-3", NsState.HUNG, reason="heartbeat 31s overdue"),
        ns_view("worker-7", NsState.UNKNOWN, grade="inferred"),
        ns_view("old", NsState.STALE, reason="pid 1 gone"),
        ns_view("done", NsState.RELEASED, reason="released by its owner (exit code 0)"),
        incidents=[
            incident("takeover-1", "/roots/r1/agent-1"),
            incident("refused-2", "/roots/r1/agent-2", kind="refused-claim", acknowledged=True),
        ],
    )


async def loaded(pilot, app: LanewatchApp, rows: int) -> None:  # type: ignore[no-untyped-def]
    await until(pilot, lambda: app.main.table().row_count == rows, what=f"{rows} rows")
    await settle(pilot)


def key(name: str) -> str:
    return f"/roots/r1/{name}"


async def test_rows_take_the_tone_of_their_state_or_of_the_worst_open_incident() -> None:
    app = lanes()
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot, app, 4)
        table = app.main.table()
        assert table.tones.get(key("agent-2")) is None, "live, only an acknowledged incident"
        assert table.tones.get(key("agent-3")) == "high", "hung"
        assert table.tones.get(key("agent-1")) == "high", "victim of an open takeover"
        assert table.tones.get(key("worker-7")) == "medium", "could not tell"
        stale = app.main.table(View.STALE)
        assert stale.tones.get(key("old")) == "medium" and stale.tones.get(key("done")) == "low"
        # The victim's marker, in its own column; none for the acknowledged one.
        assert str(table.get_row(key("agent-1"))[0]) == "!"
        assert str(table.get_row(key("agent-2"))[0]) == ""
        # The tone is drawn: the victim's lane name is styled, the live one's is not.
        lines = {y: table.render_line(y) for y in range(1, 5)}
        by_lane = {
            next(s.text.strip() for s in strip if "agent" in s.text or "worker" in s.text): strip
            for strip in lines.values()
        }
        victim = next(s for s in by_lane["agent-1"] if "agent-1" in s.text)
        live = next(s for s in by_lane["agent-2"] if "agent-2" in s.text)
        assert victim.style is not None and victim.style.bold
        assert not (live.style and live.style.bold)

        # Acknowledged: the marker and the tone go (the victim row is redrawn).
        app.engine.push(_changes(app, incident("takeover-1", key("agent-1"), acknowledged=True)))
        await until(pilot, lambda: table.tones.get(key("agent-1")) is None, what="tone gone")
        assert str(table.get_row(key("agent-1"))[0]) == ""


def _changes(app: LanewatchApp, *incidents):  # type: ignore[no-untyped-def]
    from lanewatch.model.views import Changes

    return Changes(incidents={i.id: i for i in incidents}, at=NOW)


def test_every_state_has_a_severity_and_a_new_one_is_never_fine() -> None:
    assert {s.value for s in NsState} == set(STATES)
    assert state_severity(NsState.LIVE) is None and state_severity(NsState.HUNG) is Severity.HIGH
    assert state_severity("runner-gone") is Severity.MEDIUM, "unlisted: shown, not hidden"
    hung = ns_view("x", NsState.HUNG)
    assert row_tone(hung) == "high"
    assert row_tone(ns_view("y", NsState.RELEASED), [incident("i", key("y"))]) == "high"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("state:hung", {"agent-3"}),
        ("lane:agent*", {"agent-1", "agent-2", "agent-3"}),
        ("!state:live", {"agent-3", "worker-7"}),
        ("lane:agent* !state:hung", {"agent-1", "agent-2"}),
        ("!agent", {"worker-7"}),
        ("STATE:UNKNOWN", {"worker-7"}),
        ("worker", {"worker-7"}),  # plain text, as before
        ("nope:agent", set()),  # no such column: plain text, found nowhere
    ],
)
async def test_field_filters(text: str, shown: set[str]) -> None:
    app = lanes()
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot, app, 4)
        await pilot.press("slash")
        for char in text:
            await pilot.press(char if char != " " else "space")
        await pilot.press("enter")
        table = app.main.table()
        await until(pilot, lambda: table.filter_text == text, what="filter set")
        assert {k.rsplit("/", 1)[1] for k in table.visible_keys} == shown
        # The header says how many of how many.
        assert f"Lanes {len(shown)} of 4" in screen_text(app)


async def test_g_and_G_go_to_the_first_and_last_row() -> None:
    app = lanes()
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot, app, 4)
        table = app.main.table()
        await pilot.press("G")
        assert table.cursor_key == table.visible_keys[-1]
        await pilot.press("g")
        assert table.cursor_key == table.visible_keys[0]


async def test_columns_hide_show_and_scroll_by_column() -> None:
    app = lanes()
    async with app.run_test(size=(60, 30)) as pilot:
        await loaded(pilot, app, 4)
        table = app.main.table()
        assert "CHECKOUT" in screen_text(app)
        await pilot.press("C")
        await until(pilot, lambda: isinstance(app.screen, ColumnPick), what="column picker")
        picker = app.screen.query_one(SelectionList)
        index = [c.key for c in table.columns].index("checkout")
        picker.highlighted = index
        await pilot.press("space")
        await until(pilot, lambda: "checkout" in table.hidden_columns, what="hidden")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        await until(pilot, lambda: "CHECKOUT" not in screen_text(app), what="column gone")
        assert table.hidden_columns == {"checkout"}
        # Scroll sideways a column at a time (the table is wider than 60 columns).
        assert table.scroll_offset.x == 0
        await pilot.press("right")
        first = table.scroll_offset.x
        assert first > 0
        await pilot.press("right")
        assert table.scroll_offset.x > first
        await pilot.press("left")
        assert table.scroll_offset.x == first
        await pilot.press("left")
        assert table.scroll_offset.x == 0


async def test_help_has_one_row_per_key() -> None:
    app = lanes()
    async with app.run_test(size=(100, 80)) as pilot:
        await loaded(pilot, app, 4)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = await shows(pilot, "Follow / Unfollow")
        assert "Pause / Resume" in text
        assert text.count("Unfollow") == 1 and text.count("Resume") == 1
        rows = [line.replace("█", " ").split() for line in text.splitlines()]
        assert [r[:1] for r in rows].count(["f"]) == 1, "f has one row"
        assert ["home", "g", "First", "row"] in rows


def prompts(palette: CommandPalette) -> list[str]:
    found = palette.query_one(CommandList)
    return [str(found.get_option_at_index(i).prompt) for i in range(found.option_count)]


async def test_palette_lists_the_dashboards_commands_first() -> None:
    app = lanes()
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 4)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette")
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        await until(
            pilot, lambda: any("theme" in p.lower() for p in prompts(palette)), what="listed"
        )
        listed = prompts(palette)
        ours = [i for i, p in enumerate(listed) if p.startswith(("Show ", "Sort by", "Pause"))]
        theirs = [
            i
            for i, p in enumerate(listed)
            if p.lower().startswith(
                ("theme", "change theme", "maximize", "screenshot", "save screenshot")
            )
        ]
        assert ours and theirs and max(ours) < min(theirs), listed
        assert any(p.startswith("Sort by state") for p in listed)
        assert any(p.startswith("Hide or show columns") for p in listed)
        await pilot.press("escape")


async def test_keys_that_do_not_apply_say_why() -> None:
    app = lanes()
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot, app, 4)
        table = app.main.table()
        table.move_cursor(key("agent-2"))  # on another host ("host-a"): not killable here
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: any("host-a" in n.message for n in app.notices.notices))
        await settle(pilot)
        await pilot.press("c")
        await until(pilot, lambda: any("Stale view" in n.message for n in app.notices.notices))
        table.move_cursor(key("agent-3"))  # no incident
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: any("No incident" in n.message for n in app.notices.notices))
        assert app.screen is app.main


def test_sixteen_colour_terminals_get_the_ansi_theme() -> None:
    """In 16 colours the default theme's error colour comes out grey (seen with TERM=xterm):
    the ANSI theme keeps red red. Textual reads the colour system once, at import, so this
    checks the choice; the tmux run with TERM=xterm is in the report."""
    assert theme_for("standard") == "ansi-dark" and theme_for("windows") == "ansi-dark"
    assert theme_for("truecolor") is None and theme_for("256") is None


@pytest.mark.parametrize("size", [(200, 50), (120, 30)])
async def test_the_reason_takes_the_rest_of_a_wide_view(size: tuple[int, int]) -> None:
    """WHY was cut at 30 cells ("released by its owner (exit c…") even at 200 columns."""
    app = lanes()
    async with app.run_test(size=size) as pilot:
        await loaded(pilot, app, 4)
        await pilot.press("3")
        await shows(pilot, "released by its owner (exit code 0)")
        table = app.main.table()
        header = screen_text(app).splitlines()[1]
        assert all(label in header for label in ("STATE", "LANE", "SINCE", "DISK", "WHY"))
        assert table.scroll_offset.x == 0


async def test_the_ack_dialog_names_a_missing_victim_as_the_table_does() -> None:
    """A shared-file incident has no victim: the table says "–", and so does the dialog (it
    said "victim ?"); cancelling it acknowledges nothing."""
    shared = incident("shared-file-1", None, kind="shared-file", intruder={"lane": "fuzz"})
    engine = FakeEngine([ns_view("fuzz")], [shared])
    app = make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("a")
        text = await shows(pilot, "Acknowledge 1 incident?", "shared-file-1  victim –")
        assert "victim ?" not in text
        await settle(pilot)
        await pilot.press("n")
        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        assert engine.acknowledged == []


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_marked_row_shows_a_glyph_not_colour_alone(size: tuple[int, int]) -> None:
    """`space` marks the cursor row: a glyph at its left edge says so (bold and colour alone
    are lost without colour); unmarked, it goes."""
    app = lanes()
    async with app.run_test(size=size) as pilot:
        await loaded(pilot, app, 4)
        table = app.main.table()
        lane = table.cursor_key
        assert lane is not None
        name = str(lane).rsplit("/", 1)[-1]
        assert MARK_GLYPH not in screen_text(app)

        def marked_lines() -> list[str]:
            return [line for line in screen_text(app).splitlines() if MARK_GLYPH in line]

        await pilot.press("space")
        await until(pilot, lambda: lane in table.marked, what="marked")
        await until(pilot, lambda: len(marked_lines()) == 1, what="one row with the glyph")
        line = marked_lines()[0]
        assert name in line and line.index(MARK_GLYPH) < line.index(name), line
        await pilot.press("space")
        await until(pilot, lambda: lane not in table.marked, what="unmarked")
        await until(pilot, lambda: not marked_lines(), what="the glyph gone")
