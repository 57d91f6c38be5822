"""Without kernel attribution, the attribution line reads as one sentence: how writers are
judged, what can be missed, and the one thing to do for exact writers. As root, the same
command runs as uid nobody through setpriv (root would have kernel attribution)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import LANEWATCH
from tests.kits.actionkit import NOBODY, as_user

pytestmark = pytest.mark.unprivileged


def status_as_a_normal_user(root: str) -> str:
    prefix = as_user(NOBODY, caps=("dac_override",)) if os.geteuid() == 0 else []
    done = subprocess.run(
        [*prefix, *LANEWATCH, "status"],
        env={**os.environ, "LANEWATCH_ROOT": root},  # `--root` checks access() by real uid
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd="/",
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_inferred_attribution_line_is_one_sentence(tmp_path) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o777)
    said = status_as_a_normal_user(str(root))
    assert said.count("attribution:") == 1, said
    line = " ".join(said[said.index("attribution:") :].split())  # the terminal may wrap it
    assert line.startswith("attribution: inferred: writers are judged from the files"), line
    assert line.count("sudo lanewatch record") == 1, line
    assert "))" not in line and "CAP_SYS_ADMIN" in line, line
    assert line.count("CAP_SYS_ADMIN") == 1, line
