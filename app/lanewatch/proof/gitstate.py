"""A checkout's git state, read by running git: HEAD, the dirty flag and a digest of the dirt.

The digest covers what a step could have seen that HEAD does not hold: the tracked changes
against HEAD (`git diff HEAD --binary`, staged or not) and every untracked, not-ignored file by
name and content. Git runs as an argv list, never through a shell, in the worktree root, with
the variables that would point it at another repository removed (git exports GIT_DIR and
GIT_INDEX_FILE to hooks). Optional index locks are off, so reading never blocks a commit.

A state that cannot be read is not guessed: `head` is None and `error` says why. Scratch roots
that live inside the checkout (a repo-local `tests/artifacts/scratch`) are excluded from the
digest, or writing the receipt would itself make the tree dirty.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT = 120.0
DIGEST_VERSION = b"lanewatch-dirt-v1"
# `git rev-parse --local-env-vars`: each would redirect git away from the checkout we name.
_LOCAL_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
)
_COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class GitState:
    head: str | None  # full commit id; None when it cannot be read
    dirty: bool | None  # None when unknown
    digest: str | None  # sha256 of the dirt; None when clean or unknown
    error: str | None = None  # why the state could not be read

    @property
    def known(self) -> bool:
        return self.head is not None and self.dirty is not None

    def describe(self) -> str:
        if not self.known:
            return f"HEAD unknown ({self.error})"
        tree = f"dirty {self.digest[:12]}" if self.dirty and self.digest else "clean"
        return f"HEAD {self.head[:12]}, {tree}"  # type: ignore[index]


class GitFailed(Exception):
    pass


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LOCAL_ENV}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    return env


def run_git(worktree: str | os.PathLike[str], *args: str) -> bytes:
    """Run `git ARGS` in `worktree`; its stdout, or GitFailed with git's own complaint."""
    argv = ["git", "-C", os.fspath(worktree), *args]
    try:
        done = subprocess.run(
            argv, capture_output=True, env=git_env(), timeout=GIT_TIMEOUT, check=False
        )
    except FileNotFoundError as exc:
        raise GitFailed("git is not installed (no `git` on PATH)") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitFailed(f"`git {args[0]}` took longer than {GIT_TIMEOUT:.0f}s") from exc
    except OSError as exc:
        raise GitFailed(f"cannot run git: {exc.strerror}") from exc
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = said[-1] if said else f"exit code {done.returncode}"
        raise GitFailed(f"`git {args[0]}` failed: {detail}")
    return done.stdout


def read_head(worktree: str | os.PathLike[str]) -> str:
    """The commit HEAD names; GitFailed when there is none (an unborn branch) or git fails."""
    try:
        out = run_git(worktree, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except GitFailed as exc:
        raise GitFailed(f"HEAD cannot be read (no commit yet, or not a repository): {exc}") from exc
    head = out.decode("ascii", "replace").strip()
    if not _COMMIT_RE.fullmatch(head):
        raise GitFailed(f"git printed {head[:50]!r} for HEAD")
    return head


def _excludes(worktree: str, exclude: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Pathspecs that leave out the given folders when they lie inside the worktree."""
    specs: list[str] = []
    top = os.path.realpath(worktree)
    for path in exclude:
        real = os.path.realpath(os.fspath(path))
        if real != top and real.startswith(top + os.sep):
            specs.append(f":(top,exclude,literal){os.path.relpath(real, top)}")
    return specs


def _file_fingerprint(path: Path) -> bytes:
    """What an untracked entry holds: a symlink's target, a file's sha256, or its kind."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return b"gone"
    if stat.S_ISLNK(st.st_mode):
        return b"link:" + os.fsencode(os.readlink(path))
    if not stat.S_ISREG(st.st_mode):
        return b"kind:" + oct(stat.S_IFMT(st.st_mode)).encode()  # a nested repository's folder
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    mode = b"x" if st.st_mode & 0o111 else b"-"
    return b"file:" + mode + h.hexdigest().encode()


def read_git_state(
    worktree: str | os.PathLike[str], *, exclude: Sequence[str | os.PathLike[str]] = ()
) -> GitState:
    """HEAD, dirty flag and dirt digest of `worktree`. Never raises: failures land in `error`."""
    root = os.fspath(worktree)
    try:
        head = read_head(root)
        specs = ["--", ".", *_excludes(root, exclude)]
        diff = run_git(
            root,
            "diff",
            "HEAD",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--ignore-submodules=none",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            *specs,
        )
        listed = run_git(root, "ls-files", "--others", "--exclude-standard", "-z", *specs)
        untracked = sorted(name for name in listed.split(b"\0") if name)
        h = hashlib.sha256(DIGEST_VERSION + b"\0diff\0")
        h.update(hashlib.sha256(diff).hexdigest().encode())
        h.update(b"\0untracked\0")
        for name in untracked:
            h.update(name + b"\0" + _file_fingerprint(Path(root) / os.fsdecode(name)) + b"\0")
    except GitFailed as exc:
        return GitState(None, None, None, str(exc))
    except OSError as exc:
        return GitState(None, None, None, f"cannot read the working tree: {exc}")
    dirty = bool(diff) or bool(untracked)
    return GitState(head, dirty, h.hexdigest() if dirty else None)
