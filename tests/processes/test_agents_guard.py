"""`lanewatch guard`: fed a real Claude Code `PreToolUse` payload inside a real lane,
it refuses (exit 2, one line naming the lane) a Write, an Edit or a shell redirection into
another lane's namespace, and lets its own lane's writes pass silently. The shell's write
targets, shared temp seen from unfenced and fenced lanes, and `hook install --agent claude`
(keeping the user's own hooks) are checked on the real CLI and files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from lanewatch.agents.guard import BAD_INPUT, BLOCK, PASS, bash_targets, decide, main
from lanewatch.agents.me import Me
from tests.conftest import LANEWATCH
from tests.kits.enginekit import start_lane


def payload(tool: str, cwd: Path, **tool_input: Any) -> dict[str, Any]:
    """What Claude Code sends a PreToolUse hook (hooks reference: the common fields, then the
    tool's)."""
    return {
        "session_id": "abc123",
        "transcript_path": str(cwd / "transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01",
    }


def guard_in_lane(
    root: Path, repo: Path, lane: str, data: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`lanewatch guard` as Claude Code runs it from inside lane `lane`: a child of the agent,
    with the lane's environment, the payload on stdin."""
    return subprocess.run(
        [*LANEWATCH, "run", "--root", str(root), "--lane", lane, "--", *LANEWATCH, "guard"],
        cwd=repo, input=json.dumps(data), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.unprivileged
def test_a_write_into_another_lanes_namespace_is_refused_and_its_own_passes(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    other = start_lane(procs, repo, root, "B")
    theirs = other.namespace / "tmp" / "receipt.json"
    write = payload("Write", repo, file_path=str(theirs), content='{"ok": true}\n')
    out = guard_in_lane(root, repo, "A", write)
    assert out.returncode == BLOCK, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "lane 'B'" in line and "you are lane 'A'" in line and str(theirs) in line
    assert "LANEWATCH_NAMESPACE" in line  # the fix
    assert not theirs.exists()

    bash = payload("Bash", repo, command=f"echo done > {theirs}", description="mark done")
    assert guard_in_lane(root, repo, "A", bash).returncode == BLOCK

    mine = root.resolve() / other.namespace.name.replace(".B", ".A") / "tmp" / "receipt.json"
    own = guard_in_lane(root, repo, "A", payload("Write", repo, file_path=str(mine), content="x"))
    assert own.returncode == PASS and own.stderr == ""
    edit = payload("Edit", repo, file_path=str(repo / "README"), old_string="a", new_string="b")
    checkout = guard_in_lane(root, repo, "A", edit)
    assert checkout.returncode == PASS and checkout.stderr == ""


def test_the_shell_targets_it_reads() -> None:
    assert bash_targets("echo hi > /tmp/x") == ["/tmp/x"]
    assert bash_targets("make 2>&1 | tee -a build.log") == ["build.log"]
    assert bash_targets("rm -rf /a/b c && ls /d") == ["/a/b", "c"]
    assert bash_targets("cp a b /dst/; mv x y") == ["/dst/", "x", "y"]
    assert bash_targets("sudo -u me touch /f") == ["/f"]
    assert bash_targets("FOO=1 nice -n 5 mkdir -p out") == ["out"]
    assert bash_targets("sed -i s/a/b/ f.txt; sed s/a/b/ g.txt") == ["f.txt"]
    assert bash_targets("dd if=/dev/zero of=/x/y bs=1") == ["/x/y"]
    assert bash_targets('echo "a > b" >>z') == ["z"]
    assert bash_targets("cat /etc/passwd; python x.py 2>/dev/null") == []
    assert bash_targets("echo 'unterminated > q") == ["q"]  # an open quote: read as words


def test_shared_temp_is_refused_from_an_unfenced_lane_and_is_the_lanes_own_when_fenced(
    tmp_path: Path,
) -> None:
    ns = str(tmp_path / "root" / "0123456789ab.A")
    unfenced = Me("A", ns, str(tmp_path), str(tmp_path / "root"), "none")
    fenced = Me("A", ns, str(tmp_path), str(tmp_path / "root"), "kernel")
    shared = f"/tmp/lanewatch-guard-{uuid.uuid4().hex}.json"  # judged, never written
    write = payload("Write", tmp_path, file_path=shared, content="x")
    refused = decide(write, unfenced)
    assert refused.code == BLOCK and "shared temp" in refused.message
    assert f"$TMPDIR ({ns}/tmp)" in refused.message
    assert decide(write, fenced).code == PASS
    assert decide(payload("Read", tmp_path, file_path=shared), unfenced).code == PASS
    outside = decide(write, Me(found_in=""))  # no lane: nothing to compare with
    assert outside.code == PASS


def test_a_payload_it_cannot_read_is_a_non_blocking_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(io.BytesIO(b"not json")) == BAD_INPUT
    assert "not JSON" in capsys.readouterr().err
    assert main(io.BytesIO(b'{"tool_input": {}}')) == BAD_INPUT
    assert "names no tool" in capsys.readouterr().err


def test_hook_install_for_claude_keeps_the_users_hooks(repo: Path) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}
    settings.write_text(json.dumps({"model": "x", "hooks": {"PreToolUse": [theirs]}}))
    before = settings.read_text()

    dry = subprocess.run(
        [*LANEWATCH, "hook", "install", "--agent", "claude", "--dry-run"],
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert settings.read_text() == before  # nothing written
    shown = json.loads(dry.stdout.split("\n", 1)[1])
    assert shown["hooks"]["PreToolUse"][0] == theirs

    for verb in ("installed", "already installed"):
        out = subprocess.run(
            [*LANEWATCH, "hook", "install", "--agent", "claude"],
            cwd=repo, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0 and out.stdout.startswith(verb), out.stderr
    data = json.loads(settings.read_text())
    assert data["model"] == "x" and data == shown
    first, ours = data["hooks"]["PreToolUse"]
    assert first == theirs and ours["matcher"] == "Write|Edit|MultiEdit|NotebookEdit|Bash"
    assert ours["hooks"][0]["command"].endswith("lanewatch guard")

    gone = subprocess.run(
        [*LANEWATCH, "hook", "uninstall", "--agent", "claude"],
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert gone.returncode == 0 and "removed the lanewatch guard" in gone.stdout, gone.stderr
    assert json.loads(settings.read_text()) == json.loads(before)  # theirs, as it was

    settings.write_text("{not json")
    bad = subprocess.run(
        [*LANEWATCH, "hook", "install", "--agent", "claude"],
        cwd=repo, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 3 and "not JSON" in bad.stderr
    assert settings.read_text() == "{not json"


def test_the_guards_own_registry_reading_agrees_with_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lanewatch.agents.whosepath import known_roots
    from lanewatch.lanes.roots import Registry

    Registry().add(tmp_path / "other-root")
    expected = [str(p) for p in Registry().paths()]
    assert known_roots(Me(found_in="")) == expected
    monkeypatch.setenv("LANEWATCH_ROOT", str(tmp_path / "root"))
    assert known_roots(Me(found_in="")) == [str(p) for p in Registry().paths()]
    monkeypatch.delenv("LANEWATCH_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert known_roots(Me(found_in="")) == [str(p) for p in Registry().paths()]


GUARD_PROBE = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["lanewatch", "guard"]
runpy.run_module("lanewatch", run_name="__main__", alter_sys=True)
"""
GUARD_NEVER = {
    *("click", "rich", "textual", "watchdog", "psutil", "filelock", "platformdirs", "mcp"),
    *("dataclasses", "pathlib", "inspect", "logging", "asyncio"),  # the stdlib's heavy parts
}


@pytest.mark.unprivileged
@pytest.mark.parametrize("where", ["own", "other", "shared"])
def test_the_guard_loads_only_what_it_uses(where: str, repo: Path, tmp_path: Path) -> None:
    """The guard runs before every tool call: no click, no UI, none of the stdlib's heavy
    modules (`dataclasses` alone, with `inspect`, doubles its start). A real call, in a fresh
    interpreter; its sys.modules at exit."""
    root = tmp_path / "root"
    mine, theirs = root / "0123456789ab.A", root / "0123456789ab.B"
    for ns in (mine, theirs):
        (ns / ".lanewatch").mkdir(parents=True)
        (ns / ".lanewatch" / "owner.json").write_text(json.dumps({"lane": ns.name[-1]}))
    shared = Path("/tmp") / f"lanewatch-guard-{uuid.uuid4().hex}.json"  # judged, never written
    target = {"own": mine / "x", "other": theirs / "x", "shared": shared}[where]
    env = {
        **os.environ, "LANEWATCH_ROOT": str(root), "LANEWATCH_LANE": "A",
        "LANEWATCH_NAMESPACE": str(mine), "LANEWATCH_FENCE": "none",
    }  # fmt: skip
    out = tmp_path / "modules.json"
    data = json.dumps(payload("Write", repo, file_path=str(target), content="x"))
    done = subprocess.run(
        [sys.executable, "-c", GUARD_PROBE, str(out)], input=data, env=env, cwd=repo,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == (PASS if where == "own" else BLOCK), done.stderr
    loaded = set(json.loads(out.read_text()))
    assert "lanewatch.agents.guard" in loaded  # it really ran
    tops = {m.split(".")[0] for m in loaded}
    assert not (tops | loaded) & GUARD_NEVER, sorted((tops | loaded) & GUARD_NEVER)
    ours = {m for m in loaded if m.startswith("lanewatch.")}
    assert not {m for m in ours if m.startswith(("lanewatch.cli.", "lanewatch.lanes."))} - {
        "lanewatch.cli.entry", "lanewatch.lanes.names"
    }  # fmt: skip


@pytest.mark.unprivileged
def test_a_write_into_the_checkout_of_another_live_lane_is_refused(
    worktrees: tuple[Path, Path], root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    mine, theirs = worktrees
    start_lane(procs, theirs, root, "B")
    edit = payload("Edit", mine, file_path=str(theirs / "README"), old_string="a", new_string="b")
    out = guard_in_lane(root, mine, "A", edit)
    assert out.returncode == BLOCK and "lane 'B'" in out.stderr and str(theirs) in out.stderr
    assert "work in your own checkout" in out.stderr


def test_a_lane_of_my_family_is_mine(root: Path, tmp_path: Path) -> None:
    from tests.kits.enginekit import make_stamp

    head = make_stamp(root, "pytest")
    worker = make_stamp(root, "pytest-gw0", family=head.name)
    stranger = make_stamp(root, "other")
    me = Me("pytest", str(head.resolve()), str(tmp_path), str(root.resolve()), "none")
    into = {
        ns: payload("Write", tmp_path, file_path=str(ns / "x"), content="x")
        for ns in (worker, stranger)
    }
    assert decide(into[worker], me).code == PASS
    assert decide(into[stranger], me).code == BLOCK
