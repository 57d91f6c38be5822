"""Receipts: what they name, how they are written and read, and where a prove puts them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lanewatch import Lane, check_gate, write_receipt
from lanewatch.errors import ClaimRefused
from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import read_stamp
from lanewatch.proof.gate import GateReason
from lanewatch.proof.gitstate import read_git_state
from lanewatch.proof.receipts import (
    HISTORY_KEEP,
    MAX_RECEIPT_BYTES,
    BadStep,
    Outcome,
    ReceiptStatus,
    StepRun,
    decode_step,
    encode_step,
    history,
    history_dir,
    parse_receipt,
    read_receipt,
    receipt_path,
    write_run,
)
from tests.conftest import LANEWATCH, git, wait_for


def head_of(path: Path) -> str:
    return git("rev-parse", "HEAD", cwd=path).strip()


def valid_receipt_json(repo: Path) -> dict[str, object]:
    written = write_receipt("tests", exit_code=0, command=["pytest"], started_at=1.0, checkout=repo)
    return json.loads(written.path.read_text())


# -- names -------------------------------------------------------------------------------------


def test_step_names_are_encoded_injectively_and_never_hidden() -> None:
    steps = ["tests", "a/b", "a_b", "a b", ".hidden", "~2Ehidden", "..", "ünï"]
    encoded = [encode_step(s) for s in steps]
    assert len(set(encoded)) == len(steps)
    assert all(not e.startswith(".") and "/" not in e for e in encoded)
    assert [decode_step(e) for e in encoded] == steps
    for bad in ("", "x\x00y"):
        with pytest.raises(BadStep):
            encode_step(bad)


# -- writing -----------------------------------------------------------------------------------


def test_write_receipt_names_checkout_head_and_lane(repo: Path) -> None:
    started = time.time()
    written = write_receipt(
        "tests", exit_code=0, command=["pytest", "-x"], started_at=started, checkout=repo
    )
    target = locate("default", checkout=repo)
    assert written.path == receipt_path(target.namespace, "tests")
    data = json.loads(written.path.read_text())
    assert data["schema"] == 1
    assert data["step"] == "tests" and data["outcome"] == "pass" and data["exit_code"] == 0
    assert data["checkout_id"] == target.checkout.checkout_id
    assert data["checkout_path"] == str(repo.resolve())
    assert data["lane"] == "default" and data["namespace"] == target.namespace.name
    assert data["git_head"] == head_of(repo) and data["git_error"] is None
    assert data["dirty"] is False and data["dirty_digest"] is None
    assert data["command"] == ["pytest", "-x"]
    assert data["pid"] == os.getpid() and data["host"]
    assert data["started_at"] == started <= data["finished_at"]
    # Claimed for the write, released after: the lane is free again.
    assert read_stamp(target.namespace).stamp.state.value == "released"  # type: ignore[union-attr]


def test_failing_exit_code_is_a_failed_receipt(repo: Path) -> None:
    written = write_receipt("tests", exit_code=2, command=["x"], started_at=1.0, checkout=repo)
    assert written.receipt.outcome is Outcome.FAIL
    assert check_gate("tests", checkout=repo).reason is GateReason.FAILED


def test_write_receipt_with_a_claimed_lane(repo: Path) -> None:
    with Lane("agent-1", checkout=repo) as lane:
        written = write_receipt(
            "tests", exit_code=0, command=["t"], started_at=time.time(), lane=lane
        )
        assert written.path.parent == lane.receipts_dir
    assert check_gate("tests", lane="agent-1", checkout=repo).ok


def test_write_run_builds_records_and_notes_what_changed_during_the_run(repo: Path) -> None:
    """The one writer under write_receipt and prove: a receipt, its file, its ledger line."""
    with Lane("built", checkout=repo) as lane:
        before = read_git_state(repo)
        (repo / "new-file").write_text("dirt\n")
        run = StepRun("tests", ["t"], exit_code=0, started_at=5.0, finished_at=4.0)
        written = write_run(lane.target, run, git=before, git_after=read_git_state(repo))
        assert written.path == receipt_path(lane.namespace, "tests")
        assert read_receipt(lane.namespace, "tests").receipt == written.receipt
        receipt = written.receipt
        assert receipt.lane == "built" and receipt.git_head == head_of(repo)
        assert receipt.finished_at == 5.0, "never before the start"
        assert receipt.changed_during_run == "the working tree changed during the run"
        ledger = (lane.namespace / ".lanewatch" / "ledger.jsonl").read_text().splitlines()
        assert json.loads(ledger[-1])["event"] == "receipt-written"
    assert check_gate("tests", lane="built", checkout=repo).ok is False


def test_history_is_kept_and_bounded(repo: Path) -> None:
    for i in range(HISTORY_KEEP + 3):
        write_receipt(
            "tests", exit_code=i % 2, command=[str(i)], started_at=1000.0 + i, checkout=repo
        )
    ns = locate("default", checkout=repo).namespace
    kept = history(ns, "tests")
    assert len(kept) == HISTORY_KEEP == len(list(history_dir(ns, "tests").iterdir()))
    assert [r.receipt.command[0] for r in kept if r.receipt] == [
        str(i) for i in range(3, HISTORY_KEEP + 3)
    ]
    current = read_receipt(ns, "tests").receipt
    assert current is not None and current.command == (str(HISTORY_KEEP + 2),)


def test_write_receipt_is_refused_while_another_process_owns_the_lane(
    repo: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    release = tmp_path / "release"
    waiter = (
        "import os, sys, time\n"
        "deadline = time.monotonic() + 30\n"
        "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
    )
    cmd = [*LANEWATCH, "run", "--lane", "busy", "--", sys.executable, "-c", waiter, str(release)]
    procs.append(subprocess.Popen(cmd, cwd=repo, start_new_session=True))
    ns = locate("busy", checkout=repo).namespace
    wait_for(lambda: read_stamp(ns).ok and read_stamp(ns).stamp.child_pid)  # type: ignore[union-attr]
    with pytest.raises(ClaimRefused):
        write_receipt(
            "tests", exit_code=0, command=["t"], started_at=1.0, lane="busy", checkout=repo
        )
    # A forged LANEWATCH_NAMESPACE does not make us the owner's child: still refused.
    forged = {**os.environ, "LANEWATCH_NAMESPACE": str(ns), "LANEWATCH_LANE": "busy"}
    done = subprocess.run(
        [*LANEWATCH, "prove", "tests", "--", "true"],
        cwd=repo,
        env=forged,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert not receipt_path(ns, "tests").exists()
    release.touch()
    assert procs[0].wait(timeout=30) == 0


def test_prove_inside_run_writes_into_the_outer_lane(repo: Path) -> None:
    inner = f"{shlex.join(LANEWATCH)} prove unit -- sh -c 'test -n \"$LANEWATCH_NAMESPACE\"'"
    done = subprocess.run(
        [*LANEWATCH, "run", "--lane", "agent", "--", "sh", "-c", inner],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "inside the outer run's lane" in done.stderr
    ns = locate("agent", checkout=repo).namespace
    receipt = read_receipt(ns, "unit").receipt
    assert receipt is not None and receipt.passed and receipt.lane == "agent"
    assert check_gate("unit", lane="agent", checkout=repo).ok
    assert check_gate("unit", checkout=repo).reason is GateReason.MISSING  # not in "default"


def test_prove_records_a_tree_that_changed_during_the_run(repo: Path) -> None:
    """The step saw a file that is gone again by gate time: the receipt proves no one state."""
    script = "import pathlib, sys; pathlib.Path('during.txt').write_text('x')"
    done = subprocess.run(
        [*LANEWATCH, "prove", "tests", "--", sys.executable, "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "changed during the run" in done.stderr
    (repo / "during.txt").unlink()  # the tree is back to what the run started from
    result = check_gate("tests", checkout=repo)
    assert result.reason is GateReason.TREE_CHANGED and "during the run" in result.message
    assert check_gate("tests", checkout=repo, allow_dirty=True).ok


def test_a_head_that_moved_during_the_run_is_refused_even_with_allow_dirty(repo: Path) -> None:
    """The step commits; HEAD is put back before the gate: which commit did it test?"""
    script = (
        "import subprocess; subprocess.run(['git', 'commit', '-q', '--allow-empty', '-m', 'x'])"
    )
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    before = head_of(repo)
    done = subprocess.run(
        [*LANEWATCH, "prove", "tests", "--", sys.executable, "-c", script],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "HEAD moved from" in done.stderr
    git("reset", "-q", "--soft", before, cwd=repo)  # back where the step started
    result = check_gate("tests", checkout=repo, allow_dirty=True)
    assert result.reason is GateReason.HEAD_MOVED and "during the run" in result.message


# -- git state ---------------------------------------------------------------------------------


def test_digest_covers_tracked_changes_and_untracked_names_and_contents(repo: Path) -> None:
    clean = read_git_state(repo)
    assert clean.known and clean.dirty is False and clean.digest is None
    assert clean.head == head_of(repo)
    (repo / "README").write_text("changed\n")
    tracked = read_git_state(repo)
    assert tracked.dirty and tracked.digest
    assert read_git_state(repo) == tracked  # deterministic
    (repo / "new.txt").write_text("a")
    with_new = read_git_state(repo)
    (repo / "new.txt").write_text("b")
    other_content = read_git_state(repo)
    (repo / "new.txt").rename(repo / "renamed.txt")
    (repo / "renamed.txt").write_text("b")
    other_name = read_git_state(repo)
    digests = {tracked.digest, with_new.digest, other_content.digest, other_name.digest}
    assert len(digests) == 4


def test_git_state_ignores_git_dir_from_a_hook_environment(
    worktrees: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = worktrees
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    git("commit", "-q", "--allow-empty", "-m", "other", cwd=other)
    mine, theirs = head_of(a), head_of(other)
    assert mine != theirs
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # as git exports it to hooks
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert read_git_state(a).head == mine


def test_unborn_head_is_recorded_not_guessed(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git("init", "-q", "-b", "main", cwd=fresh)
    state = read_git_state(fresh)
    assert state.head is None and state.dirty is None and state.error
    written = write_receipt("tests", exit_code=0, command=["t"], started_at=1.0, checkout=fresh)
    assert written.receipt.git_head is None and written.receipt.git_error
    assert check_gate("tests", checkout=fresh).reason is GateReason.HEAD_UNKNOWN


def test_a_scratch_root_inside_the_checkout_does_not_dirty_it(repo: Path) -> None:
    root = repo / "tests" / "artifacts" / "scratch"  # repo-local and not ignored
    write_receipt("tests", exit_code=0, command=["t"], started_at=1.0, root=root, checkout=repo)
    assert (root / locate("default", checkout=repo).namespace.name).is_dir()
    assert check_gate("tests", root=root, checkout=repo).ok


# -- reading -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"schema": 2}, ReceiptStatus.FUTURE_SCHEMA),
        ({"schema": "1"}, ReceiptStatus.GARBAGE),
        ({"exit_code": True}, ReceiptStatus.GARBAGE),
        ({"exit_code": 1}, ReceiptStatus.GARBAGE),  # "pass" with exit 1
        ({"outcome": "maybe"}, ReceiptStatus.GARBAGE),
        ({"git_head": "HEAD"}, ReceiptStatus.GARBAGE),
        ({"git_head": None}, ReceiptStatus.GARBAGE),  # no HEAD and no reason why
        ({"dirty": True}, ReceiptStatus.GARBAGE),  # dirty without a digest
        ({"command": "pytest"}, ReceiptStatus.GARBAGE),
        ({"command": ["a", 1]}, ReceiptStatus.GARBAGE),
        ({"finished_at": 0.5}, ReceiptStatus.GARBAGE),  # before it started
        ({"checkout_id": None}, ReceiptStatus.GARBAGE),
        # JSON allows NaN: a NaN finish would have no age, and pass any --max-age.
        ({"finished_at": float("nan")}, ReceiptStatus.GARBAGE),
        ({"started_at": float("-inf")}, ReceiptStatus.GARBAGE),
    ],
)
def test_parse_refuses_what_it_cannot_trust(
    repo: Path, change: dict[str, object], status: ReceiptStatus
) -> None:
    data = {**valid_receipt_json(repo), **change}
    read = parse_receipt(json.dumps(data).encode())
    assert read.status is status and read.receipt is None


def test_parse_statuses_for_broken_files(repo: Path) -> None:
    good = valid_receipt_json(repo)
    assert parse_receipt(json.dumps(good).encode()).ok
    missing_field = dict(good)
    del missing_field["lane"]
    cases = {
        b"": ReceiptStatus.EMPTY,
        b"  \n": ReceiptStatus.EMPTY,
        b'{"schema": 1, "step"': ReceiptStatus.GARBAGE,
        b"[1]": ReceiptStatus.GARBAGE,
        json.dumps(missing_field).encode(): ReceiptStatus.GARBAGE,
        b" " * (MAX_RECEIPT_BYTES + 1): ReceiptStatus.OVERSIZED,
    }
    for data, status in cases.items():
        assert parse_receipt(data).status is status


def test_read_receipt_refuses_symlinks(repo: Path, tmp_path: Path) -> None:
    written = write_receipt("tests", exit_code=0, command=["t"], started_at=1.0, checkout=repo)
    ns = written.path.parent.parent
    assert read_receipt(ns, "tests").ok
    real = tmp_path / "real.json"
    real.write_bytes(written.path.read_bytes())
    written.path.unlink()
    written.path.symlink_to(real)
    assert read_receipt(ns, "tests").status is ReceiptStatus.SYMLINK
    # A symlinked receipts folder is refused too.
    folder = ns / "receipts"
    moved = tmp_path / "moved-receipts"
    folder.rename(moved)
    (moved / "tests.json").unlink()
    (moved / "tests.json").write_bytes(real.read_bytes())
    folder.symlink_to(moved)
    assert read_receipt(ns, "tests").status is ReceiptStatus.SYMLINK
    assert read_receipt(tmp_path / "nowhere", "tests").status is ReceiptStatus.MISSING
