"""Name a namespace the same way everywhere: by its folder name, its path, or its lane name.

A target is always an entry directly inside a known root (the registry, default root first),
never the root itself nor the root's own `.lanewatch-root` folder. Resolving only *locates*:
it follows no symlink at the entry and does not require the entry to exist (a namespace a
concurrent clear just moved is "gone", which the action reports). What the entry is
(a real folder, a symlink, a mount) is judged by each action at the moment it acts.

Order: a spec with a `/` (or `.`, `..`, `~`) is a path; otherwise an exact namespace name in
one root; otherwise a lane name, if exactly one namespace of the known roots carries it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lanewatch.errors import BadTarget, Missing
from lanewatch.lanes.names import split_namespace_name
from lanewatch.lanes.roots import ROOT_META, Registry, canonical_root


class TargetError(BadTarget):
    """The spec names nothing an action may touch (or names several things)."""


class NotFound(TargetError, Missing):
    def __init__(self, message: str, spec: str) -> None:
        super().__init__(message)
        self.spec = spec


class ViewLike(Protocol):
    """What a dashboard row gives (`model.views.NamespaceView`)."""

    @property
    def key(self) -> str: ...

    @property
    def root(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Target:
    root: Path  # a known root, canonical
    name: str  # an entry directly inside it

    @property
    def path(self) -> Path:
        return self.root / self.name

    @property
    def lane(self) -> str | None:
        split = split_namespace_name(self.name)
        return split[1] if split else None

    @property
    def label(self) -> str:
        lane = self.lane
        return f"lane {lane!r} ({self.name})" if lane is not None else self.name


def known_roots(extra: Iterable[str | os.PathLike[str]] = ()) -> list[Path]:
    """Every registered root (default first), then `extra`, canonical and without repeats."""
    seen: dict[str, Path] = {}
    for path in [*Registry().paths(), *(canonical_root(p) for p in extra)]:
        seen.setdefault(str(path), Path(path))
    return list(seen.values())


def check_name(name: str) -> str | None:
    """Why `name` can never be a namespace entry, or None."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return f"{name!r} is not a folder name"
    if name == ROOT_META:
        return f"{ROOT_META} is the root's own folder, never a namespace"
    return None


def in_root(root: Path, name: str) -> Target:
    why = check_name(name)
    if why is not None:
        raise TargetError(why)
    return Target(root, name)


def resolve(spec: str | os.PathLike[str] | ViewLike, roots: Sequence[Path] | None = None) -> Target:
    """The target `spec` names. Raises TargetError (NotFound when nothing matches)."""
    known = list(roots) if roots is not None else known_roots()
    if not isinstance(spec, str | os.PathLike):
        return _from_view(spec, known)
    text = os.fspath(spec)
    if _is_path(text):
        return _from_path(text, known)
    if check_name(text) is not None:
        raise TargetError(check_name(text) or "")
    found = [Target(r, text) for r in known if os.path.lexists(r / text)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise _ambiguous(text, found)
    by_lane = [t for t in namespaces(known) if t.lane == text]
    if len(by_lane) == 1:
        return by_lane[0]
    if len(by_lane) > 1:
        raise _ambiguous(text, by_lane)
    raise NotFound(f"no namespace or lane named {text!r} in the known roots", text)


def namespaces(roots: Sequence[Path]) -> list[Target]:
    """Every folder directly inside the roots (not symlinks, not the root's own folder)."""
    out: list[Target] = []
    for root in roots:
        try:
            with os.scandir(root) as it:
                names = sorted(
                    e.name for e in it if e.name != ROOT_META and e.is_dir(follow_symlinks=False)
                )
        except OSError:
            continue  # a missing or unreadable root holds nothing we can act on
        out.extend(Target(root, n) for n in names)
    return out


def _is_path(text: str) -> bool:
    return "/" in text or text in (".", "..") or text.startswith("~")


def _from_path(text: str, known: Sequence[Path]) -> Target:
    path = Path(os.path.abspath(os.path.expanduser(text)))
    real = os.path.realpath(path)
    roots = {str(r): r for r in known}
    if str(path) in roots or real in roots:
        raise TargetError(f"{path} is a scratch root itself; only namespaces inside it are")
    parent = os.path.realpath(path.parent)  # the entry itself is never followed
    if parent in roots:
        return in_root(roots[parent], path.name)
    for root in known:
        if real.startswith(str(root) + os.sep) or str(path).startswith(str(root) + os.sep):
            raise TargetError(f"{path} is not directly inside the root {root}")
    raise TargetError(f"{path} is not inside a known scratch root (see `lanewatch roots`)")


def _from_view(view: ViewLike, known: Sequence[Path]) -> Target:
    root = canonical_root(view.root)
    if all(root != r for r in known):
        raise TargetError(f"{view.root} is not a known scratch root (see `lanewatch roots`)")
    target = in_root(root, view.name)
    if os.path.abspath(view.key) != str(target.path):
        raise TargetError(f"{view.key} is not {view.name} in {view.root}")
    return target


def _ambiguous(spec: str, found: Sequence[Target]) -> TargetError:
    paths = ", ".join(str(t.path) for t in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    return TargetError(f"{spec!r} is ambiguous: {paths}{more}; name the namespace by its path")
