"""Short-lived writers under a fork storm get their own lane or "unknown", never another's:
100 writes into lane A's namespace by processes that live a millisecond, while a
process next to them forks as fast as it can, so the pid allocator moves far past the pid
clock's window between two of its samples. Each write names its writer's lane in its content;
the write history must agree: the right lane, or none ("unknown"), at least 99 of 100 right.

The writers: children of lanes B's and C's commands (known by their parent, alive), lanes D*
whose command is the writer itself (known by the stamp), and processes of no lane (the test's
own children: never a lane). Bounded: about 40 s here, at most 90 s of waiting; marked slow.
The storm is one process (one core at most), so the test passes beside a busy xdist worker.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from lanewatch.linux.proc import LAST_PID, read_int
from lanewatch.records.writes import entries
from tests.conftest import wait_for
from tests.kits.attributionkit import kernel_engine, privileged
from tests.kits.enginekit import start_lane

CHILDREN = 40  # writes by children of each of B and C
OWN = 10  # lanes D0..D9, each one write by its command itself
STRANGERS = 10  # writes by processes of no lane
RUNS = 2 * CHILDREN + OWN + STRANGERS  # 100

# Wait for $1, then $2 children each write "$3 $i" into $4/$3-$i and exit; then stay.
SPAWNER = (
    'while [ ! -e "$1" ]; do sleep 0.02; done; i=0; '
    'while [ $i -lt "$2" ]; do sh -c \'printf %s "$1" > "$2"\' sh "$3 $i" "$4/$3-$i"; '
    "i=$((i+1)); sleep 0.01; done; exec sleep 60"
)
# Forks, and between two forks threads: each takes a pid from the same allocator, and a thread
# costs far less than a fork here (forks alone made 100 to 500 a second on this loaded box).
STORM = """
import os, threading
while True:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    for _ in range(8):
        t = threading.Thread(target=int)
        t.start()
        t.join()
    os.waitpid(pid, 0)
"""


@privileged
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_short_lived_writers_under_a_fork_storm_get_their_lane_or_unknown_never_another(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    go = tmp_path / "go"
    with kernel_engine(root) as (engine, _rec):
        a = start_lane(procs, repo, root, "A")
        into = a.namespace / "tmp"
        for lane in ("B", "C"):
            cmd = ("sh", "-c", SPAWNER, "sh", str(go), str(CHILDREN), lane, str(into))
            start_lane(procs, repo, root, lane, cmd)
        storm = subprocess.Popen([sys.executable, "-c", STORM], process_group=0)
        procs.append(storm)
        first, t0 = read_int(LAST_PID), time.monotonic()
        go.touch()
        for i in range(OWN):
            lane = f"D{i}"
            write = (
                "sh",
                "-c",
                'printf %s "$1" > "$2"',
                "sh",
                f"{lane} 0",
                str(into / f"{lane}-0"),
            )
            start_lane(procs, repo, root, lane, write, wait_child=False)
        for i in range(STRANGERS):
            target = into / f"none-{i}"
            subprocess.run(["sh", "-c", 'printf %s "$1" > "$2"', "sh", f"none {i}", str(target)])
        last, t1 = read_int(LAST_PID), time.monotonic()

        def recorded() -> dict[str, object] | None:
            got = {e.path: e for e in entries([str(root)]) if e.path.startswith(f"{into}/")}
            done = {p: e for p, e in got.items() if e.sha256}
            return done if len(done) >= RUNS else None

        got = wait_for(recorded, 90, what=f"{RUNS} writes in the history")
        lives = engine.kernel.attribution.lanes.stats if engine.kernel.attribution else {}
    forks = ((last or 0) - (first or 0)) % (read_int("/proc/sys/kernel/pid_max") or 1 << 22)
    rate = forks / max(t1 - t0, 1e-3)
    wrong, unknown = [], []
    for path, e in got.items():
        expected = Path(path).name.split("-")[0]
        expected_lane = None if expected == "none" else expected
        if e.lane != expected_lane and e.lane is not None:
            wrong.append((path, e.lane, e.how))
        elif expected_lane is not None and e.lane is None:
            unknown.append((path, e.how))
    assert not wrong, wrong  # never another lane's
    assert len(unknown) <= RUNS // 100, (unknown, lives)  # at least 99 % attributed
    # Past what the pid clock alone can prove: 32 pids between two of its samples (25 ms
    # apart at best, a second or more while idle). About 2,000 a second here.
    assert rate > 250, f"the storm took only {rate:.0f} pids a second"  # 372 at load 10
