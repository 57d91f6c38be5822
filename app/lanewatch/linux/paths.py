"""Path containment judged on the text alone: no file system access, no symlinks followed.

For paths as the kernel prints them (absolute, resolved). `actions.mounts.is_within` is the
one that checks the file system (a symlink on the way makes it False).
"""

from __future__ import annotations

from collections.abc import Iterable

# The machine's shared temp: what every process sees unless a fence gives it its own.
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
# Of it, the place for shared memory and semaphores (`shm_open`, `sem_open`): a name there is a
# rendezvous that programs pick unique (multiprocessing's `sem.XXXXXX` and `psm_…`, Chromium's
# `.org.chromium.Chromium.…`), or agree on to meet. One lane using a name alone collides with
# nobody; two lanes of different families on one name do.
IPC_TEMP = ("/dev/shm",)


def is_under(path: str, prefix: str) -> bool:
    """`path` is `prefix` or lies below it. A trailing slash on `prefix` does not matter. An
    empty string is no path: under nothing (`"".startswith("")` would put it under "/")."""
    if not path:
        return False
    base = prefix.rstrip("/")
    return path in (prefix, base) or path.startswith(base + "/")


def is_below(path: str, prefix: str) -> bool:
    """`path` lies strictly below `prefix` (is not it)."""
    return path.startswith(prefix.rstrip("/") + "/") and path.rstrip("/") != prefix.rstrip("/")


def under_any(path: str, prefixes: Iterable[str]) -> bool:
    """`path` is or lies below one of `prefixes`."""
    return any(is_under(path, p) for p in prefixes)
