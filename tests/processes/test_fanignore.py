"""Kernel ignore marks on busy folders outside the prefixes (kernel.fanignore), on the real
kernel: what they hide, what they never hide, and the loss reported when a folder we ignore
moves under a root. Needs root or CAP_SYS_ADMIN and Linux 6.0; skips otherwise, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.kernel.fanignore import ForeignDirs
from lanewatch.kernel.fanotify import FanotifyGroup, FanotifyWatcher, fanotify_available
from tests.conftest import wait_for
from tests.processes.test_fanotify import Collector, sh_write, umount

AVAILABLE, REASON = fanotify_available()
pytestmark = [
    pytest.mark.usefixtures("one_mount_table"),  # marks need each filesystem mounted once
    pytest.mark.privileged,
    pytest.mark.skipif(not AVAILABLE, reason=f"fanotify unavailable here: {REASON}"),
]


@pytest.fixture
def layout(own_fs: Path) -> tuple[Path, Path]:
    """A root and a foreign folder on a filesystem of the test's own: no ignore mark is placed
    while a filesystem is mounted twice, and another test's bind mount of the machine's own
    filesystem (or another user's) would hold this test's marks back."""
    root, foreign = own_fs / "root", own_fs / "foreign"
    (root / "ns").mkdir(parents=True)
    foreign.mkdir()
    return root.resolve(), foreign.resolve()


@pytest.fixture
def group(layout: tuple[Path, Path]) -> Iterator[tuple[FanotifyGroup, ForeignDirs]]:
    root, _ = layout
    with FanotifyGroup() as g:
        g.mark(root)
        foreign = ForeignDirs(g.fileno(), lambda: (f"{root}/",), 0x0A)
        foreign.start([str(root)])
        if not foreign.available:
            pytest.skip(f"no kernel ignore marks here: {foreign.reason}")
        try:
            yield g, foreign
        finally:
            foreign.close()


def mark(fd: ForeignDirs, folder: Path) -> None:
    """Tell `fd` of writes in `folder` until it is ignored (no mark is placed while the
    filesystem is mounted twice: `layout` keeps other tests' bind mounts off it)."""
    wait_for(
        lambda: fd.consider(str(folder / "write")) or fd.is_ignored(str(folder)),
        15.0,
        what=f"{folder} considered or ignored",
    )


def read_until(g: FanotifyGroup, path: Path, timeout: float = 15.0) -> list[str]:
    """Every path read from `g` until `path` comes (kernel order: all queued before it too)."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while str(path) not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} not read in time")
        with g.read() as batch:
            seen += [e.path for e in batch if e.path]
        time.sleep(0.005)
    return seen


def test_writes_in_an_ignored_folder_stop_coming_and_the_roots_still_do(
    layout: tuple[Path, Path], group: tuple[FanotifyGroup, ForeignDirs]
) -> None:
    root, foreign = layout
    g, fd = group
    mark(fd, foreign)
    sh_write(foreign / "hidden", "x")
    (foreign / "sub").mkdir()
    sh_write(foreign / "sub" / "below", "x")  # a subfolder is not covered
    sh_write(root / "ns" / "seen", "x")
    seen = read_until(g, root / "ns" / "seen")
    assert str(foreign / "hidden") not in seen
    assert str(foreign / "sub" / "below") in seen


def test_a_folder_at_or_under_a_prefix_is_never_ignored(
    layout: tuple[Path, Path], group: tuple[FanotifyGroup, ForeignDirs]
) -> None:
    root, _ = layout
    _, fd = group
    fd.consider(str(root / "ns" / "file"))
    fd.consider(str(root / "stray"))
    assert not fd.is_ignored(str(root / "ns"))
    assert not fd.is_ignored(str(root))
    # Above a root is fine: its own files are outside every prefix.
    mark(fd, root.parent)


@pytest.fixture
def watcher(layout: tuple[Path, Path]) -> Iterator[tuple[FanotifyWatcher, Collector]]:
    root, _ = layout
    collector = Collector(read=False)
    w = FanotifyWatcher([root], collector, prefixes=[root], ignore_foreign=True)
    w.start()
    try:
        assert w.foreign is not None
        if not w.foreign.available:
            pytest.skip(f"no kernel ignore marks here: {w.foreign.reason}")
        yield w, collector
    finally:
        w.stop()


def ignore(w: FanotifyWatcher, folder: Path, timeout: float = 15.0) -> None:
    """Foreign writes the watcher drops, until it has ignored `folder` (no mark is placed
    while the filesystem is mounted twice, e.g. by another test's bind mount)."""
    fd = w.foreign
    assert fd is not None
    deadline = time.monotonic() + timeout
    while not fd.is_ignored(str(folder)):
        if time.monotonic() > deadline:
            raise AssertionError(f"{folder} not ignored in time")
        sh_write(folder / "busy", "x")
        time.sleep(0.02)


def test_an_ignored_folder_moved_under_a_root_is_a_loss_then_watched(
    layout: tuple[Path, Path], watcher: tuple[FanotifyWatcher, Collector]
) -> None:
    root, foreign = layout
    w, collector = watcher
    ignore(w, foreign)
    moved = root / "ns" / "moved"
    subprocess.run(["mv", str(foreign), str(moved)], check=True)
    collector.wait(lambda: any(e.is_overflow for e in collector.events))
    lost = [e for e in collector.events if e.is_overflow]
    assert lost[0].note is not None and str(moved) in lost[0].note
    assert w.foreign is not None and not w.foreign.is_ignored(str(foreign))
    pid = sh_write(moved / "after", "x")
    collector.wait(lambda: bool(collector.for_path(moved / "after")))
    assert {e.pid for e in collector.for_path(moved / "after")} == {pid}


def test_a_folder_moved_outside_the_roots_is_no_loss(
    layout: tuple[Path, Path], watcher: tuple[FanotifyWatcher, Collector]
) -> None:
    root, foreign = layout
    w, collector = watcher
    ignore(w, foreign)
    elsewhere = foreign.parent / "elsewhere"
    subprocess.run(["mv", str(foreign), str(elsewhere)], check=True)
    fd = w.foreign
    assert fd is not None
    wait_for(
        lambda: (str(foreign), str(elsewhere)) in list(fd.renames), 15.0, what="the rename seen"
    )
    sh_write(root / "ns" / "later", "x")
    collector.wait(lambda: bool(collector.for_path(root / "ns" / "later")))
    assert not [e for e in collector.events if e.is_overflow]
    assert fd.losses == 0


def test_a_root_added_later_drops_every_ignore_mark(
    layout: tuple[Path, Path], watcher: tuple[FanotifyWatcher, Collector]
) -> None:
    _, foreign = layout
    w, collector = watcher
    ignore(w, foreign)
    w.add_path(foreign)
    assert w.foreign is not None and not w.foreign.is_ignored(str(foreign))
    pid = sh_write(foreign / "now-a-root", "x")
    collector.wait(lambda: bool(collector.for_path(foreign / "now-a-root")))
    assert {e.pid for e in collector.for_path(foreign / "now-a-root")} == {pid}
    assert os.path.exists(foreign / "now-a-root")


def test_an_ignored_folder_mounted_under_a_root_is_a_loss_then_watched(
    layout: tuple[Path, Path], watcher: tuple[FanotifyWatcher, Collector]
) -> None:
    root, foreign = layout
    w, collector = watcher
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command")
    ignore(w, foreign)
    alias = root / "ns" / "alias"
    alias.mkdir()
    made = subprocess.run(
        [mount, "--bind", str(foreign), str(alias)], capture_output=True, text=True, timeout=30
    )
    if made.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {made.stderr.strip()}")
    try:
        collector.wait(lambda: any(e.is_overflow for e in collector.events))
        lost = [e for e in collector.events if e.is_overflow]
        assert lost[0].note is not None and str(alias) in lost[0].note
        pid = sh_write(alias / "through-the-mount", "x")
        collector.wait(lambda: bool(collector.for_path(alias / "through-the-mount")))
        assert {e.pid for e in collector.for_path(alias / "through-the-mount")} == {pid}
        # Mounted twice: a folder the bind mount shows under the root is never marked again,
        # by either of its paths; another folder of that filesystem, shown by no mount under a
        # root, still is.
        assert w.foreign is not None
        other = foreign.parent / "other"
        other.mkdir()
        for _ in range(3):
            sh_write(foreign / "busy", "x")
            sh_write(other / "busy", "x")
        sh_write(root / "ns" / "after", "x")
        collector.wait(lambda: bool(collector.for_path(root / "ns" / "after")))
        wait_for(lambda: w.foreign.is_ignored(str(other)), 15.0, what=f"{other} ignored")
        assert not w.foreign.is_ignored(str(foreign))
        pid = sh_write(alias / "still-seen", "x")
        collector.wait(lambda: bool(collector.for_path(alias / "still-seen")))
        assert {e.pid for e in collector.for_path(alias / "still-seen")} == {pid}
    finally:
        umount(alias)


def test_a_folder_of_a_root_bind_mounted_outside_the_roots_is_never_ignored(
    layout: tuple[Path, Path], watcher: tuple[FanotifyWatcher, Collector]
) -> None:
    """The same folder by another path: writes through the outside path are dropped, but its
    folder is a namespace's, so no ignore mark may ever hide the writes through the root."""
    root, foreign = layout
    w, collector = watcher
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount command")
    outside = foreign.parent / "outside"
    outside.mkdir()
    made = subprocess.run(
        [mount, "--bind", str(root / "ns"), str(outside)], capture_output=True, text=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {made.stderr.strip()}")
    try:
        assert w.foreign is not None
        ignore(w, foreign)  # marks are placed on this filesystem, mounted twice as it is
        for _ in range(5):
            sh_write(outside / "busy", "x")
        sh_write(foreign / "probe", "x")
        wait_for(lambda: w.foreign is not None and w.foreign.is_ignored(str(foreign)), 15.0)
        assert not w.foreign.is_ignored(str(outside))
        pid = sh_write(root / "ns" / "seen", "x")
        collector.wait(lambda: bool(collector.for_path(root / "ns" / "seen")))
        assert {e.pid for e in collector.for_path(root / "ns" / "seen")} == {pid}
    finally:
        umount(outside)
