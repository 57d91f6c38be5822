"""Snapshots of the main screens at 80×24 and 160×48 (pytest-textual-snapshot).

Pure-UI rendering tests: they use the stand-in engine of tests/tui/fakes.py with fixed rows,
a frozen clock and TZ=UTC, because a snapshot must be identical on every machine (real lanes
bring their own pids, paths and host names). What the rows do against real lanes is covered by
test_live.py, test_views.py and test_actions.py. Review a changed snapshot before updating it
(`pytest tests/tui/test_snapshots.py --snapshot-update`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lanewatch.linux.procid import hostname
from lanewatch.model.views import Evidence, NsState
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.kill_dialog import KillConfirm
from lanewatch.tui.screens.message_log import MessageLog

from .fakes import NOW, FakeEngine, incident, ns_view
from .helpers import screen_text, settle, until
from .test_columns import crowded

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def world() -> FakeEngine:
    views = [
        ns_view("agent-1"),
        ns_view(
            "agent-2",
            pid=4300,
            started_at=NOW - 7200,
            last_write=NOW - 40,
            files=1200,
            bytes=48_000_000,
            allocated=52_000_000,
            write_rate=(30, 28, 25, 40, 33, 20, 18, 22, 25, 31),
        ),
        ns_view(
            "[red]x",
            NsState.HUNG,
            pid=4400,
            reason="heartbeat 31s overdue",
            heartbeat_at=NOW - 31,
            write_rate=(0,) * 10,
        ),
        ns_view(
            "worker-7",
            NsState.UNKNOWN,
            grade="inferred",
            pid=4500,
            reason="cannot read /proc/4500 (permission denied)",
            write_rate=(0,) * 10,
        ),
        ns_view(
            "old-run",
            NsState.STALE,
            reason="pid 4100 does not exist",
            pid=4100,
            heartbeat_at=NOW - 5400,
            last_write=NOW - 5500,
            write_rate=(),
        ),
        ns_view(
            "done",
            NsState.RELEASED,
            reason="exited 0",
            released_at=NOW - 600,
            exit_code=0,
            write_rate=(),
        ),
        ns_view(
            "stray",
            NsState.ORPHAN,
            lane=None,
            checkout_id=None,
            checkout_path=None,
            pid=None,
            host=None,
            reason="no owner stamp",
            stamp_status="missing",
            started_at=None,
            heartbeat_at=None,
            last_write=NOW - 86400 * 3,
            write_rate=(),
        ),
    ]
    takeover = incident(
        "takeover-1a2b3c4d5e6f",
        "/roots/r1/agent-1",
        intruder={"lane": "agent-2", "pid": 4300, "checkout_id": "repo-0123456789ab"},
        evidence=(
            Evidence(
                "/roots/r1/agent-1/.lanewatch/owner.json",
                NOW - 100,
                612,
                "c0ffee" * 10,
                "known",
                "agent-2 pid 4300",
                "stamp rewritten by another live owner",
            ),
            Evidence(
                "/roots/r1/agent-1/tmp/receipt.json",
                NOW - 95,
                120,
                "ab" * 32,
                "inferred",
                "agent-2 pid 4300",
                "written while agent-2 held it open",
            ),
        ),
    )
    unbound = incident(
        "unbound-writer-0f0f0f0f0f0f",
        None,
        kind="shared-file",
        intruder={"lane": "worker-7", "pid": 4500},
        grade="inferred",
        count=12,
        first_seen=NOW - 3000,
        last_seen=NOW - 20,
        evidence=(
            Evidence(
                "/tmp/receipt.json",
                NOW - 20,
                88,
                None,
                "inferred",
                "worker-7 pid 4500",
                "open file in shared /tmp",
            ),
        ),
    )
    return FakeEngine(views, [takeover, unbound])


def app_for(engine: FakeEngine) -> LanewatchApp:
    return make_app([Path("/roots/r1")], engine=engine, clock=lambda: NOW)


def before(*keys: str, ready: Callable[[LanewatchApp], bool] | None = None) -> Any:
    async def run(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, LanewatchApp)
        await until(pilot, lambda: app.picture.loaded)
        if app.picture.namespaces:
            await until(pilot, lambda: app.main.details.detail is not None, what="detail read")
        for key in keys:  # each once the screen settled, as typed by hand (not type-ahead)
            await settle(pilot)
            await pilot.press(key)
        if ready is not None:
            await until(pilot, lambda: ready(app))
        await pilot.pause()

    return run


def compare(
    snap_compare: Any,
    app: LanewatchApp,
    size: tuple[int, int],
    keys: Sequence[str] = (),
    ready: Any = None,
) -> None:
    assert snap_compare(app, terminal_size=size, run_before=before(*keys, ready=ready))


@pytest.mark.parametrize("size", SIZES)
def test_lanes(snap_compare: Any, size: tuple[int, int]) -> None:
    compare(snap_compare, app_for(world()), size)


@pytest.mark.parametrize("key", ["1", "2", "3"])
def test_long_names_at_80x24(snap_compare: Any, key: str) -> None:
    """Long names, 7-digit pids, the widest states, a scrollbar: what matters still fits."""
    compare(snap_compare, app_for(crowded()), (80, 24), [key])


@pytest.mark.parametrize("size", SIZES)
def test_collisions(snap_compare: Any, size: tuple[int, int]) -> None:
    compare(snap_compare, app_for(world()), size, ["2"])


@pytest.mark.parametrize("size", SIZES)
def test_stale(snap_compare: Any, size: tuple[int, int]) -> None:
    compare(snap_compare, app_for(world()), size, ["3"])


@pytest.mark.parametrize("size", SIZES)
def test_incident_timeline(snap_compare: Any, size: tuple[int, int]) -> None:
    def reported(app: LanewatchApp) -> bool:
        return isinstance(app.screen, IncidentScreen) and app.screen.report is not None

    compare(snap_compare, app_for(world()), size, ["2", "enter"], ready=reported)


@pytest.mark.parametrize("size", SIZES)
def test_empty(snap_compare: Any, size: tuple[int, int]) -> None:
    compare(snap_compare, app_for(FakeEngine()), size)


def test_clear_confirmation(snap_compare: Any) -> None:
    compare(snap_compare, app_for(world()), (80, 24), ["3", "c"])


def test_help(snap_compare: Any) -> None:
    compare(snap_compare, app_for(world()), (80, 24), ["question_mark"])


async def test_timeline_keeps_writer_and_note_at_80_columns() -> None:
    """The snapshot above, read: at 80 columns the timeline still says who wrote and why."""
    app = app_for(world())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.picture.loaded, what="the world")
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        await pilot.press("enter")
        await until(
            pilot,
            lambda: isinstance(app.screen, IncidentScreen) and app.screen.report is not None,
            what="the timeline",
        )
        await pilot.pause()
        header = next(line for line in screen_text(app).splitlines() if "TIME" in line)
        assert "WRITER" in header and "NOTE" in header
        assert "What each writer wrote" in screen_text(app)


@pytest.mark.parametrize("size", SIZES)
def test_rows_read_by_severity(snap_compare: Any, size: tuple[int, int]) -> None:
    """The cursor on the last row (G): the hung row ([red]x, bold red), the victim of the open
    takeover (agent-1: `!`, bold red) and the unknown one (worker-7, warning colour) each read
    apart from the live agent-2; in Stale, stale and orphan rows take the warning colour and
    the released one is dim."""
    compare(snap_compare, app_for(world()), size, ["G"])


def test_rows_read_by_severity_without_colour(
    snap_compare: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NO_COLOR (Textual draws in greys): the hung and the victim rows are still bold, the
    victim still has its `!`, and the state words say the rest."""
    monkeypatch.setenv("NO_COLOR", "1")
    compare(snap_compare, app_for(world()), (80, 24), ["G"])


def killable_world() -> FakeEngine:
    """The world with agent-2 (the takeover's intruder) a lane of this host, so `k` on the
    timeline opens its kill dialog (nothing is pressed after it: no signal is ever sent)."""
    engine = world()
    intruder = engine.views["/roots/r1/agent-2"]
    engine.views[intruder.key] = replace(intruder, host=hostname(), uid=None)
    return engine


@pytest.mark.parametrize("size", SIZES)
def test_kill_the_intruder_from_the_timeline(snap_compare: Any, size: tuple[int, int]) -> None:
    """`2`, `enter`, `k`: the dialog names the intruding lane and why, its buttons on screen."""
    compare(
        snap_compare,
        app_for(killable_world()),
        size,
        ["2", "enter", "k"],
        ready=lambda app: isinstance(app.screen, KillConfirm),
    )


def test_message_log(snap_compare: Any) -> None:
    """`m`: every notice whole (its toast was one line)."""
    long = "refused: " + " ".join(f"pid {n} (sshd) not inspectable;" for n in range(1, 14))

    async def run(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, LanewatchApp)
        await until(pilot, lambda: app.picture.loaded)
        app.notify(long, title="clear: old-run", timeout=60)
        await settle(pilot)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MessageLog))
        await pilot.pause()

    assert snap_compare(app_for(world()), terminal_size=(80, 24), run_before=run)
