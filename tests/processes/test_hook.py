"""`lanewatch hook`: where the hook lands, whose hook it is, and that a real push is gated."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch import write_receipt
from lanewatch.proof.hooks import MARKER, hooks_dir, install_hook, is_ours, render_hook
from tests.conftest import LANEWATCH, git


def lw(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def git_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Like conftest's git(), but returns the result instead of raising (pushes may fail)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def proven(cwd: Path) -> None:
    write_receipt("tests", exit_code=0, command=["t"], started_at=time.time(), checkout=cwd)


def git_path_hooks(cwd: Path) -> Path:
    out = Path(git("rev-parse", "--git-path", "hooks", cwd=cwd).strip())
    return out if out.is_absolute() else cwd / out


@pytest.fixture
def remote(worktrees: tuple[Path, Path], tmp_path: Path) -> Path:
    a, _ = worktrees
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=a)
    return bare


def test_install_in_a_linked_worktree_lands_where_git_looks(worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    done = lw("hook", "install", "pre-push", "--gate", "tests", cwd=b)
    assert done.returncode == 0, done.stderr
    path = git_path_hooks(b) / "pre-push"
    assert path.resolve() == (a / ".git" / "hooks" / "pre-push").resolve()  # the common dir
    assert hooks_dir(b).resolve() == path.parent.resolve()
    assert path.stat().st_mode & stat.S_IXUSR
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n") and MARKER in text
    assert "gate tests --checkout . --pre-push" in text
    again = lw("hook", "install", "pre-push", "--gate", "tests", cwd=a)
    assert again.returncode == 0 and again.stdout.startswith("updated")


def test_core_hooks_path_is_respected(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    git("config", "core.hooksPath", "custom-hooks", cwd=a)
    done = lw("hook", "install", "pre-commit", "--gate", "lint", cwd=a)
    assert done.returncode == 0, done.stderr
    assert is_ours(a / "custom-hooks" / "pre-commit")
    assert not (a / ".git" / "hooks" / "pre-commit").exists()
    assert "outside this repository" not in done.stderr


def test_a_hooks_path_outside_the_repository_is_pointed_out(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = worktrees
    shared = tmp_path / "global-hooks"
    git("config", "core.hooksPath", str(shared), cwd=a)
    done = lw("hook", "install", "--gate", "tests", cwd=a)
    assert done.returncode == 0, done.stderr
    assert is_ours(shared / "pre-push")
    assert "outside this repository" in done.stderr


def test_a_foreign_hook_is_refused_without_force(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    path = a / ".git" / "hooks" / "pre-push"
    theirs = "#!/bin/sh\necho husky was here\n"
    path.write_text(theirs)
    done = lw("hook", "install", "--gate", "tests", cwd=a)
    assert done.returncode == 3
    assert "not a lanewatch hook" in done.stderr
    assert path.read_text() == theirs
    assert lw("hook", "uninstall", cwd=a).returncode == 3  # nor removed
    assert path.read_text() == theirs

    forced = lw("hook", "install", "--gate", "tests", "--force", cwd=a)
    assert forced.returncode == 0, forced.stderr
    assert is_ours(path)
    backups = list(path.parent.glob("pre-push.lanewatch-backup-*"))
    assert [b.read_text() for b in backups] == [theirs]

    removed = lw("hook", "uninstall", cwd=a)
    assert removed.returncode == 0 and not path.exists()


def test_a_symlinked_hook_is_foreign(worktrees: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = worktrees
    target = tmp_path / "shared-hook"
    target.write_text(render_hook("pre-push", "tests"))  # ours in content, but reached by a link
    (a / ".git" / "hooks" / "pre-push").symlink_to(target)
    assert lw("hook", "install", "--gate", "tests", cwd=a).returncode == 3


def test_unbound_install_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert lw("hook", "install", "--gate", "tests", cwd=plain).returncode == 6  # unbound


def test_a_real_push_is_gated_per_worktree(worktrees: tuple[Path, Path], remote: Path) -> None:
    a, b = worktrees
    install_hook("pre-push", "tests", checkout=a)
    proven(a)  # A's receipt, at the very commit B would push
    blocked = git_run("push", "-q", "origin", "side", cwd=b)
    assert blocked.returncode != 0
    assert "refused (missing)" in blocked.stderr

    assert lw("prove", "tests", "--", "true", cwd=b).returncode == 0
    pushed = git_run("push", "-q", "origin", "side", cwd=b)
    assert pushed.returncode == 0, pushed.stderr
    assert git("rev-parse", "side", cwd=remote).strip() == git("rev-parse", "HEAD", cwd=b).strip()


def test_pushing_a_commit_that_is_not_the_proven_head_is_refused(
    worktrees: tuple[Path, Path], remote: Path
) -> None:
    a, _ = worktrees
    git("checkout", "-q", "-b", "unproven", cwd=a)
    git("commit", "-q", "--allow-empty", "-m", "not tested", cwd=a)
    git("checkout", "-q", "main", cwd=a)
    install_hook("pre-push", "tests", checkout=a)
    proven(a)
    blocked = git_run("push", "-q", "origin", "unproven", cwd=a)
    assert blocked.returncode != 0 and "refused (head-moved)" in blocked.stderr
    git("tag", "-a", "v1", "-m", "release", cwd=a)  # an annotated tag: its own object id
    done = git_run("push", "-q", "origin", "main", "v1", cwd=a)
    assert done.returncode == 0, done.stderr  # peeled, the tag names the proven commit


def test_a_real_commit_is_gated_by_pre_commit(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    install_hook("pre-commit", "tests", checkout=a)
    (a / "README").write_text("change\n")
    git("add", "README", cwd=a)
    blocked = git_run("commit", "-q", "-m", "untested", cwd=a)
    assert blocked.returncode != 0 and "refused (missing)" in blocked.stderr

    proven(a)  # proves this dirty tree
    (a / "README").write_text("changed again after the prove\n")
    git("add", "README", cwd=a)
    blocked = git_run("commit", "-q", "-m", "changed since", cwd=a)
    assert blocked.returncode != 0 and "refused (tree-changed)" in blocked.stderr

    proven(a)
    done = git_run("commit", "-q", "-m", "tested", cwd=a)
    assert done.returncode == 0, done.stderr
