"""Pin a namespace for a clear: hold its folder open and both of its locks, without waiting.

`pin` opens the entry from the root's folder with O_NOFOLLOW|O_DIRECTORY (a symlink or a
non-folder is refused, never followed), then takes, without waiting:
- an exclusive flock on the folder itself (owners hold it shared; systemd-tmpfiles honours it),
- an exclusive flock on `.lanewatch/owner.lock`, the lock every owner holds for its whole life
  (flock, like `filelock.UnixFileLock` that `lanes.lock` uses: the same lock). It is created
  when `.lanewatch/` exists but the file does not, so a claimant racing us is refused instead
  of slipping in between our check and our move.
Held by anyone: refused. While pinned, no claimant can take the lane, and the folder's
identity (device, inode) is known, so the move can check it still moves this very folder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path

from lanewatch.lanes.fsutil import NotAFile, open_regular
from lanewatch.lanes.stamp import LOCK_FILE, META_DIR

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class Pinned:
    path: Path
    root_fd: int
    dir_fd: int
    lock_fd: int | None  # None: no .lanewatch folder, so no owner lock exists (a foreign folder)
    identity: tuple[int, int]  # (st_dev, st_ino) of the namespace folder
    closed: bool = field(default=False)

    @property
    def own_fds(self) -> list[int]:
        """Our fds inside the namespace, which a holders scan must not count against it."""
        return [fd for fd in (self.dir_fd, self.lock_fd) if fd is not None]

    def still_here(self) -> bool:
        """Whether the entry at the namespace's name is still the folder we pinned."""
        try:
            st = os.lstat(self.path.name, dir_fd=self.root_fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.identity

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self.lock_fd, self.dir_fd, self.root_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)  # closing drops the flocks


class Gone(Exception):
    """The namespace is not there (any more)."""


class Refused(Exception):
    """It may not be pinned; the message says why."""


def pin(path: Path, *, create_lock: bool = True) -> Pinned:
    """Pin the namespace at `path` (an entry directly in its root). Raises Gone or Refused."""
    try:
        root_fd = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        raise Gone(f"its root {path.parent} is gone") from None
    except OSError as exc:
        raise Refused(f"cannot open the root {path.parent}: {exc.strerror}") from None
    fds: list[int] = [root_fd]
    try:
        dir_fd = _open_entry(path, root_fd)
        fds.append(dir_fd)
        st = os.fstat(dir_fd)
        if st.st_dev != os.fstat(root_fd).st_dev:
            raise Refused(f"{path} is a mount point (another filesystem)")
        _flock(dir_fd, f"{path} is locked by another process (its owner holds it)")
        lock_fd = _owner_lock(path, dir_fd, create_lock)
        if lock_fd is not None:
            fds.append(lock_fd)
            _flock(
                lock_fd, f"the lock of {path.name} is held (by its owner or a process it forked)"
            )
    except BaseException:
        for fd in reversed(fds):
            os.close(fd)
        raise
    return Pinned(path, root_fd, dir_fd, lock_fd, (st.st_dev, st.st_ino))


def _open_entry(path: Path, root_fd: int) -> int:
    try:
        return os.open(path.name, _DIR_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        raise Gone(f"{path} is gone") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{path} is a symlink; lanewatch never acts through one") from None
        if exc.errno == errno.ENOTDIR:
            raise Refused(f"{path} is not a folder") from None
        raise Refused(f"cannot open {path}: {exc.strerror}") from None


def _owner_lock(path: Path, dir_fd: int, create: bool) -> int | None:
    try:
        meta_fd = os.open(META_DIR, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{path / META_DIR} is not a real folder (a symlink?)") from None
        raise Refused(f"cannot open {path / META_DIR}: {exc.strerror}") from None
    try:
        flags = os.O_RDONLY | (os.O_CREAT if create else 0)
        try:
            return open_regular(LOCK_FILE, flags, dir_fd=meta_fd)
        except FileNotFoundError:
            return None  # only without `create` (a dry run changes nothing)
        except NotAFile as exc:
            raise Refused(f"its lock {path / META_DIR / LOCK_FILE}: {exc}") from None
        except OSError as exc:
            raise Refused(f"cannot open the lock of {path.name}: {exc.strerror}") from None
    finally:
        os.close(meta_fd)


def _flock(fd: int, held: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise Refused(held) from None
        raise Refused(f"cannot lock: {exc.strerror}") from None
