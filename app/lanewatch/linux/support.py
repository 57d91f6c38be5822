"""What lanewatch needs from the system, asked before a command starts: /proc and inotify.

Owners, holders and liveness are read from /proc; the live tail uses inotify (watchdog's inotify
observer, which fails at import where libc has no inotify functions: macOS, the BSDs). Where one
is missing, the commands that need it say so in one line (cli/group.py) instead of a traceback.
"""

from __future__ import annotations

import os

PROC = "/proc"
INOTIFY = "inotify"
_INOTIFY_CALLS = ("inotify_init", "inotify_add_watch", "inotify_rm_watch")  # what watchdog checks


def has_proc() -> bool:
    """A mounted procfs: this process's own stat file is there."""
    return os.path.exists(f"{PROC}/self/stat")


def has_inotify() -> bool:
    """libc offers inotify: the same test watchdog's inotify module makes on import."""
    from lanewatch.linux.libc import libc  # here: `run` and `gate` never ask, nor pay for it

    lib = libc()
    return lib is not None and all(hasattr(lib, name) for name in _INOTIFY_CALLS)


def missing(needs: tuple[str, ...]) -> list[str]:
    """Which of `needs` (PROC, INOTIFY) this system lacks."""
    checks = {PROC: has_proc, INOTIFY: has_inotify}
    return [need for need in needs if not checks[need]()]
