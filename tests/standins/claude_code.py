"""Claude Code as it behaves on disk and in processes, for tests/processes/test_launchers.py.

- Its temp folder is `/tmp/claude-UID/`, whatever TMPDIR says (background task output is
  written there: anthropics/claude-code#15700, #35164), one folder per project named by its
  working folder with every non-alphanumeric character made `-` (#70076): two sessions of one
  project share it (#42536).
- At start it cleans the project's `tasks/` of output files, the other sessions' included:
  "another Claude Code process in the same project deleted it during startup cleanup" (#42536).
- Each session has a folder of its own with a `scratchpad/` (#17936).
- A background shell (`run_in_background`) writes `tasks/ID.output` and outlives the session.

argv[1]: a report file (JSON: session, project folder, task output, shell pid, what the
startup cleanup removed, the other sessions seen). It exits once the shell writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path


def main(report: Path) -> int:
    project = Path("/tmp", f"claude-{os.getuid()}", re.sub(r"[^A-Za-z0-9]", "-", os.getcwd()))
    tasks = project / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    removed = []
    for old in sorted(tasks.glob("*.output")):  # the startup cleanup
        old.unlink(missing_ok=True)
        removed.append(old.name)
    others = sorted(p.name for p in project.iterdir() if p.is_dir() and p.name != "tasks")
    session = str(uuid.uuid4())
    scratch = project / session / "scratchpad"
    scratch.mkdir(parents=True)
    (scratch / "plan.md").write_text(f"session {session}\n")
    output = tasks / f"{uuid.uuid4().hex[:9]}.output"
    shell = subprocess.Popen(
        ["sh", "-c", 'while :; do date +%s.%N; sleep 0.05; done >> "$0" 2>&1', str(output)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (output.exists() and output.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)
    facts = {
        "session": session,
        "project": str(project),
        "output": str(output),
        "shell": shell.pid,
        "removed": removed,
        "others": others,
    }
    part = report.with_name(report.name + ".part")
    part.write_text(json.dumps(facts))
    part.rename(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
