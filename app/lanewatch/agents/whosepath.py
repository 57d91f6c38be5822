"""Whose is this path: the one judgement behind `is_path_mine` (MCP) and the guard.

A path (made absolute against the caller's folder, symlinks resolved as far as they exist) is:

- `mine`: in my namespace, in my checkout, in my fenced `/tmp` or `/var/tmp`, or in the
  namespace of a lane of my family (`docs/engine.md`, families);
- `other-lane`: in another lane's namespace (under a scratch root, in a folder the scheme
  named: the lane is in its name), or, for a lane, in the checkout of another live lane;
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

import json
import os
from collections.abc import Iterable
from typing import Any

from lanewatch.agents.me import Me, stamp_field
from lanewatch.linux.paths import SHARED_TEMP, is_under

MINE, OTHER, SHARED, UNBOUND, OUTSIDE = "mine", "other-lane", "shared", "unbound", "outside"
FENCED = ("/tmp", "/var/tmp")  # what a fence makes the lane's own (/dev/shm only on request)


class Verdict:
    """Whose a path is (a plain class: see `me.Me`)."""

    __slots__ = ("checkout", "fix", "kind", "lane", "namespace", "path", "reason")

    def __init__(
        self,
        path: str,  # as judged: absolute, canonical
        kind: str,  # mine | other-lane | shared | unbound | outside
        reason: str,
        fix: str = "",
        lane: str | None = None,  # the other lane (other-lane)
        namespace: str | None = None,  # the namespace the path is in, if any
        checkout: str | None = None,  # the checkout the path is in, if known
    ) -> None:
        self.path, self.kind, self.reason, self.fix = path, kind, reason, fix
        self.lane, self.namespace, self.checkout = lane, namespace, checkout

    @property
    def blocks(self) -> bool:
        return self.kind in (OTHER, SHARED)

    def to_json(self) -> dict[str, Any]:
        fields = ("path", "kind", "reason", "fix", "lane", "namespace", "checkout")
        return {k: getattr(self, k) for k in fields if getattr(self, k) not in (None, "")}


def canonical(path: str, cwd: str | None = None) -> str:
    """`path` absolute (against `cwd`, `~` expanded) with symlinks resolved where they exist."""
    text = os.path.expanduser(path)
    if not os.path.isabs(text):
        text = os.path.join(cwd or os.getcwd(), text)
    return os.path.realpath(text)


def _state_dir() -> str | None:
    """`lanes.roots.state_dir()` in its usual cases ($LANEWATCH_STATE_DIR, then
    `_xdg_state_dir`'s), without importing it; None for the rest (the caller asks it then).
    tests/processes/test_agents_guard.py holds `known_roots` equal to the registry's answer."""
    env = os.environ.get("LANEWATCH_STATE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "lanewatch")
    home = os.environ.get("HOME", "")
    return home.rstrip("/") + "/.local/state/lanewatch" if os.path.isabs(home) else None


def _registered(state: str) -> list[str]:
    """The paths in the registry (`lanes.roots.Registry`'s roots.json), read only: a registry
    that cannot be read gives none here (the guard must not fail on it, nor repair it)."""
    try:
        with open(os.path.join(state, "roots.json"), "rb") as f:
            data = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return []
    items = data.get("roots") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [i["path"] for i in items if isinstance(i, dict) and isinstance(i.get("path"), str)]


def known_roots(me: Me) -> list[str]:
    """The default root, the registered roots and mine, canonical."""
    state = _state_dir()
    if state is None:  # an unusual home: the full answer
        from lanewatch.lanes.roots import Registry

        found = [str(p) for p in Registry(tell=lambda _: None).paths()]
    else:
        default = os.environ.get("LANEWATCH_ROOT") or os.path.join(state, "scratch")
        found = [os.path.expanduser(default), *_registered(state)]
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


def _head(namespace: str) -> str:
    """The namespace of the head of `namespace`'s family (`model.family.head`: the folder its
    stamp names as `family`, in the same root; itself when it names none)."""
    family = stamp_field(namespace, "family")
    if not isinstance(family, str) or not family or "/" in family:
        return namespace
    return os.path.join(os.path.dirname(namespace), family)


def _one_family(me: Me, other: str) -> bool:
    if me.namespace is None or os.path.dirname(me.namespace) != os.path.dirname(other):
        return False
    return _head(me.namespace) == _head(other)


def _checkout_of(path: str) -> str | None:
    """The worktree root above `path` (the nearest folder with a `.git` folder or file: what
    `lanes.checkout.find_checkout` finds, without its import or its checks of the git dir)."""
    here = path
    while not os.path.lexists(here) and here != "/":  # a file about to be written
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        if here == "/":
            return None
        here = os.path.dirname(here)


def live_lanes_in(checkout: str, roots: Iterable[str]) -> list[tuple[str, str]]:
    """(lane, namespace) of every live lane on this host whose stamp names `checkout`."""
    from pathlib import Path

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
    checkout = _checkout_of(target)
    if me.bound and checkout is not None and checkout != me.checkout:
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
    if not me.bound:
        return Verdict(
            target,
            UNBOUND,
            "no lane's, and you are in no lane",
            "run the agent in a lane: `lanewatch run --lane NAME -- CMD`",
            checkout=checkout,
        )
    return Verdict(target, OUTSIDE, "no lane's, and not shared temp", checkout=checkout)
