"""The dashboard's pure parts: the change buffer between threads, the picture split into three
views, formatting, and incident export. No app, no engine: plain data in, plain data out."""

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lanewatch.model.views import Changes, Evidence, NsState
from lanewatch.tui.backend.report_export import build_report, render, write_report
from lanewatch.tui.plumbing.change_buffer import ChangeBuffer
from lanewatch.tui.screens.incident_screen import context_renderable
from lanewatch.tui.state import humanize
from lanewatch.tui.state.dashboard_store import Picture, View
from lanewatch.tui.widgets import view_columns
from lanewatch.tui.widgets.detail_pane import incident_renderable

from .fakes import NOW, incident, ns_view
from .helpers import plain


def test_buffer_notifies_once_per_batch_and_merges() -> None:
    notes: list[int] = []
    buffer = ChangeBuffer(lambda: notes.append(1))
    a, b = ns_view("a"), ns_view("b")
    buffer.put(Changes(upserts={a.key: a}, at=1))
    buffer.put(Changes(upserts={b.key: b}, at=2))
    buffer.put(Changes(removed=frozenset({a.key}), at=3))
    assert notes == [1], "one notification until the UI drains"
    merged = buffer.take()
    assert merged is not None
    assert set(merged.upserts) == {b.key} and merged.removed == {a.key}
    assert buffer.take() is None
    buffer.put(Changes(upserts={a.key: a}, at=4))
    assert notes == [1, 1]


def test_buffer_survives_a_closed_loop_and_drops_after_close() -> None:
    def closed() -> None:
        raise RuntimeError("Event loop is closed")

    buffer = ChangeBuffer(closed)
    buffer.put(Changes(full=True))  # must not raise on the engine's thread
    buffer.close()
    buffer.put(Changes(full=True))
    assert buffer.take() is None


def test_buffer_from_many_threads_loses_nothing() -> None:
    buffer = ChangeBuffer(lambda: None)
    views = [ns_view(f"lane-{n}") for n in range(200)]

    def send(chunk: list) -> None:
        for v in chunk:
            buffer.put(Changes(upserts={v.key: v}))

    threads = [threading.Thread(target=send, args=(views[n::4],)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = buffer.take()
    assert merged is not None and len(merged.upserts) == 200


def test_picture_moves_rows_between_views() -> None:
    pic = Picture()
    live = ns_view("a")
    delta = pic.apply(Changes(upserts={live.key: live}, full=True))
    assert set(delta.upserts[View.LANES]) == {live.key} and pic.loaded
    dead = ns_view("a", NsState.STALE, reason="pid 4242 does not exist")
    delta = pic.apply(Changes(upserts={dead.key: dead}))
    assert delta.removals[View.LANES] == {live.key}
    assert set(delta.upserts[View.STALE]) == {dead.key}
    assert pic.counts() == {View.LANES: 0, View.COLLISIONS: 0, View.STALE: 1}
    # A full picture without it removes it.
    delta = pic.apply(Changes(full=True))
    assert delta.removals[View.STALE] == {dead.key}


def test_picture_hides_acknowledged_incidents() -> None:
    pic = Picture()
    inc = incident("takeover-1", "/roots/r1/a")
    pic.apply(Changes(incidents={inc.id: inc}, full=True))
    assert pic.counts()[View.COLLISIONS] == 1
    acked = incident("takeover-1", "/roots/r1/a", acknowledged=True)
    delta = pic.apply(Changes(incidents={acked.id: acked}))
    assert delta.removals[View.COLLISIONS] == {acked.id}
    assert pic.counts()[View.COLLISIONS] == 0
    assert pic.incidents_of("/roots/r1/a") == [acked]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (3599, "59m"),
        (3600, "1h"),
        (5400, "1h30m"),
        (86400, "1d"),
        (90000, "1d1h"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert humanize.duration(seconds) == text


def test_sizes() -> None:
    assert [humanize.size(n) for n in (None, 0, 999, 1000, 12_345, 3_400_000)] == [
        "…",
        "0B",
        "999B",
        "1.0kB",
        "12kB",
        "3.4MB",
    ]


def test_export_escapes_untrusted_text_and_never_clobbers(tmp_path: Path) -> None:
    victim = ns_view("a|b`c", key=str(tmp_path / "ns"))
    inc = incident("takeover-0123", victim.key, intruder={"lane": "x\n| injected |", "pid": 7})
    report = build_report([], inc)
    md = render(report, "md")
    # The newline is shown (`\n`, its backslash escaped for Markdown), the pipes escaped.
    assert "x | injected |" not in md and "x\\\\n\\| injected \\|" in md
    data = json.loads(render(report, "json"))
    assert data["incident"]["intruder"]["lane"] == "x\n| injected |"
    assert data["evidence"][0]["sha256"] == "ab" * 32
    first = write_report(report, "md", tmp_path)
    second = write_report(report, "md", tmp_path)
    assert first != second and first.read_text() == second.read_text() == md
    assert first.name == "lanewatch-incident-takeover-0123.md"
    assert second.name == "lanewatch-incident-takeover-0123-1.md"


def test_a_shared_port_timeline_shows_its_listeners_not_files_nor_a_victims_stamp(
    tmp_path: Path,
) -> None:
    """A shared port has no file and no victim: the timeline and the export say who listened
    where, not "no write was recorded" and "victim namespace not known"."""
    writer = "pid 7 (lane agent-3): python3 -m http.server 8000"
    listens = Evidence("127.0.0.1:8000", NOW - 50, None, None, "inferred", writer, "listens")
    port = replace(incident("shared-port-1", "", kind="shared-port"), victim=None,
                   evidence=(listens,))  # fmt: skip
    report = build_report([], port)
    md, pane = render(report, "md"), plain(context_renderable(report))
    files = ("What each writer wrote", "Victim's owner stamp", "Ledger")
    for shown in (md, pane):
        assert not any(words in shown for words in files), shown
    assert writer in md and "the evidence above is all" in pane
    # The Collisions view's detail pane names every lane of the port, not the latest alone.
    lanes = ({"lane": "agent-3", "pid": 7, "gone_at": NOW - 40}, {"lane": "agent-4", "pid": 8})
    detail = plain(incident_renderable(replace(port, writers=lanes), lambda v: v or "–"))
    assert "lane agent-3, pid 7, gone since" in detail and "lane agent-4, pid 8" in detail
    # A takeover (a file, a victim) keeps all three.
    takeover = incident("takeover-1", str(tmp_path / "ns"))
    for shown in (render(build_report([], takeover), "md"),
                  plain(context_renderable(build_report([], takeover)))):  # fmt: skip
        assert all(words in shown for words in files), shown


def test_a_collision_says_what_it_is_about_in_its_row_and_its_detail() -> None:
    """The Collisions row's WHAT and the detail pane's first line are the incident's summary,
    which alone names the path or port (five shared files of one lane read alike without it);
    a summary is built from untrusted names, so its controls are shown as escapes."""
    said = "xb writes /tmp/.X99-lock\x1b[31m outside its lane"
    inc = replace(incident("shared-file-1", "", kind="shared-file"), victim=None, summary=said)
    keys = [c.key for c in view_columns.COLUMNS[View.COLLISIONS]]
    what = view_columns.collisions_row(inc, NOW, lambda key: key or "–")[keys.index("what")]
    detail = plain(incident_renderable(inc, lambda v: v or "–"))
    for shown in (plain(what), detail):
        assert "xb writes /tmp/.X99-lock\\x1b[31m outside its lane" in shown, shown
        assert "\x1b" not in shown
    assert detail.splitlines()[1].startswith("what") and keys[-1] == "what"
    # A record with no summary (written before summaries were kept) has no "what" line.
    assert "what" not in plain(incident_renderable(replace(inc, summary=""), lambda v: v or "–"))


def test_markdown_code_fence_outlasts_backticks_in_the_stamp(tmp_path: Path) -> None:
    from lanewatch.lanes.stamp import Stamp, write_stamp

    ns = tmp_path / "ns"
    (ns / ".lanewatch").mkdir(parents=True)
    stamp = Stamp(
        lane="a",
        namespace="ns",
        checkout_id="repo-0123456789ab",
        checkout_path="/r",
        host="h",
        boot_id="b",
        pid=1,
        start_ticks=1,
        user="u",
        uid=0,
        command=["echo", "````\n# injected heading"],
        started_at=NOW,
        heartbeat_at=NOW,
        heartbeat_interval=5.0,
    )
    write_stamp(ns, stamp)
    victim = ns_view("a", key=str(ns))
    md = render(build_report([], incident("takeover-1", victim.key)), "md")
    opening = next(ln for ln in md.splitlines() if ln.startswith("`") and ln.endswith("json"))
    fence = opening.removesuffix("json")
    assert len(fence) >= 5 and set(fence) == {"`"}
    assert md.count(fence + "\n") >= 1 and "\n" + fence + "\n" in md


def test_picture_counts_follow_every_change() -> None:
    import random

    rng = random.Random(7)
    pic = Picture()
    states = list(NsState)
    for step in range(400):
        if step % 97 == 0:
            made = [ns_view(str(n), rng.choice(states)) for n in range(5)]
            views = {v.key: v for v in made}
            incs = {f"i{n}": incident(f"i{n}", "/roots/r1/0") for n in range(2)}
            pic.apply(Changes(upserts=views, incidents=incs, full=True))
            continue
        n = rng.randrange(8)
        if rng.random() < 0.2:
            pic.apply(Changes(removed=frozenset({f"/roots/r1/{n}"})))
        elif rng.random() < 0.3:
            inc = incident(f"i{n % 3}", "/roots/r1/0", acknowledged=rng.random() < 0.5)
            pic.apply(Changes(incidents={inc.id: inc}))
        else:
            v = ns_view(str(n), rng.choice(states))
            pic.apply(Changes(upserts={v.key: v}))
        expected = {view: len(pic.rows(view)) for view in View}
        assert pic.counts() == expected, step


@given(
    then=st.floats(min_value=0, max_value=4e6, allow_nan=False),
    since=st.floats(min_value=-5, max_value=4e6, allow_nan=False),
)
def test_an_age_keeps_its_text_until_the_time_it_says_it_changes(then: float, since: float) -> None:
    """The dashboard skips rebuilding a row until `ago_changes_at`: that must never skip a
    change (the text is the same up to it) nor come late (it differs just after it). Checked
    a millisecond away from the boundary: float sums may land a hair to either side of it."""
    now = then + since
    due = humanize.ago_changes_at(then, now)
    assert due >= now
    shown = humanize.ago(then, now)
    for t in (now, (now + due) / 2, due - 0.001):
        if now <= t < due:
            assert humanize.ago(then, t) == shown
    assert humanize.ago(then, due + 0.001) != shown
    assert humanize.ago_changes_at(None, now) == math.inf


@given(since=st.floats(min_value=0, max_value=2e5, allow_nan=False))
def test_time_changes_only_the_age_cells_the_tick_rebuilds(since: float) -> None:
    """The tick rebuilds only `view_columns.age_cells`: a row built later differs from the row
    built now in those cells alone, and they are the cells the row builders show."""
    rows = {
        View.LANES: ns_view("a"),
        View.STALE: ns_view("b", NsState.RELEASED, released_at=NOW - 30),
        View.COLLISIONS: incident("i1", "/roots/r1/a"),
    }

    def build(view: View, at: float) -> tuple[object, ...]:
        row = rows[view]
        if view is View.COLLISIONS:
            return view_columns.collisions_row(row, at, lambda key: key or "–")  # type: ignore[arg-type]
        if view is View.LANES:
            return view_columns.lanes_row(row, at)  # type: ignore[arg-type]
        return view_columns.stale_row(row, at)  # type: ignore[arg-type]

    for view, row in rows.items():
        keys = [c.key for c in view_columns.COLUMNS[view]]
        now, later = build(view, NOW), build(view, NOW + since)
        ages = view_columns.age_cells(view, row, NOW + since)
        moved = {keys[i] for i, (a, b) in enumerate(zip(now, later, strict=True)) if a != b}
        assert moved <= set(ages), view
        assert {k: later[keys.index(k)] for k in ages} == ages, view
