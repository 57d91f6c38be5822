"""The common git dir of each lane's checkout, for attribution: remembered a while, since the
prober asks for every live owner every probe and the kernel attribution for every writer.

A checkout's own git writes into its repository's common dir (objects, refs, packs, and a
linked worktree's index and HEAD under `worktrees/`), which for a linked worktree lies outside
the checkout: `git commit` there is the checkout's write, not an unbound one.
"""

from __future__ import annotations

import os
import threading
import time

from lanewatch.lanes.checkout import common_dir_at

REMEMBER = 60.0  # seconds an answer is kept (a checkout rarely changes repository)
MAX_KEPT = 4096  # checkouts remembered; past that the memory starts again
# Never a whole shared folder: a `.git` file naming /tmp must not excuse every write there.
_NEVER = frozenset(
    {"/", *(os.path.realpath(p) for p in ("/tmp", "/var/tmp", "/dev/shm", "/var", "/dev"))}
)

_lock = threading.Lock()
_kept: dict[str, tuple[float, str | None]] = {}


def git_common_dir(checkout_path: str | None) -> str | None:
    """The resolved common git dir of the worktree at `checkout_path`, or None (not a
    worktree, unreadable, or a folder too wide to excuse writes in)."""
    if not checkout_path:
        return None
    now = time.monotonic()
    with _lock:
        kept = _kept.get(checkout_path)
    if kept is not None and now - kept[0] < REMEMBER:
        return kept[1]
    try:
        found = common_dir_at(checkout_path)
    except (OSError, ValueError):  # a .git we may not read, or a path with a NUL
        found = None
    if found is not None and (found in _NEVER or not os.path.isdir(found)):
        found = None
    with _lock:
        if len(_kept) >= MAX_KEPT:
            _kept.clear()
        _kept[checkout_path] = (now, found)
    return found
