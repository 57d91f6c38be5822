"""Whose is this path: the one judgement behind `is_path_mine` (MCP) and the guard.

A path (made absolute against the caller's folder, symlinks resolved as far as they exist) is:

- `mine`: in my namespace, in my checkout, in my fenced `/tmp` or `/var/tmp`, or in the
  namespace of a lane of my family (`docs/engine.md`, families);
- `other-lane`: in another lane's namespace (under a scratch root, in a folder the scheme
  named: the lane is in its name), or in the checkout of another live lane;
- `shared`: shared temp (`/tmp`, `/var/tmp`, `/dev/shm`) seen from a lane that has no fence of
  its own there: every lane of the machine writes the same file (what `lanewatch audit` calls
  an unbound path);
- `unbound`: I am in no lane, and the path is no lane's;
- `outside`: no lane's, and not shared temp (another project, the home folder, the system).

Each verdict carries a one-line reason and, where there is one, the fix. The guard blocks
`other-lane` and `shared`. Blind spots: a path reached through a bind mount or a hard link
is judged by its name; a checkout is another lane's only while a live lane names it in its
stamp (on this host).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lanewatch.agents.me import Me
from lanewatch.linux.paths import SHARED_TEMP, is_under

MINE, OTHER, SHARED, UNBOUND, OUTSIDE = "mine", "other-lane", "shared", "unbound", "outside"
FENCED = ("/tmp", "/var/tmp")  # what a fence makes the lane's own (/dev/shm only on request)


@dataclass(frozen=True, slots=True)
class Verdict:
    path: str  # as judged: absolute, canonical
    kind: str  # mine | other-lane | shared | unbound | outside
    reason: str
    fix: str = ""
    lane: str | None = None  # the other lane (other-lane)
    namespace: str | None = None  # the namespace the path is in, if any
    checkout: str | None = None  # the checkout the path is in, if known

    @property
    def blocks(self) -> bool:
        return self.kind in (OTHER, SHARED)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


def canonical(path: str, cwd: str | None = None) -> str:
    """`path` absolute (against `cwd`, `~` expanded) with symlinks resolved where they exist."""
    text = os.path.expanduser(path)
    if not os.path.isabs(text):
        text = os.path.join(cwd or os.getcwd(), text)
    return os.path.realpath(text)


def known_roots(me: Me) -> list[str]:
    """The registered roots, the default root and mine, canonical. A registry that cannot be
    read leaves the default and mine (the guard must not fail on it)."""
    from lanewatch.errors import LanewatchError
    from lanewatch.lanes.roots import Registry, default_root

    found: list[str] = []
    with contextlib.suppress(LanewatchError, OSError):
        found.extend(str(p) for p in Registry(tell=lambda _: None).paths())
    with contextlib.suppress(LanewatchError, OSError):
        found.append(str(default_root()))
    if me.root:
        found.append(me.root)
    return list(dict.fromkeys(os.path.realpath(r) for r in found))


def _namespace_at(path: str, roots: Iterable[str]) -> tuple[str, str] | None:
    """(namespace folder, lane) when `path` lies in a folder the scheme named under a root."""
    from lanewatch.lanes.names import split_namespace_name

    for root in roots:
        if not is_under(path, root) or path.rstrip("/") == root.rstrip("/"):
            continue
        name = path[len(root.rstrip("/")) + 1 :].split("/", 1)[0]
        split = split_namespace_name(name)
        if split is not None:
            return os.path.join(root, name), split[1]
    return None


def _family(namespace: str) -> str | None:
    from lanewatch.lanes.stamp import read_stamp

    stamp = read_stamp(Path(namespace)).stamp
    return stamp.family if stamp is not None else None


def _one_family(me: Me, other: str) -> bool:
    if me.namespace is None or os.path.dirname(me.namespace) != os.path.dirname(other):
        return False
    from lanewatch.model.family import one_family

    return one_family(me.namespace, _family(me.namespace), other, _family(other))


def _checkout_of(path: str) -> str | None:
    from lanewatch.lanes.checkout import find_checkout

    here = path
    while not os.path.lexists(here) and here != "/":  # a file about to be written
        here = os.path.dirname(here)
    found = find_checkout(here)
    return found.root if found is not None else None


def live_lanes_in(checkout: str, roots: Iterable[str]) -> list[tuple[str, str]]:
    """(lane, namespace) of every live lane on this host whose stamp names `checkout`."""
    from lanewatch.lanes.stamp import OwnerState, read_stamp
    from lanewatch.linux.procid import Liveness, ProcessIdentity, hostname, liveness

    out: list[tuple[str, str]] = []
    for root in roots:
        try:
            names = sorted(os.listdir(root))
        except OSError:
            continue
        for name in names:
            ns = os.path.join(root, name)
            stamp = read_stamp(Path(ns)).stamp
            if stamp is None or stamp.state is not OwnerState.LIVE or stamp.host != hostname():
                continue
            if os.path.realpath(stamp.checkout_path) != checkout:
                continue
            alive, _ = liveness(ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id))
            if alive in (Liveness.ALIVE, Liveness.STOPPED):
                out.append((stamp.lane, ns))
    return out


def _where(me: Me) -> str:
    return f"$LANEWATCH_NAMESPACE ({me.namespace})" if me.namespace else "your own lane"


def judge(path: str, me: Me, *, cwd: str | None = None, roots: list[str] | None = None) -> Verdict:
    """Whose `path` is, for the lane `me` (see the module's docstring)."""
    target = canonical(path, cwd)
    if me.owns(target):
        return Verdict(
            target, MINE, f"in your lane {me.lane!r}'s namespace", namespace=me.namespace
        )
    roots = known_roots(me) if roots is None else roots
    found = _namespace_at(target, roots)
    if found is not None:
        ns, lane = found
        if _one_family(me, ns):
            why = f"in lane {lane!r}'s namespace, of your lane's family"
            return Verdict(target, MINE, why, lane=lane, namespace=ns)
        who = f"you are lane {me.lane!r}" if me.bound else "you are in no lane"
        return Verdict(
            target,
            OTHER,
            f"in lane {lane!r}'s namespace ({ns}); {who}",
            f"write under {_where(me)} instead" if me.bound else "leave it to that lane",
            lane=lane,
            namespace=ns,
        )
    if me.checkout and is_under(target, me.checkout):
        return Verdict(target, MINE, f"in your lane's checkout {me.checkout}", checkout=me.checkout)
    if any(is_under(target, t) for t in SHARED_TEMP):
        if me.private_tmp and any(is_under(target, t) for t in FENCED):
            return Verdict(target, MINE, f"in your lane's private /tmp (fence: {me.fence})")
        if me.bound:
            return Verdict(
                target,
                SHARED,
                f"in shared temp, which every lane of this machine writes "
                f"(your lane {me.lane!r} runs unfenced)",
                f"write under $TMPDIR ({me.namespace}/tmp) instead",
            )
        return Verdict(
            target,
            UNBOUND,
            "in shared temp, and you are in no lane",
            "run the agent in a lane: `lanewatch run --lane NAME -- CMD`",
        )
    checkout = _checkout_of(target)
    if checkout is not None and checkout != me.checkout:
        others = [(lane, ns) for lane, ns in live_lanes_in(checkout, roots) if ns != me.namespace]
        if others:
            lanes = ", ".join(repr(lane) for lane, _ in others)
            return Verdict(
                target,
                OTHER,
                f"in the checkout {checkout} of lane {lanes}, which runs there now",
                f"work in your own checkout ({me.checkout})" if me.checkout else "leave it to it",
                lane=others[0][0],
                namespace=others[0][1],
                checkout=checkout,
            )
    if not me.bound:
        return Verdict(
            target,
            UNBOUND,
            "no lane's, and you are in no lane",
            "run the agent in a lane: `lanewatch run --lane NAME -- CMD`",
            checkout=checkout,
        )
    return Verdict(target, OUTSIDE, "no lane's, and not shared temp", checkout=checkout)
