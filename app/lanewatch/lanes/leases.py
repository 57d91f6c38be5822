"""Port leases: each lane's block of ports, from one range every lanewatch of the machine shares.

A lease is a small JSON file in one machine-wide folder (`lease_dir`): `/run/lock/lanewatch-ports`
(a tmpfs every user may write, sticky like /tmp, never made private by a lane's fence), else
`/tmp/lanewatch-ports`; `$LANEWATCH_PORTS_DIR` names another (tests). The folder is made
world-writable and sticky (mode 1777), as /tmp is, so every user's lanes lease from one range.

Taking a block: open the folder (never through a symlink), flock it (an exclusive flock on the
folder's own fd: anyone who can read it can lock it, and no lock file is made that one user owns
and another must open), read every lease, and write the first free block as
`<first port>.<uid>.json` (a temp file renamed into place). A block is free when no live lease
overlaps it and no socket listens on any of its ports now. A lease is live while the process it
names runs: pid + start ticks + boot id, the rule owner stamps follow (`linux.procid`); a lease
of a dead owner is reclaimed (its file removed where we may, ignored where we may not). Freeing
removes our own file, under the lock, once it is re-read and still names us.

Other users: a file name carries its writer's uid, and a file whose owner on disk is not that
uid is nobody's lease (ignored); every file is opened relative to the folder's fd with
O_NOFOLLOW and read only if it is a regular file, so a symlink or FIFO planted by a neighbour is
never followed or blocked on. The worst a neighbour can do is take ports, as a bind could.

Configuration: `$LANEWATCH_PORT_RANGE` ("20000-29999", the default: below the kernel's ephemeral
range) and `$LANEWATCH_PORT_BLOCK` (ports per lane, default 10; 0: lanes take no lease).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import NotAFile, flock_within, open_regular
from lanewatch.linux import netsockets
from lanewatch.linux.procid import Liveness, ProcessIdentity, hostname, liveness

ENV_DIR = "LANEWATCH_PORTS_DIR"
ENV_RANGE = "LANEWATCH_PORT_RANGE"
ENV_BLOCK = "LANEWATCH_PORT_BLOCK"
ENV_PORT = "PORT"  # the first port of the block, what dev servers read
ENV_PORTS = "LANEWATCH_PORTS"  # the block: "20000-20009"
DEFAULT_RANGE = (20000, 29999)
DEFAULT_BLOCK = 10
MAX_BLOCK = 1000
SHARED_PLACES = ("/run/lock", "/tmp")
FOLDER = "lanewatch-ports"
LOCK_WAIT = 5.0
MAX_LEASE_BYTES = 16 * 1024
SCHEMA = 1
_NAME = re.compile(r"^(\d{1,5})\.(\d{1,10})\.json$")
_DEAD = (Liveness.DEAD, Liveness.ZOMBIE, Liveness.REUSED, Liveness.OTHER_BOOT)


class LeaseUnavailable(LanewatchError):
    """No lease could be taken: the folder is unsafe or unwritable, the range is full, or the
    configuration is not one. The lane runs without a lease and says so."""


@dataclass(frozen=True, slots=True)
class Lease:
    """One lane's block of ports, as its file says."""

    first: int
    count: int
    uid: int
    user: str
    pid: int
    start_ticks: int
    boot_id: str
    host: str
    lane: str
    namespace: str  # the lane's namespace folder (absolute): the victim of a collision
    checkout_id: str
    taken_at: float
    schema: int = SCHEMA

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    @property
    def ports(self) -> range:
        return range(self.first, self.first + self.count)

    @property
    def file_name(self) -> str:
        return f"{self.first}.{self.uid}.json"

    def holds(self, port: int) -> bool:
        return self.first <= port <= self.last

    def overlaps(self, first: int, count: int) -> bool:
        return first <= self.last and self.first <= first + count - 1

    def env(self) -> dict[str, str]:
        """`PORT` (the first) and `LANEWATCH_PORTS` (the block) for the lane's command."""
        return {ENV_PORT: str(self.first), ENV_PORTS: f"{self.first}-{self.last}"}

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def lease_dir(env: Mapping[str, str] | None = None) -> Path:
    """The machine-wide folder of leases (see the module's docstring)."""
    env = os.environ if env is None else env
    given = env.get(ENV_DIR)
    if given:
        return Path(given)
    for place in SHARED_PLACES:
        with contextlib.suppress(OSError):
            st = os.stat(place)
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o1002 == 0o1002:
                return Path(place) / FOLDER
    return Path("/tmp") / FOLDER


def block_size(env: Mapping[str, str] | None = None) -> int:
    """Ports per lane from `$LANEWATCH_PORT_BLOCK` (0: none). Raises LeaseUnavailable when it
    is not a number in 0..MAX_BLOCK."""
    raw = (os.environ if env is None else env).get(ENV_BLOCK, "").strip()
    if not raw:
        return DEFAULT_BLOCK
    if not raw.isdigit() or int(raw) > MAX_BLOCK:
        raise LeaseUnavailable(f"${ENV_BLOCK} must be a number of ports from 0 to {MAX_BLOCK}")
    return int(raw)


def port_range(env: Mapping[str, str] | None = None) -> tuple[int, int]:
    """(lowest, highest) port leases are taken from: `$LANEWATCH_PORT_RANGE` ("LOW-HIGH")."""
    raw = (os.environ if env is None else env).get(ENV_RANGE, "").strip()
    if not raw:
        return DEFAULT_RANGE
    m = re.fullmatch(r"(\d{1,5})-(\d{1,5})", raw)
    if m is None or not 1024 <= int(m[1]) <= int(m[2]) <= 65535:
        raise LeaseUnavailable(f"${ENV_RANGE} must read LOW-HIGH with 1024 <= LOW <= HIGH <= 65535")
    return int(m[1]), int(m[2])


# --- the folder -----------------------------------------------------------------------------


def _open_dir(path: Path, create: bool) -> int:
    """The lease folder's fd, made (1777) if missing and `create`; never through a symlink."""
    if create:
        try:
            os.mkdir(path, 0o700)  # then opened up: no moment where umask decides
        except FileExistsError:
            pass
        except OSError as exc:
            raise LeaseUnavailable(f"cannot make {path}: {exc.strerror}") from None
        else:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o1777, follow_symlinks=False)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LeaseUnavailable(f"{path} is not a folder (a symlink?): not used") from None
        raise LeaseUnavailable(f"cannot open {path}: {exc.strerror}") from None
    return fd


def _lock(fd: int, path: Path) -> None:
    import fcntl

    if not flock_within(fd, LOCK_WAIT, fcntl.LOCK_EX):
        os.close(fd)
        raise LeaseUnavailable(f"{path} stayed locked by another process for {LOCK_WAIT:g} s")


def _parse(data: bytes, name: str, file_uid: int) -> Lease | None:
    """A lease file's content, or None when it is not one (or not its named writer's)."""
    m = _NAME.match(name)
    if m is None or len(data) > MAX_LEASE_BYTES:
        return None
    try:
        obj = json.loads(data)
        lease = Lease(**{k: obj[k] for k in Lease.__dataclass_fields__ if k in obj})
    except (ValueError, TypeError, KeyError):
        return None
    ints = (lease.first, lease.count, lease.uid, lease.pid, lease.start_ticks)
    if not all(type(v) is int for v in ints) or not all(
        type(v) is str for v in (lease.user, lease.boot_id, lease.host, lease.lane, lease.namespace)
    ):
        return None
    if lease.first != int(m[1]) or lease.uid != int(m[2]) or lease.uid != file_uid:
        return None  # a file that is not what its name says, or written by another user
    if not (0 < lease.count <= MAX_BLOCK and lease.first > 0 and lease.last <= 65535):
        return None
    return lease


def _read_in(fd: int) -> list[tuple[str, Lease]]:
    out: list[tuple[str, Lease]] = []
    for name in os.listdir(fd):
        if _NAME.match(name) is None:
            continue
        try:
            f = open_regular(name, os.O_RDONLY, dir_fd=fd)
        except (NotAFile, OSError):
            continue
        try:
            st = os.fstat(f)
            data = os.read(f, MAX_LEASE_BYTES + 1)
        except OSError:
            continue
        finally:
            os.close(f)
        lease = _parse(data, name, st.st_uid)
        if lease is not None:
            out.append((name, lease))
    return out


def is_live(lease: Lease) -> bool:
    """Whether the lease's owner still runs (another host's, or one we may not read: yes)."""
    if lease.host != hostname():
        return True
    state, _ = liveness(ProcessIdentity(lease.pid, lease.start_ticks, lease.boot_id))
    return state not in _DEAD


def read_leases(path: Path | None = None, *, live_only: bool = True) -> list[Lease]:
    """Every lease of the machine (live ones only, by default), lowest port first. Never
    raises: an absent or unreadable folder has no leases."""
    folder = lease_dir() if path is None else path
    try:
        fd = _open_dir(folder, create=False)
    except LeaseUnavailable:
        return []
    try:
        found = [lease for _, lease in _read_in(fd)]
    except OSError:
        found = []
    finally:
        os.close(fd)
    if live_only:
        found = [lease for lease in found if is_live(lease)]
    return sorted(found, key=lambda lease: lease.first)


# --- take and free --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Holder:
    """Who a new lease is for: the process that claims the lane, and the lane."""

    identity: ProcessIdentity
    user: str
    lane: str
    namespace: str
    checkout_id: str


def take(
    holder: Holder,
    size: int,
    *,
    path: Path | None = None,
    span: tuple[int, int] | None = None,
    busy: Iterable[int] | None = None,
) -> Lease:
    """Lease the first free block of `size` ports of `span` (default `port_range()`) for
    `holder`. `busy`: ports in use now (default: every listening socket's). Raises
    LeaseUnavailable, saying why."""
    low, high = port_range() if span is None else span
    if not 0 < size <= MAX_BLOCK:
        raise LeaseUnavailable(f"a block of {size} ports cannot be leased")
    folder = lease_dir() if path is None else path
    fd = _open_dir(folder, create=True)
    _lock(fd, folder)
    try:
        taken = []
        for name, lease in _read_in(fd):
            if is_live(lease):
                taken.append(lease)
            elif lease.uid == os.getuid() or os.getuid() == 0:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)  # a dead owner's: reclaimed
        used = set(netsockets.ports_listening() if busy is None else busy)
        for first in range(low, high - size + 2, size):
            if any(lease.overlaps(first, size) for lease in taken):
                continue
            if any(p in used for p in range(first, first + size)):
                continue
            lease = _lease(holder, first, size)
            if _write(fd, lease):
                return lease
        raise LeaseUnavailable(
            f"no free block of {size} ports in {low}-{high} ({len(taken)} leases held)"
        )
    finally:
        os.close(fd)  # the flock goes with it


def _lease(holder: Holder, first: int, size: int) -> Lease:
    me = holder.identity
    return Lease(
        first=first,
        count=size,
        uid=os.getuid(),
        user=holder.user,
        pid=me.pid,
        start_ticks=me.start_ticks,
        boot_id=me.boot_id,
        host=hostname(),
        lane=holder.lane,
        namespace=holder.namespace,
        checkout_id=holder.checkout_id,
        taken_at=time.time(),
    )


def _write(fd: int, lease: Lease) -> bool:
    """Write `lease` under its name; False when the name is another's (a file we may not
    replace in a sticky folder)."""
    data = json.dumps(lease.to_json(), sort_keys=True).encode() + b"\n"
    tmp = f".{lease.file_name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    f = os.open(tmp, flags, 0o644, dir_fd=fd)
    try:
        os.fchmod(f, 0o644)  # readable by every user's lanewatch, whatever the umask
        os.write(f, data)
    finally:
        os.close(f)
    try:
        os.replace(tmp, lease.file_name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        if exc.errno in (errno.EPERM, errno.EACCES, errno.EISDIR):
            return False
        raise LeaseUnavailable(f"cannot write a lease: {exc.strerror}") from None
    return True


def free(lease: Lease, *, path: Path | None = None) -> bool:
    """Remove `lease`'s file if it still names the same owner; True if it was removed."""
    folder = lease_dir() if path is None else path
    try:
        fd = _open_dir(folder, create=False)
        _lock(fd, folder)
    except LeaseUnavailable:
        return False
    try:
        for name, found in _read_in(fd):
            if name == lease.file_name and (found.pid, found.start_ticks, found.boot_id) == (
                lease.pid,
                lease.start_ticks,
                lease.boot_id,
            ):
                os.unlink(name, dir_fd=fd)
                return True
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


def lease_of(port: int, leases: Iterable[Lease]) -> Lease | None:
    """The lease holding `port`, if any."""
    return next((lease for lease in leases if lease.holds(port)), None)
