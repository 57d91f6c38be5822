"""docs/agents.md's recipes, run as written: each block marked `<!-- recipe: NAME
-->` is read from the page and used as the agent would use it, with `lanewatch` on PATH (a
shim for this interpreter's lanewatch) and inside a real lane. Claude Code's `.mcp.json` and
Codex's `config.toml` start the server the SDK's way; the plain client's Python runs as is;
the settings entry is what `hook install --agent claude` writes, and the guard it names blocks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LANEWATCH
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
CLIENT = str(Path(__file__).resolve().parents[1] / "kits" / "mcp_client.py")


def recipe(name: str) -> str:
    found = re.search(rf"<!-- recipe: {name} -->\n```\w+\n(.*?)\n```", DOC.read_text(), re.S)
    assert found, f"docs/agents.md has no recipe {name!r}"
    return found.group(1)


@pytest.fixture
def on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds `lanewatch` (this interpreter's), as an install gives."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lanewatch"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lanewatch "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def in_lane(root: Path, repo: Path, env: dict[str, str], *cmd: str) -> Any:
    out = subprocess.run(
        [*LANEWATCH, "run", "--root", str(root), "--lane", "agent-1", "--", *cmd],
        cwd=repo, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out


def whoami_through(server: dict[str, Any], root: Path, repo: Path, env: dict[str, str]) -> Any:
    """Start the server a config names (command and args, the SDK's stdio client) in a lane."""
    code = (
        "import asyncio, json, sys\n"
        "from mcp import Client, StdioServerParameters\n"
        "async def main():\n"
        "    p = StdioServerParameters(command=sys.argv[1], args=json.loads(sys.argv[2]))\n"
        "    async with Client(p) as c:\n"
        "        print(json.dumps((await c.call_tool('whoami', {})).structured_content))\n"
        "asyncio.run(main())\n"
    )
    args = json.dumps(server["args"])
    out = in_lane(root, repo, env, sys.executable, "-c", code, server["command"], args)
    return json.loads(out.stdout.splitlines()[-1])


def test_claude_codes_mcp_json_starts_the_server_in_the_agents_lane(
    repo: Path, root: Path, on_path: dict[str, str]
) -> None:
    server = json.loads(recipe("claude-mcp"))["mcpServers"]["lanewatch"]
    me = whoami_through(server, root, repo, on_path)
    assert me["lane"] == "agent-1" and me["bound"] and me["state"] == "live"


def test_codex_config_starts_the_server_in_the_agents_lane(
    repo: Path, root: Path, on_path: dict[str, str]
) -> None:
    server = tomllib.loads(recipe("codex-mcp"))["mcp_servers"]["lanewatch"]
    me = whoami_through(server, root, repo, on_path)
    assert me["lane"] == "agent-1" and me["found_in"].startswith("pid ")


def test_the_plain_python_client_runs_as_written(
    repo: Path, root: Path, on_path: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "client.py"
    script.write_text(recipe("python-client"))
    out = in_lane(root, repo, on_path, sys.executable, str(script))
    me, tmp = (json.loads(line) for line in out.stdout.splitlines()[-2:])
    assert me["lane"] == "agent-1"
    assert tmp["kind"] == ("mine" if me["private_tmp"] else "shared")


def test_the_settings_entry_is_what_hook_install_writes_and_its_guard_blocks(
    repo: Path, root: Path, on_path: dict[str, str], procs: list[subprocess.Popen[bytes]]
) -> None:
    documented = json.loads(recipe("claude-settings"))
    done = subprocess.run(
        [*LANEWATCH, "hook", "install", "--agent", "claude"],
        cwd=repo, env=on_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads((repo / ".claude" / "settings.json").read_text())
    (entry,) = written["hooks"]["PreToolUse"]
    (doc_entry,) = documented["hooks"]["PreToolUse"]
    assert entry["matcher"] == doc_entry["matcher"]
    hook, doc_hook = entry["hooks"][0], doc_entry["hooks"][0]
    assert {**hook, "command": "lanewatch guard"} == doc_hook  # the path aside, the same
    other = start_lane(procs, repo, root, "B")
    call = {
        "hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": str(repo),
        "tool_input": {"file_path": str(other.namespace / "tmp" / "x"), "content": "x"},
    }  # fmt: skip
    out = subprocess.run(
        [*LANEWATCH, "run", "--root", str(root), "--lane", "agent-1", "--",
         "sh", "-c", hook["command"]],
        cwd=repo, env=on_path, input=json.dumps(call), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2 and "lane 'B'" in out.stderr
