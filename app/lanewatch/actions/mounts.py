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
import re
import stat
from dataclasses import dataclass

from lanewatch.linux.procid import PROC

_OCTAL_ESCAPE = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of /proc/PID/mountinfo (see proc(5)), escapes decoded."""

    mount_id: int
    parent_id: int
    device: str  # "major:minor"
    root: str  # the folder of the filesystem mounted here: not "/" for a bind mount of a subdir
    mount_point: str
    options: str
    optional: tuple[str, ...]  # shared:N, master:N, ...
    fstype: str
    source: str
    super_options: str


def unescape(field: bytes) -> str:
    """Decode the kernel's octal escapes (space \\040, tab \\011, newline \\012, backslash
    \\134) and then the bytes, as the filesystem encoding does."""
    return os.fsdecode(_OCTAL_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def parse_mountinfo(data: bytes) -> list[MountEntry]:
    """Parse mountinfo content; malformed lines are skipped."""
    entries: list[MountEntry] = []
    for line in data.splitlines():
        fields = line.split(b" ")
        try:
            sep = fields.index(b"-", 6)
            entries.append(
                MountEntry(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    device=fields[2].decode("ascii"),
                    root=unescape(fields[3]),
                    mount_point=unescape(fields[4]),
                    options=unescape(fields[5]),
                    optional=tuple(unescape(f) for f in fields[6:sep]),
                    fstype=unescape(fields[sep + 1]),
                    source=unescape(fields[sep + 2]),
                    super_options=unescape(fields[sep + 3]) if len(fields) > sep + 3 else "",
                )
            )
        except (ValueError, IndexError, UnicodeDecodeError):
            continue
    return entries


def read_mountinfo(path: str = f"{PROC}/self/mountinfo") -> list[MountEntry]:
    with open(path, "rb") as f:
        return parse_mountinfo(f.read())


def mount_id(fd: int) -> int | None:
    """The id of the mount `fd` lies on (the `mnt_id` of /proc/self/fdinfo, as in mountinfo's
    first field); None when the kernel does not say. Unlike st_dev it tells a bind mount of the
    same filesystem from its parent, and unlike a path it cannot be swapped under us."""
    try:
        with open(f"{PROC}/self/fdinfo/{fd}", "rb") as f:
            for line in f:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


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
            if _lexically_under(point, form, include_self):
                found.add(point)
    return sorted(found)


def _lexically_under(child: str, parent: str, include_self: bool) -> bool:
    if child == parent:
        return include_self
    slashed = parent if parent.endswith("/") else parent + "/"
    return child.startswith(slashed)


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
