"""Path containment judged on the text alone: no file system access, no symlinks followed.

For paths as the kernel prints them (absolute, resolved). `actions.mounts.is_within` is the
one that checks the file system (a symlink on the way makes it False).
"""

from __future__ import annotations

from collections.abc import Iterable

# The machine's shared temp: what every process sees unless a fence gives it its own.
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")


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
