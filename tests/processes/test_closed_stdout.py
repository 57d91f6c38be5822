"""A reader that went away (`lanewatch id | head -1`, `lanewatch roots | head -1`): the real
`lanewatch` in a subprocess whose stdout is a real pipe with its read end already closed, so
the first write gets EPIPE. It exits quietly, as click does for every other command, and never
says a lie such as "lanewatch: Broken pipe" about a failure of its own."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH


def run_into_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before lanewatch writes its first line
    try:
        return subprocess.run(
            [*LANEWATCH, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=30,
        )
    finally:
        os.close(write_end)


@pytest.mark.unprivileged
@pytest.mark.parametrize("args", [("id",), ("id", "--json"), ("roots",), ("trash",)])
def test_a_closed_stdout_ends_quietly(args: tuple[str, ...], repo: Path, root: Path) -> None:
    subprocess.run([*LANEWATCH, "roots", "add", str(root)], check=True, capture_output=True)
    done = run_into_closed_pipe(*args, cwd=repo)
    assert b"Broken pipe" not in done.stderr, done.stderr
    assert b"Traceback" not in done.stderr, done.stderr
    assert done.stderr == b""
    assert done.returncode == 1  # what click gives EPIPE for every command: not a verdict
