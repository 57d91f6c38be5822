"""`lanewatch audit` as root: fanotify sees every write by the runs' processes, anywhere (here a
"product" folder under tmp_path, outside /tmp's private fence and HOME's overlay), and the reads
of each written file; a run reading what another run wrote fails the audit. A process that is
no member of a run, writing in the same folder meanwhile, is not reported.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.cli.exits import Exit
from tests.conftest import LANEWATCH, Spawn, git, inner_pytest_env, wait_for
from tests.kits.attributionkit import shared_temp_file
from tests.kits.contractkit import parsed
from tests.processes.test_audit import PYTEST, audit, by_path

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="kernel attribution needs root"),
]

SAMPLE = """
import os
import pathlib
import time

PRODUCT = pathlib.Path(os.environ["AUDIT_PRODUCT"])

def test_build():
    out = PRODUCT / "build" / "artifact.bin"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("artifact")

def test_gate():
    # Run 0 publishes; run 1's gate reads what run 0 published (its checkout's name says which).
    feed = PRODUCT / "feed.txt"
    if pathlib.Path.cwd().name.endswith("-0"):
        feed.write_text("from run 0")
        return
    deadline = time.monotonic() + 60
    while not feed.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    for _ in range(40):  # a gate that polls the artifact
        feed.read_text()
        time.sleep(0.05)
"""

NEIGHBOUR = """
import pathlib, sys, time
out = pathlib.Path(sys.argv[1])
while True:
    out.write_text(str(time.time()))
    time.sleep(0.05)
"""


def _sample(tmp_path: Path, name: str, text: str) -> tuple[Path, Path, Path]:
    """A repository whose one commit holds `name` (`text`), a home and a product folder."""
    repo, home, product = tmp_path / "sample", tmp_path / "home", tmp_path / "product"
    for folder in (repo, home, product):
        folder.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / name).write_text(text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", "sample", cwd=repo)
    return repo, home, product


def test_as_root_every_write_of_the_runs_is_seen_and_a_read_across_runs_fails(
    tmp_path: Path,
) -> None:
    repo, home, product = _sample(tmp_path, "test_sample.py", SAMPLE)
    neighbour_file = product / "neighbour.txt"
    # Not a member of any run: another test, another user's job on the same machine.
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR, str(neighbour_file)])
    try:
        wait_for(neighbour_file.exists, 30, what="the neighbour writes")
        before = neighbour_file.stat().st_mtime_ns
        done = audit(
            "--parallel",
            "2",
            "--json",
            "--",
            *PYTEST,
            cwd=repo,
            home=home,
            env={"AUDIT_PRODUCT": str(product)},
        )
        assert neighbour_file.stat().st_mtime_ns > before  # it wrote while the audit ran
    finally:
        neighbour.kill()
        neighbour.wait()
    report = parsed("audit", done.stdout)
    if done.returncode != Exit.COLLISION:  # the whole report, for the failure's output
        print(done.stdout, done.stderr)
    assert done.returncode == Exit.COLLISION
    assert report["kernel"] == "on", report["kernel"]
    assert [r["exit_code"] for r in report["runs"]] == [0, 0], report["runs"]
    found = by_path(report)
    artifact = found[str(product / "build" / "artifact.bin")]
    assert (artifact["scope"], artifact["shared"], artifact["runs"]) == (
        "product-scoped",
        True,
        [0, 1],
    )
    assert artifact["tests"] == ["test_sample.py::test_build"]
    assert artifact["reads_seen"] and not artifact["read_by_other_run"]
    feed = found[str(product / "feed.txt")]
    assert (feed["shared"], feed["runs"], feed["read_by_other_run"]) == (False, [0], True)
    assert {r["run"] for r in feed["reads"]} == {1}
    assert {t for r in feed["reads"] for t in r["tests"]} == {"test_sample.py::test_gate"}
    assert report["read_by_other_run"] == 1
    assert str(neighbour_file) not in found  # the neighbour is no run's
    assert not any("kernel attribution needs root" in u for u in report["unseen"])

    done = audit(
        "--markdown", "--", *PYTEST, cwd=repo, home=home, env={"AUDIT_PRODUCT": str(product)}
    )
    assert done.returncode == Exit.COLLISION, (done.stdout, done.stderr)
    assert "run 1 read what run 0 wrote" in done.stdout
    assert "**READ BY ANOTHER RUN**" in done.stdout


# Run 0 writes the artifact and goes on to its next test; run 1 writes it again meanwhile. Each
# waits on the other by files in the product folder, so the order is certain.
LATE = """
import os
import pathlib
import time

PRODUCT = pathlib.Path(os.environ["AUDIT_PRODUCT"])
FIRST = pathlib.Path.cwd().name.endswith("-0")

def _wait(path):
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)

def test_build():
    if FIRST:
        (PRODUCT / "ready").touch()
        _wait(PRODUCT / "go")
        (PRODUCT / "artifact.bin").write_text("run 0")
    else:
        _wait(PRODUCT / "moved-on")
        (PRODUCT / "artifact.bin").write_text("run 1")

def test_after():
    if FIRST:
        (PRODUCT / "moved-on").touch()
        _wait(PRODUCT / "artifact.bin.1")
    else:
        (PRODUCT / "artifact.bin.1").touch()
"""


def test_a_write_read_after_another_runs_rewrite_names_no_test_of_its_run(
    tmp_path: Path, spawn: Spawn
) -> None:
    """The audit reads a write's time as its file's mtime when it reads the event. Here it
    reads them late for certain (stopped, SIGSTOP, while both runs write): run 0's write then
    carries run 1's later time, which falls in run 0's `test_after`. It must not name that
    test: the artifact was written by `test_build` alone."""
    repo, home, product = _sample(tmp_path, "test_sample.py", LATE)
    env = inner_pytest_env({**os.environ, "HOME": str(home), "AUDIT_PRODUCT": str(product)})
    args = [*LANEWATCH, "audit", "--parallel", "2", "--json", "--", *PYTEST]
    proc = spawn(args, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for((product / "ready").exists, 120, what="run 0 at its write")
    os.kill(proc.pid, signal.SIGSTOP)  # the audit, not its runs: its events wait in the queue
    try:
        (product / "go").touch()
        wait_for((product / "artifact.bin.1").exists, 60, what="run 1 rewrote the artifact")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == Exit.COLLISION, (out, err)
    report = parsed("audit", out.decode())
    artifact = by_path(report)[str(product / "artifact.bin")]
    assert (artifact["shared"], artifact["runs"]) == (True, [0, 1]), artifact
    assert artifact["tests"] == ["test_sample.py::test_build"], artifact["writes"]


# Python's multiprocessing (named semaphores, shared memory), and one name both runs agree on.
# After writing it, each run waits for the other's (by a file of each in the product folder)
# and then works on: a writer that exits the moment it wrote can be gone before the audit
# reads its event, and is then no run's (docs/audit.md, "not seen").
MULTIPROCESSING = """
import multiprocessing as mp, os, pathlib, sys, time
from multiprocessing import shared_memory

def square(x):
    return x * x

def work():
    with mp.Pool(2) as pool:
        assert sum(pool.map(square, range(50))) == 40425

if __name__ == "__main__":
    meet, product = sys.argv[1], pathlib.Path(os.environ["AUDIT_PRODUCT"])
    work()
    shm = shared_memory.SharedMemory(create=True, size=4096)
    shm.buf[:2] = b"ok"
    shm.close()
    shm.unlink()
    with open(meet, "w") as out:
        out.write(os.getcwd())
    (product / pathlib.Path.cwd().name).write_text("wrote")
    deadline = time.monotonic() + 60
    while len(list(product.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    work()
"""


def test_names_in_dev_shm_of_one_run_are_left_out_and_one_both_use_fails(
    tmp_path: Path,
) -> None:
    repo, home, product = _sample(tmp_path, "mp.py", MULTIPROCESSING)
    with shared_temp_file("", where="/dev/shm") as meet:
        done = audit(
            *("--parallel", "2", "--json", "--", sys.executable, "mp.py", str(meet)),
            cwd=repo,
            home=home,
            env={"AUDIT_PRODUCT": str(product)},
        )
    report = parsed("audit", done.stdout)
    in_shm = [f for f in report["findings"] if f["path"].startswith("/dev/shm/")]
    said = (in_shm, report["unseen"], report["runs"])
    assert done.returncode == Exit.COLLISION, said
    assert [r["exit_code"] for r in report["runs"]] == [0, 0], said
    assert [(f["path"], f["shared"]) for f in in_shm] == [(str(meet), True)], said
    assert report["own_ipc_names"] >= 4, report  # each run's semaphores and shared memory
