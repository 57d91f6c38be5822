"""One lanewatch command on a host, through ssh, and what its answer means.

ssh exits 255 for its own failures (no route, refused, a key not accepted) and otherwise with
the far command's code: 127 is "command not found" there, which for us is "lanewatch is not
installed (or not where hosts.toml says)". Those two are told apart from lanewatch's own codes
(docs/exit-codes.md), which pass through unchanged.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from lanewatch.hosts.config import Host

SSH_FAILED = 255
NOT_FOUND = 127
NOT_EXECUTABLE = 126
CALL_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    out: str
    err: str

    @property
    def unreachable(self) -> bool:
        return self.code == SSH_FAILED

    @property
    def no_lanewatch(self) -> bool:
        return self.code in (NOT_FOUND, NOT_EXECUTABLE)

    def json(self) -> dict[str, Any] | None:
        """The JSON object it printed; None when it printed none."""
        try:
            data = json.loads(self.out)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def why(self) -> str:
        """One line for people: the last thing the far side (or ssh) said on stderr."""
        lines = [line.strip() for line in self.err.splitlines() if line.strip()]
        return lines[-1][:300] if lines else f"exit {self.code}"


def call(host: Host, *args: str, timeout: float = CALL_TIMEOUT, stdin: str = "") -> Answer:
    """Run `lanewatch ARGS…` on `host` and wait for it (`timeout`: ssh itself is ended)."""
    try:
        done = subprocess.run(
            host.argv(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return Answer(SSH_FAILED, "", f"no answer from {host.destination} within {timeout:g}s")
    except OSError as exc:  # no ssh client here
        return Answer(SSH_FAILED, "", f"cannot run ssh: {exc}")
    return Answer(done.returncode, done.stdout, done.stderr)
