"""Fixtures shared by every test. No test writes to a fixed shared path: the state dir, the
default root and TMPDIR all point under pytest's tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("LANEWATCH_STATE_DIR", str(state))
    monkeypatch.delenv("LANEWATCH_ROOT", raising=False)
    for var in ("LANEWATCH_LANE", "LANEWATCH_NAMESPACE", "LANEWATCH_CHECKOUT"):
        monkeypatch.delenv(var, raising=False)
    return state


def git(*args: str, cwd: Path) -> str:
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
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "init", cwd=path)
    return path


@pytest.fixture
def worktrees(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two worktrees of one repository: the main one and a linked one."""
    other = tmp_path / "repo-wt"
    git("worktree", "add", "-q", str(other), "-b", "side", cwd=repo)
    return repo, other


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def wait_for(
    condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.02
) -> object:
    """Poll `condition` until truthy or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {condition}")
        time.sleep(interval)


LANEWATCH = [sys.executable, "-m", "lanewatch"]


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; all are killed and reaped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except (ProcessLookupError, PermissionError):
                p.kill()
        p.wait(timeout=10)
