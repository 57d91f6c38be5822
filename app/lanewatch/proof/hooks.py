"""Git hooks that call the gate: written where git will run them, marked as ours.

The hooks folder is the one git itself reports (`git rev-parse --git-path hooks`, run in the
worktree): it honours `core.hooksPath`, and for a linked worktree it is the repository's common
hooks folder, shared by every worktree. That is why the hook passes `--checkout .`: git runs a
hook in the root of the worktree that triggered it, so each worktree is gated on its own
receipt, whatever `$LANEWATCH_CHECKOUT` an outer run may have exported.

A hook is ours when it holds `MARKER`. A foreign hook is never overwritten without `force`,
and then a backup is kept beside it. With `chain`, the foreign hook is kept beside ours as
`<kind>.lanewatch-chained` and ours runs it first (with git's arguments and, for pre-push, the
same stdin lines), then the gate only if it passed; uninstalling puts it back where it was.
The file is written executable in one rename, so git never sees a half-written or
not-yet-executable hook.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lanewatch.errors import LanewatchError
from lanewatch.lanes.checkout import resolve_checkout
from lanewatch.lanes.fsutil import fsync_dir, write_atomic
from lanewatch.proof.gate import format_duration
from lanewatch.proof.gitstate import GitFailed, run_git
from lanewatch.proof.receipts import encode_step

MARKER = "# lanewatch-hook v1"
CHAINED = ".lanewatch-chained"  # `pre-push` + this: the hook that was there before ours
KINDS = ("pre-push", "pre-commit")
_SNIFF = 4096


class HookRefused(LanewatchError):
    """A hook that is not ours is in the way."""


@dataclass(frozen=True, slots=True)
class HookInstall:
    path: Path
    previous: str  # "none" | "ours" | "foreign"
    backup: Path | None
    outside: bool = False  # core.hooksPath points outside this repository: others share it
    chained: Path | None = None  # the previous hook, kept and run before the gate


@dataclass(frozen=True, slots=True)
class HookRemoval:
    path: Path
    restored: bool  # the chained hook is back in its place


def hooks_dir(checkout: str | os.PathLike[str] | None = None) -> Path:
    """The folder git runs this checkout's hooks from."""
    bound = resolve_checkout(checkout)
    try:
        out = run_git(bound.root, "rev-parse", "--git-path", "hooks")
    except GitFailed as exc:
        raise LanewatchError(f"cannot ask git where hooks live: {exc}") from exc
    text = os.fsdecode(out.rstrip(b"\n"))
    path = Path(text)
    return path if path.is_absolute() else Path(bound.root) / path


def is_ours(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return False
        return MARKER.encode() in f.read(_SNIFF)


def render_hook(
    kind: str,
    step: str,
    *,
    lane: str | None = None,
    allow_dirty: bool = False,
    max_age: float | None = None,
    python: str | None = None,
    chained: bool = False,
) -> str:
    argv = [python or sys.executable, "-m", "lanewatch", "gate", step, "--checkout", "."]
    if lane is not None:
        argv += ["--lane", lane]
    if allow_dirty:
        argv.append("--allow-dirty")
    if max_age is not None:
        argv += ["--max-age", f"{max_age:g}s"]
    if kind == "pre-push":
        argv.append("--pre-push")  # git's ref lines arrive on stdin; exec passes them on
    action = "push" if kind == "pre-push" else "commit"
    age = f", at most {format_duration(max_age)} old" if max_age is not None else ""
    head = (
        "#!/bin/sh\n"
        f"{MARKER} ({kind})\n"
        f"# Written by `lanewatch hook install {kind} --gate {shlex.quote(step)}`.\n"
        f"# Refuses the {action} unless this worktree's receipt for {step!r} names this\n"
        f"# checkout, passed, and matches HEAD{'' if allow_dirty else ' and the working tree'}"
        f"{age}.\n"
    )
    if not chained:
        return (
            head + "# `lanewatch hook uninstall` removes it; reinstalling rewrites it.\n"
            f"exec {shlex.join(argv)}\n"
        )
    gate = shlex.join(argv)
    # git's pre-push lines arrive once on stdin: read them, then give each hook its own copy
    # (none at all when there were none, as git would).
    feed = 'lines=$(cat)\nfeed() { [ -z "$lines" ] || printf \'%s\\n\' "$lines"; }\n'
    first = '"$chained" "$@" || exit $?'
    if kind == "pre-push":
        first = f"feed | {first}"
    last = f"feed | {gate}" if kind == "pre-push" else f"exec {gate}"
    return (
        head + f"# The {kind} hook that was here before runs first, kept as {kind}{CHAINED};\n"
        "# if it fails, so does this one. `lanewatch hook uninstall` puts it back.\n"
        f'chained="$(dirname -- "$0")/{kind}{CHAINED}"\n'
        + (feed if kind == "pre-push" else "")
        + f'if [ -x "$chained" ]; then\n    {first}\nfi\n{last}\n'
    )


def _write_executable(path: Path, text: str) -> None:
    write_atomic(path, text.encode(), mode=0o755)


def _backup(path: Path) -> Path:
    base = f"{path.name}.lanewatch-backup-{time.strftime('%Y%m%d-%H%M%S')}"
    backup, n = path.with_name(base), 1
    while os.path.lexists(backup):
        backup, n = path.with_name(f"{base}-{n}"), n + 1
    if path.is_symlink():
        os.symlink(os.readlink(path), backup)
    else:
        shutil.copy2(path, backup, follow_symlinks=False)
    return backup


def install_hook(
    kind: str,
    step: str,
    *,
    checkout: str | os.PathLike[str] | None = None,
    lane: str | None = None,
    allow_dirty: bool = False,
    max_age: float | None = None,
    force: bool = False,
    chain: bool = False,
) -> HookInstall:
    """Write a `kind` hook that runs `lanewatch gate STEP`. A foreign hook in the way is refused,
    unless `chain` (kept and run first) or `force` (replaced, a backup kept). Ours is rewritten,
    still running the hook it chained, if any: idempotent."""
    if kind not in KINDS:
        raise LanewatchError(f"unknown hook {kind!r}; one of {', '.join(KINDS)}")
    encode_step(step)
    folder = hooks_dir(checkout)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / kind
    kept = folder / f"{kind}{CHAINED}"
    previous, backup = "none", None
    if os.path.lexists(path):
        if is_ours(path):
            previous = "ours"
        elif chain:
            if os.path.lexists(kept):
                raise HookRefused(
                    f"{kept} already holds a chained hook and {path} is another one; "
                    "move one of them away first"
                )
            previous = "foreign"
            _keep_as(path, kept)
        elif not force:
            raise HookRefused(
                f"{path} exists and is not a lanewatch hook; refusing to overwrite it "
                "(--chain keeps it and runs it before the gate; --force replaces it and keeps "
                "a backup beside it)"
            )
        else:
            previous, backup = "foreign", _backup(path)
    chained = kept if os.path.lexists(kept) else None
    text = render_hook(
        kind, step, lane=lane, allow_dirty=allow_dirty, max_age=max_age, chained=bool(chained)
    )
    _write_executable(path, text)
    outside = not _inside_repository(folder, checkout)
    return HookInstall(path, previous, backup, outside=outside, chained=chained)


def _keep_as(path: Path, kept: Path) -> None:
    """A second name for the hook in the way, so that it is never missing: ours then replaces
    `path` in one rename. A filesystem without hard links gets a plain rename."""
    try:
        os.link(path, kept, follow_symlinks=False)
    except OSError:
        os.rename(path, kept)
    fsync_dir(kept.parent)


def _inside_repository(folder: Path, checkout: str | os.PathLike[str] | None) -> bool:
    bound = resolve_checkout(checkout)
    real = os.path.realpath(folder)
    homes = (bound.root, bound.common_dir, os.path.dirname(bound.common_dir))
    return any(real == h or real.startswith(h.rstrip(os.sep) + os.sep) for h in homes)


def uninstall_hook(
    kind: str, *, checkout: str | os.PathLike[str] | None = None
) -> HookRemoval | None:
    """Remove our `kind` hook, putting back the hook it chained (in one rename) if any; a
    foreign hook is left alone (HookRefused). None if there is no hook."""
    if kind not in KINDS:
        raise LanewatchError(f"unknown hook {kind!r}; one of {', '.join(KINDS)}")
    path = hooks_dir(checkout) / kind
    if not os.path.lexists(path):
        return None
    if not is_ours(path):
        raise HookRefused(f"{path} is not a lanewatch hook; leaving it alone")
    kept = path.with_name(f"{kind}{CHAINED}")
    if os.path.lexists(kept):
        os.replace(kept, path)
        fsync_dir(path.parent)
        return HookRemoval(path, restored=True)
    os.unlink(path)
    return HookRemoval(path, restored=False)
