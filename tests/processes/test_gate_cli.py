"""`lanewatch gate`, end to end through the CLI in a real repository with two worktrees.

Every refusal reason, its exit code and its one line; a gate never trusts another worktree's
receipt, another lane's, the receipt history, or the ledger.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.lanes import ledger
from lanewatch.lanes.checkout import find_checkout
from lanewatch.lanes.lane import locate
from lanewatch.proof.gate import EXIT_CODES, GateReason, check_gate, parse_duration
from lanewatch.proof.receipts import history_dir, receipt_path, write_receipt
from tests.conftest import LANEWATCH, git

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

DOCS = Path(__file__).resolve().parents[2] / "docs" / "receipts-and-gates.md"


def lw(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def prove(cwd: Path, *cmd: str, step: str = "tests", lane: str | None = None) -> None:
    lane_args = ["--lane", lane] if lane else []
    done = lw("prove", step, *lane_args, "--", *(cmd or ("true",)), cwd=cwd)
    assert done.returncode == 0, done.stderr


def gate(cwd: Path, *args: str, step: str = "tests") -> subprocess.CompletedProcess[str]:
    return lw("gate", step, *args, cwd=cwd)


def refused(done: subprocess.CompletedProcess[str], reason: GateReason) -> str:
    assert done.returncode == EXIT_CODES[reason], (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"lanewatch gate: refused ({reason.value}): ")
    return lines[0]


def namespace_of(cwd: Path, lane: str = "default") -> Path:
    return locate(lane, checkout=cwd).namespace


def proven(cwd: Path, step: str = "tests", lane: str = "default", code: int = 0) -> Path:
    """Set-up through the Python API (same writer as `prove`, without a process start)."""
    done = write_receipt(
        step, exit_code=code, command=["t"], started_at=time.time(), lane=lane, checkout=cwd
    )
    return done.path


def test_exit_codes_are_distinct_and_documented() -> None:
    codes = list(EXIT_CODES.values())
    assert len(set(codes)) == len(codes) == len(GateReason)
    assert EXIT_CODES[GateReason.PASS] == 0
    assert not {1, 2} & set(codes)  # a crash or a usage error is never mistaken for a reason
    doc = DOCS.read_text()
    for reason, code in EXIT_CODES.items():
        assert re.search(rf"\|\s*`{reason.value}`\s*\|\s*{code}\s*\|", doc), reason


def test_pass_after_prove_in_each_worktree(worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    for wt in (a, b):
        prove(wt)
        done = gate(wt)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("lanewatch gate: pass: 'tests' passed at HEAD ")
        assert find_checkout(wt).checkout_id in done.stdout  # type: ignore[union-attr]


def test_missing(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    line = refused(gate(a), GateReason.MISSING)
    assert "lanewatch prove tests" in line


def test_failed(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    done = lw("prove", "tests", "--", "sh", "-c", "exit 3", cwd=a)
    assert done.returncode == 3  # prove passes the command's exit code through
    assert "fail (exit 3)" in done.stderr
    assert "exit code 3" in refused(gate(a), GateReason.FAILED)


def test_head_moved(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    prove(a)
    git("commit", "-q", "--allow-empty", "-m", "next", cwd=a)
    assert "HEAD is now" in refused(gate(a), GateReason.HEAD_MOVED)


def test_tree_changed(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    prove(a)
    (a / "README").write_text("edited\n")
    refused(gate(a), GateReason.TREE_CHANGED)
    assert gate(a, "--allow-dirty").returncode == 0


def test_tree_changed_by_untracked_names_and_contents(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    (a / "README").write_text("edited\n")
    proven(a)  # proven dirty: the digest is what must match now
    assert check_gate("tests", checkout=a).ok
    (a / "notes.txt").write_text("one\n")  # a new untracked file
    assert check_gate("tests", checkout=a).reason is GateReason.TREE_CHANGED
    proven(a)
    (a / "notes.txt").write_text("two\n")  # same name, other content
    refused(gate(a), GateReason.TREE_CHANGED)
    (a / "notes.txt").write_text("one\n")  # back to exactly what was proven
    assert check_gate("tests", checkout=a).ok


def test_ignored_files_do_not_change_the_tree(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    (a / ".gitignore").write_text("build/\n")
    git("add", ".gitignore", cwd=a)
    git("commit", "-q", "-m", "ignore", cwd=a)
    proven(a)
    (a / "build").mkdir()
    (a / "build" / "out.o").write_text("x")
    assert gate(a).returncode == 0


def test_too_old(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    hour_ago = time.time() - 3600
    write_receipt(
        "tests",
        exit_code=0,
        command=["pytest"],
        started_at=hour_ago - 5,
        finished_at=hour_ago,
        checkout=a,
    )
    assert "older than 10m00s" in refused(gate(a, "--max-age", "10m"), GateReason.TOO_OLD)
    assert gate(a, "--max-age", "2h").returncode == 0
    assert gate(a).returncode == 0  # no --max-age, no age limit


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"schema": 1}',
        b'{"schema": 99, "step": "tests"}',
    ],
    ids=["empty", "garbage", "not-object", "partial", "future-schema"],
)
def test_unreadable(worktrees: tuple[Path, Path], content: bytes) -> None:
    a, _ = worktrees
    proven(a).write_bytes(content)
    refused(gate(a), GateReason.UNREADABLE)


def test_unreadable_when_fields_contradict(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    path = proven(a)
    data = json.loads(path.read_text())
    data["exit_code"] = 1  # "pass" with a non-zero exit: not something we guess about
    path.write_text(json.dumps(data))
    assert "contradicts" in refused(gate(a), GateReason.UNREADABLE)


def test_unreadable_when_symlinked(worktrees: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = worktrees
    path = proven(a)
    elsewhere = tmp_path / "elsewhere.json"
    shutil.copy(path, elsewhere)  # a perfectly good receipt, reached through a symlink
    path.unlink()
    path.symlink_to(elsewhere)
    refused(gate(a), GateReason.UNREADABLE)


def test_unbound(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "not inside a git checkout" in refused(gate(plain), GateReason.UNBOUND)


def test_head_unknown(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git("init", "-q", "-b", "main", cwd=fresh)  # no commit: HEAD cannot be read
    done = lw("prove", "tests", "--", "true", cwd=fresh)
    assert done.returncode == 0
    assert "HEAD UNKNOWN" in done.stderr
    data = json.loads(receipt_path(namespace_of(fresh), "tests").read_text())
    assert data["git_head"] is None and data["git_error"]
    assert "no HEAD" in refused(gate(fresh), GateReason.HEAD_UNKNOWN)


def test_a_never_accepts_bs_receipt_at_the_same_commit(worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    assert git("rev-parse", "HEAD", cwd=a) == git("rev-parse", "HEAD", cwd=b)
    prove(a)
    prove(b)
    assert check_gate("tests", checkout=a).ok
    assert check_gate("tests", checkout=b).ok
    theirs = receipt_path(namespace_of(b), "tests")
    mine = receipt_path(namespace_of(a), "tests")
    shutil.copyfile(theirs, mine)  # B's receipt, clobbering A's own, as a shared /tmp would
    line = refused(gate(a), GateReason.FOREIGN)
    assert find_checkout(b).checkout_id in line  # type: ignore[union-attr]
    assert gate(b).returncode == 0  # B still passes on its own receipt


def test_b_receipt_alone_never_lets_a_through(worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    proven(b)
    refused(gate(a), GateReason.MISSING)


def test_another_lanes_receipt_is_foreign(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    theirs = proven(a, lane="agent-2")
    assert gate(a, "--lane", "agent-2").returncode == 0
    assert check_gate("tests", checkout=a).reason is GateReason.MISSING  # "default" has none
    shutil.copyfile(theirs, proven(a))
    assert "lane 'agent-2'" in refused(gate(a), GateReason.FOREIGN)


def test_another_steps_receipt_is_foreign(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    shutil.copyfile(proven(a, step="lint"), receipt_path(namespace_of(a), "tests"))
    assert "step 'lint'" in refused(gate(a), GateReason.FOREIGN)


def test_a_ledger_line_saying_passed_never_passes(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    proven(a, step="other")  # the namespace exists, with its ledger
    ns = namespace_of(a)
    head = git("rev-parse", "HEAD", cwd=a).strip()
    for event in ("passed", "receipt-written", "prove-passed"):
        ledger.append(ns, event, lane="default", step="tests", outcome="pass", git_head=head)
    refused(gate(a), GateReason.MISSING)

    proven(a, code=1)
    ledger.append(ns, "passed", lane="default", step="tests", outcome="pass", exit_code=0)
    refused(gate(a), GateReason.FAILED)
    assert "passed" in ledger.ledger_path(ns).read_text()  # the diary says so; the gate says no


def test_the_gate_never_falls_back_to_history_or_another_root(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = worktrees
    proven(a).unlink()  # only the history holds a passing receipt now
    assert any(history_dir(namespace_of(a), "tests").iterdir())
    refused(gate(a), GateReason.MISSING)

    proven(a)
    other_root = tmp_path / "other-root"
    refused(gate(a, "--root", str(other_root)), GateReason.MISSING)
    assert not other_root.exists()  # the gate creates nothing


def test_pre_push_refuses_commits_that_are_not_the_proven_head(
    worktrees: tuple[Path, Path],
) -> None:
    a, _ = worktrees
    proven(a)
    head = git("rev-parse", "HEAD", cwd=a).strip()
    zero = "0" * 40
    ok = lw("gate", "tests", "--pre-push", cwd=a, stdin=f"refs/heads/main {head} refs/x {zero}\n")
    assert ok.returncode == 0, ok.stderr
    other = "1" * 40
    moved = lw("gate", "tests", "--pre-push", cwd=a, stdin=f"refs/heads/x {other} refs/x {zero}\n")
    assert "the push sends 111111111111" in refused(moved, GateReason.HEAD_MOVED)
    delete = lw("gate", "tests", "--pre-push", cwd=a, stdin=f"(delete) {zero} refs/x {head}\n")
    assert delete.returncode == 0


def test_json_output(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    done = gate(a, "--json")
    data = json.loads(done.stdout)
    assert done.returncode == EXIT_CODES[GateReason.MISSING]
    assert data["reason"] == "missing" and data["ok"] is False and data["receipt"] is None
    proven(a)
    data = json.loads(gate(a, "--json").stdout)
    assert data["ok"] is True and data["receipt"]["checkout_path"] == str(a.resolve())


def test_bad_max_age_is_a_usage_error(worktrees: tuple[Path, Path]) -> None:
    a, _ = worktrees
    assert gate(a, "--max-age", "soon").returncode == 2


def test_parse_duration() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("10m") == 600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d") == 172800
    for bad in ("", "m", "10x", "-5", "1h 30m"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_check_gate_python_api(worktrees: tuple[Path, Path]) -> None:
    a, b = worktrees
    assert check_gate("tests", checkout=a).reason is GateReason.MISSING
    write_receipt("tests", exit_code=0, command=["pytest"], started_at=time.time(), checkout=a)
    result = check_gate("tests", checkout=a)
    assert result.ok and result.exit_code == 0 and result.receipt is not None
    assert check_gate("tests", checkout=b).reason is GateReason.MISSING
    assert check_gate("", checkout=a).reason is GateReason.UNBOUND  # never raises


def test_the_gate_ignores_a_leaked_checkout_variable(
    worktrees: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outer run of A exports LANEWATCH_CHECKOUT; `--checkout .` (the hook) still means B."""
    a, b = worktrees
    proven(a)
    monkeypatch.setenv("LANEWATCH_CHECKOUT", str(a))
    assert gate(b).returncode == 0  # without --checkout, the variable binds A
    refused(gate(b, "--checkout", "."), GateReason.MISSING)
    assert os.environ["LANEWATCH_CHECKOUT"] == str(a)
