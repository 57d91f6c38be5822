"""One dashboard, two hosts: a local lane and a lane of the "far" host, a real sshd on
loopback (tests/kits/sshkit.py) streaming the far side's real `lanewatch record`. The far lane shows
with its host in the HOST column, is killed from the dashboard through the far lanewatch (the
dialog names the host), and the host goes degraded when sshd dies and ok when it is back."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from textual.widgets import Static

from lanewatch.engine.process import EngineProcess
from lanewatch.hosts import actions as remote
from lanewatch.hosts.config import Host
from lanewatch.hosts.many import ManyHosts
from lanewatch.hosts.stream import HostStream
from lanewatch.tui.app import LanewatchApp, make_app
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.files_screen import FilesScreen
from lanewatch.tui.screens.incident_screen import IncidentScreen
from lanewatch.tui.screens.kill_dialog import KillConfirm
from lanewatch.tui.screens.trash_screen import TrashScreen
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.widgets.lane_table import LaneTable
from tests.kits.hostile import FILE_NAMES, check_text
from tests.kits.sshkit import (  # the fixtures, and those they use, by name for pytest to find
    FarLive,
    SshServer,
    far_command,
    far_live,  # noqa: F401
    old_scheme_script,
    refused_far_claim,
    shared_ssh,  # noqa: F401
    ssh_server,  # noqa: F401
)

from .conftest import Lanes
from .helpers import screen_text, settle, shows, until
from .test_actions import outcome, show

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


async def test_one_dashboard_shows_and_kills_lanes_of_both_hosts(
    lanes: Lanes,
    scratch: Path,
    ssh_server: SshServer,  # noqa: F811 (its own: it stops it)
    far_live: FarLive,  # noqa: F811
) -> None:
    near = lanes.start("near-lane")
    far_proc, far_key = far_live.proc, far_live.key
    stream = HostStream(far_live.host)
    engine = ManyHosts(EngineProcess([scratch]), [stream])
    app = make_app([scratch], engine=engine)
    async with app.run_test(size=(160, 36)) as pilot:
        table = app.main.table(View.LANES)
        await until(pilot, lambda: table.has_row(near.key), what="the local lane")
        await until(pilot, lambda: table.has_row(far_key), timeout=60, what="the far lane")
        await shows(pilot, "near-lane", "far-lane", "HOST")
        far_line = next(line for line in screen_text(app).splitlines() if "far-lane" in line)
        assert " far " in far_line + " ", far_line  # its HOST cell
        assert app.picture.namespaces[far_key].host == "far"

        # Kill the far lane from here: the dialog names the host; the far lanewatch does it.
        await show(pilot, app, View.LANES, far_key)
        await settle(pilot)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, KillConfirm), what="kill dialog")
        await shows(pilot, "on host far", "On host far, through its own lanewatch")
        await settle(pilot)
        await pilot.press("y")
        result = await outcome(pilot, app, "kill")
        assert result.ok, result.message
        assert "host far" in result.message
        await asyncio.to_thread(far_proc.wait, 30)  # the far lane's runner ended
        await until(
            pilot,
            lambda: app.main.table(View.STALE).has_row(far_key),
            timeout=30,
            what="the far lane released (stale view)",
        )
        assert near.owner.poll() is None  # the local lane is untouched

        # The host goes away: degraded in the status line; back: the warning leaves.
        await asyncio.to_thread(ssh_server.stop)
        await shows(pilot, "degraded ssh:far", timeout=30)
        await asyncio.to_thread(ssh_server.start)
        await until(
            pilot,
            lambda: stream.state.status == "ok" and "ssh:far" not in screen_text(app),
            timeout=60,
            what="the host ok again",
        )
        assert app.main.table(View.STALE).has_row(far_key)


async def test_half_migrated_hosts_are_named_in_the_status_line(
    scratch: Path,
    tmp_path: Path,
    shared_ssh: SshServer,  # noqa: F811
) -> None:
    far = far_command(tmp_path / "farhome")
    bare = HostStream(Host("bare", "far", str(tmp_path / "nowhere" / "lanewatch")))
    old = HostStream(Host("old", "far", old_scheme_script(tmp_path / "oldhome", far)))
    app = make_app([scratch], engine=ManyHosts(EngineProcess([scratch]), [bare, old]))
    async with app.run_test(size=(250, 36)) as pilot:
        await until(pilot, lambda: old.state.status == "ok", timeout=60, what="old streams")
        text = await shows(pilot, "missing ssh:bare", "degraded ssh:old", timeout=30)
        assert "fix: ssh far 'python3 -m pip install --user lanewatch'" in text
        # One status line cannot hold both fixes: each flagged host's is also told in a toast.
        await until(pilot, lambda: len(toasts(app)) >= 2, what="a toast per flagged host")
        said = toasts(app)
        assert said["host bare"].endswith("fix: ssh far 'python3 -m pip install --user lanewatch'")
        assert said["host old"] == (
            "it keeps scheme 0 (lanewatch 0.0.9), not this side's 1\n"
            "fix: ssh far 'python3 -m pip install -U lanewatch'"
        )


def toasts(app: LanewatchApp) -> dict[str, str]:
    return {n.title: n.message for n in app.notices.notices if n.title.startswith("host ")}


async def test_a_far_lane_is_never_read_from_this_disk_and_its_trash_restores_there(
    scratch: Path,
    repo: Path,
    shared_ssh: SshServer,  # noqa: F811
    far_live: FarLive,  # noqa: F811
) -> None:
    """The files screen and the detail pane of a far lane list its files as its own lanewatch
    lists them there (never this disk's); its ledger, a far file's content and the incident
    screen say where they are and the command that shows them (never an empty list that reads
    as "no files"); the trash screen lists the far host's trash with a HOST column and
    restores there."""
    far_home, far_proc, far_ns, far_key = far_live.home, far_live.proc, far_live.ns, far_live.key
    (far_ns / "made-there.txt").write_text("far bytes")  # a file the far lane really has
    host = far_live.host
    stream = HostStream(host)
    app = make_app([scratch], engine=ManyHosts(EngineProcess([scratch]), [stream]))
    async with app.run_test(size=(200, 44)) as pilot:
        await show(pilot, app, View.LANES, far_key)
        await until(
            pilot,
            lambda: (
                (d := app.main.details.detail) is not None and d.key == far_key and d.host == "far"
            ),
            timeout=30,
            what="the far lane's detail, listed there",
        )
        detail = app.main.details.detail
        assert detail is not None and detail.elsewhere is not None
        assert [w.path for w in detail.writes] == ["made-there.txt"]  # its meta folder left out
        assert detail.stamp is None and not detail.ledger  # nothing read from this disk
        assert detail.elsewhere.startswith("Ledger and owner stamp: on host far")
        await shows(pilot, "Recent writes (listed on host far)", "made-there.txt", timeout=30)
        await shows(pilot, "not read from here", timeout=30)

        app.navigator.open_files(far_key)
        await until(pilot, lambda: isinstance(app.screen, FilesScreen), what="files screen")
        files = app.screen
        assert isinstance(files, FilesScreen)
        text = await shows(pilot, "made-there.txt", "on host far, listed by its lanewatch")
        assert {"made-there.txt", ".lanewatch/owner.json"} <= set(files.files)
        assert files.files["made-there.txt"].size == len("far bytes")
        # Its content is not fetched: `v` says the command that shows it there.
        table = files.query_one(LaneTable)
        assert table.move_cursor("made-there.txt")
        await pilot.press("v")
        await until(
            pilot,
            lambda: any("less -- " in n.message for n in app.notices.notices),
            what="the far file's command",
        )
        [said] = [n.message for n in app.notices.notices if "less -- " in n.message]
        assert said.endswith(f"ssh far 'less -- {far_ns}/made-there.txt'"), said
        assert isinstance(app.screen, FilesScreen)  # no file screen reading this disk
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="back")

        # A far incident (a second claim of the lane there, refused and recorded there).
        refused_far_claim(repo, far_home, "far-lane")
        await until(pilot, lambda: bool(stream.incidents), timeout=60, what="the far incident")
        [incident] = stream.incidents.values()
        app.navigator.open_incident(incident)
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), what="incident")
        screen = app.screen
        assert isinstance(screen, IncidentScreen)
        await until(pilot, lambda: screen.report is not None, timeout=30, what="its report")
        assert screen.report is not None and screen.report.victim_stamp is None
        assert not screen.report.ledger and not screen.report.files
        text = await shows(pilot, "not read from here", timeout=30)
        assert "incidents" in text and "--markdown" in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="back")

        # The far lane ends and is cleared there: the trash screen lists it under host far.
        far_proc.terminate()
        await asyncio.to_thread(far_proc.wait, 30)
        cleared = await asyncio.to_thread(remote.clear, host, str(far_ns))
        assert cleared.ok, cleared
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TrashScreen), what="trash")
        trash = app.screen
        assert isinstance(trash, TrashScreen)
        await until(pilot, lambda: bool(trash.items), timeout=30, what="far trash listed")
        [item] = trash.items.values()
        assert item.id.startswith("far:") and item.original == far_key
        text = await shows(pilot, "HOST", "far-lane", timeout=30)
        row = next(line for line in text.splitlines() if "far-lane" in line)
        assert row.split()[0].strip("│") == "far" or " far " in row, row
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="dialog")
        await shows(
            pilot, "Restore from trash on host far?", "On host far, through its own", timeout=30
        )
        await settle(pilot)
        await pilot.press("y")
        result = await outcome(pilot, app, "restore")
        assert result.ok, result.message
        assert "host far" in result.message
        assert (far_ns / "made-there.txt").read_text() == "far bytes"  # back, there


async def test_a_far_lanes_hostile_file_names_are_inert_and_a_lost_host_is_said(
    scratch: Path,
    ssh_server: SshServer,  # noqa: F811 (its own: it stops it)
    far_live: FarLive,  # noqa: F811
) -> None:
    """File names that carry terminal controls, markup and undecodable bytes come through ssh
    byte for byte and are shown as visible escapes; when the host goes, listing again says it
    is unreachable and shows the command to list them there, and no stale rows."""
    far_ns, far_key = far_live.ns, far_live.key
    for raw in FILE_NAMES:
        (far_ns / os.fsdecode(raw)).write_bytes(b"far")
    (far_ns / "[bold red]markup.txt").write_text("far")
    stream = HostStream(far_live.host)
    app = make_app([scratch], engine=ManyHosts(EngineProcess([scratch]), [stream]))
    async with app.run_test(size=(200, 44)) as pilot:
        await show(pilot, app, View.LANES, far_key)
        app.navigator.open_files(far_key)
        await until(pilot, lambda: isinstance(app.screen, FilesScreen), what="files screen")
        files = app.screen
        assert isinstance(files, FilesScreen)
        await until(pilot, lambda: len(files.files) > 3, timeout=30, what="the far listing")
        assert {os.fsdecode(raw) for raw in FILE_NAMES} <= set(files.files)
        text = await shows(pilot, "f\\x1b[2JWIPED.txt", "[bold red]markup.txt")
        assert "g\\xff\\x9bBYTE.txt" in text, text
        check_text(text.encode(), "the far files screen")  # nothing raw reached the screen

        await asyncio.to_thread(ssh_server.stop)  # the host goes away
        await pilot.press("r")
        text = await shows(pilot, "Host far is unreachable", timeout=60)
        assert not files.files and not files.query_one(LaneTable).row_count
        note = str(files.query_one("#files-note", Static).content)
        assert note.endswith(f"List them there: ssh far 'ls -lAtR {far_ns}'"), note
