"""Budgets: a root's budgets.toml, and a real lane over its memory or disk
budget raising an `over-budget` warning in `status --json` (a warning: exit 0, not 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanewatch.lanes.budgets import BudgetFiles, parse, parse_size
from lanewatch.lanes.lane import locate
from lanewatch.model.detectors.over_budget import AHEAD, over_budget
from lanewatch.model.kinds import is_collision
from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for

pytestmark = pytest.mark.unprivileged

HOLD = textwrap.dedent(
    """
    import os, sys, time
    out, go = sys.argv[1:3]
    with open(os.path.join(os.environ["TMPDIR"], "blob"), "wb") as f:
        f.write(os.urandom(2 * 1024 * 1024))
    open(out + ".part", "w").write(str(os.getpid())); os.rename(out + ".part", out)
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    """
)


def test_sizes_and_the_file() -> None:
    assert parse_size(1000) == 1000
    assert parse_size("5G") == 5 * 1024**3
    assert parse_size("512 MiB") == 512 * 1024**2
    assert parse_size("1.5k") == 1536
    for bad in ("lots", "-1", True, "5X", -3):
        with pytest.raises(ValueError):
            parse_size(bad)
    budgets = parse('disk = "1G"\n[lanes."agent-*"]\nmemory = "2M"\n[lanes."*"]\ndisk = "3G"\n')
    assert budgets.of("agent-7") == {"disk": 1024**3, "memory": 2 * 1024**2}
    assert budgets.of("pytest") == {"disk": 3 * 1024**3}
    assert budgets.of(None) == {"disk": 1024**3}
    with pytest.raises(ValueError):
        parse('[lanes."x"]\nmemory = "a lot"\n')


def test_a_file_that_is_no_budgets_file_applies_none_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / ".lanewatch-root"
    folder.mkdir()
    (folder / "budgets.toml").write_text("disk = [", encoding="utf-8")
    files = BudgetFiles()
    assert files.of(str(tmp_path)) is None
    assert "not used" in caplog.text
    (folder / "budgets.toml").write_text('disk = "1K"\n', encoding="utf-8")
    found = files.of(str(tmp_path))
    assert found is not None and found.of("x") == {"disk": 1024}


def test_the_detector_warns_over_the_budget_and_before_it() -> None:
    assert over_budget("/r/ns", "a", "disk", 900, 1000, 1.0) is None
    over = over_budget("/r/ns", "a", "disk", 1000, 1000, 1.0)
    assert over is not None and over.kind == "over-budget" and "over" in over.summary
    soon = over_budget("/r/ns", "a", "disk", 900, 1000, 1.0, growth=200 / AHEAD)
    assert soon is not None and "toward" in soon.evidence.note
    assert over.id == soon.id  # one warning per lane and resource
    assert over_budget("/r/ns", "a", "memory", None, 1000, 1.0) is None
    assert not is_collision("over-budget") and is_collision("takeover")
    assert is_collision("a-kind-of-the-future")


def test_a_lane_over_its_budgets_is_warned_of_and_status_still_exits_0(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    out, go = tmp_path / "pid", tmp_path / "go"
    spawn(
        [
            *LANEWATCH,
            "run",
            "--lane",
            "greedy",
            "--",
            sys.executable,
            "-c",
            HOLD,
            str(out),
            str(go),
        ],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: out.exists(), 30, what="CMD running")
    root = locate("greedy", checkout=repo).namespace.parent
    budgets = root / ".lanewatch-root" / "budgets.toml"
    budgets.write_text('[lanes."greedy"]\nmemory = "1M"\ndisk = "1M"\n', encoding="utf-8")
    seen: dict[str, object] = {}

    def warned() -> bool:
        done = lanewatch("status", "--json", cwd=repo, timeout=60)
        data = json.loads(done.stdout)
        seen.update(data=data, code=done.returncode)
        kinds = {(i["kind"], i["intruder"].get("resource")) for i in data["incidents"]}
        return {("over-budget", "memory"), ("over-budget", "disk")} <= kinds

    wait_for(warned, 60, interval=0.2, what="the over-budget warnings")
    assert seen["code"] == 0, seen  # a warning, not a collision
    go.touch()
