"""Small filesystem primitives that never follow a symlink where it matters."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from lanewatch.errors import LanewatchError


class UnsafePath(LanewatchError):
    """A path that is a symlink, or not what it should be, where we would write."""


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


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` by temp file in the same folder, fsync, rename.

    The rename replaces a symlink at `path` rather than writing through it.
    """
    parent = path.parent
    tmp = parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb", closefd=True) as f:
            f.write(data)
            f.flush()
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
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    return _read_regular(fd, path, limit)[0]


def read_nofollow_in(folder: Path, name: str, limit: int) -> tuple[bytes, os.stat_result]:
    """Read at most `limit` + 1 bytes of `folder/name` and its stat, following no symlink at
    either step (a symlinked folder raises ELOOP or ENOTDIR, a non-regular file UnsafePath)."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(name, flags, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    return _read_regular(fd, folder / name, limit)


def _read_regular(fd: int, path: Path, limit: int) -> tuple[bytes, os.stat_result]:
    """Read from (and close) `fd`, which must be a regular file."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path} is not a regular file")
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
