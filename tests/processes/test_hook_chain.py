"""`lanewatch hook install --chain`: a hook already in place is kept and run first, with git's
arguments and stdin; real pushes and commits through real git."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from lanewatch.proof.hooks import CHAINED, hooks_dir
from tests.conftest import git
from tests.processes.test_hook import git_run, lw, proven

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# A hook of the user's own: logs its arguments and its stdin, then exits with $OLD_EXIT.
OLD_HOOK = """#!/bin/sh
# the user's own hook
log="$(git rev-parse --git-common-dir)/old-hook.log"
echo "args: $*" >> "$log"
echo "stdin: $(cat | tr '\\n' '|')" >> "$log"
exit "${{OLD_EXIT:-{code}}}"
"""


@pytest.fixture
def pushable(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    return repo


def plant(repo: Path, kind: str, code: int = 0) -> Path:
    path = hooks_dir(repo) / kind
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OLD_HOOK.format(code=code))
    path.chmod(0o755)
    return path


def old_log(repo: Path) -> list[str]:
    log = repo / ".git" / "old-hook.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_old_pre_push_hook_runs_first_with_gits_lines_then_the_gate(pushable: Path) -> None:
    repo = pushable
    original = plant(repo, "pre-push").read_bytes()
    done = lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"kept as {hooks_dir(repo) / ('pre-push' + CHAINED)}" in done.stdout
    assert (hooks_dir(repo) / f"pre-push{CHAINED}").read_bytes() == original

    blocked = git_run("push", "-q", "origin", "main", cwd=repo)
    assert blocked.returncode != 0
    assert "refused (missing)" in blocked.stderr
    head = git("rev-parse", "HEAD", cwd=repo).strip()
    log = old_log(repo)
    assert log[0].startswith("args: origin ")
    assert log[1] == f"stdin: refs/heads/main {head} refs/heads/main {'0' * 40}|"

    proven(repo)
    passed = git_run("push", "-q", "origin", "main", cwd=repo)
    assert passed.returncode == 0, passed.stderr
    assert len(old_log(repo)) == 4  # it ran again, before the gate let the push through


def test_a_failing_old_hook_stops_the_push_before_the_gate(pushable: Path) -> None:
    repo = pushable
    plant(repo, "pre-push", code=1)
    assert lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo).returncode == 0
    proven(repo)  # the gate would pass: the old hook alone refuses
    blocked = git_run("push", "-q", "origin", "main", cwd=repo)
    assert blocked.returncode != 0
    assert "lanewatch gate" not in blocked.stderr
    assert len(old_log(repo)) == 2


def test_no_lines_reach_the_old_hook_as_no_lines(pushable: Path) -> None:
    repo = pushable
    plant(repo, "pre-push")
    assert lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo).returncode == 0
    proven(repo)
    hook = hooks_dir(repo) / "pre-push"
    ran = subprocess.run(
        [str(hook), "origin", "url"], cwd=repo, stdin=subprocess.DEVNULL, capture_output=True
    )
    assert ran.returncode == 0, ran.stderr
    assert old_log(repo) == ["args: origin url", "stdin: "]


def test_chaining_is_idempotent_and_uninstall_puts_the_old_hook_back(repo: Path) -> None:
    old = plant(repo, "pre-push")
    original, mode = old.read_bytes(), stat.S_IMODE(old.stat().st_mode)
    kept = hooks_dir(repo) / f"pre-push{CHAINED}"
    assert lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo).returncode == 0
    first = old.read_text()
    again = lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo)
    assert again.returncode == 0 and again.stdout.startswith("updated")
    plain = lw("hook", "install", "pre-push", "--gate", "tests", cwd=repo)  # still chains
    assert plain.returncode == 0 and old.read_text() == first
    assert kept.read_bytes() == original
    assert sorted(
        p.name
        for p in old.parent.iterdir()
        if p.name.startswith("pre-push") and not p.name.endswith(".sample")
    ) == [
        "pre-push",
        f"pre-push{CHAINED}",
    ]  # one kept hook, no backups

    gone = lw("hook", "uninstall", "pre-push", cwd=repo)
    assert gone.returncode == 0 and "back at" in gone.stdout
    assert old.read_bytes() == original and stat.S_IMODE(old.stat().st_mode) == mode
    assert not os.path.lexists(kept)


def test_a_second_foreign_hook_over_a_kept_one_is_refused(repo: Path) -> None:
    plant(repo, "pre-push")
    kept = hooks_dir(repo) / f"pre-push{CHAINED}"
    kept.write_text("#!/bin/sh\n# an older kept hook\n")
    refused = lw("hook", "install", "pre-push", "--gate", "tests", "--chain", cwd=repo)
    assert refused.returncode == 3 and "already holds a chained hook" in refused.stderr
    assert "the user's own hook" in (hooks_dir(repo) / "pre-push").read_text()


def test_without_chain_the_refusal_says_chain_is_there(repo: Path) -> None:
    plant(repo, "pre-push")
    refused = lw("hook", "install", "pre-push", "--gate", "tests", cwd=repo)
    assert refused.returncode == 3 and "--chain keeps it" in refused.stderr
    both = lw("hook", "install", "pre-push", "--gate", "tests", "--chain", "--force", cwd=repo)
    assert both.returncode == 2


def test_a_chained_pre_commit_hook_runs_first(repo: Path) -> None:
    plant(repo, "pre-commit", code=1)
    assert (
        lw("hook", "install", "pre-commit", "--gate", "tests", "--chain", cwd=repo).returncode == 0
    )
    proven(repo)
    (repo / "new").write_text("x\n")
    git("add", "new", cwd=repo)
    proven(repo)  # the gate would pass at this tree: the old hook alone refuses
    refused = git_run("commit", "-q", "-m", "x", cwd=repo)
    assert refused.returncode != 0 and len(old_log(repo)) == 2
    env_ok = subprocess.run(
        ["git", "commit", "-q", "-m", "x"],
        cwd=repo,
        env={**os.environ, "OLD_EXIT": "0", "HOME": str(repo), "GIT_CONFIG_NOSYSTEM": "1",
             "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"},
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert env_ok.returncode == 0, env_ok.stderr  # the old hook passes, then the gate does
