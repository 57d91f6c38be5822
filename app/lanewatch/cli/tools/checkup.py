"""`lanewatch doctor`'s checks: what a lane gets on this machine, as this user.

Each check asks the way the code that acts asks, for real where that code tries for real: the
fence's kernel calls in a forked child and bubblewrap run (`runner/fence.py`), the network
namespace beside it, slirp4netns and /dev/net/tun (`runner/netfence.py`), the host's resolver
(`runner/netdns.py`), a cgroup made and removed (`linux/cgroup.py`), a fanotify group marked
(`kernel/attribution.py`), the port lease folder and range (`lanes/leases.py`), the registry's
roots, the inotify watches a watcher of those roots needs against what this user has left
(`linux/inotifyuse.py`), and the always-on service's heartbeat (`records/service.py`). A
check says "ok" (lanes get it), "degraded" (they get less, and still run: what is missing and
what would change it) or "off" (they do not get it).
"""

from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes import leases
from lanewatch.lanes.roots import Registry, canonical_root, default_root
from lanewatch.linux import support

if TYPE_CHECKING:
    from lanewatch.linux.inotifyuse import InotifyUse

OK, DEGRADED, OFF = "ok", "degraded", "off"


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # system, fence, network, dns, cgroup, attribution, ports, roots, inotify, service
    status: str  # OK, DEGRADED or OFF
    summary: str  # what lanes get here, in one line
    fix: str = ""  # what would change it; empty when it is ok

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def system() -> Check:
    lacking = support.missing((support.PROC, support.INOTIFY))
    if not lacking:
        return Check("system", OK, f"{support.PROC} and inotify: lanes, owners and the tail work")
    return Check(
        "system",
        OFF,
        f"missing: {', '.join(lacking)}; only id, gate, hook, roots and files work here",
        f"Linux, with {support.PROC} mounted",
    )


def fence() -> Check:
    from lanewatch.runner import fence as fences

    how, why = fences.fence_here()
    if how == "kernel":
        inside = "a mount namespace" if os.geteuid() == 0 else "a user namespace"
        return Check("fence", OK, f"kernel: a private /tmp and /var/tmp per lane ({inside})")
    if how == "bwrap":
        return Check(
            "fence",
            DEGRADED,
            f"bwrap: a private /tmp per lane through bubblewrap (the kernel's way: {why})",
            "allow user namespaces for the kernel's way and --fence net (docs/fence.md)",
        )
    return Check(
        "fence",
        OFF,
        f"none: lanes share /tmp and each run says so ({why}; bwrap is not installed or does "
        "not work here)",
        "install bubblewrap or allow user namespaces (docs/fence.md); --fence require refuses "
        "to run unfenced",
    )


def network(fence_check: Check) -> Check:
    from lanewatch.runner import fence as fences
    from lanewatch.runner import netfence

    if fence_check.status != OK:  # only the kernel's way is ok, and only it builds one
        return Check(
            "network",
            OFF,
            "--fence net: lanes share the host's loopback (it is built the kernel's way only)",
            "allow user namespaces (docs/fence.md)",
        )
    shared = "--fence net: lanes share the host's loopback, and say so"
    tool, why = netfence.tool()
    if not tool:
        return Check("network", OFF, shared, why)  # why: what is missing, and how to get it
    refused = fences.net_refusal()
    if refused is not None:
        return Check("network", OFF, shared, f"{refused} (docs/fence.md)")
    return Check("network", OK, f"--fence net: a loopback of the lane's own, by {tool}")


def dns(network_check: Check) -> Check:
    from lanewatch.runner import netdns

    if network_check.status != OK:
        return Check("dns", OFF, "no --fence net here: lanes use the host's resolver")
    host = netdns.host_text(os.environ)
    if host is None:
        return Check(
            "dns",
            DEGRADED,
            f"{netdns.HOST_RESOLV} cannot be read: a net-fenced lane keeps what it finds there",
            f"a readable {netdns.HOST_RESOLV}",
        )
    servers = netdns.nameservers(host)
    if netdns.lane_text(host) is not None:
        named = ", ".join(servers) or "none: the local host"
        return Check(
            "dns",
            OK,
            f"the host's resolver is on loopback ({named}): a net-fenced lane asks it through "
            f"{netdns.SLIRP_DNS}",
        )
    return Check(
        "dns", OK, f"a net-fenced lane asks the host's resolvers as they are ({', '.join(servers)})"
    )


def cgroups() -> Check:
    from lanewatch.linux import cgroup
    from lanewatch.linux.procid import start_ticks

    if os.geteuid() != 0:
        return Check(
            "cgroup",
            DEGRADED,
            "none for a normal user's lanes (the hierarchy is root's): their processes are "
            "found by the membership rules",
            "a lane run as root gets a cgroup of its own (docs/engine.md, 'A cgroup per lane')",
        )
    path, why = cgroup.make(os.getpid(), start_ticks(os.getpid()) or 0)
    if path is None:
        return Check("cgroup", DEGRADED, f"none: {why}; lanes are found by the membership rules")
    cgroup.remove(path)
    return Check("cgroup", OK, "a cgroup v2 per lane: its processes cannot leave it")


def attribution() -> Check:
    from lanewatch.kernel.attribution import HINT_INFERRED, attribution_status

    mode, hint = attribution_status()
    if mode == "kernel":
        return Check("attribution", OK, f"kernel: {hint}")
    how = hint.removeprefix(HINT_INFERRED).removeprefix("; ")
    return Check("attribution", DEGRADED, f"inferred: {HINT_INFERRED}", how)


def ports() -> Check:
    try:
        size = leases.block_size()
        low, high = leases.port_range()
    except leases.LeaseUnavailable as exc:
        how = f"fix or unset ${leases.ENV_RANGE} and ${leases.ENV_BLOCK} (docs/ports.md)"
        return Check("ports", OFF, f"no port leases: {exc}", how)
    if size == 0:
        return Check(
            "ports", OFF, f"no port leases (${leases.ENV_BLOCK}=0)", f"unset ${leases.ENV_BLOCK}"
        )
    folder = leases.lease_dir()
    where = _lease_folder(folder)
    if where:
        return Check("ports", OFF, f"no port leases: {where}", f"a folder of mode 1777 at {folder}")
    live = len(leases.read_leases(folder))
    return Check(
        "ports",
        OK,
        f"{size} ports per lane from {low}-{high}, leased in {folder} ({live} leased now)",
    )


def _lease_folder(folder: os.PathLike[str] | str) -> str:
    """Why lanes could not lease in `folder` ("" when they can, or can make it)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        parent = os.path.dirname(os.fspath(folder))
        return "" if os.access(parent, os.W_OK | os.X_OK) else f"cannot make {folder}"
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder} is not a folder (a symlink?)"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable by this user"
    return ""


def roots() -> Check:
    registry = Registry()
    try:
        paths = registry.paths()
    except LanewatchError as exc:
        return Check(
            "roots",
            DEGRADED,
            f"the registry cannot be read: {exc}",
            f"repair or remove {registry.path}; `lanewatch roots add DIR` again",
        )
    if not paths:
        return Check(
            "roots", OK, "none yet: `lanewatch run` registers the default root at its first claim"
        )
    default = canonical_root(default_root())
    unreadable = [
        str(p)
        for p in paths
        if not os.access(p, os.R_OK | os.X_OK) and not (p == default and not os.path.lexists(p))
    ]
    if unreadable:
        return Check(
            "roots",
            DEGRADED,
            f"{len(paths) - len(unreadable)} of {len(paths)} readable; gone or not readable: "
            + ", ".join(unreadable),
            "`lanewatch roots remove DIR` for a root that is gone",
        )
    later = f" (the default, {default}, is made by the first run)" if default in paths else ""
    later = later if not os.path.lexists(default) else ""
    return Check("roots", OK, f"{len(paths)} watched, all readable{later}")


FOLDERS_COUNTED = 1_000_000  # folders of the roots counted at the most (a doctor, not a walk)


def inotify() -> Check:
    """Room for one more watcher of the roots (a dashboard, the service): each watches every
    folder of every root with one inotify watch, and each root with one instance; the kernel
    counts both per user. Past the limit the watcher polls instead, and says so."""
    from lanewatch.linux import inotifyuse
    from lanewatch.linux.procid import user_name

    try:
        paths = [str(p) for p in Registry().paths() if os.path.isdir(p)]
    except LanewatchError:
        paths = []  # the roots check says why
    most_watches, most_instances = inotifyuse.limits()
    use = inotifyuse.use_of(os.geteuid())
    return inotify_verdict(
        _folders(paths), len(paths), use, most_watches, most_instances, user_name()
    )


def inotify_verdict(
    folders: int,
    roots: int,
    use: InotifyUse,
    most_watches: int | None,
    most_instances: int | None,
    user: str,
) -> Check:
    """The check from its figures: what one more watcher needs, what the user holds."""
    if most_watches is None or most_instances is None:
        return Check("inotify", OK, "this kernel states no inotify limits")
    free = most_watches - use.watches
    free_instances = most_instances - use.instances
    unread = f"; {use.unread} of {user}'s processes not read" if use.unread else ""
    held = f"{use.watches:,} of {most_watches:,} watches and {use.instances} of {most_instances}"
    if folders > free:
        want = _round_up(max(2 * most_watches, use.watches + 4 * folders))
        return Check(
            "inotify",
            DEGRADED,
            f"the roots' {folders:,} folders want a watch each, and {free:,} are left "
            f"({held} instances held by {user}'s processes{unread}): a new dashboard or "
            "service would poll instead, slower and costlier",
            f"sudo sysctl fs.inotify.max_user_watches={want} (and the line in "
            "/etc/sysctl.d/ to keep it)",
        )
    if roots > free_instances:
        want = _round_up(max(2 * most_instances, use.instances + 4 * roots), 128)
        return Check(
            "inotify",
            DEGRADED,
            f"{roots} roots want an inotify instance each, and {max(free_instances, 0)} "
            f"left ({held} instances held by {user}'s processes{unread}): a new dashboard "
            "or service would poll them instead",
            f"sudo sysctl fs.inotify.max_user_instances={want} (and the line in "
            "/etc/sysctl.d/ to keep it)",
        )
    return Check(
        "inotify",
        OK,
        f"room to watch the roots' {folders:,} folders: {held} instances held by "
        f"{user}'s processes{unread}",
    )


def _round_up(n: int, step: int = 65536) -> int:
    return -(-n // step) * step


def _folders(paths: list[str]) -> int:
    """The folders of the roots, the roots included, never following a link."""
    count, stack = 0, list(paths)
    while stack and count < FOLDERS_COUNTED:
        top = stack.pop()
        count += 1
        try:
            with os.scandir(top) as entries:
                stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue
    return count


def service() -> Check:
    from lanewatch.records import service as svc

    states = svc.services()
    watching = [s for s in states if s.watching]
    if watching:
        return Check("service", OK, svc.verdict(watching[0]))
    said = f" ({states[0].reason})" if states else ""
    return Check(
        "service",
        DEGRADED,
        f"none watching{said}: collisions are recorded only while a dashboard runs",
        "`lanewatch service install` (docs/service.md)",
    )


def run_all() -> list[Check]:
    """Every check, in the order a lane meets them."""
    base = system()
    if base.status == OFF:
        return [base]
    fenced = fence()
    net = network(fenced)
    checks = [base, fenced, net, dns(net), cgroups(), attribution(), ports(), roots(), inotify()]
    return [*checks, service()]
