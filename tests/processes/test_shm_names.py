"""Names in /dev/shm, end to end with real lanes and a real engine: a program's own semaphores
and shared memory (Python's multiprocessing: `sem.XXXXXX`, `psm_…`) collide with nobody, so
they are no incident; one name two lanes both use is one `shared-file` incident naming both.
As root with the kernel's writes (fanotify), and as a normal user with the prober's holdings.

Every name this test makes itself in /dev/shm is its own (a uuid), removed at the end."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.kits.attributionkit import kernel_engine, privileged, shared_temp_file
from tests.kits.enginekit import Recorder, running, start_lane

# Real multiprocessing at work (named semaphores, a pool, shared memory), then, once `$2`
# exists, writes of the one name both lanes agree on (`$1`), held open until the test ends.
PROGRAM = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys, time
    from multiprocessing import shared_memory

    def square(x):
        return x * x

    if __name__ == "__main__":
        shared, go, lane = sys.argv[1], sys.argv[2], sys.argv[3]
        with mp.Pool(2) as pool:
            assert sum(pool.map(square, range(50))) == 40425
        mine = shared_memory.SharedMemory(create=True, size=4096)  # psm_…, held from here on
        mine.buf[:4] = b"mine"
        with mp.Lock():
            pass
        with open(os.path.join(os.environ["TMPDIR"], "ready"), "w") as ready:
            ready.write(mine.name)  # in the lane's own tmp/: no write outside it but the test's
        while not os.path.exists(go):
            time.sleep(0.02)
        out = open(shared, "a")  # the name both lanes use, held open for writing
        for i in range(3):
            out.write(f"{lane} {i}\\n")
            out.flush()
            os.fsync(out.fileno())
            time.sleep(0.1)
        time.sleep(120)
    """
)


@pytest.fixture
def shm_name() -> Iterator[Path]:
    with shared_temp_file("", where="/dev/shm") as path:
        yield path


def incidents(rec: Recorder) -> list[Any]:
    with rec.lock:
        return list(rec.picture.incidents.values())


def both_named(rec: Recorder, path: Path) -> Any:
    def found() -> Any:
        for i in incidents(rec):
            lanes = {w.get("lane") for w in i.writers}
            if i.kind == "shared-file" and i.path == str(path) and lanes == {"a", "b"}:
                return i
        return None

    return wait_for(found, 60, what=f"one shared-file incident for {path} naming a and b")


def run_pair(procs: list[Any], repo: Path, root: Path, tmp_path: Path, shared: Path) -> None:
    program, go = tmp_path / "program.py", tmp_path / "go"
    program.write_text(PROGRAM)
    lanes = [
        start_lane(procs, repo, root, lane, ("python3", str(program), str(shared), str(go), lane))
        for lane in ("a", "b")
    ]

    def ready() -> bool:  # each program's pool done, its own shared memory made and held
        return all((lane.namespace / "tmp" / "ready").exists() for lane in lanes)

    wait_for(ready, 60, what="both programs' pools done, their shared memory made")
    go.touch()


def only_the_shared_one(rec: Recorder, shared: Path) -> None:
    incident = both_named(rec, shared)
    assert incident.summary in (f"a and b both write {shared}", f"b and a both write {shared}")
    others = [(i.kind, i.summary) for i in incidents(rec) if i.id != incident.id]
    assert others == [], others  # every semaphore and psm_ name was each program's own


@privileged
def test_kernel_writes_of_own_names_are_quiet_and_one_shared_name_is_one_incident(
    repo: Path, root: Path, procs: list[Any], tmp_path: Path, shm_name: Path
) -> None:
    with kernel_engine(root) as (_, rec):
        run_pair(procs, repo, root, tmp_path, shm_name)
        only_the_shared_one(rec, shm_name)


@pytest.mark.unprivileged
def test_held_names_alone_are_quiet_and_one_held_by_two_lanes_is_one_incident(
    repo: Path, root: Path, procs: list[Any], tmp_path: Path, shm_name: Path
) -> None:
    with running([root], probe_interval=0.3, attribution=False) as (_, rec):
        run_pair(procs, repo, root, tmp_path, shm_name)
        only_the_shared_one(rec, shm_name)
