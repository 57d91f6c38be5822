"""The dashboard's engine in a process of its own (`EngineProcess`): real child processes, real
roots, real writes and real signals. The child must deliver what an in-process engine delivers,
never outlive the dashboard, and show its own death instead of freezing the picture."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from lanewatch.engine import wire
from lanewatch.engine.process import EngineProcess, EngineStartError
from lanewatch.model.views import Changes, SourceHealth
from lanewatch.records.writes import history
from tests.conftest import wait_for
from tests.kits.attributionkit import privileged
from tests.kits.enginekit import Recorder, make_stamp
from tests.kits.prockit import alive


def files(rec: Recorder, ns: Path) -> int | None:
    view = rec.view(ns)
    return None if view is None else view.files


def test_the_child_delivers_the_picture_then_live_writes(root: Path) -> None:
    ns = make_stamp(root, "a")
    engine = EngineProcess([str(root)])
    rec = Recorder()
    engine.start(rec)
    try:
        # The early picture (read here from the stamps) is in before `start` returns.
        assert rec.fulls >= 1 and rec.view(ns) is not None
        assert engine.settled.wait(30)
        wait_for(lambda: files(rec, ns) is not None, 20)
        (ns / "tmp").mkdir()
        for i in range(5):
            (ns / "tmp" / f"f{i}").write_text("written by the test")
        wait_for(lambda: files(rec, ns) == 6, 20)  # + the stamp
        assert engine.stats.get("overflows") == 0  # counters cross the boundary too
        assert engine.pid is not None and engine.pid != os.getpid()
        child = engine.pid
    finally:
        engine.stop()
    assert not alive(child)
    assert engine.pid is None


def test_a_child_killed_shows_degraded_then_comes_back(root: Path) -> None:
    ns = make_stamp(root, "a")
    engine = EngineProcess([str(root)])
    rec = Recorder()
    engine.start(rec)
    try:
        assert engine.settled.wait(30)
        first = engine.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: (str(root), "degraded") in rec.statuses, 20)
        with rec.lock:
            details = [h.detail for h in rec.picture.health]
        assert any("signal 9" in d for d in details), details
        wait_for(lambda: engine.pid not in (None, first) and rec.health(root) == "ok", 30)
        assert engine.restarts == 1
        new = make_stamp(root, "b")  # the new child watches
        wait_for(lambda: rec.view(new) is not None, 20)
        assert rec.view(ns) is not None
    finally:
        engine.stop()


def test_the_child_ends_when_the_dashboard_dies(tmp_path: Path, root: Path) -> None:
    """SIGKILL of the dashboard's process closes the child's stdin: it stops on its own."""
    make_stamp(root, "a")
    script = textwrap.dedent(
        f"""
        import sys, time
        from lanewatch.engine.process import EngineProcess
        engine = EngineProcess([{str(root)!r}])
        engine.start(lambda changes: None)
        print(engine.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait(10)
        wait_for(lambda: not alive(child), 20)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_stop_before_any_picture_is_prompt_and_idempotent(root: Path) -> None:
    engine = EngineProcess([str(root)])
    engine.stop()  # never started: nothing to do
    engine.start(Recorder())
    child = engine.pid
    engine.stop()
    engine.stop()
    assert child is not None and not alive(child)
    assert engine.stats == {}  # nobody to ask: an answer, not a hang


def test_frames_carry_read_only_mappings_and_say_when_broken() -> None:
    changes = Changes(
        incidents=MappingProxyType({}),
        health=(SourceHealth("/r", "ok", "inotify"),),
        full=True,
        at=1.5,
    )
    stream = io.BytesIO()
    wire.Writer(stream).send(("changes", changes))
    data = stream.getvalue()
    got = wire.receive(io.BytesIO(data))
    assert got == ("changes", changes)
    assert isinstance(got[1].upserts, MappingProxyType)  # type: ignore[index]
    assert wire.receive(io.BytesIO(b"")) is None  # a clean end between frames
    with pytest.raises(wire.WireError, match="inside a frame"):
        wire.receive(io.BytesIO(data[:-3]))
    with pytest.raises(wire.WireError, match="unreadable"):
        wire.receive(io.BytesIO(b"\x00\x00\x00\x03abc"))


@privileged
def test_the_dashboards_own_writes_are_not_attributed(root: Path) -> None:
    """The engine process counts the dashboard that started it as lanewatch itself: its
    writes (clears, trash moves) are nobody's collision; another process's are kept."""
    ns = make_stamp(root, "a")
    (ns / "tmp").mkdir()
    mine, theirs = ns / "tmp" / "mine.txt", ns / "tmp" / "theirs.txt"
    engine = EngineProcess([str(root)])
    engine.start(Recorder())
    try:
        assert engine.settled.wait(30)
        wait_for(lambda: engine.attribution == "kernel", 20)
        mine.write_text("written by the dashboard's process")
        subprocess.run(
            [sys.executable, "-c", f"open({str(theirs)!r}, 'w').write('someone else')"],
            check=True,
        )
        wait_for(lambda: history([str(root)], str(theirs)), 20)  # read after mine: in order
        assert history([str(root)], str(mine)) == []
    finally:
        engine.stop()


def test_a_child_that_cannot_start_is_an_error_from_start(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No interpreter to run the engine (a real process that exits at once, exit 1): `start`
    raises with the reason, nothing restarts, nothing is left running."""
    monkeypatch.setattr(sys, "executable", "/bin/false")
    engine = EngineProcess([str(root)])
    rec = Recorder()
    with pytest.raises(EngineStartError, match=r"ended \(exit 1\)"):
        engine.start(rec)
    assert engine.restarts == 0 and engine.pid is None
    assert (str(root), "degraded") not in rec.statuses
    engine.stop()
