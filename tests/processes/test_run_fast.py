"""`lanewatch run` without click (cli/lanes/run_fast.py): what it parses, click parses the same way,
and what it leaves to click is still said by click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from lanewatch.cli.group import NEEDS
from lanewatch.cli.lanes.laneopts import command_after_dashes
from lanewatch.cli.lanes.run_cmd import run_command
from lanewatch.cli.lanes.run_fast import parse
from lanewatch.linux.support import PROC
from tests.conftest import LANEWATCH

# The same `lanewatch run` through the click group, never the fast path.
CLICK_ONLY = [sys.executable, "-c", "from lanewatch.cli.group import main; main()"]


def by_click(args: list[str]) -> dict[str, Any] | None:
    """What the click command would call `run_lane` with; None where it says no first."""
    try:
        params = run_command.make_context("run", list(args)).params
        argv = command_after_dashes(params.pop("cmd"), "usage")
    except (click.ClickException, click.exceptions.Exit):
        return None
    if params["lane_auto"] and params["wait"] is not None:
        return None
    return {**params, "argv": argv}


def grid(tmp_path: Path) -> list[list[str]]:
    folder = tmp_path / "folder"
    folder.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    missing = str(tmp_path / "missing")
    options: list[list[str]] = [
        [],
        ["--lane", "a"],
        ["--lane=a"],
        ["--lane", ""],
        ["--lane="],
        ["--lane", "a", "--lane", "b"],
        ["--lane", "a=b"],
        ["--lane", "-x"],
        ["--lane"],
        ["--fence", "none"],
        ["--fence=tmp"],
        ["--fence", "auto", "--fence-shm"],
        ["--fence", "nope"],
        ["--fence-shm=1"],
        ["--root", str(folder)],
        ["--root", missing],
        ["--root", str(a_file)],
        ["--root="],
        ["--checkout", str(a_file)],
        ["--checkout", missing],
        ["--heartbeat", "2"],
        ["--heartbeat=0.05"],
        ["--heartbeat", "0.01"],
        ["--heartbeat", "86400"],
        ["--heartbeat", "86401"],
        ["--heartbeat", "nan"],
        ["--heartbeat", "1e1"],
        ["--heartbeat", "two"],
        ["--lane-auto"],
        ["--lane-auto", "--wait"],
        ["--wait"],
        ["--wait", "5"],
        ["--wait=5"],
        ["--wait", "-"],
        ["--wait", "-1"],
        ["--wait", ""],
        ["--wait=inf"],
        ["--wait", "infinity"],
        ["--wait", "--lane", "a"],
        ["-h"],
        ["--help"],
        ["--unknown"],
        ["--lan", "a"],
        ["--version"],
    ]
    commands: list[list[str]] = [
        ["--", "true"],
        ["--", "sh", "-c", "exit 3", "--lane", "x"],
        ["--", "--", "true"],
        ["--", "-h"],
        ["--"],
        [],
        ["true"],
        ["true", "--", "x"],
    ]
    return [[*o, *c] for o in options for c in commands]


# The forms hooks and agent loops use: these must not need click.
USUAL = [
    ["--", "true"],
    ["--lane", "a", "--fence", "none", "--", "true"],
    ["--lane=a", "--fence=tmp", "--fence-shm", "--heartbeat", "1", "--", "make", "-j4"],
    ["--lane", "a", "--lane-auto", "--", "pytest", "-x"],
    ["--wait", "--", "true"],
    ["--wait", "30", "--lane", "a", "--", "true"],
    ["--wait=0.5", "--checkout", ".", "--root", ".", "--", "true"],
]


@pytest.mark.parametrize("lane_env", [None, "", "from-env"])
def test_what_the_fast_path_takes_click_takes_the_same_way(
    lane_env: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if lane_env is not None:
        monkeypatch.setenv("LANEWATCH_LANE", lane_env)
    taken = 0
    for args in grid(tmp_path):
        fast = parse(args, os.environ)
        if fast is not None:
            taken += 1
            assert fast == by_click(args), args
    assert taken > 60  # the grid really reaches the fast path


@pytest.mark.parametrize("args", USUAL)
def test_the_usual_forms_take_the_fast_path(args: list[str]) -> None:
    assert parse(args, os.environ) == by_click(args) is not None


def test_shell_completion_is_left_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_LANEWATCH_COMPLETE", "bash_complete")
    assert parse(["--", "true"], os.environ) is None


def test_the_fast_path_asks_what_the_group_asks_before_run() -> None:
    assert NEEDS["run"] == (PROC,)  # run_fast checks PROC alone (cli/lanes/run_fast.py)


def _run(prefix: list[str], args: list[str], repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, "run", *args],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.unprivileged
@pytest.mark.parametrize(
    "args",
    [
        ["--lane", "fast", "--fence", "none", "--", "sh", "-c", "echo $LANEWATCH_LANE; exit 7"],
        ["--lane=", "--", "true"],  # a lane name that cannot be one: exit 2
        ["--lane", "x" * 200, "--fence", "none", "--", "true"],
        ["--fence", "none", "--", "sh", "-c", "kill -TERM $$"],  # 128 + 15
        ["--heartbeat", "0", "--", "true"],  # click's range error (the fast path leaves it)
        ["--lane-auto", "--wait", "--", "true"],  # run_command's usage error
        ["--fence", "none"],  # no CMD
    ],
)
def test_a_run_ends_the_same_with_and_without_click(args: list[str], repo: Path) -> None:
    """A real `lanewatch run` as users start it, and the same through the click group alone:
    the same exit code, output and error, whether or not the fast path took it."""
    fast, slow = _run(LANEWATCH, args, repo), _run(CLICK_ONLY, args, repo)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr.replace("Usage: -c run", "Usage: lanewatch run"),
    )
    assert fast.returncode != 0


@pytest.mark.unprivileged
def test_a_warning_of_a_run_without_click_is_inert(repo: Path, tmp_path: Path) -> None:
    """The ledger's warnings come through logging, which `run` imports only then
    (lanes/logs.py): still one inert line each, as through the click group."""
    root = tmp_path / "root\x1b[31mRED"
    args = ["--lane", "l", "--root", str(root), "--fence", "none", "--", "true"]
    assert _run(LANEWATCH, args, repo).returncode == 0
    [ledger_file] = root.glob("*/.lanewatch/ledger.jsonl")
    ledger_file.unlink()
    os.mkfifo(ledger_file)  # appends skip it and say so (lanes/ledger.py)
    fast, slow = _run(LANEWATCH, args, repo), _run(CLICK_ONLY, args, repo)
    assert (fast.returncode, fast.stderr) == (slow.returncode, slow.stderr) == (0, fast.stderr)
    lines = [line for line in fast.stderr.splitlines() if line.startswith("ledger line")]
    assert len(lines) == 4 and all("not written to" in line for line in lines), fast.stderr
    assert "\x1b" not in fast.stderr and "root\\x1b[31mRED" in fast.stderr
