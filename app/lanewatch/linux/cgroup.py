"""A cgroup v2 of lanewatch's own per lane, where the machine lets us make one.

`lanewatch run` as root makes `<cgroup2 mount>/lanewatch/lw-<runner pid>-<start ticks>` (under
the runner's own cgroup when that is already a lane's: a lane run inside a lane stays inside
it) and starts CMD in it: the runner enters it for the fork and leaves it at once, so CMD is in
it before its exec and the runner never is (a `cgroup.kill` ends the lane, not its runner). A
process cannot leave a cgroup without write access to another one, so setsid, a double fork
or `env -i` keep a process in its lane. What the cgroup gives:
- membership: `cgroup.procs`, every process of the lane, however it detached;
- CPU: `cpu.stat` `usage_usec`, exact, processes already gone included;
- memory: `memory.current` less `inactive_file` (the working set, as k9s and kubelet show
  it) where the memory controller is on the unified hierarchy; on a hybrid machine (cgroup
  v1 controllers, v2 mounted at `/sys/fs/cgroup/unified`) it is not, and memory is summed
  from the members' resident pages;
- kill: `cgroup.kill` (kernel 5.14 and later), SIGKILL to every process in it at once, new
  forks included.

A runner killed by SIGKILL leaves its cgroup behind: the next `run` removes every empty one
whose runner is gone (`sweep`; the name says whose it was).

Where no cgroup can be made (a normal user: the hierarchy is root's, and no delegated
systemd scope is asked for here; no cgroup2 mounted; a read-only /sys) the lane's membership
follows the rules of `processes/members.py`, and the stamp says so (`membership`, `cgroup_note`).

A stamp names its cgroup; a stamp is written by the lane's owner, so a path read from it is
trusted only when `lane_cgroup` agrees: under our own `lanewatch` folder of the cgroup2 mount,
named after the stamp's own runner identity, a real folder (no link).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import stat

from lanewatch.linux.mountinfo import read_mountinfo
from lanewatch.linux.proc import read_file, read_stat

TOP = "lanewatch"  # our folder under the cgroup2 mount
_NAME = re.compile(r"lw-(\d+)-(\d+)\Z")
ENV_OFF = "LANEWATCH_CGROUP"  # "off": never make one (the rules of today)


@functools.lru_cache(maxsize=1)
def mount_point() -> str | None:
    """Where the unified (v2) hierarchy is mounted here; None when it is not (read once)."""
    try:
        mounts = read_mountinfo()
    except OSError:
        return None
    for m in mounts:
        if m.fstype == "cgroup2":
            return m.mount_point
    return None


def own_cgroup(pid: int | str = "self") -> str | None:
    """The v2 cgroup of `pid` ("/a/b", relative to the mount); None when it cannot be read."""
    try:
        data = read_file(pid, "cgroup")
    except OSError:
        return None
    for line in (data or b"").splitlines():
        if line.startswith(b"0::"):
            return os.fsdecode(line[3:]).strip()
    return None


def name_for(pid: int, start_ticks: int) -> str:
    return f"lw-{pid}-{start_ticks}"


def lane_cgroup(path: str | None, pid: int, start_ticks: int) -> str | None:
    """`path` (a stamp's `cgroup`) when it is the cgroup lanewatch made for the runner
    (`pid`, `start_ticks`) and exists; else None (a claim not to act on)."""
    if not path:
        return None
    top = mount_point()
    if top is None:
        return None
    ours = os.path.join(top, TOP)
    norm = os.path.normpath(path)
    if norm != path or not norm.startswith(ours + "/"):
        return None
    if os.path.basename(norm) != name_for(pid, start_ticks):
        return None
    for part in os.path.relpath(norm, ours).split("/")[:-1]:
        if _NAME.match(part) is None:  # a lane inside a lane: only lane cgroups above
            return None
    try:
        st = os.lstat(norm)
    except OSError:
        return None
    return norm if stat.S_ISDIR(st.st_mode) else None


def make(pid: int, start_ticks: int) -> tuple[str | None, str]:
    """Make the cgroup of the runner (`pid`, `start_ticks`): (its path, "") or (None, why not).
    Under the runner's own cgroup when that is a lane's, else under `<mount>/lanewatch`."""
    if os.environ.get(ENV_OFF, "").lower() in ("0", "off", "no", "none"):
        return None, f"${ENV_OFF} is off"
    top = mount_point()
    if top is None:
        return None, "no cgroup2 hierarchy is mounted"
    mine = own_cgroup()
    parent = os.path.join(top, TOP)
    if mine:
        here = os.path.normpath(os.path.join(top, mine.lstrip("/")))
        if here.startswith(parent + "/") and _NAME.match(os.path.basename(here)):
            parent = here
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent, 0o755)
        sweep(parent)
        path = os.path.join(parent, name_for(pid, start_ticks))
        os.mkdir(path, 0o755)
    except OSError as exc:
        return None, f"cannot make a cgroup under {parent}: {os.strerror(exc.errno or 0)}"
    return path, ""


def enter(path: str, pid: int = 0) -> None:
    """Move `pid` (0: this process, every thread) into the cgroup at `path`. Raises OSError."""
    _write(path, "cgroup.procs", str(pid))


def leave(back: str, top: str | None = None) -> None:
    """Move this process back to `back` (a cgroup path relative to the mount)."""
    top = top or mount_point()
    if top is None:
        raise OSError(errno.ENOENT, "no cgroup2 hierarchy is mounted")
    _write(os.path.join(top, back.lstrip("/")), "cgroup.procs", "0")


def procs(path: str) -> list[int] | None:
    """The pids in the cgroup (not its children's); None when it cannot be read."""
    try:
        with open(os.path.join(path, "cgroup.procs"), "rb") as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None


def all_procs(path: str) -> list[int] | None:
    """The pids in the cgroup and every cgroup below it (a lane run inside the lane)."""
    out: list[int] = []
    for here, dirs, _files in os.walk(path):
        found = procs(here)
        if found is None:
            if here == path:
                return None
            continue
        out.extend(found)
        dirs[:] = [d for d in dirs if _NAME.match(d)]
    return out


def cpu_usec(path: str) -> int | None:
    """CPU time the cgroup's processes used, in µs (`cpu.stat` `usage_usec`), the gone ones
    and the cgroups below included."""
    return _field(os.path.join(path, "cpu.stat"), b"usage_usec")


def memory(path: str) -> int | None:
    """The working set: `memory.current` less `inactive_file`; None where the memory
    controller is not on this hierarchy (hybrid machines)."""
    try:
        with open(os.path.join(path, "memory.current"), "rb") as f:
            current = int(f.read())
    except (OSError, ValueError):
        return None
    inactive = _field(os.path.join(path, "memory.stat"), b"inactive_file") or 0
    return max(0, current - inactive)


def kill(path: str) -> None:
    """SIGKILL to every process of the cgroup and below (`cgroup.kill`). Raises OSError
    (ENOENT: a kernel before 5.14, or the cgroup is gone)."""
    _write(path, "cgroup.kill", "1")


def can_kill(path: str) -> bool:
    return os.path.exists(os.path.join(path, "cgroup.kill"))


def remove(path: str) -> bool:
    """Remove the cgroup (and lane cgroups below it) once empty; False if some still run."""
    try:
        for here, dirs, _files in os.walk(path, topdown=False):
            if here != path and not _NAME.match(os.path.basename(here)):
                return False
            os.rmdir(here)
            del dirs[:]
    except OSError:
        return False
    return True


def sweep(parent: str) -> int:
    """Remove the empty lane cgroups under `parent` whose runner is gone (a runner killed by
    SIGKILL cannot remove its own): the name says whose it was, pid and start ticks, so a
    live runner's is never touched, and one that still holds a process cannot be removed.
    How many went."""
    try:
        names = os.listdir(parent)
    except OSError:
        return 0
    gone = 0
    for name in names:
        m = _NAME.match(name)
        if m is None:
            continue
        pid, ticks = int(m.group(1)), int(m.group(2))
        try:
            st = read_stat(pid)
        except OSError:
            continue  # cannot tell: keep it
        if st is not None and st.start_ticks == ticks:
            continue  # its runner lives
        gone += remove(os.path.join(parent, name))
    return gone


def _write(path: str, name: str, value: str) -> None:
    fd = os.open(os.path.join(path, name), os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _field(path: str, key: bytes) -> int | None:
    try:
        with open(path, "rb") as f:
            for line in f:
                name, _, value = line.partition(b" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        return None
    return None
