"""The fanotify binding: parsing and fd ownership everywhere, real kernel events when privileged.

Privileged tests need root or CAP_SYS_ADMIN; without it they skip with the reason that
`fanotify_available()` gives. Nothing here writes to a fixed shared path.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from lanewatch.kernel import fanevents
from lanewatch.kernel import fanotify as fan
from lanewatch.kernel.fanotify import (
    FAN_CLOSE_WRITE,
    FAN_MODIFY,
    FAN_NOFD,
    FAN_OPEN_PERM,
    FAN_Q_OVERFLOW,
    EventBatch,
    FanEvent,
    FanotifyError,
    FanotifyGroup,
    FanotifyWatcher,
    events_from_buffer,
    fanotify_available,
    mask_names,
    parse_metadata,
    read_content,
)

AVAILABLE, REASON = fanotify_available()
F = TypeVar("F", bound=Callable[..., object])


def privileged(test: F) -> F:
    """Runs with root or CAP_SYS_ADMIN; otherwise skips, saying why fanotify is unavailable."""
    skip = pytest.mark.skipif(not AVAILABLE, reason=f"fanotify unavailable here: {REASON}")
    return pytest.mark.privileged(skip(test))


def record(mask: int, fd: int, pid: int, *, extra: bytes = b"", vers: int = 3) -> bytes:
    """One fanotify_event_metadata record, as the kernel lays it out."""
    size = fan.EVENT_METADATA.size + len(extra)
    return fan.EVENT_METADATA.pack(size, vers, 0, fan.EVENT_METADATA.size, mask, fd, pid) + extra


def fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError as exc:
        assert exc.errno == errno.EBADF
        return False
    return True


def open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


# --- parsing, mask decoding, content: no privilege needed ------------------------------------


def test_parse_metadata_reads_each_record_and_skips_info_records() -> None:
    buf = (
        record(FAN_MODIFY | FAN_CLOSE_WRITE, 7, 1234)
        + record(FAN_CLOSE_WRITE, 8, 99, extra=b"\x01" * 16)  # an info record we do not ask for
        + record(FAN_Q_OVERFLOW, FAN_NOFD, 0)
        + b"\x00" * 10  # a truncated tail is not a record
    )
    recs = parse_metadata(buf)
    assert [(r.mask, r.fd, r.pid, r.version) for r in recs] == [
        (FAN_MODIFY | FAN_CLOSE_WRITE, 7, 1234, 3),
        (FAN_CLOSE_WRITE, 8, 99, 3),
        (FAN_Q_OVERFLOW, FAN_NOFD, 0, 3),
    ]


def test_parse_metadata_reads_pidfd_records_the_short_way_and_the_long_way() -> None:
    pidfd = fan.INFO_HEADER.pack(fan.FAN_EVENT_INFO_TYPE_PIDFD, 0, 8) + fan.INFO_PIDFD.pack(41)
    other = fan.INFO_HEADER.pack(99, 0, 8) + b"\x00" * 4
    buf = (
        record(FAN_CLOSE_WRITE, 7, 1234, extra=pidfd)  # the usual layout
        + record(FAN_MODIFY, 8, 99, extra=other + pidfd)  # another info record first
        + record(FAN_MODIFY, 9, 98, extra=other)  # no pidfd
        + record(FAN_Q_OVERFLOW, FAN_NOFD, 0)
    )
    assert [(r.mask, r.fd, r.pid, r.pidfd) for r in parse_metadata(buf)] == [
        (FAN_CLOSE_WRITE, 7, 1234, 41),
        (FAN_MODIFY, 8, 99, 41),
        (FAN_MODIFY, 9, 98, fan.FAN_NOPIDFD),
        (FAN_Q_OVERFLOW, FAN_NOFD, 0, fan.FAN_NOPIDFD),
    ]


def test_parse_metadata_stops_at_a_malformed_length() -> None:
    bad = fan.EVENT_METADATA.pack(4, 3, 0, 24, FAN_MODIFY, 5, 1)  # event_len < header
    assert parse_metadata(record(FAN_MODIFY, 3, 1) + bad + record(FAN_MODIFY, 4, 1)) == [
        fan.RawEvent(FAN_MODIFY, 3, 1, 3)
    ]
    too_long = fan.EVENT_METADATA.pack(4096, 3, 0, 24, FAN_MODIFY, 5, 1)
    assert parse_metadata(too_long) == []


def test_mask_names() -> None:
    assert mask_names(FAN_MODIFY | FAN_CLOSE_WRITE) == ("MODIFY", "CLOSE_WRITE")
    assert mask_names(FAN_Q_OVERFLOW) == ("Q_OVERFLOW",)
    assert mask_names(FAN_MODIFY | 0x0400_0000) == ("MODIFY", "0x4000000")
    assert mask_names(0) == ()


def test_events_from_buffer_filters_own_pid_and_paths_and_owns_the_rest(tmp_path: Path) -> None:
    # Real descriptors stand in for the ones the kernel would hand us.
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (inside / "theirs").write_bytes(b"theirs")
    (inside / "ours").write_bytes(b"ours")
    (outside / "far").write_bytes(b"far")
    theirs = os.open(inside / "theirs", os.O_RDONLY)
    ours = os.open(inside / "ours", os.O_RDONLY)
    far = os.open(outside / "far", os.O_RDONLY)
    me, other = os.getpid(), os.getpid() + 1
    buf = (
        record(FAN_CLOSE_WRITE, theirs, other)
        + record(FAN_CLOSE_WRITE, ours, me)
        + record(FAN_MODIFY, far, other)
        + record(FAN_Q_OVERFLOW, -errno.EBADF, 0)  # what 6.13+ sends with FAN_REPORT_FD_ERROR
        + record(FAN_CLOSE_WRITE, -errno.EMFILE, other)
    )
    prefix = str(inside.resolve()) + "/"
    lease = fanevents._Lease()
    events, records = events_from_buffer(
        buf, own=frozenset({me}), accept=lambda p: (p + "/").startswith(prefix), lease=lease
    )
    batch = EventBatch(events, records, lease)

    assert records == 5
    assert [(e.pid, e.path) for e in batch] == [
        (other, str((inside / "theirs").resolve())),
        (0, None),
        (other, None),
    ]
    # Our own write and the one outside the prefix were closed at once; we own the rest.
    assert not fd_is_open(ours) and not fd_is_open(far)
    assert fd_is_open(theirs)
    first, overflow, failed = batch.events
    assert first.is_close_write and not first.is_overflow
    assert overflow.is_overflow and overflow.fd == FAN_NOFD and overflow.fd_error is None
    assert failed.fd_error == errno.EMFILE and not failed.is_overflow
    sample = first.read_content()
    assert sample is not None and sample.prefix == b"theirs"

    batch.close()
    batch.close()  # idempotent: a second close must not hit a reused fd number
    assert not fd_is_open(theirs)
    with pytest.raises(ValueError, match="already closed"):
        first.read_content()
    with pytest.raises(ValueError, match="no file descriptor"):
        overflow.read_content()


def test_events_from_buffer_closes_everything_if_accept_raises(tmp_path: Path) -> None:
    fds = []
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"x")
        fds.append(os.open(tmp_path / f"f{i}", os.O_RDONLY))
    buf = b"".join(record(FAN_CLOSE_WRITE, fd, os.getpid() + 1) for fd in fds)
    calls = []

    def accept(path: str) -> bool:
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return True

    with pytest.raises(RuntimeError):
        events_from_buffer(buf, accept=accept)
    assert not any(fd_is_open(fd) for fd in fds)


def test_read_content_reads_through_the_fd_without_moving_it(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40  # 10 KiB
    path = tmp_path / "blob"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 17, os.SEEK_SET)
        path.unlink()  # gone by name: the descriptor still reads it
        sample = read_content(fd, prefix_limit=100)
        assert sample is not None
        assert sample.size == len(data)
        assert sample.sha256 == hashlib.sha256(data).hexdigest()
        assert sample.prefix == data[:100] and not sample.complete
        assert os.lseek(fd, 0, os.SEEK_CUR) == 17

        big = read_content(fd, prefix_limit=8, hash_limit=1000)
        assert big is not None
        assert (big.size, big.sha256, big.prefix) == (len(data), None, data[:8])

        whole = read_content(fd)
        assert whole is not None and whole.complete and whole.prefix == data
    finally:
        os.close(fd)


def test_read_content_of_a_pipe_is_none() -> None:
    r, w = os.pipe()
    try:
        assert read_content(r) is None
    finally:
        os.close(r)
        os.close(w)


def test_unavailable_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    ok, reason = fanotify_available()
    assert not ok and "Linux-only" in reason
    with pytest.raises(FanotifyError):
        FanotifyGroup()


PROBE = textwrap.dedent(
    """
    import json, sys, tempfile
    from lanewatch.kernel import fanotify as fan
    ok, reason = fan.fanotify_available()
    try:
        fan.FanotifyWatcher([tempfile.gettempdir()], lambda events: None).start()
        raised = None
    except fan.FanotifyError as exc:
        raised = exc.reason
    print(json.dumps({"ok": ok, "reason": reason, "raised": raised}))
    """
)


def run_probe(prefix: list[str], **kwargs: object) -> dict[str, object]:
    out = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        **kwargs,  # type: ignore[call-overload]
    )
    return json.loads(out.stdout)


def test_import_never_raises_and_reports_non_linux() -> None:
    # The parent packages import other parts of lanewatch (and filelock, which does check the
    # platform): load them first, then pretend, then import this module fresh.
    code = "import sys, lanewatch.kernel; sys.platform = 'win32'\n" + PROBE
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result = json.loads(out.stdout)
    assert result["ok"] is False and "Linux-only" in result["reason"]
    assert result["raised"] == result["reason"]


def test_unavailable_without_cap_sys_admin_says_why() -> None:
    if os.geteuid() != 0:
        if AVAILABLE:
            pytest.skip("not root, yet fanotify works: cannot take the privilege away here")
        result = run_probe([])
    else:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root, and no setpriv to drop CAP_SYS_ADMIN for a child")
        # Root without CAP_SYS_ADMIN: what a container without the capability looks like.
        result = run_probe([setpriv, "--bounding-set=-sys_admin"])
    assert result["ok"] is False
    assert "CAP_SYS_ADMIN" in str(result["reason"])
    assert result["raised"] == result["reason"]


# --- real kernel events: root or CAP_SYS_ADMIN ---------------------------------------------


class Collector:
    """A watcher callback that keeps what tests need once the descriptors are closed."""

    def __init__(self, read: bool = True) -> None:
        self.cond = threading.Condition()
        self.events: list[FanEvent] = []
        self.content: dict[str, str | None] = {}  # path -> sha256 at close-write
        self.batches = 0
        self.open_during_callback = True
        self._read = read

    def __call__(self, events: Sequence[FanEvent]) -> None:
        for ev in events:
            if self._read and ev.fd >= 0 and ev.path is not None:
                self.open_during_callback &= fd_is_open(ev.fd)
                sample = ev.read_content()
                self.content[ev.path] = sample.sha256 if sample else None
        with self.cond:
            self.events.extend(events)
            self.batches += 1
            self.cond.notify_all()

    def wait(self, condition: Callable[[], bool], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not seen within {timeout}s; got {len(self.events)}")
                self.cond.wait(left)

    def for_path(self, path: Path | str) -> list[FanEvent]:
        target = os.path.realpath(path)
        return [e for e in self.events if e.path == target]


@pytest.fixture
def collector() -> Collector:
    return Collector()


@pytest.fixture
def watcher(tmp_path: Path, collector: Collector) -> Iterator[FanotifyWatcher]:
    w = FanotifyWatcher([tmp_path], collector)
    w.start()
    yield w
    w.stop()


WRITER = textwrap.dedent(
    """
    import os, sys
    folder, count = sys.argv[1], int(sys.argv[2])
    for i in range(count):
        fd = os.open(os.path.join(folder, f"w{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b"payload %d" % i)
        os.close(fd)
    """
)


def sh_write(path: Path, text: str) -> int:
    """A shell writes `text` into `path` in one open-write-close and exits; returns its pid."""
    proc = subprocess.Popen(["/bin/sh", "-c", 'printf %s "$1" > "$2"', "sh", text, str(path)])
    assert proc.wait(timeout=30) == 0
    return proc.pid


@privileged
def test_a_microsecond_write_is_attributed_to_its_pid(
    tmp_path: Path, watcher: FanotifyWatcher, collector: Collector
) -> None:
    target = tmp_path / "clobbered.json"
    pid = sh_write(target, '{"by": "lane B"}')  # the process is gone before we look

    collector.wait(lambda: any(e.is_close_write for e in collector.for_path(target)))
    events = collector.for_path(target)
    assert {e.pid for e in events} == {pid}
    assert collector.content[str(target.resolve())] == (
        hashlib.sha256(b'{"by": "lane B"}').hexdigest()
    )
    assert collector.open_during_callback
    assert watcher.marks[str(tmp_path)] in (fan.MarkKind.FILESYSTEM, fan.MarkKind.MOUNT)


@privileged
def test_content_is_read_through_the_fd_even_after_unlink(tmp_path: Path) -> None:
    target = tmp_path / "short-lived"
    with FanotifyGroup() as group:
        group.mark(tmp_path)
        pid = sh_write(target, "evidence")
        target.unlink()  # our own unlink: the queued event still holds the file
        deadline = time.monotonic() + 15
        found: list[tuple[int, str | None, str | None]] = []
        while not found and time.monotonic() < deadline:
            with group.read(accept=lambda p: p.startswith(os.path.realpath(tmp_path))) as batch:
                for ev in batch:
                    sample = ev.read_content()
                    found.append((ev.pid, ev.path, sample.sha256 if sample else None))
            if not found:
                _wait_readable(group, deadline)
    assert found, "no event within 15s"
    assert found[0] == (
        pid,
        str(target.resolve()) + " (deleted)",
        hashlib.sha256(b"evidence").hexdigest(),
    )


def _wait_readable(group: FanotifyGroup, deadline: float) -> None:
    select.select([group.fileno()], [], [], max(0.0, deadline - time.monotonic()))


@privileged
def test_our_own_writes_are_never_reported(
    tmp_path: Path, watcher: FanotifyWatcher, collector: Collector
) -> None:
    ours = tmp_path / "ours"
    ours.write_text("written by lanewatch itself")
    sentinel = tmp_path / "sentinel"
    sh_write(sentinel, "after ours")
    # The kernel queues in order: once the later sentinel is in, ours would have come first.
    collector.wait(lambda: bool(collector.for_path(sentinel)))
    assert collector.for_path(ours) == []
    assert os.getpid() not in {e.pid for e in collector.events}


@privileged
def test_no_descriptor_leaks_after_1000_events(own_fs: Path) -> None:
    collector = Collector()
    folder = own_fs / "many"  # every one of its events must come: no one else's flood
    folder.mkdir()
    before = open_fds()
    with FanotifyWatcher([folder], collector):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), "1000"])
        assert proc.wait(timeout=120) == 0
        collector.wait(lambda: len({e.path for e in collector.events if e.is_close_write}) >= 1000)
    # No descriptor of ours is left open. (The worker's other threads, left by earlier tests,
    # may close theirs meanwhile: fewer is not a leak.)
    assert open_fds() - before == set()
    assert {e.pid for e in collector.events if not e.is_overflow} == {proc.pid}
    assert len(collector.content) == 1000 and None not in collector.content.values()
    assert collector.open_during_callback
    with pytest.raises(ValueError, match="already closed"):
        collector.events[0].read_content()


@privileged
def test_queue_overflow_is_reported_as_its_own_event(own_fs: Path) -> None:
    limit = int(Path("/proc/sys/fs/fanotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"fs.fanotify.max_queued_events is {limit}: too many files to overflow it")
    gate = threading.Event()
    collector = Collector(read=False)

    def held(events: Sequence[FanEvent]) -> None:
        collector(events)
        gate.wait(120)  # hold the reader so the kernel queue fills behind it

    folder = own_fs / "flood"  # its flood overflows no other test's queue
    folder.mkdir()
    with FanotifyWatcher([folder], held) as w:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(folder), str(limit + limit // 4)]
        )
        try:
            assert writer.wait(timeout=300) == 0
        finally:
            gate.set()
        collector.wait(lambda: any(e.is_overflow for e in collector.events), timeout=60)
    overflow = next(e for e in collector.events if e.is_overflow)
    assert overflow.fd == FAN_NOFD and overflow.path is None
    assert overflow.mask & FAN_Q_OVERFLOW and overflow.names == ("Q_OVERFLOW",)
    assert w.overflows >= 1
    # Events before the overflow are real and attributed; none were invented for it.
    assert {e.pid for e in collector.events if not e.is_overflow} == {writer.pid}


@privileged
def test_stop_returns_promptly_when_idle(tmp_path: Path) -> None:
    w = FanotifyWatcher([tmp_path], lambda events: None)
    w.start()
    assert w.running
    started = time.monotonic()
    w.stop()
    assert time.monotonic() - started < 1.0
    assert not w.running and w.error is None
    w.stop()  # idempotent


@privileged
def test_shared_memory_tmpfs_is_watched(collector: Collector) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    target = shm / f"lanewatch-test-{uuid.uuid4().hex}"
    try:
        with FanotifyWatcher([shm], collector, prefixes=[target]):
            pid = sh_write(target, "shared")
            collector.wait(lambda: any(e.is_close_write for e in collector.for_path(target)))
    finally:
        target.unlink(missing_ok=True)
    assert {e.pid for e in collector.for_path(target)} == {pid}


def umount(path: Path) -> None:
    """Unmount now, even while busy: every fanotify group marking this filesystem (ours, another
    test's held reader or SIGSTOPped recorder, a service of the machine) holds the files of its
    queued events until it reads them, which may be minutes. A lazy unmount detaches the mount
    at once; the kernel frees it when the last of them lets go."""
    subprocess.run(["umount", "--lazy", str(path)], check=True, capture_output=True, timeout=30)


@privileged
def test_a_write_through_a_bind_mount_is_seen(own_fs: Path, collector: Collector) -> None:
    # Why filesystem marks: a lane reaching the root through another mount of it is seen.
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command")
    root, alias = own_fs / "root", own_fs / "alias"  # no one else's flood drops its event
    root.mkdir()
    alias.mkdir()
    with FanotifyWatcher([root], collector, prefixes=[root, alias]) as w:
        if w.marks[str(root)] is not fan.MarkKind.FILESYSTEM:
            pytest.skip("kernel before 4.20: mount marks only, bind mounts are not seen")
        made = subprocess.run(
            [mount, "--bind", str(root), str(alias)], capture_output=True, text=True, timeout=30
        )
        if made.returncode != 0:
            pytest.skip(f"cannot bind-mount here: {made.stderr.strip()}")
        try:
            pid = sh_write(alias / "via-alias", "sneaky")
            collector.wait(
                lambda: any(e.is_close_write for e in collector.for_path(alias / "via-alias"))
            )
        finally:
            umount(alias)
    assert {e.pid for e in collector.for_path(alias / "via-alias")} == {pid}
    assert (root / "via-alias").read_text() == "sneaky"


@privileged
def test_a_root_added_while_running_is_watched(tmp_path: Path) -> None:
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    collector = Collector()
    with FanotifyWatcher([first], collector) as w:
        assert w.add_path(later) in (fan.MarkKind.FILESYSTEM, fan.MarkKind.MOUNT)
        pid = sh_write(later / "after", "watched")
        collector.wait(lambda: bool(collector.for_path(later / "after")))
    assert {e.pid for e in collector.for_path(later / "after")} == {pid}


@privileged
def test_permission_events_are_refused(tmp_path: Path) -> None:
    with FanotifyGroup() as group, pytest.raises(ValueError, match="permission events"):
        group.mark(tmp_path, mask=FAN_OPEN_PERM)


FD_EXHAUSTION = textwrap.dedent(
    """
    import json, os, resource, subprocess, sys
    from lanewatch.kernel import fanotify as fan
    folder = os.path.realpath(sys.argv[1])
    group = fan.FanotifyGroup()
    group.mark(folder)
    writer = subprocess.Popen([sys.executable, "-c", sys.argv[2], folder, "20"])
    assert writer.wait() == 0
    # Leave room for a few event fds only: the kernel cannot open the rest for us.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 3, hard))
    seen = []
    while len(seen) < 20:
        with group.read(max_events=8, accept=lambda p: p.startswith(folder)) as batch:
            seen += [[e.path, e.fd_error] for e in batch if e.pid == writer.pid]
            if batch.records == 0:
                break
    print(json.dumps({"fd_errors": group.reports_fd_errors, "seen": seen}))
    """
)


@privileged
def test_events_the_kernel_cannot_open_are_reported_not_lost(own_fs: Path) -> None:
    out = subprocess.run(  # on a filesystem of its own: no one else's writes fill its queue
        [sys.executable, "-c", FD_EXHAUSTION, str(own_fs), WRITER],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(out.stdout)
    if not result["fd_errors"]:
        pytest.skip("kernel before 6.13: no FAN_REPORT_FD_ERROR, such events are dropped")
    seen = result["seen"]
    # Each of the writer's 20 files comes back: with its path, or with the kernel's errno.
    assert len(seen) == 20
    failed = [s for s in seen if s[1] is not None]
    assert failed, "expected some events the kernel could not open under a 3-fd limit"
    assert all(err == errno.EMFILE and path is None for path, err in failed)
    assert all(path is not None for path, err in seen if err is None)


@privileged
def test_mark_file_reports_reads_of_that_file_only(
    tmp_path: Path, watcher: FanotifyWatcher, collector: Collector
) -> None:
    marked, other = tmp_path / "artifact", tmp_path / "other"
    marked.write_text("built")
    other.write_text("not watched for reads")
    watcher.mark_file(marked, fan.FAN_ACCESS | fan.FAN_CLOSE_NOWRITE)
    reader = subprocess.Popen(["cat", str(other), str(marked)], stdout=subprocess.DEVNULL)
    assert reader.wait(timeout=30) == 0
    reads = fan.FAN_ACCESS | fan.FAN_CLOSE_NOWRITE
    collector.wait(lambda: any(e.mask & reads for e in collector.for_path(marked)))
    assert {e.pid for e in collector.for_path(marked) if e.mask & reads} == {reader.pid}
    # the filesystem mark asks for writes only: the unmarked file's read wakes nobody
    assert not any(e.mask & reads for e in collector.for_path(other))
    with pytest.raises(ValueError):
        watcher.mark_file(marked, fan.FAN_OPEN_PERM)  # never a permission event


@privileged
def test_stop_after_the_reader_already_ended_does_not_raise(tmp_path: Path) -> None:
    """`stop` sets the flag, then wakes the reader through its pipe. A reader that sees the flag
    first ends and closes its end before the wake-up is written (seen in CI under load:
    BrokenPipeError out of `stop`). Here the reader is made to end first, every time."""
    w = FanotifyWatcher([tmp_path], Collector())
    w.start()
    w._stopping.set()  # what stop() does first; the reader ends at its next wake-up
    os.write(w._stop_w, b"x")
    assert w._thread is not None
    w._thread.join(10)
    assert not w._thread.is_alive() and w._stop_r == -1, "the reader did not end"
    w.stop()  # its wake-up now meets a pipe with no reader
    assert w.error is None
