"""`lanewatch guard`: answer an agent's hook before a tool call, and refuse a write into
another lane.

Claude Code's `PreToolUse` hook sends one JSON object on stdin: `hook_event_name`, `tool_name`,
`tool_input`, `cwd` (and the session's ids). The guard looks at the paths a call would write:

- Write, Edit, MultiEdit: `tool_input.file_path`; NotebookEdit: `tool_input.notebook_path`;
- Bash: the targets of output redirections (`>`, `>>`, `&>`, `2>`, `>|`), and the operands of
  commands that write what they name (rm, mv, cp and ln's destination, touch, mkdir, tee, ...).

Each is judged by `agents.whosepath.judge`. A call that would write into another lane's namespace
or checkout, or into shared temp from an unfenced lane, is refused: exit 2 (Claude Code's
blocking code) with one line on stderr, which the agent reads as the reason. Everything else
exits 0 and prints nothing (an explicit "allow" would skip the user's own permission prompts).
A payload that is not JSON, or not a tool call, is a non-blocking error (exit 1, one line).

Blind spots: the shell is read, not run: a path built at run time (`$VAR`, `$(...)`, globs, a
script that writes on its own) is not seen; reading another lane's files is never refused.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

from lanewatch.agents.me import Me, who_am_i
from lanewatch.agents.whosepath import Verdict, judge, known_roots

BLOCK, PASS, BAD_INPUT = 2, 0, 1  # Claude Code: 2 blocks, 0 goes on, others are non-blocking
MAX_PAYLOAD = 16 << 20
FILE_TOOLS = {
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
# Commands whose every operand is written (or removed); `DEST_ONLY`: only the last one.
WRITES_ALL = frozenset(
    [
        "rm",
        "rmdir",
        "mv",
        "touch",
        "mkdir",
        "tee",
        "truncate",
        "shred",
        "unlink",
        "chmod",
        "chown",
        "chgrp",
        "mkfifo",
    ]
)
DEST_ONLY = frozenset(["cp", "ln", "install", "rsync", "scp"])
PREFIXES = frozenset(
    ["sudo", "env", "nohup", "nice", "ionice", "time", "command", "exec", "timeout", "stdbuf"]
)
PREFIX_VALUED = frozenset({"-u", "-g", "-n", "-C", "-p", "-s", "-k", "-o", "-e", "-i"})
REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n", "|&", ";;"})


class Decision(NamedTuple):
    code: int
    message: str = ""
    verdict: Verdict | None = None


class BadPayload(ValueError):
    """Not a hook payload we can read."""


def parse(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadPayload(f"the hook payload is not JSON ({exc})") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("tool_name"), str):
        raise BadPayload("the hook payload names no tool (`tool_name`)")
    if not isinstance(payload.get("tool_input", {}), dict):
        raise BadPayload("the hook payload's `tool_input` is not an object")
    return payload


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an open quote: read what can be read the plain way
        return command.split()


def _commands(words: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(argv, redirect targets) of each simple command."""
    argv: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in SEPARATORS:
            yield argv, targets
            argv, targets = [], []
        elif w in REDIRECTS or (w.endswith(">") and w.rstrip(">&").isdigit()):
            if i + 1 < len(words) and words[i + 1] not in SEPARATORS:
                targets.append(words[i + 1])
                i += 1
        elif w in (">&", "<", "<<", "<<<", "<&"):
            i += 1  # a descriptor or an input: nothing written
        elif w.isdigit() and i + 1 < len(words) and words[i + 1] in REDIRECTS | {">&"}:
            pass  # the descriptor number of `2>`, `2>&1`
        else:
            argv.append(w)
        i += 1
    yield argv, targets


def _operands(argv: list[str]) -> list[str]:
    while argv and (argv[0] in PREFIXES or ("=" in argv[0] and not argv[0].startswith("-"))):
        argv = argv[1:]
        while argv and argv[0].startswith("-"):  # the prefix's own options (`nice -n 5`)
            valued = argv[0] in PREFIX_VALUED
            argv = argv[1:]
            if argv and (valued or argv[0].isdigit()):
                argv = argv[1:]
    if not argv:
        return []
    name = os.path.basename(argv[0])
    rest = [a for a in argv[1:] if not a.startswith("-")]
    if name == "dd":
        return [a[3:] for a in argv[1:] if a.startswith("of=")]
    if name == "sed":
        return rest[1:] if any(a.startswith("-i") or a == "--in-place" for a in argv) else []
    if name in WRITES_ALL:
        return rest
    if name in DEST_ONLY:
        return rest[-1:] if len(rest) > 1 else []
    return []


def bash_targets(command: str) -> list[str]:
    """The paths a shell command line would write, as far as its text says."""
    out: list[str] = []
    for argv, targets in _commands(_words(command)):
        out.extend(targets)
        out.extend(_operands(argv))
    return [t for t in dict.fromkeys(out) if t and not t.startswith(("$", "/dev/null"))]


def targets_of(payload: dict[str, Any]) -> list[str]:
    tool = payload["tool_name"]
    given = payload.get("tool_input") or {}
    if tool in FILE_TOOLS:
        path = given.get(FILE_TOOLS[tool])
        return [path] if isinstance(path, str) and path else []
    if tool == "Bash":
        command = given.get("command")
        return bash_targets(command) if isinstance(command, str) else []
    return []


def decide(payload: dict[str, Any], me: Me | None = None) -> Decision:
    paths = targets_of(payload)
    if not paths:
        return Decision(PASS)
    me = who_am_i() if me is None else me
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    roots = known_roots(me)
    for path in paths:
        verdict = judge(path, me, cwd=cwd, roots=roots)
        if verdict.blocks:
            return Decision(BLOCK, refusal(payload["tool_name"], verdict), verdict)
    return Decision(PASS)


def refusal(tool: str, v: Verdict) -> str:
    """One line for the agent (inert: control characters of a path shown as escapes)."""
    from lanewatch.inert import inert

    line = f"lanewatch refused this {tool}: {v.path} is {v.reason}"
    if v.fix:
        line += f". Fix: {v.fix}"
    return inert(line + ". (`lanewatch mcp` tool is_path_mine says whose a path is.)")


def main(stdin: Any = None) -> int:
    """The hook: read the payload, answer with an exit code (and a line on stderr)."""
    stream = sys.stdin.buffer if stdin is None else stdin
    try:
        payload = parse(stream.read(MAX_PAYLOAD))
    except BadPayload as exc:
        print(f"lanewatch guard: {exc}; the call goes on unchecked", file=sys.stderr)
        return BAD_INPUT
    decision = decide(payload)
    if decision.message:
        print(decision.message, file=sys.stderr)
    return decision.code
