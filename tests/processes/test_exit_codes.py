"""The exit-code table (lanewatch/cli/exits.py, docs/exit-codes.md) holds for every command: each
situation is made for real (a folder outside any checkout, a namespace on disk, a trash entry, a
hook in the way, a seal key others can read) and the real CLI is called into it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from lanewatch.cli.exits import MEANING, Exit
from tests.conftest import LANEWATCH
from tests.kits import actionkit
from tests.kits.actionkit import make_stamp, released_namespace

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

scratch = actionkit.scratch  # the kit's fixture: a registered root under tmp_path
DOCS = Path(__file__).parents[2] / "docs" / "exit-codes.md"


def code(*args: str, cwd: Path) -> int:
    done = subprocess.run(
        [*LANEWATCH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,  # no terminal: nobody to confirm
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def test_the_docs_table_is_the_code_table() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| [^|]*\| ([^|]+) \|", DOCS.read_text(), re.M))
    for exit_code in Exit:
        assert str(int(exit_code)) in rows, f"{exit_code!r} is not in {DOCS.name}"
    assert set(MEANING) == set(Exit)


def test_usage_error_is_2(repo: Path) -> None:
    assert code("kill", cwd=repo) == Exit.USAGE
    assert code("clear", cwd=repo) == Exit.USAGE
    assert code("run", cwd=repo) == Exit.USAGE  # no CMD
    assert code("run", "--lane", "", "--", "true", cwd=repo) == Exit.USAGE  # no lane name
    assert code("prove", "", "--", "true", cwd=repo) == Exit.USAGE  # no step name
    assert code("gate", "tests", "--max-age", "soon", cwd=repo) == Exit.USAGE
    assert code("status", "--no-such-option", cwd=repo) == Exit.USAGE


def test_unbound_is_6_everywhere(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for args in (
        ("id",),
        ("run", "--", "true"),
        ("prove", "tests", "--", "true"),
        ("gate", "tests"),
        ("drill", "--lanes", "2", "--seconds", "0.1"),
        ("hook", "install", "--gate", "tests"),
    ):
        assert code(*args, cwd=plain) == Exit.UNBOUND, args


def test_refused_for_safety_is_3(repo: Path, scratch: Path) -> None:
    make_stamp(scratch, "remote", host="elsewhere.example")  # live, on another host
    assert code("kill", "remote", "--yes", cwd=repo) == Exit.REFUSED
    assert code("clear", "remote", "--yes", cwd=repo) == Exit.REFUSED
    hook = repo / ".git" / "hooks" / "pre-push"
    hook.write_text("#!/bin/sh\nexit 0\n")  # someone else's hook
    assert code("hook", "install", "--gate", "tests", cwd=repo) == Exit.REFUSED
    ns = released_namespace(scratch, "taken")
    assert code("clear", "taken", "--yes", cwd=repo) == Exit.OK
    ns.mkdir()  # the name is taken again
    [trash_id] = [p.name for p in (scratch / ".lanewatch-root" / "trash").iterdir()]
    assert code("restore", trash_id, cwd=repo) == Exit.REFUSED


def test_nothing_to_do_is_0(repo: Path, scratch: Path) -> None:
    released_namespace(scratch, "done")
    (scratch / "orphan").mkdir()  # no stamp: an orphan, with no owner to kill
    make_stamp(scratch, "stale", pid=2**22 + 1, start_ticks=1)  # its owner is dead
    for target in ("done", "orphan", "stale"):
        assert code("kill", target, cwd=repo) == Exit.OK, target
    assert code("purge", cwd=repo) == Exit.OK  # nothing due
    assert code("clear", "done", "--yes", cwd=repo) == Exit.OK
    assert code("clear", "done", "--yes", cwd=repo) == Exit.OK  # already in the trash


def test_needs_confirmation_is_7(repo: Path, scratch: Path) -> None:
    released_namespace(scratch, "ask")
    assert code("clear", "ask", cwd=repo) == Exit.NEEDS_CONFIRMATION
    assert code("clear", "ask", "--yes", cwd=repo) == Exit.OK
    assert code("purge", "--older-than", "0", cwd=repo) == Exit.NEEDS_CONFIRMATION


def test_not_found_is_8(repo: Path, scratch: Path) -> None:
    assert code("kill", "nosuch", cwd=repo) == Exit.NOT_FOUND
    assert code("clear", "nosuch", "--yes", cwd=repo) == Exit.NOT_FOUND
    assert code("incidents", "takeover-000000000000", cwd=repo) == Exit.NOT_FOUND
    assert code("incidents", "takeover-000000000000", "--ack", cwd=repo) == Exit.NOT_FOUND
    assert code("history", str(repo / "README"), cwd=repo) == Exit.NOT_FOUND
    released_namespace(scratch, "twice")
    assert code("clear", "twice", "--yes", cwd=repo) == Exit.OK
    [trash_id] = [p.name for p in (scratch / ".lanewatch-root" / "trash").iterdir()]
    assert code("restore", trash_id, cwd=repo) == Exit.OK
    assert code("restore", trash_id, cwd=repo) == Exit.NOT_FOUND  # restored already


def test_collision_and_incomplete_are_4_and_5(repo: Path, scratch: Path, tmp_path: Path) -> None:
    assert code("status", "--root", str(scratch), cwd=repo) == Exit.OK
    assert code("status", "--root", str(tmp_path / "missing"), cwd=repo) == Exit.INCOMPLETE


def test_a_seal_key_others_can_read_is_125_not_cmds_own_1(
    repo: Path, scratch: Path, isolated_state: Path
) -> None:
    assert code("prove", "tests", "--root", str(scratch), "--", "true", cwd=repo) == Exit.OK
    [key] = [p for p in isolated_state.rglob("*") if p.is_file() and "seal" in p.name]
    key.chmod(0o644)
    ran = scratch.parent / "ran"
    cmd = ("--", "touch", str(ran))
    assert code("prove", "tests", "--root", str(scratch), *cmd, cwd=repo) == Exit.RUN_FAILED
    assert not ran.exists()  # CMD never ran
