"""From a collision to the culprit, on the stand-in engine of tests/tui/fakes.py
(rows fixed, clock frozen) at 80×24 and 160×48: the `!` roles, free width by priority, the
incident states, the Collisions view on its newest row, notices that never cover a dialog and
a message log, what is not offered for a shared file. What the keys do to real lanes (kill the
intruder from its timeline) is in test_culprit_live.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.model.roles import Role, role_in, roles_of
from lanewatch.model.views import Evidence
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.message_log import MessageLog
from lanewatch.tui.shell import clipboard_osc52
from lanewatch.tui.state.notice_log import MORE, one_line, toast_budget
from lanewatch.tui.widgets.lane_table import Column
from lanewatch.tui.widgets.lane_table._free_width import share

from .fakes import NOW, incident, ns_view
from .helpers import screen_text, settle, shows, until
from .test_snapshots import app_for, world

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]
TAKEOVER = "takeover-1a2b3c4d5e6f"
LONG_NOTE = "stamp rewritten by another live owner while the victim ran its tests"


def test_free_width_goes_by_priority_then_column_order() -> None:
    columns = [
        Column("a", "A", max_width=5),
        Column("b", "B", max_width=5, grow=2),
        Column("c", "C", max_width=5, grow=1),
        Column("d", "D", width=3),
    ]
    widths = [5, 5, 5, 3]
    share(columns, widths, [9, 9, 9, 3], [0, 1, 2, 3], free=6)
    assert widths == [5, 7, 9, 3], "C (grow 1) whole first, then B; A and the fixed D wait"
    widths = [5, 5, 5, 3]
    share(columns, widths, [9, 9, 9, 3], [0, 1, 2, 3], free=0)
    assert widths == [5, 5, 5, 3], "no free width: nothing grows (the row scrolls)"


def test_roles_tell_victim_intruder_and_shared_apart() -> None:
    victim, intruder, bystander = ns_view("agent-1"), ns_view("agent-2"), ns_view("other")
    takeover = incident("takeover-1", victim.key, intruder={"lane": "agent-2"})
    shared = incident("shared-file-1", None, kind="shared-file", intruder={"lane": "other"})
    assert role_in(victim, takeover) is Role.VICTIM
    assert role_in(intruder, takeover) is Role.INTRUDER
    assert role_in(bystander, takeover) is None
    assert role_in(bystander, shared) is Role.SHARED
    assert roles_of(intruder, [replace(takeover, acknowledged=True)]) == (), "open ones only"
    assert {r.glyph for r in Role} == {"!", ">", "~"} and len({r.word for r in Role}) == 3


def test_a_notice_is_one_line_and_says_when_the_log_has_more() -> None:
    budget = toast_budget(80)
    assert budget < 40
    assert one_line("Kill: alpha", "sent TERM", budget) == "Kill: alpha: sent TERM"
    long = one_line("clear: x", "refused\n" + "pid 1 (init) not inspectable " * 12, budget)
    assert "\n" not in long and long.endswith(MORE) and len(long) <= budget


@pytest.mark.parametrize("size", SIZES)
async def test_lanes_mark_victim_intruder_and_shared_writer(size: tuple[int, int]) -> None:
    """The world's takeover: agent-1 `!` (victim), agent-2 `>` (intruder); its shared file:
    worker-7 `~`. The detail pane says it in words."""
    app = app_for(world())
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        rows = {line.split()[2 if line.split()[0] in "!>~" else 1]: line for line in
                screen_text(app).splitlines() if "repo:0123" in line}  # fmt: skip
        assert rows["agent-1"].split()[0] == "!", rows
        assert rows["agent-2"].split()[0] == ">", rows
        assert rows["worker-7"].split()[0] == "~", rows
        app.main.table().move_cursor("/roots/r1/agent-2")
        await shows(pilot, "agent-2  live (known)  > intruder")


@pytest.mark.parametrize("size", SIZES)
async def test_the_timeline_gives_free_width_to_writer_and_note(size: tuple[int, int]) -> None:
    engine = world()
    takeover = engine.incidents[TAKEOVER]
    first = replace(takeover.evidence[0], note=LONG_NOTE)
    engine.incidents[TAKEOVER] = replace(takeover, evidence=(first, *takeover.evidence[1:]))
    app = app_for(engine)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("enter")
        await until(
            pilot,
            lambda: isinstance(app.screen, IncidentScreen) and app.screen.report is not None,
        )
        await pilot.pause()
        text = screen_text(app)
        # 160 columns: the note whole (was cut at 28 with 40+ columns empty); 80: cut.
        assert (LONG_NOTE in text) == (size[0] == 160), text


async def test_collisions_open_on_the_newest_row() -> None:
    """The older incident arrives first (it held the cursor and was sorted down under the
    newer one): the view opens on the newest, the row `a` acts on."""
    engine = world()
    engine.incidents = dict(reversed(engine.incidents.items()))  # the older shared file first
    app = app_for(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.main.table()
        assert table.visible_keys[0] == "takeover-1a2b3c4d5e6f"
        assert table.cursor_key == "takeover-1a2b3c4d5e6f"


@pytest.mark.parametrize("size", SIZES)
async def test_a_reopened_incident_says_so_in_its_row_and_timeline(size: tuple[int, int]) -> None:
    engine = world()
    takeover = engine.incidents[TAKEOVER]
    later = Evidence(
        "/roots/r1/agent-1/tmp/again.json", NOW - 5, 9, None, "known", "agent-2 pid 4300", "again"
    )
    engine.incidents[TAKEOVER] = replace(
        takeover, reopened=True, ack_at=NOW - 50, ack_by="ada",
        evidence=(*takeover.evidence, later), last_seen=NOW - 5,
    )  # fmt: skip
    app = app_for(engine)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        row = next(line for line in (await shows(pilot, "takeover")).splitlines()
                   if line.lstrip().startswith("takeover"))  # fmt: skip
        assert "reopened" in row, row
        await settle(pilot)
        await pilot.press("enter")
        text = await shows(pilot, "reopened: acknowledged")
        assert "then agent-2 pid 4300 wrote" in " ".join(text.split()), text


async def test_acknowledging_an_ongoing_collision_says_what_happens() -> None:
    engine = world()
    app = app_for(engine)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        what = str(app.screen.what)  # type: ignore[attr-defined]
        assert "still being written" in what and "reopened" in what and "(k)" in what


async def test_no_victim_keys_on_a_shared_file_timeline() -> None:
    app = app_for(world())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        shared = app.picture.incidents["unbound-writer-0f0f0f0f0f0f"]
        app.navigator.open_incident(shared)
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen))
        screen = app.screen
        assert isinstance(screen, IncidentScreen)
        for action, params in (("jump", ("victim",)), ("kill_intruder", ()), ("victim_files", ())):
            assert screen.check_action(action, params) is False, action
        footer = (await shows(pilot, "Back")).splitlines()[-1]
        assert "Victim's lane" not in footer and "Kill intruder" not in footer


@pytest.mark.parametrize("size", SIZES)
async def test_a_notice_waits_for_the_dialog_and_the_log_has_it_whole(
    size: tuple[int, int],
) -> None:
    app = app_for(world())
    long = "could not inspect: " + " ".join(f"pid {n} (x)" for n in range(100, 160))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        app.notify("before the dialog", timeout=30)
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        assert not app._notifications, "the dialog took the toasts off the screen"
        app.notify(long, title="clear: old-run", timeout=30)
        await pilot.pause()
        assert not app._notifications, "a notice never covers a dialog"
        assert "could not inspect" not in screen_text(app)
        await settle(pilot)
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await until(
            pilot,
            lambda: any(n.message.startswith("clear: old-run") for n in app._notifications),
            what="the held notice shown",
        )
        toasts = [n.message for n in app._notifications]
        assert any(m.startswith("clear: old-run: could") and m.endswith(MORE) for m in toasts)
        assert all("\n" not in m and len(m) <= toast_budget(size[0]) for m in toasts), toasts
        await settle(pilot)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MessageLog), what="the message log")
        await shows(pilot, "pid 159 (x)", "before the dialog")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_under_tmux_set_clipboard_external_the_path_goes_to_tmuxs_buffer(
    tmp_path: Path,
) -> None:
    """A real tmux server of its own (socket under tmp_path), set-clipboard external (tmux's
    default): OSC 52 from an app is dropped there, so the path goes into tmux's buffer and the
    notice says so, never "Copied"."""
    env = {**os.environ, "TMUX_TMPDIR": str(tmp_path)}
    tmux = ["tmux", "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-s", "t"], env=env, check=True, timeout=20)
    try:
        socket = next(tmp_path.glob("tmux-*/default"))
        env["TMUX"] = f"{socket},1,0"
        subprocess.run([*tmux, "set", "-g", "set-clipboard", "external"], env=env, check=True)
        told = clipboard_osc52.after_osc52("/roots/r1/agent-1", env)
        assert "paste buffer" in told.title and "Copied" not in told.title
        assert "external" in told.message
        shown = subprocess.run(
            [*tmux, "show-buffer"], env=env, capture_output=True, text=True, timeout=20
        )
        assert shown.stdout == "/roots/r1/agent-1"
        subprocess.run([*tmux, "set", "-g", "set-clipboard", "on"], env=env, check=True)
        assert "through tmux" in clipboard_osc52.after_osc52("/x", env).title
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, timeout=20, check=False)
    outside = {k: v for k, v in env.items() if k != "TMUX"}
    assert "OSC 52" in clipboard_osc52.after_osc52("/x", outside).title
