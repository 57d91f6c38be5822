"""`scratch_dir_for(name)` inside the `lanewatch run` that owns lane `name` returns that lane's
scratch folder instead of failing on the run's own lock; outside it, a live owner refuses."""

from __future__ import annotations

import sys
from pathlib import Path

from lanewatch.lanes.lane import locate
from tests.conftest import lanewatch

PRINT_SCRATCH = "from lanewatch.lanes.lane import scratch_dir_for; print(scratch_dir_for('w'))"


def test_inside_its_own_run_the_lane_is_not_claimed_again(repo: Path, root: Path) -> None:
    result = lanewatch(
        "run",
        "--root",
        str(root),
        "--lane",
        "w",
        "--",
        sys.executable,
        "-c",
        PRINT_SCRATCH,
        cwd=repo,
    )
    assert result.returncode == 0, result.stderr
    expected = locate("w", root=root, checkout=repo).namespace / "scratch"
    assert result.stdout.strip() == str(expected)
    assert expected.is_dir()


def test_a_run_of_another_lane_does_not_entitle_it(repo: Path, root: Path) -> None:
    """Inside lane `other`, `scratch_dir_for('w')` claims `w` itself (free here: it works and
    is a claim of its own, released at exit), never borrowing another lane's ownership."""
    result = lanewatch(
        "run",
        "--root",
        str(root),
        "--lane",
        "other",
        "--",
        sys.executable,
        "-c",
        PRINT_SCRATCH,
        cwd=repo,
    )
    assert result.returncode == 0, result.stderr
    ledger = locate("w", root=root, checkout=repo).namespace / ".lanewatch" / "ledger.jsonl"
    assert '"started"' in ledger.read_text()  # `w` was claimed by the inner process
