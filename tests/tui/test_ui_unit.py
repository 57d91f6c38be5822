"""Pure-UI unit tests on a stand-in engine (tests/tui/fakes.py): rendering of untrusted text,
greying of actions, help and palette contents, pause and per-frame coalescing. Behaviour against
real lanes is tested with the real engine in test_live.py and test_actions.py."""

from __future__ import annotations

import re
from pathlib import Path

from textual.binding import Binding

from lanewatch.linux.procid import hostname
from lanewatch.model.views import Changes, NsState
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.screens.help_screen import HelpScreen, key_display
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.shell.palette import entries
from lanewatch.tui.state.dashboard_store import View

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import plain, screen_text, settle, shows, until

DOCS = Path(__file__).resolve().parents[2] / "docs" / "keys.md"


def app_with(*views, incidents=()) -> tuple[LanewatchApp, FakeEngine]:
    engine = FakeEngine(views, incidents)
    return make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW), engine


async def test_markup_in_lane_names_is_shown_as_typed() -> None:
    app, _ = app_with(ns_view("[red]x[/red]", command=("[bold]rm", "-rf")))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        await pilot.pause()
        text = await shows(pilot, "[red]x[/red]", "[bold]rm -rf")
        assert "[red]x[/red]" in text
        assert "[bold]rm -rf" in text


async def test_kill_greyed_for_a_remote_owner_and_hidden_outside_lanes() -> None:
    app, _ = app_with(
        ns_view("remote"), ns_view("old", NsState.STALE, reason="pid 1 gone", host=hostname())
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        main = app.main
        assert main.check_action("kill", ()) is None  # another host: greyed, not hidden
        assert main.check_action("clear", ()) is False
        await pilot.press("3")
        assert main.view is View.STALE
        assert main.check_action("kill", ()) is False
        assert main.check_action("clear", ()) is True
        assert main.check_action("acknowledge", ()) is False


async def test_marks_select_several_targets() -> None:
    here = hostname()
    app, _ = app_with(*(ns_view(f"lane-{n}", host=here) for n in range(3)))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 3)
        await pilot.press("space", "down", "space")
        assert len(app.main.selection.targets()) == 2
        await settle(pilot)  # k right after other keys is type-ahead, not a command
        await pilot.press("k")
        await until(pilot, lambda: not isinstance(app.screen, MainScreen))
        text = await shows(pilot, "Kill 2 lanes?")
        assert "Kill 2 lanes?" in text and "lane-0" in text and "lane-1" in text
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("U")
        assert app.main.selection.targets() and len(app.main.selection.targets()) == 1


async def test_help_lists_every_key_and_docs_cover_them() -> None:
    app, _ = app_with()
    docs = DOCS.read_text(encoding="utf-8")
    async with app.run_test(size=(100, 140)) as pilot:  # tall enough for every group
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = await shows(pilot, "Views and rows")
        for title, bindings in app.navigator.help_groups():
            assert title in text
            for binding in bindings:
                assert isinstance(binding, Binding)
                assert binding.description in text, binding
                for key in key_display(binding.key).split():
                    assert f"`{key}`" in docs, f"docs/keys.md lacks {key} ({title})"
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_palette_offers_only_what_fits() -> None:
    here = hostname()
    inc = incident("takeover-1", "/roots/r1/a")
    app, _ = app_with(ns_view("a", host=here), incidents=[inc])
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        labels = [label for label, _, _ in entries(app.main)]
        assert any(label.startswith("Kill lane 'a'") for label in labels)
        assert not any(label.startswith("Clear") for label in labels)
        assert any(label.startswith("Open timeline") for label in labels)
        await pilot.press("2")
        labels = [label for label, _, _ in entries(app.main)]
        assert any(label.startswith("Acknowledge incident takeover-1") for label in labels)
        assert not any(label.startswith("Kill") for label in labels)
        assert "Sort by kind" in labels


async def test_pause_holds_changes_and_resume_applies_them() -> None:
    app, engine = app_with(ns_view("a"))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        await pilot.press("p")
        b = ns_view("b")
        engine.push(Changes(upserts={b.key: b}, at=NOW))
        await until(pilot, lambda: app.buffer.pending)
        await pilot.pause()
        assert app.main.table().row_count == 1
        await shows(pilot, "PAUSED")
        await pilot.press("p")
        await until(pilot, lambda: app.main.table().row_count == 2)
        await until(pilot, lambda: "PAUSED" not in screen_text(app))


async def test_a_burst_of_batches_is_drawn_in_few_frames() -> None:
    app, engine = app_with()
    drains: list[int] = []
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        original = app.main.rows.apply
        app.main.rows.apply = lambda delta: (drains.append(1), original(delta))  # type: ignore[method-assign]
        for n in range(300):
            v = ns_view(f"lane-{n}")
            assert engine.on_changes is not None
            engine.on_changes(Changes(upserts={v.key: v}, at=NOW))
        await until(pilot, lambda: app.main.table().row_count == 300)
        assert len(drains) < 30, f"{len(drains)} drains for 300 batches"


async def test_empty_state_tells_what_to_do() -> None:
    app, _ = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        await pilot.pause()
        text = await shows(pilot, "No lanes are running")
        assert "No lanes are running" in text
        assert "lanewatch run --lane NAME -- CMD" in text
        assert "/roots/r1" in text


async def test_filter_narrows_and_escape_clears() -> None:
    app, _ = app_with(ns_view("alpha"), ns_view("beta"), ns_view("gamma"))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 3)
        await pilot.press("slash", *"et", "enter")
        assert [str(k).rsplit("/", 1)[-1] for k in app.main.table().visible_keys] == ["beta"]
        assert re.search(r"filter: et", screen_text(app))
        await pilot.press("slash", "z", "enter")
        await shows(pilot, "No row matches the filter etz")
        await pilot.press("escape")
        assert len(app.main.table().visible_keys) == 3


async def test_a_click_on_the_header_switches_view() -> None:
    app, _ = app_with(ns_view("a"))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        bar = app.main.query_one("#viewbar")
        start = screen_text(app).splitlines()[0].index("3 Stale")
        await pilot.click(bar, offset=(start + 2, 0))
        await until(pilot, lambda: app.main.view is View.STALE)


class BrokenEngine(FakeEngine):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def start(self, on_changes) -> None:  # type: ignore[no-untyped-def]
        raise self.error


async def test_an_engine_that_cannot_start_is_shown_not_fatal() -> None:
    app = make_app([Path("/roots/r1")], engine=BrokenEngine(OSError("inotify is gone")))
    async with app.run_test(size=(120, 30)) as pilot:
        await shows(pilot, "engine error:", "inotify is gone")
    app = make_app([Path("/roots/r1")], engine=BrokenEngine(ValueError("a bug")))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(
            pilot,
            lambda: any("a bug" in n.message for n in app.notices.notices),
            what="the failed worker is reported",
        )
        assert app.is_running


async def test_the_status_line_says_how_writers_are_known_attribution() -> None:
    import dataclasses

    import pytest

    if "attribution" not in {f.name for f in dataclasses.fields(Changes)}:
        pytest.skip("this engine does not report write attribution")
    app, engine = app_with(ns_view("a"))
    async with app.run_test(size=(140, 30)) as pilot:
        await until(pilot, lambda: app.picture.loaded)
        engine.push(
            Changes(at=NOW, attribution="inferred", attribution_hint="fanotify needs root")  # type: ignore[call-arg]
        )
        await shows(pilot, "attribution: inferred")
        assert any("fanotify needs root" in n.message for n in app.notices.notices)
        await pilot.press("question_mark")
        await shows(pilot, "attribution: inferred: fanotify needs root")


async def test_the_selected_lanes_pane_catches_up_after_a_burst_of_changes() -> None:
    """The pane of a lane that changes on every drain is redrawn at most every DETAIL_REDRAW
    (and measured, to skip the layout pass when its height stays): the last change must still
    reach it, without a key pressed."""
    from dataclasses import replace
    from types import MappingProxyType

    view = ns_view("busy", files=1, host=hostname())
    app, engine = app_with(view)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.table().row_count == 1)
        await shows(pilot, "1 files")
        for files in range(2, 40):
            changed = replace(view, files=files)
            engine.push(Changes(upserts=MappingProxyType({view.key: changed}), at=NOW))
            await pilot.pause(0.005)
        assert "size        39 files" in await shows(pilot, "39 files", timeout=5)


def test_a_headless_lane_shows_its_processes_in_the_lanes_view() -> None:
    """The detail pane lists a lane's members (pid, since when, how, command), inert; a
    headless lane stays with the lanes (never the stale view) and can be killed."""
    from lanewatch.model.views import LaneMember
    from lanewatch.tui.backend.actions_adapter import KILLABLE
    from lanewatch.tui.state.dashboard_store import view_of
    from lanewatch.tui.widgets.detail_pane import namespace_renderable

    members = (
        LaneMember(200, 9, "tmux -L a new -d", NOW - 30, "descendant"),
        LaneMember(201, 10, "evil \x1b]0;pwned\x07", NOW - 29, "marker"),
    )
    ns = ns_view("a", NsState.HEADLESS, members=members, reason="runner pid 5 does not exist")
    text = plain(namespace_renderable(ns, None, ()))
    assert "headless" in text and "Processes (2)" in text
    assert "pid 200" in text and "tmux -L a new -d" in text and "descendant" in text
    assert "pid 201" in text and "\x1b]0;" not in text  # shown, never sent to the terminal
    assert view_of(ns) is View.LANES and NsState.HEADLESS in KILLABLE


def test_the_detail_pane_says_a_lane_is_unfenced_and_why() -> None:
    """The dashboard's fence is a key away, in the detail pane: kernel / bwrap with
    the private mounts, or unfenced with the kernel's reason."""
    from lanewatch.tui.widgets.detail_pane import namespace_renderable

    why = "user namespaces disabled by user.max_user_namespaces (0 or reached; here 0)"
    shown = []
    for how, note, private in (("none", why, ()), ("bwrap", "", ("/tmp", "/var/tmp"))):
        ns = ns_view("a", fence=how, fence_note=note, fence_private=private)
        shown.append(plain(namespace_renderable(ns, None, ()), width=200))
    assert f"unfenced: {why}" in shown[0]
    assert "private /tmp, /var/tmp (bwrap)" in shown[1]
