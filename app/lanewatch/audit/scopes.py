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


def is_bytecode_cache(rel: str) -> bool:
    """`…/__pycache__/NAME.pyc` (and the `NAME.pyc.<n>` a writer renames into place): Python's
    own bytecode cache, or pytest's assertion-rewritten one (`*-pytest-8.4.2.pyc`). Not a
    shared path of the user's: each is derived from the source beside it and written whole,
    atomically (a temporary name, then a rename), so two runs writing one get the same bytes
    and neither can clobber the other. A venv's site-packages fills with them the first time
    pytest rewrites its plugins there."""
    folder, _, name = rel.rpartition("/")
    if folder != "__pycache__" and not folder.endswith("/__pycache__"):
        return False
    stem, dot, tail = name.rpartition(".")
    return name.endswith(".pyc") or (bool(dot) and stem.endswith(".pyc") and tail.isdigit())


# Caches tools keep in the checkout, and what to type so that two lanes of one checkout each
# have their own (or none). Matched on the first part of the path inside the checkout.
TOOL_CACHES = {
    ".pytest_cache": (
        "pytest's cache (--lf, --nf): run `pytest -p no:cacheprovider`, or give each lane its "
        "own with `pytest -o cache_dir=$LANEWATCH_NAMESPACE/pytest-cache`"
    ),
    ".mypy_cache": "`mypy --cache-dir $LANEWATCH_NAMESPACE/mypy-cache` (or MYPY_CACHE_DIR)",
    ".ruff_cache": "`ruff check --cache-dir $LANEWATCH_NAMESPACE/ruff-cache` (or RUFF_CACHE_DIR)",
    ".coverage": "`COVERAGE_FILE=$LANEWATCH_NAMESPACE/.coverage` in the lane's environment",
}
SCRATCH = "$LANEWATCH_NAMESPACE/scratch in a shell, `lanewatch.scratch_dir_for(name)` in Python"


def fix_for(area: str, rel: str, scope: str, pytest: bool) -> str:
    """A suggested fix, in one sentence, in words a user types (options, variables)."""
    if scope == CHECKOUT:
        first = rel.split("/", 1)[0]
        tool = TOOL_CACHES.get(first) or (
            TOOL_CACHES[".coverage"] if first.startswith(".coverage.") else None
        )
        if tool is not None:
            return f"fine across checkouts; for two lanes of one checkout: {tool}"
        return (
            "fine across checkouts; if two lanes of one checkout run it, write it under the "
            f"lane's own folder instead ({SCRATCH})"
        )
    if is_shared_temp(area):
        how = "use `tmp_path` (or `tmp_path_factory`)" if pytest else "create it under $TMPDIR"
        return (
            f"{how} instead of the fixed {area} name; a tool that ignores TMPDIR needs its "
            "temp option pointed into the lane (pytest: `--basetemp=$LANEWATCH_NAMESPACE/"
            "basetemp`)"
        )
    if area == OTHER:
        where = "`tmp_path`" if pytest else f"the lane's own folder ({SCRATCH})"
        return (
            f"make the folder an option of the tool (or its variable) and point it at {where}; "
            "a build output belongs inside the checkout"
        )
    if pytest:
        return (
            "give the tool a folder of the test: point its cache/config variable (XDG_CACHE_HOME, "
            'the tool\'s own) at `tmp_path`, or `monkeypatch.setenv("HOME", str(tmp_path))`'
        )
    return (
        "point the tool's cache/config variable (XDG_CACHE_HOME, XDG_CONFIG_HOME, the tool's "
        "own) at the lane's own folder: `XDG_CACHE_HOME=$LANEWATCH_NAMESPACE/cache`"
    )
