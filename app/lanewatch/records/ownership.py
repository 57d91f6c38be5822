"""What a privileged engine writes into a root belongs to the root's owner.

A recorder running as root (a `--system` service, or `sudo lanewatch record` beside a user's
dashboard) keeps incidents, evidence and write history in each root's `.lanewatch-root/`. Left
as they are created, those files are root's, in a folder the user owns: the user can neither
rotate, compact nor append to them, and their own engine then loses its records. So every folder
and file a record store creates is handed to the owner of the root folder (uid and gid), by
fd or without following a symlink, as soon as it exists. A process that is not root cannot
give files away and needs not: its files are its own, and so is the root it may write.
"""

from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)


def root_owner(root: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(uid, gid) to give new record files in `root` to; None when nothing is to be given:
    not root, or the root folder is root's own (or cannot be read)."""
    if os.geteuid() != 0:
        return None
    try:
        st = os.stat(root)
    except OSError:
        return None
    return None if st.st_uid == 0 else (st.st_uid, st.st_gid)


def give_fd(fd: int, owner: tuple[int, int] | None) -> None:
    """Hand the open file `fd` to `owner` unless it has it already."""
    if owner is None:
        return
    try:
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != owner:
            os.fchown(fd, *owner)
    except OSError as exc:  # a filesystem without ownership (vfat, some FUSE): say so once here
        log.warning("cannot give a record file to uid %s: %s", owner[0], exc)


def give_path(path: str | os.PathLike[str], owner: tuple[int, int] | None) -> None:
    """Hand `path` (a folder or file we just made; a symlink itself, never its target)."""
    if owner is None:
        return
    with contextlib.suppress(FileNotFoundError):
        try:
            st = os.lstat(path)
            if (st.st_uid, st.st_gid) != owner:
                os.lchown(path, *owner)
        except OSError as exc:
            log.warning("cannot give %s to uid %s: %s", path, owner[0], exc)
