"""Every read of /proc/PID (and /proc/self, /proc/sys, /proc/locks) the project makes.

One errno policy for all callers: ENOENT and ESRCH mean the process is *gone* (`is_gone`),
EACCES and EPERM mean we were *denied* (`is_denied`); a denial is never read as a death.
One parser per file: `parse_stat` for /proc/PID/stat, `parse_status` for /proc/PID/status.

A process is pinned by an `O_PATH` fd on /proc/PID (`pin`, `Pinned`) before anything else is
read, and every later read goes through that fd: if the process exits, the reads fail; if its
pid is reused meanwhile, the pinned fd still names the dead process. The hot path
(`processes.holders`) keeps the bare fd and calls the `*_at` functions: no extra system call
and no extra object per process.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

PROC = "/proc"
LAST_PID = f"{PROC}/sys/kernel/ns_last_pid"
PID_MAX = f"{PROC}/sys/kernel/pid_max"
LOCKS = f"{PROC}/locks"
BOOT_ID = f"{PROC}/sys/kernel/random/boot_id"
SELF_MOUNTINFO = f"{PROC}/self/mountinfo"

GONE_ERRNOS = frozenset({errno.ENOENT, errno.ESRCH})
DENIED_ERRNOS = frozenset({errno.EACCES, errno.EPERM})
DELETED = " (deleted)"  # what the kernel appends to the link of an unlinked object
O_PATH: int = getattr(os, "O_PATH", 0)
_PF_KTHREAD = 0x00200000
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


# --- the errno policy ---------------------------------------------------------------------------


def is_gone(exc: OSError) -> bool:
    """The process (or the fd read) no longer exists: ENOENT, ESRCH."""
    return exc.errno in GONE_ERRNOS


def is_denied(exc: OSError) -> bool:
    """We may not look (ptrace check, hidepid, another user): EACCES, EPERM. Never "gone"."""
    return exc.errno in DENIED_ERRNOS


def why(exc: OSError) -> str:
    """A short reason for people: "EACCES: Permission denied"."""
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name}: {exc.strerror}" if exc.strerror else name


# --- parsers ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of `/proc/PID/stat` needed for identity and process trees."""

    pid: int
    comm: str
    state: str  # R, S, D, T (stopped), t (traced), Z (zombie), ...
    ppid: int
    pgid: int
    sid: int
    flags: int
    start_ticks: int  # field 22: start time in clock ticks since boot
    # The footprint: fields 14+15 (utime + stime, clock ticks, every thread of the
    # process; not its reaped children's) and 24 (resident pages), read in the same pass.
    cpu_ticks: int = 0
    rss_pages: int = 0
    threads: int = 0  # field 20 (0: not read)

    @property
    def kernel_thread(self) -> bool:
        return bool(self.flags & _PF_KTHREAD)


def parse_stat(pid: int, data: bytes) -> ProcStat | None:
    """The one parser of /proc/PID/stat; None when `data` is malformed."""
    # comm (field 2) may hold spaces and ')': it ends at the LAST ')'.
    close = data.rfind(b")")
    if close < 0:
        return None
    rest = data[close + 2 :].split(None, 22)  # rest[0] is field 3 (state); 24 is the last used
    try:
        return ProcStat(
            pid=pid,
            comm=data[data.find(b"(") + 1 : close].decode("utf-8", "replace"),
            state=rest[0].decode("ascii", "replace"),
            ppid=int(rest[1]),
            pgid=int(rest[2]),
            sid=int(rest[3]),
            flags=int(rest[6]),
            start_ticks=int(rest[19]),
            cpu_ticks=int(rest[11]) + int(rest[12]),
            rss_pages=int(rest[21]),
            threads=int(rest[17]),
        )
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ProcStatus:
    """The lines of `/proc/PID/status` (readable by all) we use; None where missing."""

    state: str | None  # the one-letter state
    tgid: int | None
    uid: int | None  # real uid
    euid: int | None  # effective uid
    cap_eff: int | None  # effective capabilities (a bit mask)


def _status_line(data: bytes, key: bytes) -> bytes:
    """The value of the line `key` ("Uid:") of /proc/PID/status content; b"" if none."""
    if data.startswith(key):
        start = len(key)
    else:
        start = data.find(b"\n" + key)
        if start < 0:
            return b""
        start += 1 + len(key)
    end = data.find(b"\n", start)
    return data[start:] if end < 0 else data[start:end]


def parse_status(data: bytes) -> ProcStatus:
    """The one parser of /proc/PID/status (the four lines it needs are looked up, not every
    line split: the prober reads one per owner at each probe)."""
    state = tgid = uid = euid = cap = None
    words = _status_line(data, b"State:").split()
    if words:
        state = words[0].decode("ascii", "replace")
    with contextlib.suppress(ValueError):
        tgid = int(_status_line(data, b"Tgid:"))
    ids = _status_line(data, b"Uid:").split()
    with contextlib.suppress(IndexError, ValueError):
        uid, euid = int(ids[0]), int(ids[1])
    with contextlib.suppress(ValueError):
        cap = int(_status_line(data, b"CapEff:"), 16)
    return ProcStatus(state, tgid, uid, euid, cap)


def status_uid(data: bytes) -> int | None:
    """The real uid of /proc/PID/status content, None unless it has its Uid and Tgid lines
    (as `procid.uid_and_tgid` asks): `parse_status` for the prober's owners, which need no
    more."""
    ids = _status_line(data, b"Uid:").split(None, 2)
    try:
        int(_status_line(data, b"Tgid:"))
        uid, _euid = int(ids[0]), int(ids[1])
    except (IndexError, ValueError):
        return None
    return uid


def parse_cmdline(raw: bytes) -> tuple[str, ...]:
    """/proc/PID/cmdline: NUL-separated arguments (the last one NUL-terminated)."""
    args = tuple(os.fsdecode(a) for a in raw.split(b"\0"))
    return args[:-1] if args and args[-1] == "" else args


def environ_values(env: bytes, *names: bytes) -> list[str | None]:
    """The values of the variables `names` (b"NAME=") in /proc/PID/environ content, in order;
    None for a variable that is not set."""
    found: list[str | None] = [None] * len(names)
    if not any(key in env for key in names):
        return found  # most processes carry none of them: no split of the whole environment
    for entry in env.split(b"\0"):
        for i, key in enumerate(names):
            if entry.startswith(key):
                found[i] = os.fsdecode(entry[len(key) :])
                break
    return found


# --- reads through a pinned /proc/PID -----------------------------------------------------------


def pids() -> list[int]:
    """Every pid visible in /proc now (threads not included)."""
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit()]


def stat_table() -> dict[int, ProcStat]:
    """The stat of every visible process; processes that vanish or cannot be read meanwhile
    are skipped."""
    table: dict[int, ProcStat] = {}
    for pid in pids():
        try:
            st = read_stat(pid)
        except OSError:
            continue
        if st is not None:
            table[pid] = st
    return table


def exists(pid: int) -> bool:
    """Whether /proc/PID exists (a thread id counts). No exception per missing pid."""
    return os.access(f"{PROC}/{pid}", os.F_OK)


def pin(pid: int) -> int:
    """An `O_PATH` fd on /proc/PID (the caller closes it). Raises OSError (`is_gone`, ...)."""
    return os.open(f"{PROC}/{pid}", O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def pidfd_alive(pidfd: int) -> bool:
    """The process behind `pidfd` has not been reaped (a zombie still counts: its pid is
    held). EPERM also means it exists."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_at(dfd: int, name: str, once: int = 0) -> bytes:
    """The whole of `name` (stat, status, cmdline, environ, maps, ...) under pinned `dfd`.
    `once`: a single read of at most that many bytes (status fits in one)."""
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
    try:
        if once:
            return os.read(fd, once)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


STAT_BYTES = 4096  # /proc/PID/stat fits in one read of this (52 numbers and a 64-byte comm)


def stat_at(
    pid: int,
    dfd: int,
    known: Mapping[bytes, ProcStat] | None = None,
    learn: dict[bytes, ProcStat] | None = None,
) -> ProcStat | None:
    """The stat of pinned `dfd` (None if malformed); raises OSError. `known`: stats parsed
    before, by their very bytes (the pid is their first field): a process whose stat did not
    change (asleep) is not parsed again; `learn` is taught this one."""
    data = read_at(dfd, "stat", once=STAT_BYTES)
    st = known.get(data) if known is not None else None
    if st is None or st.pid != pid:
        st = parse_stat(pid, data)
    if learn is not None and st is not None:
        learn[data] = st
    return st


def owner_at(dfd: int) -> int | None:
    """The owner of /proc/PID: the process's effective uid, one fstat (root for a non-dumpable
    process). None when it cannot be told."""
    try:
        return os.fstat(dfd).st_uid
    except OSError:
        return None


def open_fd_dir(dfd: int) -> int:
    """/proc/PID/fd of the pinned process, as a directory fd: names looked up in it are that
    process's fds only (if the pid was reused, this fails). Raises OSError."""
    return os.open("fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)


def _fdinfo_value(path: str, key: bytes, base: int, dfd: int | None = None) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dfd)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        for line in data.splitlines():
            if line.startswith(key):
                return int(line.split()[1], base)
    except (OSError, ValueError, IndexError):
        return None
    return None


def fd_flags_at(dfd: int, fd: str) -> int | None:
    """The open flags of fd `fd` of the pinned process (fdinfo `flags:`), or None."""
    return _fdinfo_value(f"fdinfo/{fd}", b"flags:", 8, dfd)


def fd_access(flags: int | None) -> str | None:
    """ "read", "write", "readwrite" or "path" (O_PATH) from fdinfo flags."""
    if flags is None:
        return None
    if O_PATH and flags & O_PATH:
        return "path"
    return ("read", "write", "readwrite", "readwrite")[flags & 3]


class Pinned:
    """A process pinned by an O_PATH fd on /proc/PID; every read goes through it. Use as a
    context manager; `Pinned.open` raises OSError (`is_gone`, `is_denied`)."""

    __slots__ = ("dfd", "pid")

    def __init__(self, pid: int, dfd: int) -> None:
        self.pid = pid
        self.dfd = dfd

    @classmethod
    def open(cls, pid: int) -> Pinned:
        return cls(pid, pin(pid))

    def close(self) -> None:
        if self.dfd >= 0:
            os.close(self.dfd)
            self.dfd = -1

    def __enter__(self) -> Pinned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, name: str) -> bytes:
        return read_at(self.dfd, name)

    def stat(self) -> ProcStat | None:
        return stat_at(self.pid, self.dfd)

    def status(self) -> ProcStatus:
        return parse_status(read_at(self.dfd, "status"))

    def cmdline(self) -> tuple[str, ...]:
        return parse_cmdline(read_at(self.dfd, "cmdline"))

    def environ(self) -> bytes:
        return read_at(self.dfd, "environ")

    def readlink(self, name: str) -> str:
        """cwd, root, exe or fd/N of the pinned process."""
        return os.readlink(name, dir_fd=self.dfd)

    def fds(self) -> list[str]:
        """The fd numbers (as names) of the pinned process."""
        fdd = open_fd_dir(self.dfd)
        try:
            return os.listdir(fdd)
        finally:
            os.close(fdd)

    def fd_flags(self, fd: str) -> int | None:
        return fd_flags_at(self.dfd, fd)

    def owner(self) -> int | None:
        return owner_at(self.dfd)


# --- reads by pid (unpinned: one file each) -----------------------------------------------------


def read_file(pid: int | str, name: str) -> bytes | None:
    """/proc/PID/name in full (PID may be "self"); None when the process is gone. Raises
    OSError for any other error (`is_denied` tells a denial)."""
    try:
        fd = os.open(f"{PROC}/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        if is_gone(exc):
            return None
        raise
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        if is_gone(exc):
            return None
        raise
    finally:
        os.close(fd)


def thread_states(pid: int) -> str | None:
    """The state letter (R, S, D, T, Z, ...; field 3 of each stat) of every thread of `pid`, in
    one string; None when the process is gone. A thread that ends while we read is left out.
    Raises OSError when we may not look (`is_denied`)."""
    try:
        tids = os.listdir(f"{PROC}/{pid}/task")
    except OSError as exc:
        if is_gone(exc):
            return None
        raise
    states = []
    for tid in tids:
        data = read_file(pid, f"task/{tid}/stat")
        close = data.rfind(b")") if data is not None else -1
        if data is not None and close >= 0:
            states.append(data[close + 2 : close + 3].decode("ascii", "replace"))
    return "".join(states)


def read_stat(pid: int) -> ProcStat | None:
    """`/proc/PID/stat` parsed, or None when there is no such process (or it is malformed).

    Raises OSError for other errors (stat is world-readable, so that is unexpected).
    """
    data = read_file(pid, "stat")
    return None if data is None else parse_stat(pid, data)


def readlink(pid: int | str, name: str) -> str:
    """The link /proc/PID/name (cwd, root, fd/N), PID may be "self". Raises OSError."""
    return os.readlink(f"{PROC}/{pid}/{name}")


def fd_path(fd: int) -> str | None:
    """The path our own fd `fd` names, as the kernel prints it; None if it cannot be read."""
    try:
        return os.readlink(f"{PROC}/self/fd/{fd}")
    except OSError:
        return None


def fd_stat(pid: int, fd: int) -> os.stat_result:
    """What process `pid`'s fd `fd` is open on, stat'ed through its /proc link: a stat, not an
    open. Raises OSError (closed since, or not ours to look at)."""
    return os.stat(f"{PROC}/{pid}/fd/{fd}")


def reopen_own(fd: int, flags: int) -> int:
    """A new open file description of what our own fd `fd` names, with `flags` of its own
    (O_NONBLOCK on it leaves `fd`'s description as it was). Raises OSError."""
    return os.open(f"{PROC}/self/fd/{fd}", flags)


def through_fd(fd: int, name: str) -> str:
    """`name` inside the folder our fd `fd` is open on, as a short path (/proc/self/fd/N/NAME):
    for a socket whose full path is too long for `connect`."""
    return f"{PROC}/self/fd/{fd}/{name}"


def chmod_fd(fd: int, mode: int) -> None:
    """chmod the object our fd `fd` names, even an O_PATH fd (fchmod refuses those): through
    its /proc/self/fd link, which names that very object. Raises OSError."""
    os.chmod(f"{PROC}/self/fd/{fd}", mode)


def self_fdinfo_value(fd: int, key: bytes) -> int | None:
    """A decimal field (e.g. b"mnt_id:") of /proc/self/fdinfo/FD, or None."""
    return _fdinfo_value(f"{PROC}/self/fdinfo/{fd}", key, 10)


def own_children() -> list[int] | None:
    """This process's children, from each of its threads' /proc list (a zombie is listed until
    reaped, and only we reap: one that died while we read is still there); None where
    unreadable (a kernel without CONFIG_PROC_CHILDREN)."""
    out: list[int] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                out += [int(word) for word in f.read().split()]
    except (OSError, ValueError):
        return None
    return out


def read_int(path: str) -> int | None:
    """An integer file under /proc/sys (pid_max, ns_last_pid), or None."""
    try:
        with open(path, "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class LastPid:
    """`ns_last_pid` (the last pid handed out in the reader's pid namespace), read through one
    descriptor kept open: a `pread` (~2 µs), not an open per read (~20 µs, and far more from a
    thread that woke cold). The pid clock samples it up to 40 times a second, the prober's
    quiet rounds twice a second. A kernel sysctl file answers each read at offset 0 afresh."""

    def __init__(self) -> None:
        try:
            self._fd = os.open(LAST_PID, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = -1

    def read(self) -> int | None:
        if self._fd < 0:
            return read_int(LAST_PID)
        try:
            return int(os.pread(self._fd, 32, 0).strip())
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Back to an open per read (still correct), with no descriptor held."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()


def sysctl(name: str) -> str | None:
    """A kernel setting by its sysctl name (`user.max_user_namespaces`), stripped; None when
    this kernel has no such setting or it cannot be read."""
    try:
        with open(f"{PROC}/sys/" + name.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


def read_locks() -> str | None:
    """The kernel's table of file locks, or None when it cannot be read."""
    try:
        with open(LOCKS, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def namespace_link(pid: int | str, kind: str = "mnt") -> str | None:
    """The identity of a process's namespace of `kind` ("mnt:[4026531841]"); None when we may
    not read it (another user's process, as a normal user); "" when the process is gone or
    exiting (its namespaces already left): no namespace, so not a withheld one either."""
    try:
        return os.readlink(f"{PROC}/{pid}/ns/{kind}")
    except OSError as exc:
        return None if is_denied(exc) else ""
