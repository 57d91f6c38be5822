"""Investigating inside the dashboard, on the real demo (`DemoScenario`: real lanes, a real
intruder, a real engine): an incident's timeline says who wrote what, jumps to the victim's and
the intruder's lanes and back, a lane's files and one file's content are shown safely (a FIFO
is never opened, a symlink never followed), a lane's path is copied, and an export lands in the
state folder, byte for byte what `lanewatch incidents ID --markdown` prints."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from lanewatch.demo import DemoScenario
from lanewatch.engine.engine import Engine
from lanewatch.lanes.roots import state_dir
from lanewatch.model.views import Incident, NsState
from lanewatch.records.evidence import load
from lanewatch.records.incident_log import read_all
from lanewatch.records.writes import history
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.backend.report_export import default_folder
from lanewatch.tui.screens.files_screen import FileScreen, FilesScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.state.dashboard_store import View
from tests.conftest import LANEWATCH
from tests.kits.attributionkit import privileged, shared_temp_file
from tests.processes.test_attribution import write_cmd

from .conftest import Lanes
from .helpers import confirm_export, settle, shows, until

SIZE = (160, 60)
OUTSIDE = "SECRET-OUTSIDE-THE-NAMESPACE"


def _demo(tmp_path: Path, takeover_after: Path | None) -> Iterator[DemoScenario]:
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    with DemoScenario(shared_tmp=shared, takeover_after=takeover_after) as scenario:
        yield scenario


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[DemoScenario]:
    yield from _demo(tmp_path, None)


@pytest.fixture
def live_takeover(tmp_path: Path) -> Iterator[DemoScenario]:
    """The demo with its takeover once the dashboard watches, as in `lanewatch demo` (a
    takeover is seen as a stamp that changes owner; the kernel, when it attributes, records
    the intruder's stamp as it is written): `takeover_seen` lets the intruder go."""
    yield from _demo(tmp_path, tmp_path / "take-over-now")


def incident_of(app: LanewatchApp, kind: str, victim: Path | None = None) -> Incident | None:
    for inc in app.picture.incidents.values():
        if inc.kind == kind and (victim is None or inc.victim == str(victim)):
            return inc
    return None


async def takeover_seen(pilot, app: LanewatchApp, demo: DemoScenario) -> Incident:  # type: ignore[no-untyped-def]
    """`live_takeover`'s intruder rewrites agent-2's stamp once the engine has settled (its
    watches up, one probe in) and the dashboard shows the lane live under its real owner (the
    engine keeps that stamp: the timeline's "before"); the takeover incident, once shown."""
    run = demo.lanes["agent-2"]

    def owner_read() -> bool:
        if not app.engine.settled.is_set():
            return False
        view = app.picture.namespaces.get(str(run.namespace))
        return view is not None and view.pid == run.runner.pid and view.state is NsState.LIVE

    await until(pilot, owner_read, 60, what="agent-2 live under its real owner")
    assert demo.takeover_after is not None
    demo.takeover_after.touch()
    taken = lambda: incident_of(app, "takeover", run.namespace)  # noqa: E731
    await until(pilot, lambda: taken() is not None, 60, what="takeover")
    inc = taken()
    assert inc is not None
    return inc


async def writes_pane(pilot, screen: IncidentScreen, *texts: str) -> str:  # type: ignore[no-untyped-def]
    """Wait until the timeline's "What each writer wrote" pane is on screen and holds every
    one of `texts` in its whole text (a user scrolls it: the screen shows only its top, and
    how far down a version's diff lies depends on how many writes the demo made meanwhile).
    Returns that whole text."""

    def body() -> str:
        pane = screen.query_one("#incident-context-body", Static)
        out = io.StringIO()
        Console(file=out, width=max(pane.size.width, 40), color_system=None).print(pane.content)
        return out.getvalue()

    await shows(pilot, "What each writer wrote")
    await until(pilot, lambda: all(t in body() for t in texts), what=f"{texts} in the pane")
    return body()


async def open_timeline(pilot, app: LanewatchApp, inc: Incident) -> IncidentScreen:  # type: ignore[no-untyped-def]
    app.navigator.open_incident(inc)
    await until(pilot, lambda: isinstance(app.screen, IncidentScreen), what="the timeline")
    screen = app.screen
    assert isinstance(screen, IncidentScreen)
    await until(pilot, lambda: screen.report is not None, what="the timeline's report")
    await settle(pilot)
    return screen


@pytest.mark.unprivileged
async def test_timeline_jumps_to_both_lanes_and_back(demo: DemoScenario) -> None:
    victim = demo.lanes["agent-1"].namespace
    intruder = demo.lanes["tests"].namespace
    app = make_app([demo.scratch_root])
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot, lambda: incident_of(app, "cross-lane-write", victim) is not None, 60, what="inc"
        )
        inc = incident_of(app, "cross-lane-write", victim)
        assert inc is not None
        await open_timeline(pilot, app, inc)
        # Who wrote: the writer's lane and pid, on the timeline, not a dict dump.
        text = await shows(pilot, "What each writer wrote", "lane tests, pid")
        assert "checkout_id=" not in text and "command=[" not in text

        await pilot.press("v")
        await until(pilot, lambda: app.screen is app.main, what="back on the main screen")
        assert app.main.view is View.LANES and app.main.table().cursor_key == str(victim)
        await settle(pilot)
        await pilot.press("backspace")
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), what="back again")
        assert app.screen.incident.id == inc.id  # type: ignore[attr-defined]
        await until(pilot, lambda: app.screen.report is not None)  # type: ignore[attr-defined]
        await settle(pilot)

        await pilot.press("i")
        await until(pilot, lambda: app.screen is app.main)
        assert app.main.table().cursor_key == str(intruder)
        assert isinstance(app.screen, MainScreen) and app.main.came_from is not None


@pytest.mark.unprivileged
async def test_files_view_never_opens_a_fifo_nor_follows_a_symlink(
    demo: DemoScenario, tmp_path: Path
) -> None:
    ns = demo.lanes["agent-3"].namespace
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE)
    os.mkfifo(ns / "tmp" / "pipe")  # opening it for reading would block for ever
    (ns / "tmp" / "escape").symlink_to(outside)
    (ns / "tmp" / "notes.txt").write_bytes(b"first line\n\x1b]0;OWNED\x07second line\n")
    app = make_app([demo.scratch_root])
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: str(ns) in app.picture.namespaces, 30, what="agent-3")
        app.main.select_lane(str(ns), None)
        await settle(pilot)
        await pilot.press("y")  # the lane's path, copied (OSC 52) and shown
        await until(pilot, lambda: app.clipboard == str(ns), what="the path copied")
        await until(
            pilot,
            lambda: any(n.message.startswith(str(ns)) for n in app.notices.notices),
            what="what was done with the path, said",
        )

        await pilot.press("l")
        await until(pilot, lambda: isinstance(app.screen, FilesScreen), what="the files view")
        files = app.screen
        assert isinstance(files, FilesScreen)
        await until(pilot, lambda: "tmp/pipe" in files.files, what="the files listed")
        text = await shows(pilot, "LAST WRITER", "tmp/escape -> ", "fifo", "link")
        assert OUTSIDE not in text
        table = files.query_one("#files-table")
        for name, kind in (("tmp/pipe", "fifo"), ("tmp/escape", "link")):
            table.move_cursor(name)  # type: ignore[attr-defined]
            await pilot.press("v")
            await until(
                pilot,
                lambda n=name, k=kind: any(
                    m.message == f"{n} is a {k}: only regular files are shown"
                    for m in app.notices.notices
                ),
                what=f"{name} refused",
            )
            assert app.screen is files  # never opened
        table.move_cursor("tmp/notes.txt")  # type: ignore[attr-defined]
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, FileScreen), what="the file view")
        text = await shows(pilot, "second line", "sha256")
        assert "\\x1b]0;OWNED\\x07second line" in text  # the escape shown inert
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is files)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)


@pytest.mark.unprivileged
async def test_export_goes_to_the_state_folder_as_the_cli_prints_it(
    live_takeover: DemoScenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = live_takeover
    checkout = tmp_path / "checkout"  # where a user runs the dashboard: never written
    checkout.mkdir()
    monkeypatch.chdir(checkout)
    app = make_app([demo.scratch_root])
    async with app.run_test(size=SIZE) as pilot:
        inc = await takeover_seen(pilot, app, demo)
        roots = [str(demo.scratch_root)]
        await until(pilot, lambda: inc.id in read_all(roots), what="the incident on disk")
        screen = await open_timeline(pilot, app, inc)
        # The intruder and the owner it replaced, readably.
        await shows(pilot, "intruder lane agent-2, pid", "before   lane agent-2, pid")
        await confirm_export(pilot, "e")
        await until(pilot, lambda: app.last_export is not None, what="the export")
        md = app.last_export
        assert md is not None and md.parent == default_folder()
        assert md.is_relative_to(state_dir()) and not list(checkout.iterdir())
        await until(
            pilot,
            lambda: any(str(md) == n.message.removeprefix("Wrote ") for n in app.notices.notices),
            what="the toast naming the file",
        )
        assert screen.report is not None
        app.last_export = None
        await settle(pilot)
        await confirm_export(pilot, "E")
        await until(pilot, lambda: app.last_export is not None, what="the JSON export")
        as_json = app.last_export
        assert as_json is not None and as_json.parent == default_folder()

    def cli(flag: str) -> bytes:
        out = subprocess.run(
            [*LANEWATCH, "incidents", inc.id, flag, "--root", str(demo.scratch_root)],
            capture_output=True,
            timeout=60,
            cwd=checkout,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    markdown = cli("--markdown")
    assert markdown == md.read_bytes()  # one format, byte for byte
    assert b"## What each writer wrote" in markdown and b"Times are UTC." in markdown
    assert cli("--json") == as_json.read_bytes()
    assert not list(checkout.iterdir())


@privileged
async def test_takeover_timeline_shows_what_the_intruder_wrote(
    live_takeover: DemoScenario,
) -> None:
    demo = live_takeover
    victim = demo.lanes["agent-2"].namespace
    stamp = victim / ".lanewatch" / "owner.json"
    app = make_app([demo.scratch_root])
    async with app.run_test(size=(160, 120)) as pilot:
        # The kernel attributes before the intruder writes: it records the intruder's stamp.
        await until(pilot, lambda: app.picture.attribution == "kernel", 30, what="kernel")
        inc = await takeover_seen(pilot, app, demo)
        intruder_pid = inc.intruder["pid"]

        def recorded() -> bool:
            screen = app.screen
            if not isinstance(screen, IncidentScreen) or screen.report is None:
                return False
            return any(story.path == str(stamp) for story in screen.report.files)

        screen = await open_timeline(pilot, app, inc)
        await until(pilot, lambda: (screen.action_reload(), recorded())[1], 30, what="writes")
        await settle(pilot)
        text = await shows(pilot, "What each writer wrote", f'"pid": {intruder_pid}')
        assert f"pid {intruder_pid}" in text and "Written by" in text


@pytest.mark.unprivileged
async def test_takeover_timeline_shows_the_victims_stamp_the_intruders_and_the_diff(
    live_takeover: DemoScenario,
) -> None:
    """Without kernel attribution too: the engine keeps the stamp it read before the owner
    changed and the new one (each named by the owner its stamp names), so the timeline shows
    the victim's stamp whole, then the intruder's as a diff from it."""
    demo = live_takeover
    victim = demo.lanes["agent-2"].namespace
    victim_pid = demo.lanes["agent-2"].runner.pid
    stamp = victim / ".lanewatch" / "owner.json"
    app = make_app([demo.scratch_root])
    async with app.run_test(size=(160, 120)) as pilot:
        inc = await takeover_seen(pilot, app, demo)
        intruder_pid = inc.intruder["pid"]
        screen = await open_timeline(pilot, app, inc)
        assert screen.report is not None
        (story,) = [s for s in screen.report.files if s.path == str(stamp)]
        kinds = [s.kind for s in story.shown]
        assert kinds[:2] == ["content", "diff"], kinds
        first, then = story.shown[0], story.shown[1]
        assert f"pid {victim_pid}" in first.version.writer
        assert f"pid {intruder_pid}" in then.version.writer
        assert f'  "pid": {victim_pid},' in first.lines
        assert f'-  "pid": {victim_pid},' in then.lines
        assert f'+  "pid": {intruder_pid},' in then.lines
        # Its writer is who the stamp names, or (with kernel attribution) who the kernel saw.
        text = await shows(pilot, f"Written by lane agent-2, pid {victim_pid}", "Then ")
        then_line = next(line for line in text.splitlines() if line.startswith(" Then "))
        assert f"pid {intruder_pid}" in then_line
        assert f'  -  "pid": {victim_pid},' in text and f'  +  "pid": {intruder_pid},' in text
        assert text.index("Written by lane agent-2") < text.index(then_line)


@privileged
async def test_demo_shared_file_timeline_shows_both_lanes_contents_and_the_diff(
    demo: DemoScenario,
) -> None:
    """The demo's two fuzz lanes rewrite one file in shared temp, each version written whole
    and closed: kernel attribution reads each at its close, so the timeline shows what fuzz
    wrote and, as a diff from it, what fuzz-2 wrote (and the other way round)."""
    shared = demo.lanes["fuzz"].hold
    roots = [str(demo.scratch_root)]
    app = make_app([demo.scratch_root])
    async with app.run_test(size=(160, 120)) as pilot:
        await until(pilot, lambda: app.picture.attribution == "kernel", 30, what="kernel")

        def both() -> Incident | None:
            inc = incident_of(app, "shared-file")
            lanes = {w.get("lane") for w in inc.writers} if inc is not None else set()
            return inc if {"fuzz", "fuzz-2"} <= lanes else None

        def hashed_by(lane: str) -> bool:
            return any(e.lane == lane and e.sha256 for e in history(roots, str(shared)))

        await until(pilot, lambda: both() is not None, 60, what="both fuzz lanes' incident")
        await until(pilot, lambda: hashed_by("fuzz") and hashed_by("fuzz-2"), 30, what="writes")
        inc = both()
        assert inc is not None
        screen = await open_timeline(pilot, app, inc)
        assert screen.report is not None
        (story,) = [s for s in screen.report.files if s.path == str(shared)]
        writers = {s.version.writer.split(",")[0] for s in story.shown}
        assert {"lane fuzz", "lane fuzz-2"} <= writers
        diffs = [s for s in story.shown if s.kind == "diff"]
        changed = [s for s in diffs if any(line.startswith("+written by lane") for line in s.lines)]
        assert changed, [s.kind for s in story.shown]
        text = await writes_pane(pilot, screen, "+written by lane fuzz")
        assert "-written by lane fuzz" in text


@pytest.mark.unprivileged
async def test_demo_shared_file_timeline_without_the_kernel_shows_both_lanes_contents(
    demo: DemoScenario,
) -> None:
    """Without kernel attribution (a normal user's): the engine reads the demo's shared file
    while the fuzz lanes hold it, so the timeline still shows what each wrote and the diff,
    every version graded inferred and, both lanes holding it, naming both as its writers."""
    shared = demo.lanes["fuzz"].hold
    engine = Engine([str(demo.scratch_root)], attribution=False)  # what a normal user gets
    app = make_app([demo.scratch_root], engine=engine)
    async with app.run_test(size=(160, 120)) as pilot:

        def both() -> Incident | None:
            inc = incident_of(app, "shared-file")
            lanes = {w.get("lane") for w in inc.writers} if inc is not None else set()
            return inc if {"fuzz", "fuzz-2"} <= lanes else None

        roots = [str(demo.scratch_root)]

        def read_from(lane: str) -> bool:
            """A version the engine read names `lane` as its writer inside (the demo writer's
            first line: "written by lane L, pid N")."""
            kept = [load(roots, e.sha256) for e in history(roots, str(shared)) if e.sha256]
            return any(d is not None and f"written by lane {lane},".encode() in d for d in kept)

        await until(pilot, lambda: both() is not None, 60, what="both fuzz lanes' incident")
        await until(pilot, lambda: read_from("fuzz") and read_from("fuzz-2"), 60, what="reads")
        inc = both()
        assert inc is not None
        screen = await open_timeline(pilot, app, inc)
        assert screen.report is not None
        (story,) = [s for s in screen.report.files if s.path == str(shared)]
        assert {s.version.grade for s in story.shown} == {"inferred"}
        # The first version may be the file emptied by a writer's `open(p, "w")`: shown as
        # content (empty), never "not kept" (docs/flakes.md, 2026-12-07).
        assert [s.kind for s in story.shown][:2] == ["content", "diff"], story.shown
        lines = [line for s in story.shown for line in s.lines]
        assert any(line.startswith("+written by lane fuzz") for line in lines), lines
        for lane in ("fuzz,", "fuzz-2,"):  # each lane's content, whole or in a diff
            assert any(line.lstrip("+-").startswith(f"written by lane {lane}") for line in lines)
        text = await writes_pane(pilot, screen, "inferred: read while")
        assert "lane fuzz" in text and "lane fuzz-2" in text


@privileged
async def test_shared_file_timeline_shows_both_contents_and_the_diff(
    lanes: Lanes, scratch: Path
) -> None:
    first, second = '{"receipt": "from A"}\n', '{"receipt": "from B"}\n'
    app = make_app([scratch])
    with shared_temp_file() as shared:
        async with app.run_test(size=(160, 100)) as pilot:
            await until(pilot, lambda: app.picture.attribution == "kernel", 30, what="kernel")
            # unfenced: a fenced lane's /tmp is its own (tests/processes/test_fence.py)
            lanes.start("A", write_cmd(first, shared, then="exec sleep 60"), fence="none")
            await until(pilot, lambda: len(history([str(scratch)], str(shared))) >= 1, 30, what="A")
            lanes.start("B", write_cmd(second, shared, then="exec sleep 60"), fence="none")

            def b_incident() -> Incident | None:
                for inc in app.picture.incidents.values():
                    if inc.intruder.get("lane") == "B" and inc.kind == "shared-file":
                        return inc
                return None

            await until(pilot, lambda: b_incident() is not None, 30, what="B's incident")
            await until(pilot, lambda: len(history([str(scratch)], str(shared))) >= 2, 30)
            inc = b_incident()
            assert inc is not None
            await open_timeline(pilot, app, inc)
            text = await shows(pilot, "Written by lane A, pid", "Then lane B, pid")
            # A's content whole, then B's as a diff from it; each under its writer.
            assert '  {"receipt": "from A"}' in text
            assert '  -{"receipt": "from A"}' in text and '  +{"receipt": "from B"}' in text
            assert text.index("Written by lane A") < text.index("Then lane B")
