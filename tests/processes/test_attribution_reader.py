"""The kernel reader's per-read memos (`kernel/attribution.py`): a folder's zone asked once, a
writer resolved once per read, and forgotten when a stamp in the same read changes who owns
what. Driven with real pidfds of a real process, events built by hand (no fanotify group: the
reader's own part is what is tested; test_attribution.py runs the whole path as root)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lanewatch.kernel.attribution import Attribution, KernelBatch
from lanewatch.kernel.fanevents import FanEvent
from lanewatch.linux.fanotify_abi import FAN_CLOSE_WRITE
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.processes.pidlane import Writer
from tests.kits.enginekit import make_stamp


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def fds() -> Iterator[list[int]]:
    opened: list[int] = []
    try:
        yield opened
    finally:
        for fd in opened:
            os.close(fd)


def counting(att: Attribution, name: str) -> list[object]:
    """Replace `att.<name>` (a bound method, or `att.lanes.resolve`) by one that records its
    first argument each call."""
    seen: list[object] = []
    owner: Any = att.lanes if name == "resolve" else att
    real: Callable[..., Any] = getattr(owner, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[0])
        return real(*args, **kwargs)

    setattr(owner, name, spy)
    return seen


def write_event(pid: int, path: Path, fds: list[int], *, content: bool = False) -> FanEvent:
    """A close-write of `path` by `pid`, with a pidfd for it (and, `content`: the file open)."""
    pidfd = os.pidfd_open(pid)
    fds.append(pidfd)
    fd = -1
    if content:
        fd = os.open(path, os.O_RDONLY)
        fds.append(fd)
    return FanEvent(pid, FAN_CLOSE_WRITE, str(path), fd, pidfd=pidfd)


def test_a_folders_zone_is_asked_once_and_always_the_paths_own(tmp_path: Path) -> None:
    root, shared, state = tmp_path / "root", tmp_path / "tmp", tmp_path / "state"
    att = Attribution([str(root)], lambda batch: None, shared=[str(shared)], ignore=[str(state)])
    ns = root / "ns.A"
    paths = [
        ns / "f",
        ns / "sub" / "g",
        root / "stray",  # a file directly in the root: nobody's
        root / ".lanewatch-root" / "x",  # the root's own data
        shared / "a",
        shared / "b" / "c",
        state / "scratch" / "ns.B" / "x",
        tmp_path / "other",  # beside the prefixes: a name there may be a prefix itself
        tmp_path / "tmp",  # ... as this one is (shared temp)
        tmp_path / "root",
        Path("/elsewhere/y"),
        Path("/x"),
    ]
    for order in (paths, paths[::-1], paths):
        for p in order:
            assert att._zone(str(p)) == att._zone_of(str(p)), p
    asked = counting(att, "_zone_of")
    for i in range(100):
        assert att._zone(str(shared / "busy" / f"f{i}")) == ("shared", None, None)
    assert asked == [str(shared / "busy" / "f0")]  # once for the folder
    for p in ("tmp", "root", "other"):  # in a folder above a prefix: asked each time
        att._zone(str(tmp_path / p))
    assert len(asked) == 4


def test_a_writer_is_resolved_once_per_read(
    tmp_path: Path, child: subprocess.Popen[bytes], fds: list[int]
) -> None:
    shared = tmp_path / "tmp"
    att = Attribution([str(tmp_path / "root")], lambda batch: None, shared=[str(shared)])
    resolved = counting(att, "resolve")
    att._on_events([write_event(child.pid, shared / f"f{i}", fds) for i in range(50)])
    assert resolved == [child.pid]
    att._on_events([write_event(child.pid, shared / "again", fds)])
    assert resolved == [child.pid, child.pid]  # the next read asks again
    me = os.getpid()
    att._on_events([write_event(me, shared / "m", fds), write_event(child.pid, shared / "c", fds)])
    assert resolved[2:] == [me, child.pid]  # one per writer


def test_a_stamp_in_the_same_read_makes_its_owners_next_write_its_lanes(
    tmp_path: Path, child: subprocess.Popen[bytes], fds: list[int]
) -> None:
    """An in-process owner (`pytest -p lanewatch`) writes its stamp, then in shared temp at
    once: both in one read. Its first write, before the stamp, is nobody's; the one after is
    its lane's, not the memo's "nobody" of a moment before."""
    root, shared = tmp_path / "root", tmp_path / "tmp"
    shared.mkdir(exist_ok=True)  # the suite gives each test a temp folder there
    batches: list[KernelBatch] = []
    att = Attribution([str(root)], batches.append, shared=[str(shared)])
    who = ProcessIdentity.of(child.pid)
    ns = make_stamp(root, "A", pid=who.pid, start_ticks=who.start_ticks)
    stamp = ns / ".lanewatch" / "owner.json"
    resolved = counting(att, "resolve")
    before, after = shared / "before", shared / "after"
    for p in (before, after):
        p.write_text("x")
    att._on_events(
        [
            write_event(child.pid, before, fds),
            write_event(child.pid, stamp, fds, content=True),
            write_event(child.pid, after, fds),
        ]
    )
    assert resolved == [child.pid, child.pid]  # the stamp's own write from the memo, then again
    facts = [f for f in att._queue.get_nowait() if hasattr(f, "writer")]
    writers: dict[str, Writer] = {f.path: f.writer for f in facts}
    assert str(before) not in writers  # nobody's lane then: not ours to record
    assert writers[str(after)].lane == "A"
