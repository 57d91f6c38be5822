"""The namespace lock: held by the owner for its whole life.

`owner.lock` is an flock file that is never unlinked: recreating a lock path while someone
holds the old inode would split holders. It is taken with `fcntl.flock` itself, as filelock's
UnixFileLock takes it (the two exclude each other): `lanewatch run` starts without filelock's
import cost (docs/performance.md, `run_start`). Alongside it the owner holds a shared flock
on the namespace folder itself, which systemd-tmpfiles honours before it ages a folder.
A held lock is not proof of life on its own (a forked child may inherit it); liveness is
judged from the stamp's pid + start ticks + boot id.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

from lanewatch.lanes.stamp import LOCK_FILE, META_DIR
from lanewatch.linux.proc import read_locks


def lock_path(namespace: Path) -> Path:
    return namespace / META_DIR / LOCK_FILE


class NamespaceLock:
    def __init__(self, namespace: Path) -> None:
        self.namespace = namespace
        self._fd: int | None = None  # the lock file, flocked, while held
        self._pid = 0  # who took it: a forked child inherits the descriptor, not the hold
        self._dir_fd: int | None = None
        self._lock_inode: tuple[int, int] | None = None

    @property
    def held(self) -> bool:
        """Whether this process holds it (a forked child of the holder does not: its exit
        must not release the parent's lane, as with filelock)."""
        return self._fd is not None and self._pid == os.getpid()

    def try_acquire(self) -> bool:
        """Take the lock without waiting; False if another holder has it."""
        if self.held:
            return True
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(lock_path(self.namespace), flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        st = os.fstat(fd)
        self._fd, self._pid, self._lock_inode = fd, os.getpid(), (st.st_dev, st.st_ino)
        return True

    def hold_folder(self) -> None:
        """Take the shared folder lock that systemd-tmpfiles respects."""
        fd = os.open(self.namespace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            return  # someone holds it exclusively (tmpfiles mid-clean); the owner lock rules
        self._dir_fd = fd

    def still_in_place(self) -> bool:
        """Whether the lock file we hold is still the one at the namespace's path.

        A clear may move the folder between our open and our flock; then we would hold the
        lock of a namespace in the trash.
        """
        try:
            st = os.stat(lock_path(self.namespace), follow_symlinks=False)
        except OSError:
            return False
        return self._lock_inode == (st.st_dev, st.st_ino)

    def release(self) -> None:
        if not self.held:
            return  # a forked child: the hold is its parent's (filelock did the same)
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # the flock goes with the last descriptor of this open
            self._fd = None


def is_lock_held(namespace: Path) -> bool | None:
    """Whether anyone holds the namespace lock, read from /proc/locks without taking it.

    Taking the lock to test it would make a racing claimant fail; reading the kernel's lock
    table does not. None when it cannot be told (no lock file, no /proc/locks).
    """
    try:
        inode, devices = _lock_table_key(lock_path(namespace))
    except OSError:
        return None
    table = read_locks()
    if table is None:
        return None
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"; blocked waiters have "->".
        if len(parts) < 6 or "->" in parts[1]:
            continue
        try:
            major, minor, ino = parts[5].split(":")
            if int(ino) == inode and (int(major, 16), int(minor, 16)) in devices:
                return True
        except ValueError:
            continue
    return False


def _lock_table_key(path: Path) -> tuple[int, set[tuple[int, int]]]:
    """The inode of `path` and the devices /proc/locks may name it by.

    /proc/locks prints the superblock's device, which stat() does not always report: on btrfs
    stat gives the subvolume's device. The device of the file's mount (from mountinfo, found
    through the mount id in fdinfo) is the superblock's, so both are accepted.
    """
    from lanewatch.linux.mountinfo import mount_device  # here: `run` starts without mountinfo

    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        devices = {(os.major(st.st_dev), os.minor(st.st_dev))}
        mount = mount_device(fd)
    finally:
        os.close(fd)
    if mount is not None:
        devices.add(mount)
    return st.st_ino, devices
