"""Who is asking: the lane an agent (or its hook, or its MCP server) runs in.

`lanewatch run` exports `LANEWATCH_LANE`, `LANEWATCH_NAMESPACE`, `LANEWATCH_CHECKOUT`,
`LANEWATCH_ROOT` and `LANEWATCH_FENCE` to everything it starts. An MCP client may start its
servers with a reduced environment (the Python SDK's stdio client passes only HOME, PATH and a
few more), so where the variables are missing the lane is looked for in the environment of the
asking process's ancestors (`linux/ancestry.py`: `/proc/PID/environ`, readable for one's own
processes), nearest first. Either way the namespace is trusted only when its stamp names the
same lane: a copied or stale variable gives no lane.
"""

from __future__ import annotations

import os

from lanewatch.linux.ancestry import environ_of, parent_of
from lanewatch.linux.paths import is_under

ENV_LANE = "LANEWATCH_LANE"
ENV_NAMESPACE = "LANEWATCH_NAMESPACE"
ENV_CHECKOUT = "LANEWATCH_CHECKOUT"
ENV_ROOT = "LANEWATCH_ROOT"
ENV_FENCE = "LANEWATCH_FENCE"
WANTED = (ENV_LANE, ENV_NAMESPACE, ENV_CHECKOUT, ENV_ROOT, ENV_FENCE)
MAX_ANCESTORS = 32


class Me:
    """The asking lane; every field None outside a lane. A plain class, not a dataclass: the
    guard starts before each tool call, and `dataclasses` (with `inspect`) would double what
    it imports (tests/bench/bench.py `guard`)."""

    __slots__ = ("checkout", "fence", "found_in", "lane", "namespace", "root")

    def __init__(
        self,
        lane: str | None = None,
        namespace: str | None = None,  # canonical
        checkout: str | None = None,  # canonical worktree root
        root: str | None = None,  # canonical scratch root
        fence: str | None = None,  # "kernel", "bwrap", "none"
        found_in: str = "environment",  # "environment", "pid N" (an ancestor's), "" (no lane)
    ) -> None:
        self.lane, self.namespace, self.checkout = lane, namespace, checkout
        self.root, self.fence, self.found_in = root, fence, found_in

    def __repr__(self) -> str:
        return f"Me(lane={self.lane!r}, namespace={self.namespace!r}, found_in={self.found_in!r})"

    @property
    def bound(self) -> bool:
        return self.lane is not None and self.namespace is not None

    @property
    def private_tmp(self) -> bool:
        """/tmp and /var/tmp are the lane's own (a fence: a mount namespace of its own)."""
        return self.bound and self.fence in ("kernel", "bwrap")

    def owns(self, path: str) -> bool:
        """`path` (canonical) is in this lane's namespace."""
        return self.namespace is not None and is_under(path, self.namespace)


def _real(value: str | None) -> str | None:
    return os.path.realpath(value) if value else None


def _from(values: dict[str, str], found_in: str) -> Me:
    return Me(
        lane=values.get(ENV_LANE) or None,
        namespace=_real(values.get(ENV_NAMESPACE)),
        checkout=_real(values.get(ENV_CHECKOUT)),
        root=_real(values.get(ENV_ROOT)),
        fence=values.get(ENV_FENCE) or None,
        found_in=found_in,
    )


STAMP = (".lanewatch", "owner.json")  # lanes/stamp.py: META_DIR, STAMP_FILE
MAX_STAMP = 64 * 1024


def stamp_field(namespace: str, name: str) -> object:
    """One field of a namespace's stamp, read the cheap way (no symlink followed, nothing but
    a small regular file read; `lanes.stamp.read_stamp` is the full reader); None if unreadable.
    For the guard's questions only: which lane, which family."""
    import json

    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        meta = os.open(os.path.join(namespace, STAMP[0]), flags | os.O_DIRECTORY)
        try:
            fd = os.open(STAMP[1], flags, dir_fd=meta)
        finally:
            os.close(meta)
        try:
            import stat

            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = os.read(fd, MAX_STAMP + 1)
        finally:
            os.close(fd)
        obj = json.loads(data) if len(data) <= MAX_STAMP else None
    except (OSError, ValueError):
        return None
    return obj.get(name) if isinstance(obj, dict) else None


def _stamp_names(namespace: str, lane: str | None) -> bool:
    """The namespace's stamp names `lane` (a cheap check, no liveness: `whoami` says that)."""
    named = stamp_field(namespace, "lane")
    return isinstance(named, str) and (lane is None or named == lane)


def who_am_i(environ: dict[str, str] | os._Environ[str] | None = None) -> Me:
    """The asking lane: from the environment, else from the nearest ancestor that has one."""
    env = os.environ if environ is None else environ
    if env.get(ENV_LANE) and env.get(ENV_NAMESPACE):
        return _from(dict(env), "environment")
    pid = os.getppid()
    for _ in range(MAX_ANCESTORS):
        if pid <= 1:
            break
        values = environ_of(pid, WANTED)
        if values.get(ENV_LANE) and values.get(ENV_NAMESPACE):
            found = _from(values, f"pid {pid}")
            if found.namespace and _stamp_names(found.namespace, found.lane):
                return found
            break  # the nearest lane's variables are wrong: never guess past them
        pid = parent_of(pid)
    return Me(found_in="")
