"""Filesystem moves and deletes for actions: atomic, never through a symlink.

`rename_noreplace` is renameat2(RENAME_NOREPLACE): one atomic step that fails if the
destination exists (plain rename silently replaces an empty folder). Where the kernel or the
filesystem lacks it, a fallback makes the destination folder first (mkdir fails if it exists)
and renames onto it (rename only replaces an *empty* folder, so a racer that filled it wins).

`remove_tree` never leaves the filesystem, nor the mount, it starts on. It walks by folder fd
(`openat`/`unlinkat` relative to a folder it holds open, O_NOFOLLOW), and before it enters a
folder, at every level and at delete time: the folder's st_dev must be the tree's, its path must
not be in the mount table (`/proc/self/mountinfo`: a bind mount of the same filesystem keeps
st_dev), and the fd it opened must lie on the tree's mount (`mnt_id` in fdinfo: this catches a
mount made after the table was read). A mount point is never entered and never deleted; it is
named in what is left. A mount put on a folder after it was opened only hides it: the walk
empties the folder under it (ours) and its rmdir fails with EBUSY, named too. Entries that
vanish meanwhile are fine; a permission error is fixed by a chmod through an fd checked the
same way, so no chmod can land outside the tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.actions.mounts import mount_id, mounts_inside
from lanewatch.files.usage import Usage
from lanewatch.lanes.fsutil import walk_files
from lanewatch.linux.libc import libc
from lanewatch.linux.proc import chmod_fd

RENAME_NOREPLACE = 1
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _renameat2() -> Any | None:
    return getattr(libc(), "renameat2", None)


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


def tree_size(path: Path) -> tuple[int, int, int]:
    """(files, bytes, allocated) under `path`, following no symlink; unreadable parts are
    skipped. `bytes` is apparent (the files' lengths); `allocated` what `du -sB1` counts
    (blocks of files and folders, a hard-linked file once): what moving it out frees."""
    files = size = 0
    usage = Usage()
    folders: list[tuple[str, os.stat_result]] = []
    with contextlib.suppress(FileNotFoundError):  # `path` gone: nothing under it
        for _folder, entry, st in walk_files(os.fspath(path), None, folders):
            files += 1
            size += st.st_size
            usage.set(entry.path, st)
    for folder, st in folders:
        usage.set(folder, st)
    return files, size, usage.allocated


def remove_tree(path: Path, passes: int = 3) -> list[str]:
    """Delete the folder `path` and all in it, never leaving its mount; [] once it is gone,
    else what was left and why (a mount point, another filesystem, a permission error)."""
    left: list[str] = []
    for _ in range(passes):
        left = []
        try:
            mounts = frozenset(mounts_inside(path))  # read again each pass: mounts come and go
        except OSError as exc:
            return [f"{path}: cannot read the mount table ({exc.strerror}); nothing deleted"]
        try:
            _remove_top(path, mounts, left)
        except RecursionError:
            left.append(f"{path}: nested too deep to delete")
        if not os.path.lexists(path):
            return []
    return left or [f"{path}: still there"]


@dataclass(frozen=True, slots=True)
class _Home:
    """The filesystem and the mount the tree lies on; nothing on another one is touched."""

    dev: int
    mount: int | None  # None: the kernel does not say (no /proc): the mount table still counts
    mounts: frozenset[str]  # mount points at or below the tree, from the mount table


def _remove_top(path: Path, mounts: frozenset[str], left: list[str]) -> None:
    try:
        parent_fd = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        left.append(f"{path.parent}: {exc.strerror}")
        return
    try:
        home = _Home(os.fstat(parent_fd).st_dev, mount_id(parent_fd), mounts)
        where = os.path.join(os.path.realpath(path.parent), path.name)  # as mountinfo spells it
        _remove_entry(parent_fd, path.name, where, home, left)
    finally:
        os.close(parent_fd)


def _remove_entry(dir_fd: int, name: str, where: str, home: _Home, left: list[str]) -> None:
    """Delete `name` in the folder open at `dir_fd` (a verified folder on `home`'s mount)."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        left.append(f"{where}: {exc.strerror}")
        return
    if not stat.S_ISDIR(st.st_mode):
        _remove_name(dir_fd, name, where, False, left)
        return
    fd = _enter(dir_fd, name, where, st, home, left)
    if fd is None:
        return
    try:
        try:
            names = os.listdir(fd)
        except PermissionError:
            names = os.listdir(fd) if _make_writable(fd) else []
        for child in names:
            _remove_entry(fd, child, os.path.join(where, child), home, left)
    except OSError as exc:
        left.append(f"{where}: {exc.strerror}")
    finally:
        os.close(fd)
    _remove_name(dir_fd, name, where, True, left)


def _enter(
    dir_fd: int, name: str, where: str, st: os.stat_result, home: _Home, left: list[str]
) -> int | None:
    """An fd on the folder `name`, or None (and why, in `left`) when it must not be entered:
    on another filesystem, a mount point in the mount table, or an fd on another mount (a
    bind mount of the same filesystem, or one mounted since the table was read)."""
    if st.st_dev != home.dev:
        left.append(f"{where}: on another filesystem (a mount point); not entered")
        return None
    if where in home.mounts:
        left.append(f"{where}: a mount point; not entered")
        return None
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except PermissionError:
        if not _chmod_entry(dir_fd, name, st, home):
            left.append(f"{where}: permission denied")
            return None
        return _enter(dir_fd, name, where, st, home, left)
    except OSError as exc:  # swapped for a symlink or a file since the lstat: next pass
        left.append(f"{where}: {exc.strerror}")
        return None
    fst = os.fstat(fd)
    if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not _on_home(fd, home):
        os.close(fd)
        left.append(f"{where}: a mount point (or swapped while being deleted); not entered")
        return None
    return fd


def _on_home(fd: int, home: _Home) -> bool:
    return home.mount is None or mount_id(fd) == home.mount


def _remove_name(dir_fd: int, name: str, where: str, folder: bool, left: list[str]) -> None:
    remove = functools.partial(os.rmdir if folder else os.unlink, name, dir_fd=dir_fd)
    try:
        remove()
    except FileNotFoundError:
        return  # vanished meanwhile: that is what we wanted
    except PermissionError:
        if not _make_writable(dir_fd):
            left.append(f"{where}: permission denied")
            return
        _remove_name(dir_fd, name, where, folder, left)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            left.append(f"{where}: a mount point; left as it is")
        elif exc.errno != errno.ENOTEMPTY:  # ENOTEMPTY: what stayed inside is listed already
            left.append(f"{where}: {exc.strerror}")


def _make_writable(fd: int) -> bool:
    """u+rwx on the folder open at `fd` (already checked to be on the tree's mount)."""
    try:
        mode = os.fstat(fd).st_mode
        if mode & 0o700 == 0o700:
            return False  # not what stops us
        os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
    except OSError:
        return False
    return True


def _chmod_entry(dir_fd: int, name: str, st: os.stat_result, home: _Home) -> bool:
    """u+rwx on a folder we may not even open for reading: through an O_PATH fd (which needs
    no permission), checked to be that folder on the tree's mount, by its /proc/self/fd link,
    so the chmod cannot land on anything a path swap put there."""
    try:
        fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        fst = os.fstat(fd)
        if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino) or not _on_home(fd, home):
            return False
        if fst.st_mode & 0o700 == 0o700:
            return False
        chmod_fd(fd, stat.S_IMODE(fst.st_mode) | 0o700)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
