"""claude-squad (`cs`) as it starts its agents, for tests/processes/test_launchers.py.

For each instance claude-squad makes a git worktree of the repository on a branch of its own
under its config folder (`~/.claude-squad/worktrees/NAME_HEX`, smtg-ai/claude-squad#141,
#245), then a tmux session named `claudesquad_NAME` (session/tmux/tmux.go, `TmuxPrefix`)
whose command is the program (`cs -p PROGRAM`), started in that worktree. Real claude-squad
uses the user's default tmux server; this one takes the server's socket (`-S`) so a test never
touches the user's.

argv: TMUX_SOCKET PROGRAM NAME... (run in the repository; $HOME holds `.claude-squad`)
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path


def main(socket: str, program: str, names: list[str]) -> int:
    base = Path(os.environ["HOME"], ".claude-squad", "worktrees")
    base.mkdir(parents=True, exist_ok=True)
    for name in names:
        tree = base / f"{name}_{secrets.token_hex(8)}"
        subprocess.run(["git", "worktree", "add", "-q", "-b", f"cs/{name}", str(tree)], check=True)
        subprocess.run(
            ["tmux", "-S", socket, "new-session", "-d", "-s", f"claudesquad_{name}",
             "-c", str(tree), program],
            check=True,
        )  # fmt: skip
        print(tree, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
