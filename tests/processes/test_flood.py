"""A flood of one kind from one lane is one incident with a count, never thousands:
the model folds a lane's per-file incidents past `flood.FLOOD_AFTER` into one, and the root's
incident log stays small. Pure model tests, then real lanes: kernel writes (root) and files held
open under the prober (also as a normal user)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.model import model as m
from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.flood import FLOOD_AFTER, is_flood
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.records.incident_log import IncidentLog, log_path
from tests.conftest import wait_for
from tests.kits.attributionkit import kernel_engine, kw, privileged, shared_temp_dir
from tests.kits.enginekit import running, start_lane


def write(path: str, lane: str, t: float, pid: int = 42) -> KernelWrite:
    """A lane's write of `path`, its content the path's own (each file's evidence apart)."""
    return kw(path, lane, t, path.encode(), pid)


def observed(*writes: KernelWrite) -> list[m.Observed]:
    out = []
    for w in writes:
        obs = unbound_write(w, ["/r"])
        assert obs is not None
        out.append(m.Observed(obs, "/r"))
    return out


def test_a_lanes_thousands_of_files_are_ten_incidents_and_one_with_a_count(
    tmp_path: Path,
) -> None:
    files = [f"/tmp/toxl/.tox/py/lib/f{n}.py" for n in range(4242)]
    state = m.ModelState()
    for start in range(0, len(files), 100):  # in batches, as the engine applies them
        batch = files[start : start + 100]
        state, _ = m.apply(
            state, observed(*(write(p, "toxl", 1.0 + i) for i, p in enumerate(batch)))
        )
    records = list(state.incidents.values())
    floods = [r for r in records if is_flood(r)]
    assert len(records) == FLOOD_AFTER + 1 and len(floods) == 1
    (flood,) = floods
    assert flood.count == len(files) - FLOOD_AFTER
    assert flood.summary == (
        f"toxl writes many files outside its lane (the latest: {flood.evidence[-1].path})"
    )
    # Another lane writing one of the first files is still named with it there; a file of its
    # own is its own incident.
    state, _ = m.apply(state, observed(write(files[0], "other", 9e3, pid=77)))
    state, _ = m.apply(state, observed(write("/tmp/other.json", "other", 9e3, pid=77)))
    titles = {r.summary for r in state.incidents.values()}
    assert f"toxl and other both write {files[0]}" in titles
    assert "other writes /tmp/other.json outside its lane" in titles
    assert len(state.incidents) == FLOOD_AFTER + 2
    # On disk: a dozen records, not thousands.
    root = tmp_path / "root"
    root.mkdir()
    assert IncidentLog(str(root)).persist(state.incidents.values())
    assert log_path(str(root)).stat().st_size < 512 * 1024


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder in /tmp (shared temp for the engine), unique to the run; removed at the end."""
    with shared_temp_dir() as path:
        yield path


def shared_files(rec_picture: object) -> list[object]:
    incidents = rec_picture.incidents.values()  # type: ignore[attr-defined]
    return [i for i in incidents if i.kind == "shared-file"]


@privileged
def test_a_lane_writing_hundreds_of_files_in_tmp_is_a_dozen_incidents_at_most(
    repo: Path, root: Path, shared_dir: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    script = 'i=0; while [ $i -lt 300 ]; do echo $i > "$1/f$i"; i=$((i+1)); done; sleep 60'
    with kernel_engine(root) as (_, rec):
        start_lane(
            procs, repo, root, "A", ("sh", "-c", script, "sh", str(shared_dir)), fence="none"
        )

        def flood_count() -> int:
            with rec.lock:
                found = [i for i in shared_files(rec.picture) if i.path is None]
            return found[0].count if found else 0

        wait_for(lambda: flood_count() >= 300 - FLOOD_AFTER, 30)
        with rec.lock:
            incidents = shared_files(rec.picture)
    assert len(incidents) == FLOOD_AFTER + 1
    assert len(log_path(str(root)).read_bytes().splitlines()) < 100


HOLD = r"""
import sys, time
ready, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = [open(f"{folder}/held-{i}.txt", "w") for i in range(n)]
open(ready, "w").close()
time.sleep(600)
"""


@pytest.mark.unprivileged
def test_a_lane_holding_many_files_in_tmp_is_a_dozen_incidents_at_most(
    repo: Path,
    root: Path,
    shared_dir: Path,
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    ready, n = tmp_path / "ready", 3 * FLOOD_AFTER
    cmd = (sys.executable, "-c", HOLD, str(ready), str(shared_dir), str(n))
    with running([root], probe_interval=0.5) as (_, rec):
        start_lane(procs, repo, root, "A", cmd, fence="none")
        wait_for(ready.exists, 20)

        def flood_count() -> int:
            with rec.lock:
                found = [i for i in shared_files(rec.picture) if i.path is None]
            return found[0].count if found else 0

        # A probe while the lane was still opening its files saw some of them: the flood grows
        # with the next (each file once; a file seen again may count again).
        wait_for(lambda: flood_count() >= n - FLOOD_AFTER, 30, what="the flood counts every file")
        with rec.lock:
            incidents = shared_files(rec.picture)
    assert len(incidents) == FLOOD_AFTER + 1
