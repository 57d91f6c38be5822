"""Small filesystem primitives that never follow a symlink where it matters.

`open_regular` is the one way to open a file lanewatch finds in a namespace or a root (stamps,
ledgers, receipts, logs, records, the registry): anyone who can write there can put a FIFO, a
socket or a device at that name, and a plain open(2) of a FIFO blocks until a writer (or reader)
comes, forever. So every such open is O_NONBLOCK | O_NOFOLLOW, and the fd is refused unless
fstat says it is a regular file. Opening a device node can have side effects of its own even
non-blocking; only root can make one (CAP_MKNOD), so that is not a way in for a neighbour.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from lanewatch.errors import LanewatchError


class UnsafePath(LanewatchError):
    """A path that is a symlink, or not what it should be, where we would write."""


# What a non-regular file is: (in words, the short label status shows for it).
_KINDS = {
    stat.S_IFIFO: ("a FIFO", "fifo"),
    stat.S_IFDIR: ("a folder", "directory"),
    stat.S_IFSOCK: ("a socket", "socket"),
    stat.S_IFCHR: ("a character device", "device"),
    stat.S_IFBLK: ("a block device", "device"),
    stat.S_IFLNK: ("a symlink", "symlink"),
}


def file_kind(mode: int) -> tuple[str, str]:
    """(words, label) for what `mode` is: ("a FIFO", "fifo"), ("a regular file", "file")..."""
    if stat.S_ISREG(mode):
        return "a regular file", "file"
    return _KINDS.get(stat.S_IFMT(mode), ("a special file", "special"))


class NotAFile(UnsafePath, OSError):
    """A FIFO, socket, device, folder or symlink where lanewatch expects a regular file.

    Also an OSError, so every caller that already survives a failed open survives this one."""

    def __init__(self, path: str | os.PathLike[str], mode: int) -> None:
        words, self.kind = file_kind(mode)
        name = os.path.basename(os.fspath(path)) or os.fspath(path)
        OSError.__init__(self, errno.EINVAL, f"{name} is {words}, not a file", os.fspath(path))

    def __str__(self) -> str:
        return str(self.strerror)


# errno values an open gets from something that is not a regular file: a symlink (O_NOFOLLOW),
# a folder opened for writing, a FIFO or socket opened for writing with no reader.
_NOT_A_FILE_ERRNOS = (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP)


def open_regular(
    path: str | os.PathLike[str], flags: int, mode: int = 0o644, *, dir_fd: int | None = None
) -> int:
    """Open `path` (relative to `dir_fd` if given) without blocking and without following a
    final symlink, and return the fd only if it is a regular file; else raise NotAFile
    ("ledger.jsonl is a FIFO, not a file"). Other failures raise OSError as open(2) does."""
    try:
        fd = os.open(
            path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )
    except OSError as exc:
        if exc.errno in _NOT_A_FILE_ERRNOS:
            try:
                st = os.lstat(path, dir_fd=dir_fd)
            except OSError:
                raise exc from None
            if not stat.S_ISREG(st.st_mode):
                raise NotAFile(path, st.st_mode) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(path, st.st_mode)
        if not flags & os.O_NONBLOCK:  # a regular file: restore ordinary blocking reads
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def flock_within(fd: int, seconds: float, operation: int = fcntl.LOCK_EX) -> bool:
    """flock `fd` waiting at most `seconds`; False if someone else held it all that time.

    For diaries anyone may open (ledgers, journals): a reader who holds a flock forever must
    not stall the writer forever."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def ensure_real_dir(path: Path, mode: int = 0o755) -> Path:
    """Create `path` if missing; refuse if it exists as a symlink or a non-folder."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path} is a symlink; lanewatch never writes through one")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} exists and is not a folder")
    return path


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `path` by temp file in the same folder, fsync, rename.

    The rename replaces a symlink at `path` rather than writing through it. `mode`: the file's
    mode whatever the umask (set before the rename; the temp file is the owner's alone until
    then); None: 0o644 less the umask.
    """
    parent = path.parent
    tmp = parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    create = 0o644 if mode is None else 0o700
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, create)
    try:
        with os.fdopen(fd, "wb", closefd=True) as f:
            f.write(data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(parent)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on folders; the rename is still atomic
    finally:
        os.close(fd)


def read_nofollow(path: Path, limit: int) -> bytes:
    """Read at most `limit` + 1 bytes of a regular file, refusing symlinks."""
    return read_all(open_regular(path, os.O_RDONLY), limit)[0]


def read_nofollow_in(folder: Path, name: str, limit: int) -> tuple[bytes, os.stat_result]:
    """Read at most `limit` + 1 bytes of `folder/name` and its stat, following no symlink at
    either step (a symlinked folder raises ELOOP or ENOTDIR, a non-regular file NotAFile)."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = open_regular(name, os.O_RDONLY, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return read_all(fd, limit)


def read_all(fd: int, limit: int) -> tuple[bytes, os.stat_result]:
    """At most `limit` + 1 bytes of `fd`, a regular file (`open_regular` checked it), and its
    stat; closes `fd`."""
    try:
        st = os.fstat(fd)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def walk_files(
    top: str,
    errors: list[str] | None = None,
    folders: list[tuple[str, os.stat_result]] | None = None,
) -> Iterator[tuple[str, os.DirEntry[str], os.stat_result]]:
    """(folder, entry, lstat) of every non-folder under `top`, following no symlink: one
    `lstat` per non-folder (folders are told apart by the directory entry's type).

    Raises FileNotFoundError when `top` itself is gone or is not a folder. A subfolder or file
    removed mid-walk is skipped; any other error is added to `errors` as "path: reason" (or
    skipped quietly when `errors` is None). Folders come depth first, their files together.
    `folders`, when given, gets (path, lstat) of every folder listed, `top` included (one
    `lstat` more per folder: what `du` counts of them)."""
    stack = [top]
    push = stack.append
    while stack:
        folder = stack.pop()
        try:
            it = os.scandir(folder)
        except FileNotFoundError:
            if folder == top:
                raise
            continue  # a subfolder removed mid-walk
        except NotADirectoryError:
            if folder == top:
                raise FileNotFoundError(errno.ENOENT, "replaced by a file", top) from None
            continue
        except OSError as exc:
            if errors is not None:
                errors.append(f"{folder}: {exc.strerror or exc}")
            continue
        with it:
            if folders is not None:
                with contextlib.suppress(OSError):  # removed meanwhile: its files are gone too
                    folders.append((folder, os.lstat(folder)))
            for entry in it:  # runs once per file: kept tight
                try:
                    if entry.is_dir(follow_symlinks=False):
                        push(entry.path)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if errors is not None:
                        errors.append(f"{entry.path}: {exc.strerror or exc}")
                    continue
                yield folder, entry, st
