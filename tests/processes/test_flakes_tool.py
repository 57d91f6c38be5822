"""The flake hunt itself (tests/flakes.py, `.ci/flakes`): it runs tests N times, each run in a
new order, and tells a flaky test by its pass rate and first failure; a steady test is 100 %."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.flakes import REPO

# A test that fails every other time it runs (a counter in a file), one that always passes,
# one that is skipped, and one whose order is recorded (to see the runs shuffle).
SUBJECT = """
import os
from pathlib import Path

import pytest


def test_steady():
    pass


def test_every_other_time():
    counter = Path(os.environ["SUBJECT_COUNTER"])
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    assert n % 2 == 1, f"call {n} is even"


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass


@pytest.mark.parametrize("i", range(8))
def test_order(i):
    with open(os.environ["SUBJECT_ORDER"], "a") as out:
        out.write(f"{i}\\n")
"""


def hunt(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    subject = tmp_path / "test_subject.py"
    subject.write_text(SUBJECT)
    env = os.environ | {
        "SUBJECT_COUNTER": str(tmp_path / "counter"),
        "SUBJECT_ORDER": str(tmp_path / "order"),
    }
    command = [sys.executable, str(REPO / "tests" / "flakes.py"), str(subject), "-n", "0"]
    return subprocess.run(
        [*command, "--load", "none", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_a_test_that_fails_every_other_run_is_50_percent_with_its_first_failure(
    tmp_path: Path,
) -> None:
    out = hunt(tmp_path, "--runs", "2", "--seed", "7")
    assert out.returncode == 1, out.stderr
    row = next(line for line in out.stdout.splitlines() if "test_every_other_time" in line)
    assert row.split()[1:4] == ["2", "1", "50"], row
    assert "AssertionError: call 0 is even" in row and "(1)" in row
    assert "test_steady" not in out.stdout  # only tests below 100 % get a row
    assert "seeds 7..8" in out.stdout and "load none" in out.stdout


def test_json_names_every_test_and_the_runs_come_in_different_orders(tmp_path: Path) -> None:
    report, keywords = tmp_path / "report.json", "steady or skipped or order"
    out = hunt(tmp_path, "--runs", "3", "--seed", "1", "--json", str(report), "-k", keywords)
    assert out.returncode == 0, out.stderr
    assert "test_subject.py  10     27    27      100 %  3" in out.stdout  # the table too
    # Node ids are relative to pytest's rootdir, which depends on where the checkout lies
    # (under /tmp: `pytest-of-root/…/test_subject.py::…`): keyed here by file name and test.
    tests = {k.rsplit("/", 1)[-1]: v for k, v in json.loads(report.read_text())["tests"].items()}
    steady = tests["test_subject.py::test_steady"]
    assert (steady["runs"], steady["passes"], steady["failures"]) == (3, 3, 0)
    assert tests["test_subject.py::test_skipped"]["skips"] == 3
    assert tests["test_subject.py::test_skipped"]["runs"] == 0
    order = (tmp_path / "order").read_text().split()
    runs = [order[i : i + 8] for i in range(0, 24, 8)]
    assert all(sorted(r) == [str(i) for i in range(8)] for r in runs)
    assert len({tuple(r) for r in runs}) > 1, runs  # seeds 1, 2, 3 shuffle differently


def test_a_hunt_over_the_suites_own_files_records_their_outcomes(tmp_path: Path) -> None:
    """The suite's conftest clears lanewatch's variables from the environment at start: the
    hunt's seed and log must survive it, or every run reports no test (and looks green)."""
    report = tmp_path / "report.json"
    target = str(REPO / "tests" / "fast" / "test_burst_differences.py")
    command = [sys.executable, str(REPO / "tests" / "flakes.py"), target, "-n", "0"]
    out = subprocess.run(
        [*command, "--load", "none", "--runs", "1", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    tests = json.loads(report.read_text())["tests"]
    assert tests and all(t["passes"] == 1 for t in tests.values()), tests


WRITE_SUBJECT = """
import os
import time
from pathlib import Path


def test_files_come_and_go_beside_me():
    work = Path(os.environ["LANEWATCH_FLAKES_LOG"]).parent  # the hunt's own folder
    seen = set()
    deadline = time.monotonic() + 60
    while len(seen) < 600 and time.monotonic() < deadline:  # more than its 500 names at once
        for folder in work.glob("write-load-*"):
            Path(os.environ["SUBJECT_FOLDERS"]).write_text(str(folder))
            for entry in os.scandir(folder):
                try:
                    seen.add(entry.inode())
                except OSError:
                    pass
        time.sleep(0.01)
    assert len(seen) >= 600, len(seen)
"""


def marked(mark: str) -> list[int]:
    """Pids of the processes whose environment holds `mark`."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark.encode() in f.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def test_the_write_load_floods_a_folder_of_its_own_until_the_hunt_ends(tmp_path: Path) -> None:
    """`--load write=N`: another process writing and removing files without pause on the same
    filesystem (what a filesystem-wide fanotify mark sees beside the tests); gone at the end."""
    subject = tmp_path / "test_writes.py"
    subject.write_text(WRITE_SUBJECT)
    mark = f"SUBJECT_MARK={os.getpid()}-{tmp_path.name}"
    env = os.environ | {"SUBJECT_FOLDERS": str(tmp_path / "folders"), "SUBJECT_MARK": mark}
    command = [sys.executable, str(REPO / "tests" / "flakes.py"), str(subject), "-n", "0"]
    out = subprocess.run(
        [*command, "--load", "write=1", "--runs", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 file writers of our own" in out.stderr
    assert (tmp_path / "folders").read_text()  # the subject saw the writer's folder
    assert not Path((tmp_path / "folders").read_text()).exists()  # removed with the hunt's work
    assert marked(mark) == []  # no writer outlives the hunt
