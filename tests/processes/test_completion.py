"""`lanewatch completion bash|zsh|fish` prints click's script, and TAB completes commands, lane
names, namespace names and trash ids from the real roots (the script's callback is called as
the shell would: `_LANEWATCH_COMPLETE=bash_complete` with COMP_WORDS/COMP_CWORD)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH
from tests.kits import actionkit
from tests.kits.actionkit import released_namespace

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

scratch = actionkit.scratch  # the kit's fixture: a registered root under tmp_path


def complete(*words: str, cwd: Path) -> list[str]:
    """What bash would offer after `lanewatch WORDS...` (the last word is being typed)."""
    line = ["lanewatch", *words]
    env = {
        **os.environ,
        "_LANEWATCH_COMPLETE": "bash_complete",
        "COMP_WORDS": " ".join(line),
        "COMP_CWORD": str(len(line) - 1),
    }
    done = subprocess.run(
        [*LANEWATCH], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    # bash_complete prints "type,value" a line
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_script_names_the_callback(shell: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [*LANEWATCH, "completion", shell], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert f"_LANEWATCH_COMPLETE={shell}_complete" in done.stdout


def test_commands_lanes_namespaces_and_trash_ids_complete(scratch: Path, tmp_path: Path) -> None:
    alpha = released_namespace(scratch, "alpha")
    released_namespace(scratch, "beta")
    assert {"kill", "clear"} <= set(complete("", cwd=tmp_path))
    assert complete("kill", "al", cwd=tmp_path) == ["alpha"]
    assert alpha.name in complete("clear", alpha.name[:6], cwd=tmp_path)
    assert complete("run", "--lane", "b", cwd=tmp_path) == ["beta"]
    cleared = subprocess.run(
        [*LANEWATCH, "clear", "beta", "--yes"], capture_output=True, text=True, timeout=60
    )
    assert cleared.returncode == 0, cleared.stderr
    [trash_id] = [p.name for p in (scratch / ".lanewatch-root" / "trash").iterdir()]
    assert complete("restore", "", cwd=tmp_path) == [trash_id]
    assert complete("run", "--lane", "b", cwd=tmp_path) == []  # in the trash: not a lane now
