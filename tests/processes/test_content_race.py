"""A content read at a close-write is tied to its writer only when no other writer's data can
have landed before the read: the race made certain, whatever the load.

CI at a load of 25 recorded lane A's content as lane B's: A was preempted between its data
landing and its event being queued for longer than the 100 ms grace. That moment cannot be held
from userspace, but a shared `mmap` lands data with no event until the close: writer A maps the
file and writes into it while B's close-write is being read (a hook on the reader waits for it),
then keeps running (as a preempted writer is runnable) for a second before it closes. The
attribution must not record A's bytes as B's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lanewatch.kernel import attribution
from lanewatch.kernel.attribution import Attribution, KernelBatch
from lanewatch.kernel.fanotify import FanEvent, FanotifyWatcher
from lanewatch.records.writes import WriteEntry, history
from tests.conftest import wait_for
from tests.kits.attributionkit import privileged, sha

SPIN = 1.0  # seconds writer A keeps running between its data landing and its close

# Writer A: write the file once (so it is known as a writer), open it for writing, then on
# "go" write b"A 2" through a shared mapping (no event), say so, run for $2 s, close.
WRITER_A = """
import mmap, os, sys, time
path, spin = sys.argv[1], float(sys.argv[2])
with open(path, "wb") as f:
    f.write(b"A 0")
fd = os.open(path, os.O_RDWR)
print("ready", flush=True)
sys.stdin.readline()
with mmap.mmap(fd, 3) as m:
    m[:3] = b"A 2"
    print("landed", flush=True)
    end = time.monotonic() + spin
    while time.monotonic() < end:
        pass
os.close(fd)
sys.stdin.readline()
"""


def closes(root: Path, target: Path, pid: int) -> list[WriteEntry]:
    return [
        e for e in history([str(root)], str(target)) if e.pid == pid and e.event.startswith("close")
    ]


@privileged
def test_another_writers_data_landed_before_the_read_is_never_this_writers_content(
    root: Path, monkeypatch: Any
) -> None:
    # Contested however long the steps below take on a loaded machine (1 s by default).
    monkeypatch.setattr(attribution, "CONTESTED", 3600.0)
    folder = root / "ck-0123456789ab.race" / "tmp"
    folder.mkdir(parents=True)
    target = folder / "f"
    real = os.path.realpath(target)

    def sink(_batch: KernelBatch) -> None:
        pass

    attr = Attribution([str(root)], sink, shared=[])
    on_events = attr._on_events
    writer_a: subprocess.Popen[str] | None = None
    fired: list[int] = []

    def hook(events: Sequence[FanEvent]) -> None:
        """On the reader: at B's close-write of the file, before its content is read, A's
        data lands (and A keeps running); then the real method reads the content."""
        a = writer_a
        theirs = [
            ev
            for ev in events
            if ev.is_close_write and ev.path == real and a is not None and ev.pid != a.pid
        ]
        if theirs and a is not None and not fired:
            fired.append(theirs[0].pid)
            assert a.stdin is not None and a.stdout is not None
            a.stdin.write("go\n")
            a.stdin.flush()
            a.stdout.readline()  # "landed" (or "" if A died: the test then fails below)
        on_events(events)

    attr._on_events = hook  # type: ignore[method-assign]
    attr.start()
    writer_b = None
    try:
        writer_a = subprocess.Popen(
            [sys.executable, "-c", WRITER_A, str(target), str(SPIN)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer_a.stdout is not None and writer_a.stdout.readline() == "ready\n"
        wait_for(lambda: closes(root, target, writer_a.pid), 30, what="A's first write read")
        writer_b = subprocess.Popen(
            ["sh", "-c", 'printf "B 1" > "$1"; exec sleep 60', "sh", str(target)]
        )
        (b_write,) = wait_for(lambda: closes(root, target, writer_b.pid), 60, what="B's write")
        assert fired == [writer_b.pid], "the hook never saw B's close-write"
        assert b_write.sha256 != sha(b"A 2"), f"A's content recorded as B's: {b_write}"
        assert b_write.sha256 is None and "content unknown" in b_write.event, b_write
        a_writes = wait_for(
            lambda: closes(root, target, writer_a.pid)[1:], 60, what="A's mapped write"
        )
    finally:
        if writer_a is not None:
            writer_a.communicate("\n", timeout=30)
        if writer_b is not None:
            writer_b.kill()
            writer_b.wait()
        attr.stop()
    assert a_writes[-1].sha256 == sha(b"A 2"), a_writes


@privileged
def test_the_watcher_is_caught_up_only_once_every_event_queued_before_was_delivered(
    own_fs: Path,
) -> None:
    """`caught_up()` (the attribution's proof that it has read a rival's events) is False while
    a read is in its callback and while events are queued; once True, every event queued before
    the call was delivered. On a tmpfs of the test's own: no one else's writes."""
    delivered: list[str | None] = []
    inside, release = threading.Event(), threading.Event()

    def callback(events: Sequence[FanEvent]) -> None:
        delivered.extend(ev.path for ev in events)
        inside.set()
        release.wait(60)

    def write(name: str) -> str:
        path = own_fs / name
        subprocess.run(["sh", "-c", 'printf x > "$1"', "sh", str(path)], check=True)
        return os.path.realpath(path)

    watcher = FanotifyWatcher([own_fs], callback)
    watcher.start()
    try:
        wait_for(watcher.caught_up, 30, what="an idle watcher caught up")
        write("first")
        assert inside.wait(30), "the first write never reached the callback"
        assert not watcher.caught_up()  # a read in its callback
        second = write("second")  # queued behind the held read
        assert not watcher.caught_up()
        release.set()
        wait_for(watcher.caught_up, 30, what="the watcher caught up")
        assert second in delivered, delivered
    finally:
        release.set()
        watcher.stop()
    assert not watcher.caught_up()  # stopped: it can read nothing more
