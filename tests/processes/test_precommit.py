"""pre-commit: the gate reads pre-commit's push range, and the project's own hook
(`.pre-commit-hooks.yaml`) blocks a push with no receipt and lets it through after `prove`,
through the real pre-commit, from a local copy of this project (no git remote, no network:
pre-commit builds and installs the copy into its own `language: python` environment, and the
dependencies and the build backend come from the test environment, as in
tests/tui/test_install.py; resolving them from the package index is `.ci/run`'s install)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH, git
from tests.processes.test_hook import proven

PROJECT = Path(__file__).resolve().parents[2]
HOOK_ID = "lanewatch-gate"
# What `pip install .` needs to build the wheel (pyproject's [tool.hatch] sections).
BUILD_FILES = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml")
BUILD_DIRS = ("app", "styles")


def gate_pre_push(
    repo: Path, to_ref: str | None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRE_COMMIT_")}
    if to_ref is not None:
        env["PRE_COMMIT_TO_REF"] = to_ref
    return subprocess.run(
        [*LANEWATCH, "gate", "tests", "--pre-push"],
        cwd=repo,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def commit(repo: Path, name: str, text: str | None = None) -> str:
    (repo / name).write_text(f"{name}\n" if text is None else text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", name, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


@pytest.mark.unprivileged
def test_the_gate_checks_pre_commits_to_ref_when_stdin_is_empty(repo: Path) -> None:
    before = git("rev-parse", "HEAD", cwd=repo).strip()
    head = commit(repo, "second")
    proven(repo)
    assert gate_pre_push(repo, None).returncode == 0  # nothing said: HEAD only, as before
    assert gate_pre_push(repo, head).returncode == 0
    assert gate_pre_push(repo, "main").returncode == 0  # `pre-commit run --to-ref main`
    moved = gate_pre_push(repo, before)
    assert moved.returncode == 12 and f"the push sends {before[:12]}" in moved.stderr
    assert gate_pre_push(repo, "--output=x").returncode == 12  # never passed to git as an option
    assert not (repo / "x").exists()
    lines = f"refs/heads/main {head} refs/heads/main {'0' * 40}\n"
    assert gate_pre_push(repo, before, stdin=lines).returncode == 0  # git's own lines win


def copy_of_the_project(tmp_path: Path) -> tuple[Path, str]:
    """This project's buildable files, committed in a repository of their own: pre-commit
    installs a hook repository at a commit, in an environment of its own (`try-repo` builds
    one in a throwaway store each time; `run` and the installed hook share one in
    PRE_COMMIT_HOME, so two are built here)."""
    copy = tmp_path / "lanewatch-src"
    copy.mkdir()
    for name in BUILD_FILES:
        shutil.copy2(PROJECT / name, copy / name)
    for name in BUILD_DIRS:
        shutil.copytree(PROJECT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    git("init", "-q", "-b", "main", cwd=copy)
    git("add", "-A", cwd=copy)
    git("commit", "-q", "-m", "lanewatch", cwd=copy)
    return copy, git("rev-parse", "HEAD", cwd=copy).strip()


def offline(home: Path) -> dict[str, str]:
    """The environment pre-commit runs in: its hook environments under tmp_path, not ~/.cache;
    `pip install .` there builds with the test environment's hatchling (no build isolation)
    and finds the dependencies installed there (on PYTHONPATH: its .pth files, the editable
    install of this checkout among them, are not processed, so `lanewatch` is the hook's own);
    no index, so nothing is downloaded (a minute less on a 2-core CI machine)."""
    return {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
    }


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **offline(home),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )


def push(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = offline(home)  # the environment already built
    return subprocess.run(
        ["git", "push", "origin", "main"],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow  # pre-commit builds lanewatch into a fresh virtualenv twice
@pytest.mark.timeout(900)
def test_the_projects_hook_blocks_a_push_until_prove(repo: Path, tmp_path: Path) -> None:
    pytest.importorskip("pre_commit")
    source, rev = copy_of_the_project(tmp_path)
    home = tmp_path / "pre-commit-home"
    before = git("rev-parse", "HEAD", cwd=repo).strip()
    head = commit(repo, "second")
    stage = ("--hook-stage", "pre-push", "--from-ref", before, "--to-ref", head)

    # The way docs/ci.md tries the hook without installing it (its own throwaway store).
    blocked = pre_commit("try-repo", str(source), HOOK_ID, *stage, cwd=repo, home=home)
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "refused (missing)" in blocked.stdout

    # What try-repo runs, with a config of ours outside the repository (as try-repo's is): the
    # hook environment is built once in PRE_COMMIT_HOME and kept for the runs and the pushes.
    config = f"repos:\n- repo: {source}\n  rev: {rev}\n  hooks:\n  - id: {HOOK_ID}\n"
    outside = tmp_path / "pre-commit-config.yaml"
    outside.write_text(config)
    run = ("run", "--config", str(outside), HOOK_ID)
    still = pre_commit(*run, *stage, cwd=repo, home=home)
    assert still.returncode == 1 and "refused (missing)" in still.stdout, still.stdout

    proved = subprocess.run(
        [*LANEWATCH, "prove", "tests", "--", "true"], cwd=repo, capture_output=True, text=True
    )
    assert proved.returncode == 0, proved.stderr
    passed = pre_commit(*run, *stage, cwd=repo, home=home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout

    # The push range, not HEAD: pushing the commit before HEAD is not what was proven.
    older = ("--hook-stage", "pre-push", "--from-ref", before, "--to-ref", before)
    moved = pre_commit(*run, *older, cwd=repo, home=home)
    assert moved.returncode == 1 and "refused (head-moved)" in moved.stdout

    # And a real `git push` through the hook pre-commit installs (the same environment).
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    commit(repo, ".pre-commit-config.yaml", config)
    installed = pre_commit("install", "--hook-type", "pre-push", cwd=repo, home=home)
    assert installed.returncode == 0, installed.stderr
    stale = push(repo, home)
    assert stale.returncode != 0
    assert "refused (head-moved)" in stale.stdout + stale.stderr  # proven one commit ago
    assert not git("branch", "--list", cwd=bare).strip()
    proven(repo)
    pushed = push(repo, home)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert git("rev-parse", "main", cwd=bare).strip() == git("rev-parse", "HEAD", cwd=repo).strip()
    built = list(home.rglob("site-packages/lanewatch/__init__.py"))
    assert len(built) == 1, built  # pre-commit installed the copy in one hook environment
