"""`lanewatch hook install --agent claude`: the guard as a `PreToolUse` hook in the project's
Claude Code settings (`<checkout>/.claude/settings.json`); `hook uninstall --agent claude`
removes it.

The user's own settings and hooks are kept: the file is read, our entry (the one whose command
runs `lanewatch ... guard`) is replaced in place or appended to `hooks.PreToolUse`, and the
whole is written back atomically. A file that is not a JSON object is refused, never replaced.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import write_atomic

MATCHER = "Write|Edit|MultiEdit|NotebookEdit|Bash"
TIMEOUT = 10  # seconds Claude Code waits for the hook
SETTINGS = Path(".claude") / "settings.json"
MAX_BYTES = 4 << 20


class SettingsRefused(LanewatchError):
    """The settings file cannot be read as Claude Code's settings: left as it is."""


@dataclass(frozen=True, slots=True)
class Installed:
    path: Path
    text: str  # the whole file as written (or as it would be, with --dry-run)
    previous: str  # "none" (no entry of ours), "ours" (ours, replaced), "same" (nothing to do)


def guard_command(executable: str | None = None) -> str:
    """How the hook runs the guard: this lanewatch's own executable, so the hook works whatever
    PATH the agent has."""
    exe = executable or sys.argv[0]
    if os.path.basename(exe) == "lanewatch" and os.path.isabs(exe):
        return f"{shlex.quote(exe)} guard"
    return f"{shlex.quote(sys.executable)} -m lanewatch guard"


def _ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    hooks = entry.get("hooks")
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and str(h.get("command", "")).endswith("lanewatch guard") for h in hooks
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsRefused(f"cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise SettingsRefused(f"{path} is over {MAX_BYTES} bytes: not a settings file")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise SettingsRefused(f"{path} is not JSON ({exc}); fix it or move it aside") from exc
    if not isinstance(data, dict):
        raise SettingsRefused(f"{path} is not a JSON object; fix it or move it aside")
    return data


def install(checkout: str, *, dry_run: bool = False, command: str | None = None) -> Installed:
    path = Path(checkout) / SETTINGS
    data = _read(path)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsRefused(f"{path}: `hooks` is not an object")
    pre = hooks.setdefault("PreToolUse", [])
    if not isinstance(pre, list):
        raise SettingsRefused(f"{path}: `hooks.PreToolUse` is not a list")
    entry = {
        "matcher": MATCHER,
        "hooks": [{"type": "command", "command": command or guard_command(), "timeout": TIMEOUT}],
    }
    previous = "none"
    for i, old in enumerate(pre):
        if _ours(old):
            previous = "same" if old == entry else "ours"
            pre[i] = entry
            break
    else:
        pre.append(entry)
    text = json.dumps(data, indent=2) + "\n"
    if not dry_run and previous != "same":
        path.parent.mkdir(exist_ok=True)
        write_atomic(path, text.encode())
    return Installed(path, text, previous)


def uninstall(checkout: str) -> Path | None:
    """Remove our entries from `hooks.PreToolUse` (and what they leave empty); the path written,
    or None when there was none of ours."""
    path = Path(checkout) / SETTINGS
    data = _read(path)
    hooks = data.get("hooks")
    pre = hooks.get("PreToolUse") if isinstance(hooks, dict) else None
    if not isinstance(hooks, dict) or not isinstance(pre, list) or not any(map(_ours, pre)):
        return None
    kept = [entry for entry in pre if not _ours(entry)]
    if kept:
        hooks["PreToolUse"] = kept
    else:
        del hooks["PreToolUse"]
        if not hooks:
            del data["hooks"]
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())
    return path
