"""Which scope a written path has, and what to do about it (pure: paths in, words out).

- checkout-scoped: inside the run's checkout. Fine across checkouts; two runs in ONE checkout
  that write it collide.
- product-scoped: a shared folder named after a product (`~/.cache/tool/…`, `/var/tmp/project/…`):
  every checkout of every project using the tool shares it.
- unbound: a fixed name straight in shared temp (`/tmp/out.json`) or in the home folder
  (`~/.toolrc`): shared by everything on the machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CHECKOUT = "checkout-scoped"
PRODUCT = "product-scoped"
UNBOUND = "unbound"
SCOPES = (CHECKOUT, PRODUCT, UNBOUND)
TEMPS = ("/tmp", "/var/tmp")
# Shared temp folders outside the fence (seen as root, audit/kernelwatch.py): a name straight in
# one is unbound, a folder in one product-scoped. `/run/user/UID` is added per user.
SHARED_TEMPS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
OTHER = "/"  # the area of any other path (seen as root): rel is the path without its first "/"
# Folders of the home folder that hold one folder per product (XDG and their usual defaults).
HOME_BASES = (".cache", ".config", ".local/share", ".local/state")


@dataclass(frozen=True, slots=True)
class Scope:
    scope: str  # one of SCOPES
    owner: str  # the shared folder it belongs to ("~/.cache/tool", "/tmp"), or the checkout


def scope_of(area: str, rel: str) -> Scope:
    """`area` is "/tmp", "/var/tmp", "~", "checkout", another shared temp folder (seen as root)
    or OTHER; `rel` the path inside it ("a/b")."""
    parts = rel.split("/")
    if area == "checkout":
        return Scope(CHECKOUT, "the checkout")
    if area == OTHER:  # a shared folder of its own: whoever else writes there shares it
        return Scope(PRODUCT, "/" + "/".join(parts[:-1]) if len(parts) > 1 else "/")
    if is_shared_temp(area):
        if len(parts) == 1:
            return Scope(UNBOUND, area)
        return Scope(PRODUCT, f"{area}/{parts[0]}")
    for base in HOME_BASES:
        depth = base.count("/") + 1
        if parts[:depth] == base.split("/") and len(parts) > depth + 1:
            return Scope(PRODUCT, "~/" + "/".join(parts[: depth + 1]))
    if len(parts) == 1:
        return Scope(UNBOUND, "~")
    return Scope(PRODUCT, f"~/{parts[0]}")


def is_shared_temp(area: str) -> bool:
    return area in SHARED_TEMPS or area.startswith("/run/user/")


def area_of(path: str, home: str) -> tuple[str, str]:
    """The area and rel of an absolute path seen by the kernel (as root)."""
    base = home.rstrip("/")
    if base and path.startswith(base + "/"):
        return "~", path[len(base) + 1 :]
    temps = [*SHARED_TEMPS, f"/run/user/{os.getuid()}"]
    for temp in temps:
        if path.startswith(temp + "/"):
            return temp, path[len(temp) + 1 :]
    return OTHER, path.lstrip("/")


def display(area: str, rel: str) -> str:
    if area == "checkout":
        return f"<checkout>/{rel}"
    if area == "~":
        return f"~/{rel}"
    if area == OTHER:
        return f"/{rel}"
    return f"{area}/{rel}"


def fix_for(area: str, rel: str, scope: str, pytest: bool) -> str:
    """A suggested fix, in one sentence."""
    if scope == CHECKOUT:
        return (
            "fine across checkouts; if two lanes of one checkout run it, write it under the "
            "lane's scratch folder instead (`lanewatch.lanes.lane.scratch_dir_for`, or "
            "$LANEWATCH_NAMESPACE/scratch)"
        )
    if is_shared_temp(area):
        how = "use `tmp_path` (or `tmp_path_factory`)" if pytest else "create it under $TMPDIR"
        return (
            f"{how} instead of the fixed {area} name; a tool that ignores TMPDIR needs its "
            "temp option pointed into the lane (`--basetemp` inside the lane for pytest)"
        )
    if area == OTHER:
        where = (
            "`tmp_path`" if pytest else "the lane's scratch folder ($LANEWATCH_NAMESPACE/scratch)"
        )
        return (
            f"make the folder an option of the tool (or its variable) and point it at {where}; "
            "a build output belongs inside the checkout"
        )
    if pytest:
        return (
            "give the tool a folder of the test: point its cache/config variable (XDG_CACHE_HOME, "
            "the tool's own) at `tmp_path`, or monkeypatch HOME to `tmp_path`"
        )
    return (
        "point the tool's cache/config variable (XDG_CACHE_HOME, XDG_CONFIG_HOME, the tool's "
        "own) at the lane's scratch folder ($LANEWATCH_NAMESPACE/scratch, scratch_dir_for)"
    )
