"""The fanotify kernel interface, bound with ctypes: constants, record layouts, the libc calls.

What `<linux/fanotify.h>` defines and we use (event bits, `fanotify_init` and `fanotify_mark`
flags, the layout of an event record and of its info records), `mask_names()`, the libc binding
(`fanotify_init`, `fanotify_mark`, typed once), `FanotifyError` with a reason fit for people,
and `_init_group()`, which opens a notification group with the newest reporting flags the
kernel has. No thread, no event: `kernel.fanevents` parses what a read returns and
`kernel.fanotify` reads it. Importing this module never raises, on any platform.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import struct
import sys

from lanewatch.linux.libc import libc as c_library

log = logging.getLogger(__name__)

# --- <linux/fanotify.h> -------------------------------------------------------------------
FAN_ACCESS = 0x0000_0001
FAN_MODIFY = 0x0000_0002
FAN_ATTRIB = 0x0000_0004
FAN_CLOSE_WRITE = 0x0000_0008
FAN_CLOSE_NOWRITE = 0x0000_0010
FAN_OPEN = 0x0000_0020
FAN_MOVED_FROM = 0x0000_0040
FAN_MOVED_TO = 0x0000_0080
FAN_CREATE = 0x0000_0100
FAN_DELETE = 0x0000_0200
FAN_DELETE_SELF = 0x0000_0400
FAN_MOVE_SELF = 0x0000_0800
FAN_OPEN_EXEC = 0x0000_1000
FAN_Q_OVERFLOW = 0x0000_4000
FAN_FS_ERROR = 0x0000_8000
FAN_OPEN_PERM = 0x0001_0000
FAN_ACCESS_PERM = 0x0002_0000
FAN_OPEN_EXEC_PERM = 0x0004_0000
FAN_ONDIR = 0x4000_0000
FAN_ALL_PERM_EVENTS = FAN_OPEN_PERM | FAN_ACCESS_PERM | FAN_OPEN_EXEC_PERM

# fanotify_init flags
FAN_CLOEXEC = 0x01
FAN_NONBLOCK = 0x02
FAN_CLASS_NOTIF = 0x00
FAN_REPORT_PIDFD = 0x80  # Linux 5.15+: each event also carries a pidfd for the writer
FAN_REPORT_FD_ERROR = 0x2000  # Linux 6.13+: a failed event fd is reported as -errno, not dropped

# fanotify_mark flags
FAN_MARK_ADD = 0x01
FAN_MARK_REMOVE = 0x02
FAN_MARK_DONT_FOLLOW = 0x04  # mark a symlink itself, never its target
FAN_MARK_MOUNT = 0x10
FAN_MARK_FILESYSTEM = 0x100  # Linux 4.20+

FAN_NOFD = -1
FAN_NOPIDFD = -1  # the writer had exited when we read the event (or -ESRCH with FD_ERROR)
FAN_EVENT_INFO_TYPE_PIDFD = 4
FANOTIFY_METADATA_VERSION = 3
AT_FDCWD = -100

# struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd, pid
EVENT_METADATA = struct.Struct("=IBBHQii")
# struct fanotify_event_info_header (info_type, pad, len), then for a pidfd record an __s32
INFO_HEADER = struct.Struct("=BBH")
INFO_PIDFD = struct.Struct("=i")

# What lanewatch watches: a write finished, or a write happened (FAN_Q_OVERFLOW needs no mark).
WATCH_MASK = FAN_CLOSE_WRITE | FAN_MODIFY

# O_CLOEXEC too: a lane we spawn while a batch is open must not inherit the event fds.
EVENT_FD_FLAGS = os.O_RDONLY | getattr(os, "O_LARGEFILE", 0) | getattr(os, "O_CLOEXEC", 0)

# One read(2) opens one fd per event it returns: bounded, so a burst cannot hit `ulimit -n`.
DEFAULT_MAX_EVENTS = 256

_MASK_NAMES: tuple[tuple[int, str], ...] = (
    (FAN_ACCESS, "ACCESS"),
    (FAN_MODIFY, "MODIFY"),
    (FAN_ATTRIB, "ATTRIB"),
    (FAN_CLOSE_WRITE, "CLOSE_WRITE"),
    (FAN_CLOSE_NOWRITE, "CLOSE_NOWRITE"),
    (FAN_OPEN, "OPEN"),
    (FAN_MOVED_FROM, "MOVED_FROM"),
    (FAN_MOVED_TO, "MOVED_TO"),
    (FAN_CREATE, "CREATE"),
    (FAN_DELETE, "DELETE"),
    (FAN_DELETE_SELF, "DELETE_SELF"),
    (FAN_MOVE_SELF, "MOVE_SELF"),
    (FAN_OPEN_EXEC, "OPEN_EXEC"),
    (FAN_Q_OVERFLOW, "Q_OVERFLOW"),
    (FAN_FS_ERROR, "FS_ERROR"),
    (FAN_OPEN_PERM, "OPEN_PERM"),
    (FAN_ACCESS_PERM, "ACCESS_PERM"),
    (FAN_OPEN_EXEC_PERM, "OPEN_EXEC_PERM"),
    (FAN_ONDIR, "ONDIR"),
)
_KNOWN_BITS = sum(bit for bit, _ in _MASK_NAMES)


def mask_names(mask: int) -> tuple[str, ...]:
    """The FAN_* names set in `mask` (without the prefix); unknown bits as hex."""
    names = [name for bit, name in _MASK_NAMES if mask & bit]
    unknown = mask & ~_KNOWN_BITS
    if unknown:
        names.append(hex(unknown))
    return tuple(names)


# --- errors and the libc binding --------------------------------------------------------------


class FanotifyError(OSError):
    """fanotify could not be set up; `reason` is one line fit to show a user."""

    def __init__(self, err: int, reason: str) -> None:
        super().__init__(err, reason)
        self.reason = reason


def _reason(err: int, what: str) -> str:
    if err == errno.EPERM:
        return "needs root or CAP_SYS_ADMIN"
    if err == errno.ENOSYS:
        return "this kernel has no fanotify (CONFIG_FANOTIFY is off)"
    if err == errno.EMFILE:
        return "too many fanotify groups or open files (fs.fanotify.max_user_groups, ulimit -n)"
    if err in (errno.ENODEV, errno.EXDEV, errno.EOPNOTSUPP):
        return f"{what}: this filesystem cannot be watched with fanotify ({os.strerror(err)})"
    if err == errno.ENOENT:
        return f"{what}: no such path"
    return f"{what}: {os.strerror(err)}"


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The process's libc with fanotify_init/fanotify_mark typed, or None if it has none."""
    libc = c_library()
    try:
        init, mark = libc.fanotify_init, libc.fanotify_mark  # type: ignore[union-attr]
    except (AttributeError, TypeError):
        return None
    init.argtypes = [ctypes.c_uint, ctypes.c_uint]
    init.restype = ctypes.c_int
    # The mask is a uint64_t: ctypes must know, or 32-bit ABIs get it wrong.
    mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
    mark.restype = ctypes.c_int
    return libc


def _require_libc() -> ctypes.CDLL:
    if not sys.platform.startswith("linux"):
        raise FanotifyError(errno.ENOSYS, f"fanotify is Linux-only (this is {sys.platform})")
    libc = _libc()
    if libc is None:
        raise FanotifyError(errno.ENOSYS, "the C library has no fanotify_init")
    return libc


def _init_group(pidfds: bool = False) -> tuple[int, int]:
    """A new notification-class group fd, and the FAN_REPORT_* flags it got.

    Asks for FAN_REPORT_FD_ERROR (6.13+) and, with `pidfds`, FAN_REPORT_PIDFD (5.15+); an older
    kernel refuses an unknown flag with EINVAL, so we retry without it.
    """
    libc = _require_libc()
    base = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK
    extras = [FAN_REPORT_FD_ERROR | FAN_REPORT_PIDFD, FAN_REPORT_PIDFD] if pidfds else []
    for extra in (*extras, FAN_REPORT_FD_ERROR, 0):
        fd = libc.fanotify_init(base | extra, EVENT_FD_FLAGS)
        if fd >= 0:
            return fd, extra
        err = ctypes.get_errno()
        if err != errno.EINVAL:  # EINVAL: an older kernel without one of the extra flags
            break
    raise FanotifyError(err, _reason(err, "fanotify_init"))
