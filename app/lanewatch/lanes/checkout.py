"""Checkout identity: one function, used by hooks, tests, the CLI and the library.

The checkout id is a readable slug of the worktree's folder name plus a short hash of the
canonical (symlink-resolved) path of the worktree root. Two worktrees of one repository get
different ids; a symlinked path to the same worktree gets the same id. We walk up looking for
`.git` ourselves instead of running git: it is fast enough for hooks and needs no git binary.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from lanewatch.errors import Unbound

ENV_CHECKOUT = "LANEWATCH_CHECKOUT"
_SLUG_RE = re.compile(r"[^a-z0-9]+")
HASH_LEN = 12
_HOW_TO_BIND = "Run inside a git worktree, or bind one with --checkout PATH or LANEWATCH_CHECKOUT."


@dataclass(frozen=True, slots=True)
class Checkout:
    checkout_id: str
    slug: str
    root: str  # canonical worktree root
    git_dir: str  # this worktree's git dir
    common_dir: str  # the repository's common git dir (shared by all its worktrees)

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def slugify(name: str) -> str:
    slug = _SLUG_RE.sub("-", name.lower()).strip("-")
    return slug[:32].strip("-") or "checkout"


def checkout_id_for(root: str) -> str:
    digest = hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:HASH_LEN]
    return f"{slugify(os.path.basename(root))}-{digest}"


def _read_gitfile(path: Path) -> Path | None:
    """A `.git` file (worktrees, submodules) says `gitdir: <path>`."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            return target if target.is_absolute() else (path.parent / target)
    return None


def _common_dir(git_dir: Path) -> Path:
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    p = Path(rel)
    return p if p.is_absolute() else git_dir / p


def _git_dir_at(folder: Path) -> Path | None:
    """The git dir of a worktree rooted at `folder`: its `.git` folder, or where its `.git`
    file points (a linked worktree, a submodule); None when `folder` has neither."""
    dotgit = folder / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():
        return _read_gitfile(dotgit)
    return None


def common_dir_at(root: str | os.PathLike[str]) -> str | None:
    """The repository's common git dir for the worktree rooted exactly at `root` (what
    `git rev-parse --git-common-dir` prints there, resolved), or None when `root` is not one.
    No walk up: a stamp's checkout path is a worktree root."""
    found = _git_dir_at(Path(root))
    if found is None:
        return None
    return os.path.realpath(_common_dir(Path(os.path.realpath(found))))


def find_checkout(start: str | os.PathLike[str]) -> Checkout | None:
    """The checkout that contains `start`, or None if no `.git` is found above it."""
    here = Path(os.path.realpath(start))
    if here.is_file():
        here = here.parent
    for candidate in (here, *here.parents):
        found = _git_dir_at(candidate)
        if found is None:
            continue
        root = str(candidate)
        git_dir = Path(os.path.realpath(found))
        return Checkout(
            checkout_id=checkout_id_for(root),
            slug=slugify(candidate.name),
            root=root,
            git_dir=str(git_dir),
            common_dir=os.path.realpath(_common_dir(git_dir)),
        )
    return None


def resolve_checkout(explicit: str | os.PathLike[str] | None = None) -> Checkout:
    """The checkout this process is bound to, or raise Unbound.

    Order: an explicit path, then $LANEWATCH_CHECKOUT (set by `lanewatch run` for its children),
    then the current directory. Never a fallback to a shared folder.
    """
    sources: list[tuple[str, str]] = []
    if explicit is not None:
        sources.append(("--checkout", os.fspath(explicit)))
    elif os.environ.get(ENV_CHECKOUT):
        sources.append((ENV_CHECKOUT, os.environ[ENV_CHECKOUT]))
    else:
        try:
            cwd = os.getcwd()
        except OSError as exc:  # the folder we stand in was removed
            message = f"the current directory is unusable ({exc.strerror}). {_HOW_TO_BIND}"
            raise Unbound(message) from exc
        sources.append(("the current directory", cwd))
    origin, path = sources[0]
    if not os.path.isdir(path):
        raise Unbound(f"{origin} names {path!r}, which is not a folder. {_HOW_TO_BIND}")
    checkout = find_checkout(path)
    if checkout is None:
        raise Unbound(
            f"{path} ({origin}) is not inside a git checkout, so nothing binds it to a lane. "
            + _HOW_TO_BIND
        )
    return checkout
