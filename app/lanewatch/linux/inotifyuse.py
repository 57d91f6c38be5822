"""How many inotify watches and instances a user's processes hold now, and the kernel's limits
on them (`fs.inotify.max_user_watches`, `fs.inotify.max_user_instances`), which count per user.

Each inotify instance is a descriptor whose link reads `anon_inode:inotify`; its fdinfo has
one `inotify wd:` line per watch. Reading every process of the user costs a `readlink` per
descriptor: a doctor's question (`cli/tools/checkup.py`), never the engine's hot path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lanewatch.linux.proc import PROC, is_gone, pids, read_int

INOTIFY_LINK = "anon_inode:inotify"


@dataclass(frozen=True, slots=True)
class InotifyUse:
    watches: int  # inotify watches the user's processes hold
    instances: int  # inotify instances (descriptors) they hold
    unread: int  # the user's processes whose descriptors could not be read (counted as none)


def limits() -> tuple[int | None, int | None]:
    """(max_user_watches, max_user_instances); None for one this kernel does not say."""
    base = f"{PROC}/sys/fs/inotify"
    return read_int(f"{base}/max_user_watches"), read_int(f"{base}/max_user_instances")


def use_of(uid: int) -> InotifyUse:
    """What the processes of `uid` (by the owner of /proc/PID) hold now. A process that ends
    meanwhile counts as none; one whose descriptors cannot be read is counted in `unread`."""
    watches = instances = unread = 0
    for pid in pids():
        base = f"{PROC}/{pid}"
        try:
            if os.stat(base).st_uid != uid:
                continue
            fds = os.listdir(f"{base}/fd")
        except OSError as exc:
            unread += not is_gone(exc)  # gone meanwhile: none held
            continue
        for fd in fds:
            try:
                if os.readlink(f"{base}/fd/{fd}") != INOTIFY_LINK:
                    continue
                with open(f"{base}/fdinfo/{fd}", "rb") as info:
                    lines = info.read().splitlines()
            except OSError:
                continue  # closed meanwhile
            instances += 1
            watches += sum(1 for line in lines if line.startswith(b"inotify wd:"))
    return InotifyUse(watches, instances, unread)
