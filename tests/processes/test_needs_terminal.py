"""The dashboard where there is no terminal (`lanewatch > out`, a CI step): it refuses at once
with a usage error naming what to run instead, rather than writing escape sequences into a file
and waiting for keys that never come (it did, for ever)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged


@pytest.mark.parametrize(
    ("args", "instead"),
    [
        (["dash"], "lanewatch status"),
        ([], "lanewatch status"),
        (["demo"], "lanewatch demo --no-ui"),
    ],
    ids=["dash", "bare", "demo"],
)
def test_the_dashboard_without_a_terminal_refuses_and_names_what_to_run(
    tmp_path: Path, args: list[str], instead: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    state = tmp_path / "state"
    env = {**os.environ, "LANEWATCH_ROOT": str(root), "LANEWATCH_STATE_DIR": str(state)}
    done = subprocess.run(
        [*LANEWATCH, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout[-500:] + done.stderr
    assert "the dashboard needs a terminal" in done.stderr and instead in done.stderr
    assert "\x1b" not in done.stdout  # nothing was drawn into the pipe
    assert not (state / "demo").exists()  # the demo started nothing
