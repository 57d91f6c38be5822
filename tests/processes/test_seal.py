"""Receipt seals, end to end: real `lanewatch prove` and `gate` processes in real checkouts.

Each forgery a review tried (outcome and exit code edited together, checkout fields rewritten, an
old receipt's HEAD set to the new one, a receipt from another checkout or user with its fields
adjusted) passed the gate before receipts were sealed; each is refused as `bad-seal` now. So is a
receipt dated in the future, with or without `--max-age`, and a key file that cannot be trusted.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch import check_gate, write_receipt
from lanewatch.lanes.lane import locate
from lanewatch.proof.gate import EXIT_CODES, GateReason
from lanewatch.proof.hooks import install_hook
from lanewatch.proof.receipts import receipt_path
from lanewatch.proof.seal import KEY_BYTES, BadSealKey, key_path, load_key
from tests.conftest import LANEWATCH, git
from tests.processes.test_hook import git_run

# Every field a receipt had before seals, unchanged: the seal is the one field added.
FIELDS = {
    "schema", "step", "outcome", "exit_code", "checkout_id", "checkout_path", "lane",
    "namespace", "git_head", "git_error", "dirty", "dirty_digest", "changed_during_run",
    "pid", "host", "user", "started_at", "finished_at", "command", "scheme",
}  # fmt: skip


def lw(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def prove(cwd: Path, *cmd: str, env: dict[str, str] | None = None) -> Path:
    done = lw("prove", "tests", "--", *(cmd or ("true",)), cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return receipt_path(locate("default", checkout=cwd).namespace, "tests")


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lw("gate", "tests", *args, cwd=cwd)


def refused(done: subprocess.CompletedProcess[str], reason: GateReason) -> str:
    assert done.returncode == EXIT_CODES[reason], (done.returncode, done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"lanewatch gate: refused ({reason.value}): ")
    return line


def edit(path: Path, **changes: Any) -> dict[str, Any]:
    """Change fields by hand, as a forger would, leaving the seal as it was."""
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def head_of(path: Path) -> str:
    return git("rev-parse", "HEAD", cwd=path).strip()


@pytest.mark.unprivileged
def test_exit_code_19_is_the_seals_own() -> None:
    assert EXIT_CODES[GateReason.BAD_SEAL] == 19
    # 6 is unbound, as for every command (docs/exit-codes.md); 17 was unbound before 0.2
    assert sorted(EXIT_CODES.values()) == [0, 6, *range(10, 17), 18, 19]


@pytest.mark.unprivileged
def test_an_untouched_receipt_passes_and_keeps_its_shape(repo: Path, isolated_state: Path) -> None:
    path = prove(repo)
    data = json.loads(path.read_text())
    assert set(data) == FIELDS | {"seal"}
    seal = data["seal"]
    assert seal["alg"] == "hmac-sha256"
    assert re.fullmatch(r"[0-9a-f]{16}", seal["key_id"])
    assert re.fullmatch(r"[0-9a-f]{64}", seal["mac"])
    key = key_path(isolated_state)
    st = key.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_size == KEY_BYTES and st.st_uid == os.geteuid()
    assert seal["key_id"] == load_key(isolated_state).key_id
    assert key.read_bytes().hex() not in path.read_text()  # the fingerprint is not the key
    assert gate(repo).returncode == 0
    # The seal covers the fields, not the file's layout: reordered and compact still passes.
    path.write_text(json.dumps(dict(reversed(list(data.items()))), separators=(",", ":")))
    assert gate(repo).returncode == 0


@pytest.mark.unprivileged
def test_outcome_and_exit_code_edited_together_are_refused(repo: Path) -> None:
    done = lw("prove", "tests", "--", "sh", "-c", "exit 3", cwd=repo)
    assert done.returncode == 3
    refused(gate(repo), GateReason.FAILED)
    edit(
        receipt_path(locate("default", checkout=repo).namespace, "tests"),
        outcome="pass",
        exit_code=0,
    )
    line = refused(gate(repo), GateReason.BAD_SEAL)
    assert "the receipt's seal does not match: it was changed after `prove` wrote it" in line


@pytest.mark.unprivileged
def test_an_old_receipts_head_set_to_the_new_one_is_refused(repo: Path) -> None:
    path = prove(repo)
    git("commit", "-q", "--allow-empty", "-m", "untested", cwd=repo)
    refused(gate(repo), GateReason.HEAD_MOVED)
    edit(path, git_head=head_of(repo))
    assert "seal does not match" in refused(gate(repo), GateReason.BAD_SEAL)
    assert not check_gate("tests", checkout=repo, allow_dirty=True).ok


@pytest.mark.unprivileged
def test_another_worktrees_receipt_with_its_checkout_fields_rewritten_is_refused(
    worktrees: tuple[Path, Path],
) -> None:
    a, b = worktrees
    done = lw("prove", "tests", "--", "false", cwd=a)  # A's own run failed
    assert done.returncode == 1
    mine = receipt_path(locate("default", checkout=a).namespace, "tests")
    own = json.loads(mine.read_text())
    theirs = prove(b)  # B passed, at the same commit
    mine.write_bytes(theirs.read_bytes())
    refused(gate(a), GateReason.FOREIGN)  # copied as is: B's seal is good, but it names B
    fields = ("checkout_id", "checkout_path", "namespace")
    edit(mine, **{name: own[name] for name in fields})
    assert "seal does not match" in refused(gate(a), GateReason.BAD_SEAL)
    assert gate(b).returncode == 0  # B's own receipt is untouched and passes


@pytest.mark.unprivileged
def test_a_receipt_from_another_user_or_machine_with_its_fields_adjusted_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    """Another user's state folder means another key; their checkout has another history."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git("init", "-q", "-b", "main", cwd=elsewhere)
    git("commit", "-q", "--allow-empty", "-m", "theirs", cwd=elsewhere)
    other_state = tmp_path / "other-user"
    prove(elsewhere, env={"LANEWATCH_STATE_DIR": str(other_state)})
    theirs = locate("default", root=other_state / "scratch", checkout=elsewhere).namespace
    assert lw("prove", "tests", "--", "false", cwd=repo).returncode == 1  # ours failed
    target = locate("default", checkout=repo)
    path = receipt_path(target.namespace, "tests")
    path.write_bytes(receipt_path(theirs, "tests").read_bytes())
    edit(
        path,
        checkout_id=target.checkout.checkout_id,
        checkout_path=target.checkout.root,
        namespace=target.namespace.name,
        git_head=head_of(repo),
    )
    line = refused(gate(repo), GateReason.BAD_SEAL)
    assert "seal does not match" in line and "this user's is" in line


@pytest.mark.unprivileged
def test_a_receipt_without_a_seal_is_refused(repo: Path) -> None:
    path = prove(repo)
    data = json.loads(path.read_text())
    del data["seal"]
    path.write_text(json.dumps(data))
    assert "no seal" in refused(gate(repo), GateReason.BAD_SEAL)
    edit(path, seal={"alg": "none"})
    refused(gate(repo), GateReason.BAD_SEAL)


@pytest.mark.unprivileged
def test_a_receipt_dated_in_the_future_is_refused_without_max_age(repo: Path) -> None:
    tomorrow = time.time() + 86400
    write_receipt("tests", exit_code=0, command=["t"], started_at=tomorrow, finished_at=tomorrow,
                  checkout=repo)  # fmt: skip
    assert "in the future" in refused(gate(repo), GateReason.TOO_OLD)
    refused(gate(repo, "--max-age", "2d"), GateReason.TOO_OLD)
    assert check_gate("tests", checkout=repo, now=tomorrow - 2).ok  # within the clock skew
    assert check_gate("tests", checkout=repo, now=tomorrow - 60).reason is GateReason.TOO_OLD


@pytest.mark.unprivileged
def test_a_key_readable_by_others_is_refused_and_never_replaced(
    repo: Path, isolated_state: Path
) -> None:
    path = prove(repo)
    key = key_path(isolated_state)
    secret = key.read_bytes()
    key.chmod(0o640)
    assert "mode 0640" in refused(gate(repo), GateReason.BAD_SEAL)
    done = lw("prove", "tests", "--", "touch", "ran", cwd=repo)
    assert done.returncode == 125 and "seal key" in done.stderr  # lanewatch's, not CMD's 1
    assert not (repo / "ran").exists()  # refused before the command ran
    assert key.read_bytes() == secret and stat.S_IMODE(key.stat().st_mode) == 0o640
    key.chmod(0o600)
    assert gate(repo).returncode == 0  # the receipt it sealed is still good
    assert path.exists()


@pytest.mark.unprivileged
@pytest.mark.parametrize("kind", ["symlink", "folder", "fifo", "short"])
def test_a_key_file_that_is_not_ours_is_refused(
    repo: Path, isolated_state: Path, tmp_path: Path, kind: str
) -> None:
    prove(repo)
    key = key_path(isolated_state)
    if kind == "symlink":
        real = tmp_path / "real.key"
        real.write_bytes(key.read_bytes())
        real.chmod(0o600)
        key.unlink()
        key.symlink_to(real)  # the right bytes, reached through a link
    elif kind == "folder":
        key.unlink()
        key.mkdir(mode=0o700)
    elif kind == "fifo":
        key.unlink()
        os.mkfifo(key, 0o600)  # opened non-blocking: refused, never waited on
    else:
        key.write_bytes(os.urandom(KEY_BYTES - 1))
    with pytest.raises(BadSealKey):
        load_key(isolated_state)
    refused(gate(repo), GateReason.BAD_SEAL)
    assert lw("prove", "tests", "--", "true", cwd=repo).returncode == 125
    with pytest.raises(BadSealKey):  # still the same bad file: never silently regenerated
        load_key(isolated_state)


@pytest.mark.unprivileged
def test_the_gate_never_makes_a_key(repo: Path, isolated_state: Path) -> None:
    prove(repo)
    key_path(isolated_state).unlink()
    assert "no seal key" in refused(gate(repo), GateReason.BAD_SEAL)
    assert not key_path(isolated_state).exists()
    prove(repo)  # the next prove makes a new key and a receipt sealed with it
    assert gate(repo).returncode == 0


@pytest.mark.unprivileged
def test_concurrent_writers_agree_on_one_key(isolated_state: Path) -> None:
    code = "from lanewatch.proof.seal import ensure_key; print(ensure_key().key_id)"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(6)
    ]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert ids == {load_key(isolated_state).key_id}
    assert sorted(os.listdir(isolated_state)) == [key_path(isolated_state).name]  # no temp left


@pytest.mark.unprivileged
def test_a_real_push_with_a_forged_receipt_is_refused(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = worktrees
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("remote", "add", "origin", str(remote), cwd=a)
    install_hook("pre-push", "tests", checkout=a)
    path = prove(a)
    git("commit", "-q", "--allow-empty", "-m", "untested", cwd=a)
    edit(path, git_head=head_of(a))
    pushed = git_run("push", "-q", "origin", "main", cwd=a)
    assert pushed.returncode != 0 and "refused (bad-seal)" in pushed.stderr
    prove(a)
    pushed = git_run("push", "-q", "origin", "main", cwd=a)
    assert pushed.returncode == 0, pushed.stderr


@pytest.mark.privileged
@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another uid")
def test_a_key_owned_by_another_uid_is_refused(repo: Path, isolated_state: Path) -> None:
    prove(repo)
    os.chown(key_path(isolated_state), 65534, 65534)
    assert "belongs to uid 65534" in refused(gate(repo), GateReason.BAD_SEAL)
