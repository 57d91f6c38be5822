"""`y`: put a path on the clipboard, and say only what was done. The app sends OSC 52 (the
terminal copies it if it allows OSC 52, and nothing tells us whether it did). Under tmux the
sequence reaches the terminal only with `set-clipboard on`; with `external` (tmux's default) or
`off` tmux drops it, so the path goes into tmux's paste buffer instead (`tmux load-buffer -w`,
which also asks tmux to set the terminal's clipboard where it can). Never "Copied" when that
cannot be known."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

TMUX_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class Told:
    title: str
    message: str


def _tmux(
    args: list[str], env: dict[str, str], feed: str | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run `tmux ARGS` (with `feed` on its stdin); None when there is no tmux or it did not run
    in time."""
    tmux = shutil.which("tmux")
    if tmux is None:
        return None
    try:
        return subprocess.run(
            [tmux, *args],
            input=feed,
            stdin=subprocess.DEVNULL if feed is None else None,
            capture_output=True,
            text=True,
            timeout=TMUX_TIMEOUT,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def tmux_clipboard(env: dict[str, str] | None = None) -> str | None:
    """tmux's `set-clipboard` ("on", "external", "off"), or None when not under tmux (or
    tmux does not answer)."""
    env = dict(os.environ) if env is None else env
    if not env.get("TMUX"):
        return None
    out = _tmux(["show-options", "-gv", "set-clipboard"], env)
    return out.stdout.strip() or None if out is not None and out.returncode == 0 else None


def to_tmux_buffer(text: str, env: dict[str, str] | None = None) -> bool:
    """`text` into tmux's paste buffer (and, `-w`, the terminal's clipboard where tmux can)."""
    out = _tmux(["load-buffer", "-w", "-"], dict(os.environ) if env is None else env, feed=text)
    return out is not None and out.returncode == 0


def after_osc52(text: str, env: dict[str, str] | None = None) -> Told:
    """Once OSC 52 was sent: what else to do (tmux), and what to say. Off the UI thread (it
    may run tmux twice)."""
    setting = tmux_clipboard(env)
    if setting is None:
        return Told(
            "Sent to the terminal's clipboard (OSC 52)",
            f"{text} — copied if the terminal allows OSC 52 (many ask or refuse)",
        )
    if setting == "on":
        return Told(
            "Sent to the clipboard through tmux (OSC 52)",
            f"{text} — tmux passes it on (set-clipboard on) if the terminal allows it",
        )
    if to_tmux_buffer(text, env):
        return Told(
            "In tmux's paste buffer (prefix ] pastes)",
            f"{text} — tmux's set-clipboard is {setting}: it drops an app's OSC 52, so the "
            "path went into tmux's buffer (load-buffer -w: tmux also asks the terminal's "
            "clipboard where it can)",
        )
    return Told(
        "Not copied",
        f"{text} — tmux's set-clipboard is {setting}: it drops an app's OSC 52, and loading "
        "tmux's buffer failed; `tmux set -g set-clipboard on` lets it through",
    )
