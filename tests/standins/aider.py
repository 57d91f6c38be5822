"""aider as it behaves on disk, for tests/processes/test_launchers.py.

aider keeps its files at the root of the git checkout it runs in: the chat transcript
`.aider.chat.history.md` (one `# aider chat started at …` header per run, then each message),
the input history `.aider.input.history`, and the repo map's cache `.aider.tags.cache.v3/`
(aider.chat/docs/config/options.html: `--chat-history-file`, `--input-history-file`; the
`.aider*` entries it offers to add to .gitignore). Nothing of it lies in /tmp.

argv: [--chat-history-file F] [--input-history-file F] MESSAGE...
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(args: list[str]) -> int:
    root = Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    chat, inputs = root / ".aider.chat.history.md", root / ".aider.input.history"
    while args and args[0].startswith("--"):
        option, value, args = args[0], Path(args[1]), args[2:]
        if option == "--chat-history-file":
            chat = value
        elif option == "--input-history-file":
            inputs = value
    (root / ".aider.tags.cache.v3").mkdir(exist_ok=True)
    (root / ".aider.tags.cache.v3" / "cache.db").write_bytes(b"tags")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with chat.open("a") as f:
        f.write(f"\n# aider chat started at {stamp}\n\n")
        for message in args:
            f.write(f"#### {message}\n\n")
    with inputs.open("a") as f:
        for message in args:
            f.write(f"\n# {stamp}\n+{message}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
