"""Filesystem moves and deletes for actions: atomic, never through a symlink.

`rename_noreplace` is renameat2(RENAME_NOREPLACE): one atomic step that fails if the
destination exists (plain rename silently replaces an empty folder). Where the kernel or the
filesystem lacks it, a fallback makes the destination folder first (mkdir fails if it exists)
and renames onto it (rename only replaces an *empty* folder, so a racer that filled it wins).

`remove_tree` is `shutil.rmtree`, which on Linux walks by file descriptor and never follows a
symlink, plus: entries that vanish meanwhile are fine, and a permission error is fixed by
making a folder writable only when that folder lies inside `boundary`, reached component by
component with O_NOFOLLOW, so no chmod can ever land outside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

RENAME_NOREPLACE = 1
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_libc: Any = None


def _renameat2() -> Any | None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = False
    return getattr(_libc, "renameat2", None) if _libc else None


def rename_noreplace(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    """Move `src` to `dst` (names relative to the dir fds) atomically; FileExistsError if
    `dst` exists, FileNotFoundError if `src` does not."""
    func = _renameat2()
    if func is not None:
        rc = func(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst), RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            if err in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(err, os.strerror(err), dst)
            raise OSError(err, os.strerror(err), src)
    _rename_onto_fresh_dir(src_dir_fd, src, dst_dir_fd, dst)


def _rename_onto_fresh_dir(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    if not stat.S_ISDIR(os.lstat(src, dir_fd=src_dir_fd).st_mode):
        raise OSError(errno.ENOTDIR, "only folders are moved", src)
    os.mkdir(dst, 0o700, dir_fd=dst_dir_fd)  # FileExistsError if taken
    try:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(exc.errno, "taken meanwhile", dst) from None
        with contextlib.suppress(OSError):  # else someone else's now
            os.rmdir(dst, dir_fd=dst_dir_fd)
        raise


def tree_size(path: Path) -> tuple[int, int]:
    """(files, bytes) under `path`, following no symlink; unreadable parts are skipped."""
    files = size = 0
    stack = [os.fspath(path)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                files += 1
                size += st.st_size
    return files, size


def remove_tree(path: Path, boundary: Path, passes: int = 3) -> list[str]:
    """Delete `path` (inside `boundary`, or it); [] when it is gone, else the last errors."""
    errors: list[str] = []
    for _ in range(passes):
        errors = []
        _rmtree(path, boundary, errors)
        if not os.path.lexists(path):
            return []
    return errors or [f"{path}: still there"]


def _rmtree(path: Path, boundary: Path, errors: list[str]) -> None:
    def handle(func: Any, failed: str, exc: BaseException) -> None:
        if isinstance(exc, FileNotFoundError):
            return  # vanished meanwhile: that is what we wanted
        if isinstance(exc, PermissionError):
            folder = failed if func in (os.open, os.scandir, os.lstat) else os.path.dirname(failed)
            if _make_writable(Path(folder), boundary):
                return  # the next pass gets it
        errors.append(f"{failed}: {getattr(exc, 'strerror', None) or exc}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=handle)
    else:
        shutil.rmtree(path, onerror=lambda f, p, info: handle(f, p, info[1]))


def _make_writable(folder: Path, boundary: Path) -> bool:
    """u+rwx on `folder` if it is `boundary` or below it with no symlink on the way."""
    rel = os.path.relpath(folder, boundary)
    if rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return False
    try:
        fd = os.open(boundary, _DIR_FLAGS)
    except OSError:
        return False
    try:
        for part in [] if rel == "." else rel.split(os.sep):
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        mode = os.fstat(fd).st_mode
        if mode & 0o700 == 0o700:
            return False  # not what stops us
        os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
