"""The fence: a private /tmp for every lane, like systemd's `PrivateTmp=`.

CMD runs in a mount namespace of its own where `/tmp` and `/var/tmp` (and, by option,
`/dev/shm`) are folders of the lane's namespace; everything else stays where it was, the user
keeps their uid. A fixed name such as `/tmp/receipt.json` is then one file per lane.

Two ways to build it (docs/fence.md says why this order):
- `kernel`: a short stdlib-only Python stub (`STUB`) that calls unshare(2) itself, maps the uid
  to itself (normal users: a user namespace; root: a mount namespace only, so root keeps its
  powers), makes every mount a slave (nothing leaks back), binds the folders and execs CMD: CMD
  keeps the pid the runner started, so signals, exit codes and the terminal behave as unfenced.
- `bwrap`: bubblewrap, when the kernel refuses the stub but bwrap is allowed (AppArmor profiles
  on Ubuntu): `--dev-bind / /` keeps the tree. bwrap keeps a monitor process between the runner
  and CMD, which dies on the first SIGTERM while CMD may still run.

The decision (docs/fence.md, "Deciding"): `auto` asks nothing beforehand. The stub tries for
real and reports through a pipe (`Report`): "fenced" with its mount namespace, or "refused"
with the errno and the step, before CMD has run; the runner then falls back (`fall_back`:
bwrap, or unfenced saying why, "unfenced: user namespaces disabled by …") and starts CMD again.
`tmp` (or `require`) asks the kernel first (`kernel_refusal`: `unshare(1)`, or a forked child
making the stub's calls), so that it refuses before anything is claimed or run.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from lanewatch.errors import FenceRefused
from lanewatch.lanes.fsutil import write_atomic
from lanewatch.lanes.stamp import META_DIR
from lanewatch.linux import userns
from lanewatch.linux.proc import namespace_link, sysctl

ENV_FENCE = "LANEWATCH_FENCE"  # exported to CMD: "kernel", "bwrap" or "none"
ENV_FENCE_WITH = "LANEWATCH_FENCE_WITH"  # force one way: "kernel" or "bwrap" (tests, debugging)
ENV_FENCE_REQUIRE = "LANEWATCH_FENCE_REQUIRE"  # "1": `auto` becomes `require` (fail closed)
ENV_NET = "LANEWATCH_NET"  # exported to CMD: "private" (`--fence net` got it) or "shared"
TMP_MOUNTS = ("/tmp", "/var/tmp")
SHM_MOUNT = "/dev/shm"
# The lane's folder seen at each private mount point (`tmp/` is the lane's TMPDIR already).
FOLDERS = {"/tmp": "tmp", "/var/tmp": "var-tmp", SHM_MOUNT: "shm"}
SHORT_TMPDIR = 60  # longer, and an unfenced TMPDIR becomes a short link (AF_UNIX paths)
SOCKET_LIMIT = 108 if sys.platform.startswith("linux") else 104  # sun_path, with its NUL
SOCKET_TAIL = 33  # what multiprocessing adds: "/pymp-xxxxxxxx/listener-xxxxxxxx" and the NUL
EXIT_FENCE_FAILED = 125  # the stub could not build the fence (CMD has not run)

MS_BIND = 4096
CLONE_NEWNET = 0x40000000


class Mode(StrEnum):
    AUTO = "auto"  # fence where the kernel allows, else run as before and say so
    TMP = "tmp"  # fence, or refuse to run
    REQUIRE = "require"  # the same as `tmp`, by the name a team looks for
    NONE = "none"  # never fence
    NET = "net"  # `auto`, and a network namespace of its own (runner/netfence.py)

    @property
    def refuses_unfenced(self) -> bool:
        return self in (Mode.TMP, Mode.REQUIRE)


TRUE_WORDS = ("1", "yes", "true", "on")


def chosen(mode: Mode, env: Mapping[str, str]) -> Mode:
    """`mode` as the environment sharpens it: `$LANEWATCH_FENCE_REQUIRE=1` makes `auto`
    `require`, so a team (a CI job, an agent's shell) fails closed without changing every
    command line. An explicit `--fence none` or `tmp` stays as given."""
    if mode is Mode.AUTO and env.get(ENV_FENCE_REQUIRE, "").strip().lower() in TRUE_WORDS:
        return Mode.REQUIRE
    return mode


def unfenced_line(lane: str, note: str) -> str:
    """The one line `run` prints (stderr) when `auto` runs a lane unfenced: what, why, and
    how to refuse instead. `lane` and `note` are made inert by the caller."""
    return (
        f"lanewatch: lane {lane} runs unfenced ({note}): CMD shares the real /tmp; "
        f"--fence require or {ENV_FENCE_REQUIRE}=1 refuses instead (docs/fence.md)"
    )


@dataclass(frozen=True, slots=True)
class Fence:
    """How one run is fenced: `how` is "kernel", "bwrap" or "none" (then `note` says why)."""

    how: str
    note: str = ""
    binds: tuple[tuple[str, str], ...] = ()  # (the lane's folder, the mount point it shows at)
    kept: tuple[str, ...] = ()  # entries of /tmp or /var/tmp the lane still needs (see `kept`)
    bwrap: str = ""  # bwrap's path, when how == "bwrap"
    # `--fence net`: slirp4netns's path when CMD gets a network namespace of its own (the
    # kernel way only); else `net_note` says why a lane that asked for one runs without it.
    net: str = ""
    net_note: str = ""
    # With `net`: the lane's resolver file (runner/netdns.py), bound over /etc/resolv.conf
    # where the host's resolver is on loopback: (its path in `.lanewatch/`, its text).
    resolv: tuple[str, str] | None = None

    @property
    def fenced(self) -> bool:
        return self.how != "none"

    def stamp_fields(self) -> dict[str, Any]:
        """The stamp's words for this fence: `fence_private` lists `network` beside the mount
        points when CMD has a network namespace of its own; `fence_note` says why a fenced lane
        that asked for one has none (`--fence net`), `net_note` keeps that alone."""
        note = self.note
        if self.fenced and self.net_note:
            note = f"no private network: {self.net_note}"
        private = [*self.private, *(["network"] if self.net else [])]
        out: dict[str, Any] = {"fence": self.how, "fence_note": note, "fence_private": private}
        if self.net_note:
            out["net_note"] = self.net_note
        return out

    @property
    def private(self) -> list[str]:
        return [mount for _, mount in self.binds]

    def hides(self, path: str) -> bool:
        """Whether `path`, as the runner sees it, is out of CMD's sight in the fence: under a
        private mount point and not in an entry bound back (`kept`). A socket there (the tmux
        server a pane's `$TMUX` names) cannot be reached from inside."""
        if not self.fenced:
            return False
        real = os.path.realpath(path)
        if not any(_under(real, m) for m in self.private):
            return False
        return not any(_under(real, k) for k in self.kept)

    def wraps(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether `wrap` puts `argv` in the fence. A command that cannot be found or run is
        left alone, so the runner reports it as before (127/126): nothing ran, nothing needs
        a fence."""
        if not self.fenced or not argv:
            return False
        import shutil  # fenced runs only: `--fence none` starts without it

        return shutil.which(argv[0], path=env.get("PATH")) is not None

    def wrap(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        report: int | None = None,
        go_ahead: int | None = None,
    ) -> list[str]:
        """`argv` as the fence runs it (`wraps`). `report`: a pipe's write end the stub tells
        how it went (`read_report`); the kernel way only. `go_ahead` (`net` only): a pipe's
        read end the stub waits on, once in its network namespace, before it execs CMD: `g`
        once the runner has connected the namespace (runner/netfence.py), else it exits 125."""
        argv = list(argv)
        if not self.wraps(argv, env):
            return argv
        if self.how == "bwrap":
            out = [self.bwrap, "--dev-bind", "/", "/"]
            for src, dst in self.binds:
                out += ["--bind", src, dst]
            for path in self.kept:
                out += ["--bind", path, path]
            if os.geteuid() == 0:
                out += ["--cap-add", "ALL"]  # bwrap drops root's capabilities by default
            return [*out, "--", *argv]
        # The stub's arguments, plain words (json would cost the stub `re`'s import): the
        # report fd and the go-ahead fd (-1: none), the lane's resolver file ("-": none), the
        # binds as pairs, the kept paths, each list after its count.
        go = "-1" if go_ahead is None or not self.net else str(go_ahead)
        dns = self.resolv[0] if self.net and self.resolv and go != "-1" else "-"
        spec = ["-1" if report is None else str(report), go, dns, str(len(self.binds))]
        spec += [part for bind in self.binds for part in bind]
        spec += [str(len(self.kept)), *self.kept]
        return [sys.executable, "-I", "-S", "-c", STUB, *spec, *argv]


def _under(real: str, top: str) -> bool:
    """Whether the resolved path `real` is `top` or below it."""
    top = os.path.realpath(top)
    return real == top or real.startswith(top.rstrip("/") + "/")


# The kernel way, run as `python -I -S -c STUB FD GO DNS N SRC DST... M KEPT... CMD...`
# (`Fence.wrap`; DNS: the lane's resolver file, or "-"):
# stdlib only, no site, no lanewatch: linux/userns.py's text, then this.
STUB = (
    userns.source()
    + r"""
import ctypes, os, sys
args = sys.argv[1:]
report = int(args[0]) if args[0] != "-1" else None
go = int(args[1]) if args[1] != "-1" else None
dns = args[2] if args[2] != "-" else None
args = args[2:]
n = int(args[1])
binds = [(args[2 + 2 * i], args[3 + 2 * i]) for i in range(n)]
m = int(args[2 + 2 * n])
keep = args[3 + 2 * n : 3 + 2 * n + m]
cmd = args[3 + 2 * n + m :]
libc = ctypes.CDLL(None, use_errno=True)
def fail(what, err=None):
    err = err or ctypes.get_errno() or 1
    if report is not None:  # the runner decides what to say (auto: run unfenced instead)
        os.write(report, ("refused %d %s\n" % (err, what)).encode())
        os._exit(125)
    sys.stderr.write("lanewatch: cannot fence the lane: %s: %s\n" % (what, os.strerror(err)))
    sys.stderr.flush()
    os._exit(125)
def mount(src, dst, flags):
    if libc.mount(src and os.fsencode(src), os.fsencode(dst), None, flags, None) != 0:
        fail("mount %s" % dst)
cwd = os.getcwd()
failed = enter_private_mounts(libc, os.getuid() == 0)  # linux/userns.py, run ahead of this
if failed is not None:
    fail(*failed)
if go is not None and libc.unshare(0x40000000) != 0:  # CLONE_NEWNET: `--fence net`
    fail("unshare net")
# Open every source before the first mount hides it (the lane's folders may lie under /tmp).
try:
    dns_fd = os.open(dns, os.O_PATH | os.O_NOFOLLOW) if dns else None
except OSError as exc:
    dns_fd = None
    sys.stderr.write("lanewatch: the lane keeps the host's resolver: %s\n" % exc.strerror)
try:
    opened = [(os.open(s, os.O_PATH | os.O_DIRECTORY), d) for s, d in binds]
    opened += [(os.open(k, os.O_PATH), k) for k in keep]
    for i, (fd, dst) in enumerate(opened):
        if i >= len(binds) and not os.path.exists(dst):
            if os.path.isdir(fd_path(fd)):
                os.makedirs(dst, mode=0o700, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
                os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o600))
        mount(fd_path(fd), dst, 4096 | 16384)
        os.close(fd)
except OSError as exc:
    fail("bind %s" % (exc.filename or "a folder"), exc.errno)
if dns_fd is not None:  # not a reason to refuse the fence: the lookups fail, as they would
    if libc.mount(os.fsencode(fd_path(dns_fd)), b"/etc/resolv.conf", None, 4096, None) != 0:
        err = os.strerror(ctypes.get_errno())
        sys.stderr.write("lanewatch: the lane keeps the host's resolver: %s\n" % err)
    os.close(dns_fd)
try:
    os.chdir(cwd)  # again: a cwd in /tmp is now the lane's
except OSError:
    pass
if report is not None:  # fenced: say in which mount namespace, then let CMD have the pid
    ns = mount_namespace()
    if go is not None and ns:
        net = net_namespace()
        ns = f"{ns} {net}" if net else ""
    os.write(report, ("fenced %s\n" % ns).encode())
    os.close(report)
if go is not None:  # the runner connects the namespace (slirp4netns), then says go
    ready = os.read(go, 1) == b"g"
    os.close(go)
    if not ready:
        os._exit(125)
try:
    os.execvp(cmd[0], cmd)
except OSError as exc:
    sys.stderr.write("lanewatch: command cannot run: %s (%s)\n" % (cmd[0], exc.strerror))
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""
)


def why_refused(err: int, root: bool) -> str:
    """The kernel's refusal in words, naming the setting that made it where one did."""
    what = os.strerror(err)
    if root:
        return f"no private mount namespace ({what}: a container without CAP_SYS_ADMIN?)"
    limit = sysctl("user.max_user_namespaces")
    if err in (errno.ENOSPC, errno.EUSERS):
        return f"user namespaces disabled by user.max_user_namespaces (0 or reached; here {limit})"
    for setting, off in (
        ("kernel.unprivileged_userns_clone", "0"),
        ("kernel.apparmor_restrict_unprivileged_userns", "1"),
    ):
        if sysctl(setting) == off:
            return f"user namespaces disabled by {setting}={off}"
    return f"user namespaces refused by the kernel ({what}: a seccomp filter or a container?)"


_probed: dict[bool, int] = {}


def kernel_refusal() -> str | None:
    """None when the kernel lets this user build the fence (the stub's unshare, uid map and
    slave mount, tried for real), else why not. Asked once per process.

    util-linux's `unshare` tries it when installed (spawned: cheaper than forking this
    process); a forked child making the very calls the stub makes tells the errno where that
    said no, or where there is no `unshare`."""
    root = os.geteuid() == 0
    if root not in _probed:
        _probed[root] = 0 if _unshare_works(root) else _probe(root)
    err = _probed[root]
    return None if err == 0 else why_refused(err, root)


def _unshare_works(root: bool) -> bool:
    import shutil

    binary = shutil.which("unshare")
    if binary is None:
        return False
    import subprocess  # spawned, not forked: see kernel_refusal

    argv = [binary, *([] if root else ["--user", "--map-root-user"])]
    argv += ["--mount", "--propagation", "slave", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


NET_STEP = 128  # `_probe`'s exit for a refused network namespace: this plus its errno


def _probe(root: bool, net: bool = False) -> int:
    """The errno of the stub's step that refused (0: none refused), the network namespace's
    (`net`) as NET_STEP plus its errno."""
    from lanewatch.linux.libc import libc as c_library

    libc = c_library()
    if libc is None:
        return errno.ENOSYS  # no C library to call unshare and mount through
    libc.unshare, libc.mount  # noqa: B018 (looked up before the fork, as the stub's are)
    pid = os.fork()
    if pid == 0:  # the child makes the stub's very calls, then _exits
        code = 0
        try:
            failed = userns.enter_private_mounts(libc, root)
            if failed is not None:
                code = failed[1]
            elif net and libc.unshare(CLONE_NEWNET) != 0:
                code = NET_STEP + (ctypes.get_errno() or errno.EPERM)
        except OSError as exc:
            code = exc.errno or errno.EPERM
        os._exit(min(code, 255))
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else errno.EPERM


def fence_here() -> tuple[str, str]:
    """How `--fence auto` would fence a lane of this user here, asked for real: ("kernel", "")
    or, where the kernel refuses, what `fall_back` chooses ("bwrap" or "none") and why not
    the kernel's way."""
    refusal = kernel_refusal()
    if refusal is None:
        return "kernel", ""
    return _without_kernel(Mode.AUTO, (), (), refusal).how, refusal


def net_refusal() -> str | None:
    """None when the kernel lets this user make the fence's network namespace beside its
    mount namespace (the stub's calls, made for real in a forked child), else why not."""
    root = os.geteuid() == 0
    code = _probe(root, net=True)
    if code == 0:
        return None
    return _no_netns(code - NET_STEP) if code > NET_STEP else why_refused(code, root)


def _bwrap_works(path: str) -> bool:
    import subprocess  # only where the kernel said no: `run` starts without it

    try:
        done = subprocess.run(
            [path, "--dev-bind", "/", "/", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def kept(paths: Iterable[str], mounts: Iterable[str]) -> tuple[str, ...]:
    """The entries of the private mount points that `paths` lie in: each is bound back into
    the fence where it was, so a checkout, a root or a venv under /tmp stays reachable.

    Only the first level (`/tmp/pytest-of-root`, not the whole /tmp), and never the mount point
    itself: a cwd of /tmp becomes the lane's own /tmp.
    """
    out: set[str] = set()
    for raw in paths:
        path = os.path.realpath(raw)
        for mount in mounts:
            real = os.path.realpath(mount)
            if path.startswith(real.rstrip("/") + "/"):
                first = path[len(real.rstrip("/")) + 1 :].split("/", 1)[0]
                out.add(os.path.join(real, first))
    return tuple(sorted(p for p in out if os.path.lexists(p)))


@dataclass(frozen=True, slots=True)
class Need:
    """What the lane needs to reach inside the fence, besides its namespace."""

    paths: list[str] = field(default_factory=list)

    @classmethod
    def of_run(cls, namespace: Path, checkout: str, env: Mapping[str, str]) -> Need:
        paths = [str(namespace), checkout, os.getcwd(), sys.prefix, sys.executable]
        for var in (
            "HOME",
            "XDG_RUNTIME_DIR",
            "LANEWATCH_STATE_DIR",
            "LANEWATCH_ROOT",
            "VIRTUAL_ENV",
        ):
            if env.get(var):
                paths.append(env[var])
        paths += [p for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
        return cls(paths)


def decide(mode: Mode, namespace: Path, need: Need, *, shm: bool = False) -> Fence:
    """How to fence a run of the lane at `namespace`; raises FenceRefused for `tmp` or
    `require` when the fence cannot be built. Pure but for the kernel's answer
    (`kernel_refusal`, `bwrap`).

    `auto` asks nothing: the kernel way is tried for real by the stub, and `fall_back` chooses
    again where it refuses (the runner reads the stub's `Report`). `tmp` asks the kernel first,
    so that a refusal comes before anything is claimed or run."""
    if mode is Mode.NONE:
        return Fence("none", "--fence none")
    mounts = [*TMP_MOUNTS, *([SHM_MOUNT] if shm else [])]
    binds = tuple((str(namespace / FOLDERS[m]), m) for m in mounts if os.path.isdir(m))
    keep = kept(need.paths, [m for _, m in binds])
    forced = os.environ.get(ENV_FENCE_WITH, "")
    if forced == "bwrap":
        return _asked_net(mode, _without_kernel(mode, binds, keep, None), namespace)
    refusal = None if mode in (Mode.AUTO, Mode.NET) else kernel_refusal()
    if refusal is None:
        return _asked_net(mode, Fence("kernel", "", binds, keep), namespace)
    return _without_kernel(mode, binds, keep, refusal)


def _asked_net(mode: Mode, fence: Fence, namespace: Path) -> Fence:
    """`fence`, with a network namespace of its own where `--fence net` asked for one and the
    kernel way builds it with slirp4netns installed (and the lane's resolver file where the
    host's resolver is on loopback: runner/netdns.py); else saying why not (`net_note`)."""
    if mode is not Mode.NET:
        return fence
    from lanewatch.runner import netfence

    if fence.how != "kernel":
        why = f"the network fence is built the kernel's way only; this lane's is {fence.how}"
        return replace(fence, net_note=why)
    tool, why = netfence.tool()
    if not tool:
        return replace(fence, net_note=why)
    return replace(fence, net=tool, resolv=_lane_resolv(namespace))


def _lane_resolv(namespace: Path) -> tuple[str, str] | None:
    from lanewatch.runner import netdns  # `--fence net` only: `run` starts without it

    host = netdns.host_text(os.environ)
    text = None if host is None else netdns.lane_text(host)
    return None if text is None else (str(namespace / META_DIR / netdns.LANE_RESOLV), text)


def without_net(fence: Fence, why: str) -> Fence:
    """The same fence without its network namespace, saying why (`--fence net` refused)."""
    return replace(fence, net="", net_note=why)


def fall_back(fence: Fence, refusal: str) -> Fence:
    """After the stub said `refusal` (`auto` only): bubblewrap where it works, else unfenced,
    saying why."""
    back = _without_kernel(Mode.AUTO, fence.binds, fence.kept, refusal)
    if fence.net or fence.net_note:  # `--fence net` asked: say it has no network of its own
        return replace(back, net_note=f"no namespaces here: {refusal}")
    return back


def _without_kernel(
    mode: Mode, binds: tuple[tuple[str, str], ...], keep: tuple[str, ...], refusal: str | None
) -> Fence:
    import shutil

    forced = os.environ.get(ENV_FENCE_WITH, "")
    bwrap = shutil.which("bwrap") if forced != "kernel" else None
    if bwrap is not None and _bwrap_works(bwrap):
        return Fence("bwrap", "", binds, keep, bwrap=bwrap)
    note = refusal or "bwrap is not installed or does not work here"
    if mode.refuses_unfenced:
        raise FenceRefused(
            f"cannot fence the lane (--fence {mode.value}): {note}; nothing was run. "
            "Install bubblewrap or allow user namespaces (docs/fence.md), or use --fence auto"
        )
    return Fence("none", note)


# The steps of the stub whose refusal is the kernel's (`why_refused` names the setting).
_KERNEL_STEPS = ("unshare", "write setgroups", "write uid_map", "write gid_map", "mount /")


@dataclass(frozen=True, slots=True)
class Report:
    """What the stub told the runner: fenced in `mnt_ns`, or `refusal` (CMD did not run);
    neither when it said nothing (killed before it could)."""

    mnt_ns: str | None = None
    refusal: str | None = None
    net_ns: str | None = None  # `--fence net`: the network namespace it made ("net:[N]")
    net_refusal: str | None = None  # `--fence net`: it could not make one (CMD did not run)


def read_report(fd: int) -> Report:
    """Read the stub's one line from the pipe `fd` until it closes it (at its exec or exit);
    closes `fd`."""
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)
    words = b"".join(chunks).decode(errors="replace").strip().split(" ", 2)
    if words[0] == "fenced":
        ns = words[1] if len(words) > 1 and words[1].startswith("mnt:[") else None
        net = words[2] if len(words) > 2 and words[2].startswith("net:[") else None
        return Report(mnt_ns=ns, net_ns=net)
    if words[0] == "refused" and len(words) == 3 and words[1].isdigit():
        err, what = int(words[1]), words[2]
        if what == "unshare net":
            return Report(net_refusal=_no_netns(err))
        if what in _KERNEL_STEPS:
            return Report(refusal=why_refused(err, os.geteuid() == 0))
        return Report(refusal=f"the fence could not be built ({what}: {os.strerror(err)})")
    return Report()


def _no_netns(err: int) -> str:
    """The kernel's refusal of a network namespace, naming the setting where one did."""
    if err in (errno.ENOSPC, errno.EUSERS):
        # The limit that bit may be an enclosing user namespace's: no number of ours to show.
        return "no network namespace: user.max_net_namespaces is 0 or reached"
    return f"no network namespace ({os.strerror(err)}: a seccomp filter or a container?)"


def own_mount_ns(pid: int, reported: str | None) -> str | None:
    """The mount namespace of the fenced `pid` as seen from here (the stub's `reported` one
    when `pid` is already gone), or None when it is this process's own: a process in our own
    namespace is not thereby the lane's."""
    ns = namespace_link(pid) or reported  # denied or gone: what the stub said
    ours = namespace_link("self")
    if not ours:
        return None  # cannot tell it from ours: record nothing rather than a wrong namespace
    return ns if ns and ns != ours else None


def prepare(fence: Fence) -> None:
    """Make the lane's folders the fence shows (the namespace exists, the lane is claimed)."""
    for src, _ in fence.binds:
        os.makedirs(src, mode=0o700, exist_ok=True)
    if fence.net and fence.resolv is not None:
        path, text = fence.resolv
        write_atomic(Path(path), text.encode("utf-8", "surrogateescape"), 0o644)


def short_tmp(tmp: Path, state: Path) -> str:
    """A TMPDIR of at most SHORT_TMPDIR characters where the state dir allows: the real folder
    when it is short, else a link `<state dir>/t/<hash>` to it (made or repaired here)."""
    real = str(tmp)
    if len(real) <= SHORT_TMPDIR:
        return real
    import hashlib  # only for a long TMPDIR: `run` starts without it

    links = state / "t"
    name = hashlib.sha256(os.fsencode(real)).hexdigest()[:10]
    link = links / name
    if len(str(link)) >= len(real):
        return real  # a state dir as deep as the root: a link would not help
    try:
        links.mkdir(parents=True, exist_ok=True, mode=0o700)
        current = os.readlink(link) if link.is_symlink() else None
        if current != real:
            spare = links / f".{name}.{os.getpid()}"
            spare.unlink(missing_ok=True)
            os.symlink(real, spare)
            os.replace(spare, link)
    except OSError:
        return real  # a long TMPDIR still works; `socket_warning` says what it may break
    return str(link)


def socket_warning(tmpdir: str) -> str | None:
    """What to tell the user when an AF_UNIX socket made in `tmpdir` would not fit."""
    if len(os.fsencode(tmpdir)) + SOCKET_TAIL <= SOCKET_LIMIT:
        return None
    return (
        f"TMPDIR {tmpdir} is {len(tmpdir)} characters: a socket made in it (multiprocessing, "
        f"ssh, tmux) will not fit in an AF_UNIX path ({SOCKET_LIMIT} bytes); "
        "use a shorter --root or the fence (docs/fence.md)"
    )


def command_for(
    fence: Fence,
    argv: Sequence[str],
    env: Mapping[str, str],
    tmp: Path,
    state: Path,
    report: int | None = None,
    go_ahead: int | None = None,
) -> tuple[list[str], dict[str, str]]:
    """CMD's argv and environment in its (claimed) lane: inside the fence TMPDIR is /tmp;
    without it, a short TMPDIR (`short_tmp`), with a warning when a socket would not fit.
    `report`: see `Fence.wrap`."""
    out = dict(env)
    if fence.fenced:
        prepare(fence)
        tmpdir = "/tmp"
    else:
        tmpdir = short_tmp(tmp, state)
        warning = socket_warning(tmpdir)
        if warning is not None:
            sys.stderr.write(f"lanewatch: warning: {warning}\n")
    out.update({"TMPDIR": tmpdir, "TMP": tmpdir, "TEMP": tmpdir, ENV_FENCE: fence.how})
    out[ENV_NET] = "private" if fence.net and fence.wraps(argv, out) else "shared"
    return fence.wrap(argv, out, report, go_ahead), out


def describe(how: str | None, note: str | None, private: Sequence[str] | None) -> str | None:
    """The fence in words for people (status, the dashboard); None for a stamp written
    before fences existed."""
    if how is None:
        return None
    if how == "none":
        return f"unfenced: {note}" if note else "unfenced"
    said = f"private {', '.join(private or ())} ({how})"
    return f"{said}; {note}" if note else said
