"""The Linux layer: one mountinfo parser that every reader of the mount table shares (escapes
and a non-UTF-8 byte decoded once, the same way), and one errno policy for /proc (a gone
process is gone, a denied read is denied: never read as a death)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lanewatch.actions import mounts as action_mounts
from lanewatch.kernel import fanignore
from lanewatch.linux import mountinfo, paths, proc, procid
from tests.kits import denied_probe
from tests.kits.actionkit import bind_mounted
from tests.kits.denied_probe import denied_facts
from tests.kits.userkit import NOBODY, as_user, script_as

DENIED_PROBE = Path(denied_probe.__file__)

# A mount point with every byte the kernel escapes, and one that is not UTF-8 (printed raw).
RAW_POINT = b"m a\tb\nc\\d\xff"
ESCAPED_POINT = b"m\\040a\\011b\\012c\\134d\xff"


def test_the_parser_undoes_escapes_on_bytes_then_decodes_as_the_fs_does() -> None:
    line = b"40 35 8:1 /sub\\040dir /srv/" + ESCAPED_POINT + b" rw shared:7 - ext4 /dev/sda1 rw\n"
    (entry,) = mountinfo.parse_mountinfo(line)
    assert entry.mount_point == "/srv/" + os.fsdecode(RAW_POINT)
    assert os.fsencode(entry.mount_point) == b"/srv/" + RAW_POINT  # round-trips to the bytes
    assert entry.root == "/sub dir"
    assert entry.major_minor == (8, 1) and entry.dev == os.makedev(8, 1)
    assert entry.optional == ("shared:7",) and entry.fstype == "ext4"
    # The actions' names are the layer's, not a second parser.
    assert action_mounts.parse_mountinfo is mountinfo.parse_mountinfo
    assert action_mounts.unescape is mountinfo.unescape
    assert action_mounts.mounts_inside("/srv", mountinfo=line) == [entry.mount_point]


@pytest.mark.privileged
def test_a_real_mount_with_escaped_and_non_utf8_bytes_reads_the_same_everywhere(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "held").write_text("x")
    point = tmp_path / os.fsdecode(RAW_POINT)
    point.mkdir()
    with bind_mounted(source, point):
        want = str(point)
        entries = [e for e in mountinfo.read_mountinfo() if e.mount_point == want]
        assert len(entries) == 1, "the mount point as os.fsdecode spells it"
        entry = entries[0]
        # fanotify's ignore marks read the same table through the same parser.
        assert (entry.dev, entry.root, want) in fanignore.read_mounts()
        # The actions' mount check finds it under the folder.
        assert action_mounts.mounts_inside(tmp_path) == [want]
        # The lock's device look-up and the actions' mount id name the same entry.
        fd = os.open(point / "held", os.O_RDONLY | os.O_CLOEXEC)
        try:
            assert mountinfo.mount_id(fd) == entry.mount_id
            assert mountinfo.mount_device(fd) == entry.major_minor
        finally:
            os.close(fd)


def _gone_pid() -> tuple[int, int]:
    """A pid that was a process a moment ago (exited and reaped), and an fd pinning it."""
    child = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    dfd = proc.pin(child.pid)
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)
    return child.pid, dfd


@pytest.mark.unprivileged
def test_a_gone_process_is_gone_for_every_reader() -> None:
    pid, dfd = _gone_pid()
    try:
        with pytest.raises(OSError) as pinned_read:
            proc.read_at(dfd, "stat")  # through the pin: never the pid's next owner
        assert proc.is_gone(pinned_read.value) and not proc.is_denied(pinned_read.value)
    finally:
        os.close(dfd)
    if proc.exists(pid):
        pytest.skip(f"pid {pid} was handed out again at once")
    with pytest.raises(OSError) as opened:
        proc.Pinned.open(pid)
    assert proc.is_gone(opened.value)
    assert proc.read_file(pid, "environ") is None
    assert proc.read_stat(pid) is None
    assert procid.start_ticks(pid) is None
    assert procid.uid_and_tgid(pid) is None
    assert procid.process_state(pid) is None
    identity = procid.ProcessIdentity(pid, 1, procid.boot_id())
    assert procid.liveness(identity)[0] is procid.Liveness.DEAD


def _check_denied(facts: dict[str, object]) -> None:
    assert facts["environ"] == "denied"  # not "gone": init is alive
    assert facts["stat"] is True
    assert facts["cwd"] == "denied"
    assert facts["liveness"] == "alive"
    assert facts["ids"] == [0, 1] or facts["ids"] == (0, 1)
    assert "cwd" in facts["unreadable_1"]  # "cannot tell", never "not holding"
    assert facts["complete"] is False


@pytest.mark.unprivileged
def test_a_denied_read_is_denied_not_gone_for_a_normal_user() -> None:
    if os.geteuid() == 0:
        pytest.skip("root may read every process (the setpriv test below covers it)")
    _check_denied(denied_facts())


def test_a_denied_read_is_denied_not_gone_as_nobody() -> None:
    done = script_as(as_user(NOBODY), DENIED_PROBE)
    assert done.returncode == 0, done.stderr
    _check_denied(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("path", "prefix", "under", "below"),
    [
        ("/a/b", "/a", True, True),
        ("/a", "/a", True, False),
        ("/a", "/a/", True, False),  # a trailing slash on the prefix does not matter
        ("/a/b", "/a/", True, True),
        ("/ab", "/a", False, False),  # a name that merely starts the same is not inside
        ("/a", "/a/b", False, False),
        ("/x", "/", True, True),
        ("/", "/", True, False),
    ],
)
def test_path_containment(path: str, prefix: str, under: bool, below: bool) -> None:
    assert paths.is_under(path, prefix) is under
    assert paths.is_below(path, prefix) is below
    assert paths.under_any(path, ["/elsewhere", prefix]) is under


@pytest.mark.unprivileged
def test_a_namespace_is_read_withheld_or_gone_never_confused() -> None:
    """`namespace_link`: a process's namespace is read; one that has exited (a zombie, not yet
    reaped: its namespaces already left) is "" (gone), never None, which means withheld: a
    lane would be judged unknown for a process that merely ended (seen in CI under load)."""
    assert proc.namespace_link(os.getpid()).startswith("mnt:[")
    child = subprocess.Popen(["true"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, still in the table
    try:
        assert proc.namespace_link(child.pid) == ""
    finally:
        child.wait()
    if os.geteuid() != 0:  # pid 1 is root's: withheld from a normal user, not gone
        assert proc.namespace_link(1) is None
