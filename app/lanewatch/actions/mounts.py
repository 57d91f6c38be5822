"""Mount points inside a folder, and "is this path inside that one" without following symlinks.

`mounts_inside` reads `/proc/self/mountinfo`, the kernel's own list of mounts in our mount
namespace. It sees bind mounts too, which `st_dev` comparisons and `os.path.ismount` miss when
the bind mount's source lies on the same filesystem (same device, and `ismount` compares
devices and inodes with the parent). Mounts made in other mount namespaces (containers) are not
visible from ours.

`is_within` and `is_direct_child` judge paths lexically and check each component below the
parent with `lstat`: a symlink anywhere from the parent down (the child included) makes the
answer False, so a check can never be led out of a root by a link. They never resolve the
parent itself: pass the root as registered. Like every check on paths, the answer can go stale
if someone swaps a component for a symlink afterwards; act through `rename(2)` of a direct
entry, which never follows the entry itself.
"""

from __future__ import annotations

import os
import stat

from lanewatch.linux.mountinfo import (  # re-exported: the actions' callers know them from here
    MountEntry,
    mount_id,
    parse_mountinfo,
    read_mountinfo,
    unescape,
)
from lanewatch.linux.paths import is_below, is_under

__all__ = [
    "MountEntry",
    "is_direct_child",
    "is_within",
    "mount_id",
    "mounts_inside",
    "parse_mountinfo",
    "read_mountinfo",
    "unescape",
]


def mounts_inside(
    path: str | os.PathLike[str], *, include_self: bool = True, mountinfo: bytes | None = None
) -> list[str]:
    """Mount points at or below `path`, as the kernel lists them, sorted and unique.

    `path` is made absolute; it is compared both as given and with symlinks resolved, because
    the kernel lists resolved paths. With `include_self`, a mount on `path` itself counts too
    (moving such a folder fails or moves the wrong thing). `mountinfo` lets a caller pass
    content already read. Raises OSError if mountinfo cannot be read: no answer is not "none".
    """
    given = os.path.abspath(os.fspath(path))
    forms = {given, os.path.realpath(given)}
    entries = parse_mountinfo(mountinfo) if mountinfo is not None else read_mountinfo()
    found: set[str] = set()
    for entry in entries:
        point = entry.mount_point
        for form in forms:
            if is_under(point, form) if include_self else is_below(point, form):
                found.add(point)
    return sorted(found)


def _components_below(
    child: str | os.PathLike[str], parent: str | os.PathLike[str]
) -> tuple[str, list[str]] | None:
    """(absolute parent, components from parent to child) judged lexically, or None when the
    child is not below the parent or the way down would climb with "..".

    Neither side is normalised with normpath: "a/link/.." is not "a" once `link` is a symlink.
    """
    parent_abs = os.path.abspath(os.fspath(parent))
    child_raw = os.fspath(child)
    child_abs = child_raw if os.path.isabs(child_raw) else os.path.join(os.getcwd(), child_raw)
    parent_parts = [p for p in parent_abs.split("/") if p]
    child_parts = [p for p in child_abs.split("/") if p and p != "."]
    if ".." in child_parts:
        return None
    if child_parts[: len(parent_parts)] != parent_parts:
        return None
    return parent_abs, child_parts[len(parent_parts) :]


def is_within(
    child: str | os.PathLike[str], parent: str | os.PathLike[str], *, allow_self: bool = False
) -> bool:
    """True when `child` exists strictly below `parent` (or is it, with `allow_self`) and no
    component from `parent` down to `child`, `child` included, is a symlink.

    A missing component gives False: what cannot be checked is not inside.
    """
    split = _components_below(child, parent)
    if split is None:
        return False
    current, below = split
    if not below:
        return allow_self
    for part in below:
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except OSError:
            return False
    return True


def is_direct_child(child: str | os.PathLike[str], parent: str | os.PathLike[str]) -> bool:
    """True when `child` is an entry directly in `parent`, is a real folder (not a symlink to
    one), and is not a mount point of a different device."""
    split = _components_below(child, parent)
    if split is None or len(split[1]) != 1:
        return False
    parent_abs, (name,) = split
    try:
        entry = os.lstat(os.path.join(parent_abs, name))
        parent_stat = os.lstat(parent_abs)
    except OSError:
        return False
    return stat.S_ISDIR(entry.st_mode) and entry.st_dev == parent_stat.st_dev
