"""Kernel write attribution end to end: real `lanewatch run` lanes, real fanotify, a real engine.

Privileged tests need root or CAP_SYS_ADMIN and skip with the reason `fanotify_available()`
gives. The unprivileged path (attribution: inferred) is tested by running `lanewatch status`
as root without CAP_SYS_ADMIN (`setpriv --bounding-set=-sys_admin`), a real privilege drop,
not an injected check. Nothing is written to a fixed shared path but one file in /tmp per
test, unique to the run and removed at the end.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lanewatch.kernel.attribution import Attribution, KernelBatch
from lanewatch.kernel.throttle import Pace
from lanewatch.records import evidence
from lanewatch.records.writes import entries, history
from tests.conftest import LANEWATCH, inner_pytest_env, wait_for
from tests.kits.attributionkit import (
    AVAILABLE,
    json_lines,
    kernel_engine,
    privileged,
    setpriv_prefix,
    sha,
    shared_temp_file,
    wait_known,
)
from tests.kits.enginekit import start_lane


def write_cmd(content: str, target: Path, *, then: str = "") -> tuple[str, ...]:
    """A lane command: one open-write-close of `content` into `target` (microseconds)."""
    script = 'printf %s "$1" > "$2"' + (f"; {then}" if then else "")
    return ("sh", "-c", script, "sh", content, str(target))


@privileged
def test_a_microsecond_write_by_lane_b_into_lane_a_is_a_known_foreign_write(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A")
        target = a.namespace / "tmp" / "receipt.json"
        content = '{"step": "build", "by": "B"}'
        b = start_lane(procs, repo, root, "B", write_cmd(content, target, then="exec sleep 60"))
        incident, ev = wait_known(rec, "cross-lane-write", target)
    assert incident.victim == str(a.namespace) and incident.grade == "known"
    assert ev.sha256 == sha(content.encode()) and ev.size == len(content)
    assert incident.intruder["lane"] == "B"
    assert incident.intruder["namespace"] == str(b.namespace)
    assert incident.intruder["pid"] == b.stamp.child_pid
    assert "lane B" in (ev.writer or "") and "kernel" in ev.note


@privileged
def test_a_writer_gone_before_its_event_is_read_is_credited_by_pid_order(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    # The writer writes and exits at once: by the time we read its event it is reaped. Its
    # lane is known from the stamp (child pid + start ticks) when the pid allocator proves no
    # other process held that pid since. Under heavy forking elsewhere the proof may not hold:
    # then the write is "unknown pid", never another lane's. A few tries, each must be one or
    # the other, and one must be proven.
    with kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A")
        for attempt in range(3):
            target = a.namespace / "tmp" / f"gone-{attempt}.json"
            lane = f"B{attempt}"
            b = start_lane(procs, repo, root, lane, write_cmd(lane, target), wait_child=False)
            assert b.proc.wait(timeout=30) == 0
            written = wait_for(lambda t=target: history([str(root)], str(t)), 20)
            assert isinstance(written, list)
            (entry,) = written
            assert entry.lane in (lane, None) and entry.sha256 == sha(lane.encode())
            if entry.lane == lane and ("pid not reused" in entry.how or "connector" in entry.how):
                break  # else read while it still ran (a loaded machine): not this test's case
        else:
            pytest.fail("no gone writer was proven in 3 tries")
        incident, ev = wait_known(rec, "cross-lane-write", target)
    assert incident.intruder["lane"] == lane
    assert "pid not reused" in ev.note or "process connector" in ev.note


@privileged
def test_a_lane_writing_a_fixed_name_in_tmp_is_a_known_unbound_write(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with shared_temp_file() as fixed, kernel_engine(root) as (_, rec):
        a = start_lane(  # unfenced: a fenced lane's /tmp is its own (test_fence.py)
            procs,
            repo,
            root,
            "A",
            write_cmd('{"ok": true}', fixed, then="exec sleep 60"),
            fence="none",
        )
        incident, ev = wait_known(rec, "shared-file", fixed)
    assert incident.victim is None and incident.intruder["namespace"] == str(a.namespace)
    assert ev.sha256 == sha(b'{"ok": true}') and incident.intruder["lane"] == "A"


@privileged
def test_a_fenced_lane_writing_a_fixed_name_in_tmp_writes_in_its_own_namespace(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    # The write goes through the lane's own mount of its tmp folder; the kernel names it by
    # that mount (/tmp/...), or by the mount alone once the lane's namespace is gone: both
    # must come out as the folder's path here, and no unbound write.
    with shared_temp_file() as fixed, kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A", write_cmd('{"fenced": 1}', fixed))
        assert a.proc.wait(timeout=30) == 0  # gone: its mounts are detached now
        own = a.namespace / "tmp" / fixed.name
        written = wait_for(lambda: history([str(root)], str(own)), 20)
        assert not fixed.exists()  # the shared /tmp never saw it
    assert isinstance(written, list) and written[0].sha256 == sha(b'{"fenced": 1}')
    assert own.read_text() == '{"fenced": 1}'
    with rec.lock:
        kinds = [i.kind for i in rec.picture.incidents.values()]
    assert "shared-file" not in kinds


@privileged
def test_two_lanes_overwriting_one_shared_file_show_both_contents(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    first, second = '{"receipt": "from A"}\n', '{"receipt": "from B"}\n'
    with shared_temp_file() as shared, kernel_engine(root) as (_, rec):
        unfenced = {"fence": "none"}  # what lanes without the fence do
        start_lane(
            procs, repo, root, "A", write_cmd(first, shared, then="exec sleep 60"), **unfenced
        )
        a_inc, _ = wait_known(rec, "shared-file", shared)
        start_lane(
            procs, repo, root, "B", write_cmd(second, shared, then="exec sleep 60"), **unfenced
        )
        b_inc, _ = wait_known(rec, "shared-file", shared, second.encode())
        wait_for(lambda: len(history([str(root)], str(shared))) >= 2, 10)
    assert a_inc.id == b_inc.id  # one incident per shared file, naming both lanes
    assert {w["lane"] for w in b_inc.writers} == {"A", "B"}
    writes = history([str(root)], str(shared))
    assert [w.sha256 for w in writes] == [sha(first.encode()), sha(second.encode())]
    assert [w.lane for w in writes] == ["A", "B"] and all(w.stored for w in writes)
    assert evidence.load([str(root)], sha(second.encode())) == second.encode()
    out = subprocess.run(
        [*LANEWATCH, "incidents", b_inc.id, "--markdown", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    md = out.stdout
    assert "## What each writer wrote" in md
    assert '{"receipt": "from A"}' in md  # the first version, whole
    assert '-{"receipt": "from A"}' in md and '+{"receipt": "from B"}' in md  # then the diff
    assert "lane A" in md and "lane B" in md


@privileged
def test_our_own_writes_are_never_incidents_or_history(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    with shared_temp_file(".ours") as ours_tmp, kernel_engine(root) as (_, rec):
        a = start_lane(procs, repo, root, "A")
        first = a.namespace / "tmp" / "first.json"
        start_lane(procs, repo, root, "B", write_cmd("first", first, then="exec sleep 60"))
        wait_known(rec, "cross-lane-write", first)  # the engine has now written its own files
        # This process is the engine's: its writes are lanewatch's own.
        ours_ns = a.namespace / "tmp" / "ours.json"
        ours_ns.write_text("written by lanewatch's own process")
        ours_tmp.write_text("ours too")
        # Another lanewatch process writing the root's own data (incidents) is not a lane.
        status = subprocess.run(
            [*LANEWATCH, "status", "--root", str(root), "--json"],
            capture_output=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert status.returncode in (0, 4), status.stderr
        # The kernel queues in order: once this later write is in, ours came before it.
        sentinel = a.namespace / "tmp" / "sentinel.json"
        start_lane(procs, repo, root, "C", write_cmd("sentinel", sentinel, then="exec sleep 60"))
        wait_known(rec, "cross-lane-write", sentinel)
        with rec.lock:
            evidence_paths = {e.path for i in rec.picture.incidents.values() for e in i.evidence}
    recorded = {e.path for e in entries([str(root)])}
    assert str(sentinel) in recorded
    own = {str(ours_ns), str(ours_tmp)}
    assert not own & recorded and not own & evidence_paths
    assert not [p for p in recorded | {p for p in evidence_paths if p} if "/.lanewatch-root/" in p]


@privileged
def test_overflow_is_reported_and_rescanned_never_attributed(tmp_path: Path, own_fs: Path) -> None:
    root = own_fs / "root"  # its flood (below) overflows no other test's queue
    root.mkdir()
    limit = int(Path("/proc/sys/fs/fanotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"fs.fanotify.max_queued_events is {limit}: too many files to overflow it")
    lines: list[dict[str, Any]] = []
    recorder = subprocess.Popen(
        [*LANEWATCH, "record", "--json", "--root", str(root)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        process_group=0,
        cwd=tmp_path,
    )
    try:
        reader = json_lines(recorder, lines)
        start = wait_for(lambda: next((x for x in lines if x["type"] == "start"), None), 30)
        assert isinstance(start, dict) and start["attribution"]["mode"] == "kernel"
        wait_for(lambda: any(x["type"] == "health" and x["detail"] == "inotify" for x in lines), 30)
        # Stop the recorder, fill the kernel's queue past its limit in shared temp (outside
        # the root: the inotify watch has nothing to do with it), then let it read.
        os.killpg(recorder.pid, signal.SIGSTOP)
        flood = own_fs / "flood"
        flood.mkdir()
        writer = subprocess.run(
            [sys.executable, "-c", FLOOD, str(flood), str(limit + limit // 4)], timeout=300
        )
        assert writer.returncode == 0
        os.killpg(recorder.pid, signal.SIGCONT)
        lost = wait_for(
            lambda: next(
                (
                    x
                    for x in lines
                    if x["type"] == "health" and "fanotify queue overflow" in str(x["detail"])
                ),
                None,
            ),
            60,
        )
        assert isinstance(lost, dict) and lost["status"] == "overflow-rescan"
        assert "rescanned" in str(lost["detail"])
        recorder.terminate()
        assert recorder.wait(timeout=30) == 0
        reader.join(timeout=10)
    finally:
        if recorder.poll() is None:
            os.killpg(recorder.pid, signal.SIGKILL)
            recorder.wait()
    assert lines[-1]["type"] == "stop"
    assert not [x for x in lines if x["type"] == "incident"]  # nothing invented for the gap


FLOOD = """
import os, sys
folder, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    fd = os.open(os.path.join(folder, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"x")
    os.close(fd)
"""


@privileged
def test_no_descriptor_leaks_under_load(own_fs: Path) -> None:
    def fds() -> dict[int, str]:
        out: dict[int, str] = {}
        for n in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # closed since listed
                out[int(n)] = os.readlink(f"/proc/self/fd/{n}")
        return out

    # What this test opened and left open. Not "the same set as before": an earlier test's
    # objects, collected meanwhile, close theirs (seen under load: four of `before` gone).
    gc.collect()

    root = own_fs / "root"  # its flood reaches no other test's queue
    ns = root / "ck-0123456789ab.lane" / "tmp"
    ns.mkdir(parents=True)
    before = fds()
    batches: list[KernelBatch] = []
    attr = Attribution([str(root)], batches.append, shared=[])
    attr.start()
    try:
        writer = subprocess.run([sys.executable, "-c", FLOOD, str(ns), "1000"], timeout=120)
        assert writer.returncode == 0
        # On a filesystem of its own no one else's writes share the queue: all 1000 come.
        wait_for(lambda: sum(len(b.writes) for b in batches) >= 1000 or attr.stats.lost, 30)
    finally:
        attr.stop()
    left = {fd: target for fd, target in fds().items() if before.get(fd) != target}
    assert left == {}
    assert attr.stats.lost == 0 and not [b.lost for b in batches if b.lost]
    assert attr.stats.events >= 1000
    assert all(w.writer and w.sha256 == sha(b"x") for b in batches for _, w in b.writes)


# Write files in $1 flat out, for ever (a hundred names: new events, not merged ones).
FLOOD_FOREVER = """
import os, sys
i = 0
while True:
    fd = os.open(os.path.join(sys.argv[1], f"f{i % 100}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, b"x")
    os.close(fd)
    i += 1
"""


@privileged
def test_a_flood_makes_the_reader_rest_and_no_thread_of_ours_loses_priority(
    tmp_path: Path,
) -> None:
    """Under a flood the reader rests after each batch; no thread is reniced. A thread at nice
    19 holding the GIL while a busy machine kept it waiting stalled every thread of the engine
    for seconds (the dashboard's picture, the lanes' heartbeats: live lanes shown hung)."""
    root, flood = tmp_path / "root", tmp_path / "flood"
    root.mkdir()
    flood.mkdir()
    attr = Attribution([str(root)], lambda batch: None, shared=[str(flood)])
    attr.pace = Pace(high=200, low=100)  # any steady writer is a flood here
    base = {int(t): os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}
    attr.start()
    writer = subprocess.Popen([sys.executable, "-c", FLOOD_FOREVER, str(flood)])
    try:
        wait_for(lambda: attr.pace.rested > 0, 60, what="the reader resting in the flood")
        assert attr.pace.flooded
        now = {}
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                now[int(tid)] = os.getpriority(os.PRIO_PROCESS, int(tid))
        process = base[os.getpid()]
        assert {tid: n for tid, n in now.items() if n != base.get(tid, process)} == {}
    finally:
        writer.kill()
        writer.wait()
        attr.stop()


OWNER_PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "lanewatch"]
OWNER_PYTEST += ["-p", "no:randomly", "-p", "no:xdist"]
IN_PROCESS_OWNER = """
import os
from pathlib import Path

def test_writes_in_shared_temp():
    Path(os.environ["ESCAPE"]).write_text("from the owner")
"""


@privileged
def test_an_in_process_owners_write_right_after_its_stamp_is_its_lanes(
    tmp_path: Path, repo: Path, root: Path
) -> None:
    """`pytest -p lanewatch` owns its lane and runs the tests itself, so no environment names
    its lane: only its stamp. Its first write in shared temp can be read before the attribution
    thread has handled that stamp (seen in CI under load: the write was dropped as no lane's).
    The reader learns a stamp as it reads it. Here the attribution thread is held in its sink
    on a first write while the owner writes its stamp and then the shared file."""
    shared = tmp_path / "shared"
    shared.mkdir()
    escape = shared / "escape.json"
    held, release = threading.Event(), threading.Event()
    batches: list[KernelBatch] = []

    def sink(batch: KernelBatch) -> None:
        held.set()
        release.wait(120)
        batches.append(batch)

    attr = Attribution([str(root)], sink, shared=[str(shared)])  # no owners from a model
    read: list[str] = []  # a spy on what the reader hands on; the real method runs
    settle = attr._settle

    def spy(events: Any, facts: list[Any]) -> None:
        read.extend(f.path for f in facts if hasattr(f, "path"))
        settle(events, facts)

    attr._settle = spy  # type: ignore[method-assign]
    attr.start()
    try:
        first = root / "ck-0123456789ab.first" / "tmp"
        first.mkdir(parents=True)
        subprocess.run(["sh", "-c", 'printf x > "$1"', "sh", first / "f"], check=True)
        assert held.wait(30), "the attribution thread never got the first write"
        (repo / "test_owner.py").write_text(IN_PROCESS_OWNER)
        env = {**os.environ, "LANEWATCH_ROOT": str(root), "ESCAPE": str(escape)}
        done = subprocess.run(
            [*OWNER_PYTEST, "test_owner.py"],
            cwd=repo,
            env=inner_pytest_env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout.decode(errors="replace")
        wait_for(lambda: str(escape) in read, 30, what="the owner's write read and kept")
        release.set()

        def seen() -> list[Any]:
            return [o for b in list(batches) for o, _ in b.observations if o.path == str(escape)]

        # One write, but its events (the open's truncation, the close) may be read in two reads
        # under load and make two observations: each must be the owner's (seen at load 30).
        found = wait_for(seen, 30, what="the owner's write in shared temp judged")
    finally:
        release.set()
        attr.stop()
    for obs in found:
        assert obs.kind == "shared-file" and obs.intruder["lane"] == "pytest"
        assert obs.evidence.grade == "known"


def test_status_says_inferred_without_cap_sys_admin(root: Path, tmp_path: Path) -> None:
    prefix = setpriv_prefix()
    if prefix is None:
        pytest.skip(
            "cannot run without CAP_SYS_ADMIN here (not root with setpriv, or fanotify works)"
        )
    base = [*prefix, *LANEWATCH, "status", "--root", str(root)]
    as_json = subprocess.run(
        [*base, "--json"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    attribution = json.loads(as_json.stdout)["attribution"]
    assert attribution["mode"] == "inferred"
    assert "CAP_SYS_ADMIN" in attribution["hint"] and "lanewatch record" in attribution["hint"]
    text = subprocess.run(base, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert "attribution: inferred" in text.stdout


@privileged
def test_status_says_kernel_when_privileged(root: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [*LANEWATCH, "status", "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert json.loads(out.stdout)["attribution"]["mode"] == "kernel"


def test_fanotify_state_is_what_the_binding_says() -> None:
    from lanewatch.kernel.attribution import attribution_status

    mode, hint = attribution_status()
    assert (mode == "kernel") == AVAILABLE and hint
